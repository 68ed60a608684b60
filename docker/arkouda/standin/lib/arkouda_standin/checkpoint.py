"""``save_checkpoint`` / ``load_checkpoint`` of the STAND-IN (a test double of Arkouda v2026.07.15's
src/CheckpointMsg.chpl): its directory layout, modes, order of work and error texts.

Layout under ``<path>/<name>/`` (``name`` empty: the server id ``id_<8 random>_``)::

    server.md                         {"serverid":"id_…_", "numLocales":N}             written by locale 0
    <entry>.md                        {"entryName":…, "entryType":…}                 one per symbol-table entry
                                      then, for a saved array: {"dtype","size","ndim","numTargetLocales","numChunks"}
                                      and one {"filename","numElems"} per locale (the full path used at save time)
    <entry>_LOCALE0000.data …         each written by that locale's own process (Block distribution)

Differences from Arkouda, on purpose and said here: a ``.data`` part holds the locale's values raw, in the
server's byte order, not as single-column Parquet (the stand-in has no Arrow), so Arkouda and the stand-in
cannot read each other's checkpoints; entries are saved in the order they were created (Arkouda: its map's
order); bigint is not held at all. Everything else follows Arkouda: only the last directory level is created,
a Strings-like entry gets its ``.md`` and nothing else (so loading it fails after the entries before it, in
file-name order, are loaded), a different ``numLocales`` cannot load, and ``mode`` other than ``error`` and
``preserve_previous`` overwrites.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil
from typing import Any

from .partfiles import LocaleParts, PartFileError
from .symtab import ARRAY_ENTRY_TYPE, DTYPES, ArrayEntry, CommandError, SymbolTable, block_bounds

log = logging.getLogger(__name__)

METADATA_EXT = "md"
DATA_EXT = "data"
SERVER_METADATA = "server." + METADATA_EXT


class LoadCheckpointError(CommandError):
    pass


class SaveCheckpointError(CommandError):
    pass


def _json_line(data: dict[str, Any]) -> str:
    # Chapel's jsonSerializer: fields in declaration order, then writeln
    return json.dumps(data, separators=(", ", ":")) + "\n"


def not_implemented(direction: str, entry_name: str, entry_type: str, md_name: str) -> str:
    # cpNotImplementedMsg
    return (
        f"{direction} a checkpoint is not implemented for entry {entry_name} "
        f"which is a {entry_type} with metadata file {md_name}"
    )


def part_filename(cp_path: str, name: str, locale: int) -> str:
    # write1DDistArrayParquet(<cp>/<name>.data) -> generateFilename(prefix, ".data", i)
    return f"{os.path.join(cp_path, name)}_LOCALE{locale:04d}.{DATA_EXT}"


def _remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


class Checkpoints:
    def __init__(self, *, table: SymbolTable, num_locales: int, parts: LocaleParts) -> None:
        self.table = table
        self.num_locales = num_locales
        self.parts = parts

    # --- save ---------------------------------------------------------------------------------------------

    def save(self, params: dict[str, str]) -> str:
        base = params.get("path", "")
        cp_name = params.get("name", "") or self.table.serverid
        mode = params.get("mode", "")
        try:
            self._save(base, cp_name, mode)
        except OSError as exc:
            raise CommandError(f"{exc.strerror} (path {exc.filename})") from None
        return cp_name

    def _save(self, base: str, cp_name: str, mode: str) -> None:
        if not os.path.exists(base):
            os.mkdir(base)  # Chapel's mkdir without parents: only the last level
        cp_path = os.path.join(base, cp_name)
        if os.path.exists(cp_path):
            if mode == "error":
                raise SaveCheckpointError(
                    f"A file already exists in {cp_path}. If you want to overwrite, use "
                    '`mode="overwrite"`, which will delete the file'
                )
            if mode == "preserve_previous":
                prev = os.path.join(base, cp_name + ".prev")
                if os.path.exists(prev):
                    _remove(prev)
                os.rename(cp_path, prev)
            else:
                _remove(cp_path)
        os.mkdir(cp_path)
        with open(os.path.join(cp_path, SERVER_METADATA), "w") as f:
            f.write(_json_line({"serverid": self.table.serverid, "numLocales": self.num_locales}))
        for name, entry in list(self.table.entries.items()):
            md_name = os.path.join(cp_path, f"{name}.{METADATA_EXT}")
            with open(md_name, "w") as md:
                md.write(_json_line({"entryName": name, "entryType": entry.entry_type}))
                if isinstance(entry, ArrayEntry):
                    self._save_array(entry, cp_path, md)
                else:
                    # AbstractSymEntry.saveEntry: "this is not an error at the moment" (a debug line only)
                    log.debug("%s", not_implemented("Saving", name, entry.entry_type, md_name))

    def _save_array(self, entry: ArrayEntry, cp_path: str, md: Any) -> None:
        filenames, counts = [], []
        for loc in range(self.num_locales):
            lo, hi = block_bounds(entry.size, self.num_locales, loc)
            filename = part_filename(cp_path, entry.name, loc)
            try:
                self.parts.write(loc, filename, bytes(entry.data[lo * entry.itemsize : hi * entry.itemsize]))
            except PartFileError as exc:
                raise CommandError(str(exc)) from None
            filenames.append(filename)
            counts.append(hi - lo)
        md.write(
            _json_line(
                {
                    "dtype": entry.dtype,
                    "size": entry.size,
                    "ndim": 1,
                    "numTargetLocales": self.num_locales,
                    "numChunks": len(filenames),
                }
            )
        )
        for filename, count in zip(filenames, counts, strict=True):
            md.write(_json_line({"filename": filename, "numElems": count}))

    # --- load ---------------------------------------------------------------------------------------------

    def load(self, params: dict[str, str]) -> tuple[str, str]:
        """(reply, msgType): the two missing-directory cases are ERROR replies, not thrown errors."""
        base = params.get("path", "")
        name = params.get("name", "")
        if not os.path.exists(base):
            return "The base checkpoint directory not found: " + base, "ERROR"
        cp_path = os.path.join(base, name)
        if not os.path.exists(cp_path):
            return "The checkpoint directory not found: " + cp_path, "ERROR"
        try:
            self._load(cp_path)
        except OSError as exc:
            raise CommandError(f"{exc.strerror} (path {exc.filename})") from None
        return name, "NORMAL"

    def _load(self, cp_path: str) -> None:
        server_md = os.path.join(cp_path, SERVER_METADATA)
        with open(server_md) as f:
            server = _read_json(f, ("serverid", "numLocales"), "server metadata", server_md)
        if server["numLocales"] != self.num_locales:
            raise LoadCheckpointError(
                "Attempting to load a checkpoint that was made with a different number of locales "
                f"({server['numLocales']}) than the current execution ({self.num_locales})"
            )
        # glob(cpPath+"/*"+metadataExt), sorted as glob(3) sorts
        for md_name in sorted(glob.glob(cp_path + "/*" + METADATA_EXT)):
            if md_name == server_md:
                continue
            with open(md_name) as md:
                entry_md = _read_json(md, ("entryName", "entryType"), "entry metadata", md_name)
                if entry_md["entryType"] != ARRAY_ENTRY_TYPE:
                    raise CommandError(
                        not_implemented("Loading", entry_md["entryName"], entry_md["entryType"], md_name)
                    )
                entry = self._load_array(md, md_name, entry_md)
            if not entry.name:
                raise LoadCheckpointError("Entry in " + md_name + " has empty name")
            self.table.add(entry)

    def _load_array(self, md: Any, md_name: str, entry_md: dict[str, Any]) -> ArrayEntry:
        array_md = _read_json(md, ("dtype", "size", "ndim", "numTargetLocales", "numChunks"), "array metadata", md_name)
        if array_md["numTargetLocales"] != self.num_locales:
            # sic: "then" in Arkouda's text for this check
            raise LoadCheckpointError(
                "Attempting to load a checkpoint that was made with a different number of locales "
                f"({array_md['numTargetLocales']}) then the current execution ({self.num_locales})"
            )
        if array_md["ndim"] != 1 or array_md["dtype"] not in DTYPES:
            raise CommandError(
                not_implemented(
                    f"Loading an array with {array_md['ndim']} dimensions and {array_md['dtype']} element type from",
                    entry_md["entryName"],
                    entry_md["entryType"],
                    md_name,
                )
            )
        chunks = [
            _read_json(md, ("filename", "numElems"), f"chunk {i + 1} metadata", md_name)
            for i in range(int(array_md["numChunks"]))
        ]
        entry = ArrayEntry(
            entry_md["entryName"], array_md["dtype"], bytearray(array_md["size"] * DTYPES[array_md["dtype"]][1])
        )
        self._read_parts(entry, [(str(c["filename"]), int(c["numElems"])) for c in chunks])
        return entry

    def _read_parts(self, entry: ArrayEntry, files: list[tuple[str, int]]) -> None:
        """readFilesByName: every locale reads, from each file that overlaps its block, the overlap."""
        itemsize = entry.itemsize
        for loc in range(self.num_locales):
            lo, hi = block_bounds(entry.size, self.num_locales, loc)
            start = 0
            for filename, count in files:
                a, b = max(lo, start), min(hi, start + count)
                if a < b:
                    try:
                        data = self.parts.read(loc, filename, (a - start) * itemsize, (b - a) * itemsize)
                    except PartFileError as exc:
                        raise CommandError(str(exc)) from None
                    entry.data[a * itemsize : b * itemsize] = data
                start += count


def _read_json(f: Any, fields: tuple[str, ...], description: str, md_name: str) -> dict[str, Any]:
    """readJson: one JSON line; a missing line is "could not read …", a bad one "invalid … in …"."""
    line = f.readline()
    if not line.strip():
        raise LoadCheckpointError(f"could not read {description} from {md_name}")
    try:
        value = json.loads(line)
        if not isinstance(value, dict):
            raise TypeError("not a JSON object")
        for name in fields:
            if name not in value:
                raise KeyError(name)
    except KeyError as exc:
        raise LoadCheckpointError(f"invalid {description} in {md_name}: field '{exc.args[0]}' not found") from None
    except (ValueError, TypeError) as exc:
        raise LoadCheckpointError(f"invalid {description} in {md_name}: {exc}") from None
    return value
