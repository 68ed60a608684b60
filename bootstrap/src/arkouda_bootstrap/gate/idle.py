"""The idle gate's decision, pure (no I/O, the clock injected): what the client requests say, and when the
release may go to sleep.

The gate ends every client's ZeroMQ session itself, so it sees each request and its reply. The release is idle
when no request is in flight (held or at the server) and none came or was answered for `timeout_seconds`
(optionally: and no client connection is open), counted from the moment the server pod became Ready (a release
that is starting, relaunching or waking is never idle). A connection that opens or closes is not a request: a
notebook that stays connected and silent lets the release sleep. The gate's own health checks are not counted.
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
    """Client requests in flight (received, not yet answered), open client connections, and when a request last
    came or was answered (or the server became Ready)."""

    def __init__(self, *, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._in_flight = 0
        self._connections = 0
        self.last_activity = clock()

    def touch(self) -> None:
        self.last_activity = max(self.last_activity, self._clock())

    def connection_opened(self) -> None:
        self._connections += 1

    def connection_closed(self) -> None:
        self._connections = max(0, self._connections - 1)

    def request_started(self) -> None:
        self._in_flight += 1
        self.touch()

    def request_ended(self) -> None:
        self._in_flight = max(0, self._in_flight - 1)
        self.touch()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def snapshot(self) -> TrafficSnapshot:
        return TrafficSnapshot(
            open_connections=self._connections, in_flight=self._in_flight, last_activity=self.last_activity
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
