"""The array commands of the STAND-IN (a test double): the requests the pinned client (Arkouda v2026.07.15)
sends to create, write, read, list and delete 1-D arrays, with the reply texts it parses.

| client call | request | reply |
| --- | --- | --- |
| ``ak.zeros(n, dt)``, ``ak.full`` | ``create<dt,1>`` ``shape`` | ``created <name> <dt> <n> 1 [<n>] <itemsize>`` |
| ``ak.array(ndarray)`` | ``array<dt,1>`` ``dtype``, ``shape``, ``seg_string`` + binary payload | ``created …`` |
| ``ak.array(list of str)`` | ``arraySegString<uint8>`` ``size`` + payload | ``created <n> Strings …+created …`` |
| ``a.to_ndarray()`` | ``tondarray<dt,1>`` ``array`` | the bytes (binary reply; errors as ``Error: …``) |
| ``a[i]`` | ``[int]<dt,1>`` ``array``, ``idx`` | ``<dt> <value>`` |
| ``a[i] = v`` | ``[int]=val<dt,1>`` ``array``, ``idx``, ``value``, ``max_bits`` | (ignored by the client) |
| ``a.fill(v)`` | ``set<dt,1>`` ``array``, ``dtype``, ``val`` | (ignored) |
| ``ak.list_symbol_table()``, ``ak.information`` | ``info`` ``names`` | JSON list of ``{"name","dtype",…}`` |
| garbage collection of a pdarray | ``delete`` ``name`` | ``deleted <name>`` |
"""

from __future__ import annotations

import json
import math
import struct

from .symtab import DTYPES, ArrayEntry, CommandError, StringsEntry, SymbolTable


class UnknownCommandError(CommandError):
    """A command (or an instantiation of one) the server does not register: Arkouda answers without the
    ``Error executing command`` prefix."""


COMMANDS = ("create", "array", "arraySegString", "tondarray", "[int]", "[int]=val", "set", "info", "delete")


def split_command(cmd: str) -> tuple[str, list[str]]:
    """``create<int64,1>`` -> (``create``, [``int64``, ``1``]): Arkouda's registered instantiations."""
    if cmd.endswith(">") and "<" in cmd:
        base, _, rest = cmd.partition("<")
        return base, [t.strip() for t in rest[:-1].split(",")]
    return cmd, []


def _dtype(types: list[str], cmd: str) -> str:
    if len(types) != 2 or types[0] not in DTYPES or types[1] != "1":
        # Arkouda registers only the instantiations it was compiled for: the rest is an unknown command.
        raise UnknownCommandError(f"Unrecognized command: {cmd} (STAND-IN: 1-D {', '.join(DTYPES)} arrays only)")
    return types[0]


def _param(params: dict[str, str], key: str) -> str:
    try:
        return params[key]
    except KeyError:
        raise CommandError(f"Key {key} not found in MessageArgs") from None


def _shape(text: str) -> int:
    """``shape`` is a JSON list of strings for a tuple (``["10"]``) or a plain number."""
    try:
        value = json.loads(text)
        dims = [int(d) for d in value] if isinstance(value, list) else [int(value)]
    except (ValueError, TypeError):
        raise CommandError(f"invalid shape {text}") from None
    if len(dims) != 1 or dims[0] < 0:
        raise CommandError(f"STAND-IN: only 1-D shapes are supported, not {text}")
    return dims[0]


def parse_value(text: str, dtype: str) -> int | float | bool:
    try:
        if dtype == "bool":
            if text in ("True", "true", "1"):
                return True
            if text in ("False", "false", "0"):
                return False
            raise ValueError(text)
        if dtype == "float64":
            return float(text)
        return int(text)
    except ValueError:
        raise CommandError(f"could not cast {text} to {dtype}") from None


def format_value(value: int | float | bool, dtype: str) -> str:
    if dtype == "bool":
        return "True" if value else "False"
    if dtype == "float64":
        return repr(float(value)) if math.isfinite(value) else str(value)
    return str(int(value))


def _index(entry: ArrayEntry, text: str) -> int:
    idx = int(parse_value(text, "int64"))
    if idx < 0:
        idx += entry.size
    if not 0 <= idx < entry.size:
        raise CommandError(f"index {text} out of bounds for array of size {entry.size}")
    return idx


class ArrayCommands:
    def __init__(self, *, table: SymbolTable) -> None:
        self.table = table

    def handles(self, cmd: str) -> bool:
        return split_command(cmd)[0] in COMMANDS

    def binary_reply(self, cmd: str) -> bool:
        return split_command(cmd)[0] == "tondarray"

    def run(self, cmd: str, params: dict[str, str], payload: bytes | None) -> str | bytes:
        base, types = split_command(cmd)
        if base == "info":
            return self._info(_param(params, "names"))
        if base == "delete":
            name = _param(params, "name")
            self.table.delete(name)
            return f"deleted {name}"
        if base == "arraySegString":
            return self._strings(payload)
        dtype = _dtype(types, cmd)
        if base == "create":
            size = _shape(_param(params, "shape"))
            return self._created(ArrayEntry(self.table.next_name(), dtype, bytearray(size * DTYPES[dtype][1])))
        if base == "array":
            return self._array(dtype, params, payload)
        entry = self.table.array(_param(params, "array"), pname=base)
        if entry.dtype != dtype:
            raise CommandError(f"Error: {base}: {entry.name} is {entry.dtype}, not {dtype}")
        if base == "tondarray":
            return bytes(entry.data)
        if base == "[int]":
            return f"{dtype} {format_value(entry.values()[_index(entry, _param(params, 'idx'))], dtype)}"
        if base == "[int]=val":
            idx = _index(entry, _param(params, "idx"))
            entry.values()[idx] = parse_value(_param(params, "value"), dtype)
            return f"set {entry.name}[{idx}]"
        # set<dt,1>: fill
        value = parse_value(_param(params, "val"), dtype)
        # one packed element repeated: an element-wise loop would take seconds for the bench's sizes
        entry.data[:] = struct.pack("=" + DTYPES[dtype][0], value) * entry.size
        return f"set {entry.name} to {format_value(value, dtype)}"

    def _created(self, entry: ArrayEntry | StringsEntry) -> str:
        self.table.add(entry)
        if isinstance(entry, StringsEntry):
            return f"created {entry.name} Strings {entry.size} 1 [{entry.size}] 8+created bytes.size {len(entry.data)}"
        return f"created {entry.attrib()}"

    def _array(self, dtype: str, params: dict[str, str], payload: bytes | None) -> str:
        size = _shape(_param(params, "shape"))
        data = bytearray(payload or b"")
        if len(data) != size * DTYPES[dtype][1]:
            raise CommandError(
                f"the payload has {len(data)} bytes, {size} {dtype} values need {size * DTYPES[dtype][1]}"
            )
        return self._created(ArrayEntry(self.table.next_name(), dtype, data))

    def _strings(self, payload: bytes | None) -> str:
        data = bytes(payload or b"")
        if data and not data.endswith(b"\x00"):
            raise CommandError("the strings payload must end with a null byte")
        return self._created(StringsEntry(self.table.next_name(), data))

    def _info(self, names: str) -> str:
        if names == "__AllSymbols__":
            entries = list(self.table.entries.values())
        elif names == "__RegisteredSymbols__":
            entries = []  # the stand-in has no registry (ak.register)
        else:
            try:
                wanted = json.loads(names)
            except ValueError:
                raise CommandError(f"invalid names {names}") from None
            entries = [self.table.get(str(n), pname="info") for n in (wanted if isinstance(wanted, list) else [wanted])]
        return json.dumps([e.info() for e in entries])
