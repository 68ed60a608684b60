"""The STAND-IN's symbol table (a test double of Arkouda's ``SymTab``, src/MultiTypeSymbolTable.chpl at
v2026.07.15): named 1-D arrays of int64, uint64, uint8, float64 and bool, and a Strings-like entry (Arkouda's
``SegStringSymEntry``, a kind its checkpoints do not save).

Names are Arkouda's: ``<serverid><n>`` with ``serverid = "id_" + 8 random letters/digits + "_"``, new at every
start. The stand-in keeps every array whole on locale 0 (no numpy in the image: values live in a bytearray in
the server's native byte order, read through ``memoryview.cast``); which locale owns which elements is Chapel's
Block distribution, computed by :func:`block_bounds` when a checkpoint writes or reads the locales' parts.
"""

from __future__ import annotations

import secrets
import string
from dataclasses import dataclass, field
from typing import Any

# Arkouda's dtype names -> (struct format for memoryview.cast, itemsize)
DTYPES: dict[str, tuple[str, int]] = {
    "int64": ("q", 8),
    "uint64": ("Q", 8),
    "uint8": ("B", 1),
    "float64": ("d", 8),
    "bool": ("?", 1),
}
ARRAY_ENTRY_TYPE = "PrimitiveTypedArraySymEntry"
STRINGS_ENTRY_TYPE = "SegStringSymEntry"


class CommandError(Exception):
    """An error a command throws: Arkouda's daemon answers ``Error executing command <cmd>: <message>``."""


def unknown_symbol(pname: str, name: str) -> CommandError:
    # ServerErrorStrings.unknownSymbolError
    return CommandError(f"Error: {pname}: unknown symbol: {name}" if pname else f"Error: unknown symbol: {name}")


@dataclass
class ArrayEntry:
    """A 1-D pdarray (Arkouda's ``SymEntry``)."""

    name: str
    dtype: str
    data: bytearray

    entry_type = ARRAY_ENTRY_TYPE

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype][1]

    @property
    def size(self) -> int:
        return len(self.data) // self.itemsize

    def values(self) -> Any:
        """The elements as a typed memoryview (typeshed types cast() per literal format, hence Any)."""
        return memoryview(self.data).cast(DTYPES[self.dtype][0])  # type: ignore[call-overload]

    def attrib(self) -> str:
        # SymTab.attrib: name dtype size ndim shape itemsize (shape as tupShapeString: "[n]")
        return f"{self.name} {self.dtype} {self.size} 1 [{self.size}] {self.itemsize}"

    def info(self) -> dict[str, object]:
        return {
            "name": self.name,
            "dtype": self.dtype,
            "size": self.size,
            "ndim": 1,
            "shape": [self.size],
            "itemsize": self.itemsize,
            "registered": False,
        }


@dataclass
class StringsEntry:
    """A Strings object (Arkouda's ``SegStringSymEntry``): null-terminated UTF-8 strings. Checkpoints skip it."""

    name: str
    data: bytes
    size: int = field(init=False)

    entry_type = STRINGS_ENTRY_TYPE

    def __post_init__(self) -> None:
        self.size = self.data.count(b"\x00")

    def info(self) -> dict[str, object]:
        return {
            "name": self.name,
            "dtype": "str",
            "size": self.size,
            "ndim": 1,
            "shape": [self.size],
            "itemsize": 0,
            "registered": False,
        }


Entry = ArrayEntry | StringsEntry


def new_server_id() -> str:
    alphabet = string.ascii_letters + string.digits
    return "id_" + "".join(secrets.choice(alphabet) for _ in range(8)) + "_"


class SymbolTable:
    def __init__(self, *, serverid: str | None = None) -> None:
        self.serverid = serverid or new_server_id()
        self._nid = 0
        self.entries: dict[str, Entry] = {}

    def next_name(self) -> str:
        self._nid += 1
        return f"{self.serverid}{self._nid}"

    def add(self, entry: Entry) -> None:
        """addEntry/addOrReplace: an existing name is replaced."""
        self.entries[entry.name] = entry

    def get(self, name: str, *, pname: str = "check") -> Entry:
        try:
            return self.entries[name]
        except KeyError:
            raise unknown_symbol(pname, name) from None

    def array(self, name: str, *, pname: str) -> ArrayEntry:
        entry = self.get(name, pname=pname)
        if not isinstance(entry, ArrayEntry):
            raise CommandError(f"Error: {pname}: {name} is a {entry.entry_type}, not an array")
        return entry

    def delete(self, name: str) -> None:
        # deleteMsg: deleting an unknown name is not an error (the client deletes on garbage collection)
        self.entries.pop(name, None)

    def nbytes(self) -> int:
        return sum(len(e.data) for e in self.entries.values())


def block_bounds(size: int, num_locales: int, locale: int) -> tuple[int, int]:
    """Chapel's Block distribution of ``0..<size`` over ``num_locales``: the [low, high) indices of one locale
    (``_computeBlock``: low = locale * size / num_locales)."""
    return locale * size // num_locales, (locale + 1) * size // num_locales
