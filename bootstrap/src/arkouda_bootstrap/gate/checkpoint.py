"""Sleep without forgetting (global.idle.checkpoint): what the gate saves before the release sleeps, what it
loads after a wake, and what it remembers in between.

Arkouda's own checkpoint (facts: "Checkpoints"): `save_checkpoint` with `name`, `path`, `mode` writes
`<path>/<name>/` (server.md, one `<entry>.md` per symbol-table entry, `<entry>_LOCALE<i>...` data files written
by each locale itself); `load_checkpoint` with `name`, `path` reads it back. It saves 1-D numeric arrays only;
any other entry still gets its `.md` and no data file, and a load stops with an error at that entry. A checkpoint
loads only at the numLocales it was made with.

So the gate names its checkpoint after the release and its size (`<release>-arkouda-gate-nl<N>`, from the server
StatefulSet's name): a checkpoint made at another size is never overwritten by the next save, and is kept until the
release saves at that size again. A small record beside the checkpoints (`.<release>-arkouda-gate.json`) says what
the last sleep left behind (which checkpoint, at which size, whether the save succeeded, what it could not save), so
a gate that restarted while the release slept still knows what to load, and never loads an older checkpoint after a
failed save.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)

SAVE_COMMAND = "save_checkpoint"
LOAD_COMMAND = "load_checkpoint"
# the name Arkouda gives the metadata file of the whole checkpoint (not an entry)
SERVER_METADATA = "server.md"


class OnUnsaved(StrEnum):
    """What the gate does when the checkpoint would not bring everything back (an entry Arkouda does not save,
    or a save that failed)."""

    # the safe default: nothing is lost; the release stays awake until the next request, and says why
    STAY_AWAKE = "stayAwake"
    # sleep anyway; the next client is told what was lost
    SLEEP = "sleep"


@dataclass(frozen=True)
class CheckpointPolicy:
    path: str  # the directory on the shared volume, the same path in the server and the gate
    release: str
    num_locales: int
    on_unsaved: OnUnsaved = OnUnsaved.STAY_AWAKE
    timeout: float = 3600.0  # seconds a save or a load may take before the gate gives up on it

    def name_for(self, num_locales: int) -> str:
        return f"{self.release}-gate-nl{num_locales}"

    @property
    def name(self) -> str:
        return self.name_for(self.num_locales)

    def where(self, name: str) -> str:
        return f"{self.path.rstrip('/')}/{name}"


@dataclass(frozen=True)
class Inspection:
    """A checkpoint directory as the gate reads it after a save."""

    size_bytes: int
    entries: tuple[str, ...]
    unsaved: tuple[str, ...]  # entries with metadata but no data file: Arkouda skipped them, a load stops there


@dataclass(frozen=True)
class Record:
    """What the last sleep left: the checkpoint `name` made at `num_locales`; `saved` false when the save
    failed (nothing to load); `unsaved` the entries it could not hold; `detail` Arkouda's words on a failure."""

    name: str
    num_locales: int
    saved: bool
    unsaved: tuple[str, ...] = ()
    size_bytes: int = 0
    detail: str = ""


class Store(Protocol):
    def inspect(self, name: str) -> Inspection | None:
        """The checkpoint `name`, or None when it cannot be read."""
        ...

    def read_record(self) -> Record | None: ...

    def write_record(self, record: Record) -> None: ...


class DirectoryStore:
    """The checkpoints and the record on the shared volume, mounted in the gate at the server's path."""

    def __init__(self, policy: CheckpointPolicy) -> None:
        self._policy = policy
        self._record = Path(policy.path) / f".{policy.release}-gate.json"

    def inspect(self, name: str) -> Inspection | None:
        directory = Path(self._policy.where(name))
        try:
            files = [(f.name, f.stat().st_size) for f in directory.iterdir() if f.is_file()]
        except OSError as exc:
            log.warning("cannot read the checkpoint %s: %s", directory, exc)
            return None
        names = {n for n, _ in files}
        entries = sorted(n[: -len(".md")] for n in names if n.endswith(".md") and n != SERVER_METADATA)
        # data files: <entry>_LOCALE<i>.data (Parquet, per locale), bigint <entry>.loc<i>.bin
        unsaved = [e for e in entries if not any(n.startswith((f"{e}_LOCALE", f"{e}.loc")) for n in names)]
        return Inspection(size_bytes=sum(size for _, size in files), entries=tuple(entries), unsaved=tuple(unsaved))

    def read_record(self) -> Record | None:
        try:
            raw = json.loads(self._record.read_text())
            return Record(
                name=str(raw["name"]),
                num_locales=int(raw["num_locales"]),
                saved=bool(raw["saved"]),
                unsaved=tuple(str(e) for e in raw.get("unsaved", ())),
                size_bytes=int(raw.get("size_bytes", 0)),
                detail=str(raw.get("detail", "")),
            )
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring the unreadable checkpoint record %s: %s", self._record, exc)
            return None

    def write_record(self, record: Record) -> None:
        # written whole, then renamed: a gate that dies meanwhile leaves the previous record, never half of one
        tmp = self._record.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(record)))
        os.replace(tmp, self._record)


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def names(entries: tuple[str, ...], *, limit: int = 8) -> str:
    shown = ", ".join(entries[:limit])
    return shown + (f" and {len(entries) - limit} more" if len(entries) > limit else "")


def size_mismatch(policy: CheckpointPolicy, record: Record) -> str:
    """The one line for a checkpoint made at another numLocales (Event and client error)."""
    return (
        f"the checkpoint {policy.where(record.name)} saved before the sleep was made with {record.num_locales} "
        f"locales and this release now has {policy.num_locales}: Arkouda cannot load it at another size, so the "
        f"server starts empty (nothing saved before the sleep was loaded). The checkpoint is kept: with "
        f"global.numLocales={record.num_locales} again, ak.load_checkpoint({record.name!r}, path={policy.path!r}) "
        "loads it"
    )
