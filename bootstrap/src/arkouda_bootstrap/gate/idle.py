"""The idle gate's decision, pure (no I/O, the clock injected): what the forwarded traffic says, and when the
release may go to sleep.

Arkouda's client is a ZeroMQ REQ socket: after a request it sends nothing until the reply has come. So the
direction of the bytes is enough, without reading the protocol: a connection whose client sent bytes after the
server's last ones has a request in flight. The release is idle when no request is in flight and nothing moved
for `timeout_seconds` (optionally: and no client connection is open), counted from the moment the server pod
became Ready (a release that is starting, relaunching or waking is never idle).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IdlePolicy:
    timeout_seconds: float
    # notebooks that stay connected between requests: an open connection keeps the release awake
    connection_is_activity: bool = False


@dataclass(frozen=True)
class TrafficSnapshot:
    open_connections: int
    in_flight: int
    last_activity: float


class Traffic:
    """Per forwarded connection: whether a request is in flight (client bytes after the server's last bytes);
    and when anything last happened (bytes either way, a connection opened or closed, the server became Ready)."""

    def __init__(self, *, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._awaiting: dict[int, bool] = {}
        self._next = 0
        self.last_activity = clock()

    def touch(self) -> None:
        self.last_activity = max(self.last_activity, self._clock())

    def opened(self) -> int:
        self._next += 1
        self._awaiting[self._next] = False
        self.touch()
        return self._next

    def closed(self, conn: int) -> None:
        self._awaiting.pop(conn, None)
        self.touch()

    def client_sent(self, conn: int) -> None:
        if conn in self._awaiting:
            self._awaiting[conn] = True
        self.touch()

    def server_sent(self, conn: int) -> None:
        if conn in self._awaiting:
            self._awaiting[conn] = False
        self.touch()

    def in_flight(self, conn: int) -> bool:
        return self._awaiting.get(conn, False)

    def snapshot(self) -> TrafficSnapshot:
        return TrafficSnapshot(
            open_connections=len(self._awaiting),
            in_flight=sum(self._awaiting.values()),
            last_activity=self.last_activity,
        )


@dataclass(frozen=True)
class IdleVerdict:
    """`remaining` seconds until the release may sleep (0: now), or None while it may not; `why` says which."""

    remaining: float | None
    why: str


def idle_verdict(*, policy: IdlePolicy, traffic: TrafficSnapshot, now: float, server_ready: bool) -> IdleVerdict:
    if not server_ready:
        return IdleVerdict(None, "the server pod is not Ready (starting, relaunching or waking)")
    if traffic.in_flight:
        return IdleVerdict(None, f"{traffic.in_flight} request(s) in flight")
    if policy.connection_is_activity and traffic.open_connections:
        return IdleVerdict(None, f"{traffic.open_connections} client connection(s) open")
    quiet = now - traffic.last_activity
    remaining = max(0.0, policy.timeout_seconds - quiet)
    return IdleVerdict(remaining, f"no traffic for {quiet:.0f} s (idle timeout {policy.timeout_seconds:g} s)")


def next_backoff(*, base_seconds: float, failures: int, cap_seconds: float = 3600.0) -> float:
    """Seconds to wait before the next wake attempt after `failures` wakes in a row missed their deadline:
    doubling from `base_seconds`, at most `cap_seconds`."""
    if failures <= 0:
        return 0.0
    return float(min(cap_seconds, base_seconds * 2 ** min(failures - 1, 20)))
