"""How the STAND-IN server on locale 0 has every locale write and read its own part of a checkpoint.

Arkouda writes each locale's part ``coforall loc in targetLocales do on loc``: the file is opened by the
process of that locale, in that locale's pod, so a path that is not one shared filesystem fails there. The
stand-in does the same through its GASNet job: this server (a child of ``arkouda_server_real`` on locale 0)
hands each part to its parent over two inherited pipes, and the parent carries it to the locale's
``arkouda_server_real`` as GASNet active messages (see ``src/arkouda_server_real.c``); that process opens,
writes or reads the file itself and answers with the error text, if any.

The pipes (``ARKOUDA_STANDIN_PARTS_FDS=<request fd>,<reply fd>``) carry one request at a time between a parent
and its child on one host (not a network protocol): a header line, then the raw bytes it announces::

    W <locale> <nbytes> <pathlen>\\n<path><nbytes of data>      write (create or truncate) the whole file
    R <locale> <offset> <length> <pathlen>\\n<path>              read length bytes at offset
    OK <nbytes>\\n<data>  |  ERR <msglen>\\n<message>             the answer
"""

from __future__ import annotations

import logging
import os
from typing import BinaryIO, Protocol

log = logging.getLogger(__name__)

ENV = "ARKOUDA_STANDIN_PARTS_FDS"


class PartFileError(Exception):
    """A locale could not write or read its part; the message is what that locale's process reported."""


class LocaleParts(Protocol):
    def write(self, locale: int, path: str, data: bytes) -> None: ...

    def read(self, locale: int, path: str, offset: int, length: int) -> bytes: ...


class GasnetParts:
    """The parts through the parent ``arkouda_server_real`` and its GASNet job."""

    def __init__(self, *, requests: BinaryIO, replies: BinaryIO) -> None:
        self._requests = requests
        self._replies = replies

    @classmethod
    def from_env(cls, value: str) -> GasnetParts:
        request_fd, reply_fd = (int(v) for v in value.split(","))
        return cls(requests=os.fdopen(request_fd, "wb"), replies=os.fdopen(reply_fd, "rb"))

    def _answer(self) -> bytes:
        header = self._replies.readline().decode()
        kind, _, count = header.strip().partition(" ")
        body = self._replies.read(int(count or 0)) if count else b""
        if kind == "OK":
            return body
        if kind == "ERR":
            raise PartFileError(body.decode("utf-8", "replace"))
        raise PartFileError(f"STAND-IN: the GASNet job ended the part-file channel ({header!r})")

    def write(self, locale: int, path: str, data: bytes) -> None:
        encoded = path.encode()
        self._requests.write(f"W {locale} {len(data)} {len(encoded)}\n".encode() + encoded)
        self._requests.write(data)
        self._requests.flush()
        self._answer()

    def read(self, locale: int, path: str, offset: int, length: int) -> bytes:
        encoded = path.encode()
        self._requests.write(f"R {locale} {offset} {length} {len(encoded)}\n".encode() + encoded)
        self._requests.flush()
        return self._answer()


class NoGasnetJob:
    """Run without ``arkouda_server_real`` (no GASNet job): no locale can be reached, so a checkpoint fails."""

    def write(self, locale: int, path: str, data: bytes) -> None:
        raise PartFileError(f"STAND-IN: no GASNet job to reach locale {locale} ({ENV} unset)")

    def read(self, locale: int, path: str, offset: int, length: int) -> bytes:
        raise PartFileError(f"STAND-IN: no GASNet job to reach locale {locale} ({ENV} unset)")


def from_env(env: dict[str, str]) -> LocaleParts:
    value = env.get(ENV, "")
    if not value:
        return NoGasnetJob()
    return GasnetParts.from_env(value)
