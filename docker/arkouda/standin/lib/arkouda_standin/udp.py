"""The locales' UDP check: GASNet's udp conduit moves all data between locales as UDP datagrams between
ephemeral ports, so a network (or NetworkPolicy) that lets the launcher's TCP through but not UDP among the
pods breaks the real server after a successful launch. Each stand-in locale opens a UDP socket, the launcher
hands every locale the table of all of them, and each locale sends ``hello <id>`` to every peer until it has
heard from each (a ``hello`` is answered with ``ack <id>``; either counts) or the time is up.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time


class Mesh:
    def __init__(self, locale: int) -> None:
        self.locale = locale
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("0.0.0.0", 0))  # noqa: S104 - peers in other pods send here
        self.sock.settimeout(0.2)
        self.port: int = self.sock.getsockname()[1]
        self.heard: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        threading.Thread(target=self._listen, name="udp", daemon=True).start()

    def _listen(self) -> None:
        while not self._stop.is_set():
            try:
                data, addr = self.sock.recvfrom(512)
            except TimeoutError:
                continue
            except OSError:
                return
            kind, _, who = data.decode("ascii", "replace").partition(" ")
            if not who.isdigit():
                continue
            with self._lock:
                self.heard.add(int(who))
            if kind == "hello":
                with contextlib.suppress(OSError):
                    self.sock.sendto(f"ack {self.locale}".encode(), addr)

    def exchange(self, peers: dict[int, tuple[str, int]], *, timeout: float) -> list[int]:
        """Ping every peer until each was heard from; returns the peers not heard from."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                missing = sorted(set(peers) - self.heard)
            if not missing or time.monotonic() > deadline:
                return missing
            for j in missing:
                with contextlib.suppress(OSError):
                    self.sock.sendto(f"hello {self.locale}".encode(), peers[j])
            time.sleep(0.2)

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
