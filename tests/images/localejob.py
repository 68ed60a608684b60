"""A TEST DOUBLE of the GASNet side of ``arkouda_server_real`` for the stand-in server's checkpoint tests: it
answers the server's part-file requests (``arkouda_standin.partfiles``) on the two pipes the server inherits,
doing each locale's I/O with that locale's working directory, so a test can give the locales one shared
directory (a shared volume) or one each (per-pod volumes). The real thing carries the part to the locale's own
process over GASNet (docker/arkouda/standin/src/arkouda_server_real.c); the answers and error texts are its.
"""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path


class LocaleJobDouble:
    def __init__(self, locale_dirs: list[Path]) -> None:
        self.locale_dirs = locale_dirs
        self.done: list[tuple[int, str, str]] = []  # (locale, "wrote"/"read", path as the locale resolved it)
        req_r, self._req_w = os.pipe()
        self._rep_r, rep_w = os.pipe()
        self._requests = os.fdopen(req_r, "rb")
        self._replies = os.fdopen(rep_w, "wb")
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def child_fds(self) -> tuple[int, int]:
        return self._req_w, self._rep_r

    @property
    def env_value(self) -> str:
        return f"{self._req_w},{self._rep_r}"

    def start(self) -> None:
        """Call after the server was spawned with ``pass_fds=child_fds``: our copies of its ends are closed so
        that its exit ends the channel."""
        os.close(self._req_w)
        os.close(self._rep_r)
        self._thread.start()

    def _answer(self, kind: str, body: bytes) -> None:
        self._replies.write(f"{kind} {len(body)}\n".encode() + body)
        self._replies.flush()

    def _serve(self) -> None:
        while True:
            header = self._requests.readline().decode()
            if not header:
                return
            fields = header.split()
            kind, loc = fields[0], int(fields[1])
            path = self._requests.read(int(fields[-1])).decode()
            where = self.locale_dirs[loc] / path
            try:
                if kind == "W":
                    data = self._requests.read(int(fields[2]))
                    with open(where, "wb") as f:
                        f.write(data)
                    self.done.append((loc, "wrote", str(where)))
                    self._answer("OK", b"")
                else:
                    offset, length = int(fields[2]), int(fields[3])
                    with open(where, "rb") as f:
                        f.seek(offset)
                        data = f.read(length)
                    if len(data) != length:
                        raise EOFError
                    self.done.append((loc, "read", str(where)))
                    self._answer("OK", data)
            except OSError as exc:
                code = exc.errno or errno.EIO
                message = f"Failed to open local file '{path}'. Detail: [errno {code}] {os.strerror(code)}"
                self._answer("ERR", message.encode())
            except EOFError:
                self._answer("ERR", f"Unexpected end of stream in local file '{path}'".encode())
