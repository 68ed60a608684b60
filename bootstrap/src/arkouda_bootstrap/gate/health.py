"""The gate's health check of the server's request loop, pure (the clock injected): when to send a probe, and
when its silence means the loop is dead.

Arkouda answers one request at a time, and a process whose request loop ended keeps its port open (the metrics
daemon lives on), so neither the pod's readiness nor an open port says the server answers. While nothing is in
flight, the gate sends a request Arkouda answers in its daemon without side effects and without counting it as
activity (`ruok`), at most every `interval` seconds after the server last answered anything. No answer within
`timeout` seconds means the loop is dead: nothing else was queued before the probe, so no long request can be
mistaken for it. While a client request is in flight no probe is sent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

PROBE_COMMAND = "ruok"


@dataclass(frozen=True)
class HealthPolicy:
    interval: float  # 0: no health check
    timeout: float


class HealthCheck:
    """One server incarnation at a time (`reset` for a new one); `unresponsive_since` survives the reset, so that
    the gate reports the release unhealthy until a new server answers."""

    def __init__(self, *, policy: HealthPolicy, clock: Callable[[], float]) -> None:
        self._policy = policy
        self._clock = clock
        self.last_answer = clock()
        self.probe_sent: float | None = None
        self.unresponsive_since: float | None = None
        self.failures = 0  # probes that went unanswered (the gate's metric)

    @property
    def enabled(self) -> bool:
        return self._policy.interval > 0

    @property
    def answering(self) -> bool:
        return self.unresponsive_since is None

    def reset(self) -> None:
        """A new server incarnation (a new pod, a new connection): its silence so far says nothing, and it is
        probed at once (so that a relaunched server is known to answer before any client needs it)."""
        self.last_answer = self._clock() - self._policy.interval
        self.probe_sent = None

    def answered(self) -> float | None:
        """The server answered something (a client's reply or the probe). Returns how long it had been
        unresponsive when this ends such a period, else None."""
        now = self._clock()
        self.last_answer = now
        self.probe_sent = None
        if self.unresponsive_since is None:
            return None
        down, self.unresponsive_since = now - self.unresponsive_since, None
        return down

    def due(self, *, in_flight: int) -> bool:
        """A probe should be sent now (the caller then calls `sent`)."""
        if not self.enabled or in_flight or self.probe_sent is not None:
            return False
        return self._clock() - self.last_answer >= self._policy.interval

    def sent(self) -> None:
        self.probe_sent = self._clock()

    def overdue(self) -> float | None:
        """Seconds the outstanding probe has waited once that is past the timeout (the loop is dead), else None.
        The same probe is reported once: the caller relaunches the server and `reset`s for the next one."""
        if self.probe_sent is None:
            return None
        waited = self._clock() - self.probe_sent
        if waited < self._policy.timeout:
            return None
        self.probe_sent = None
        self.failures += 1
        if self.unresponsive_since is None:
            self.unresponsive_since = self._clock() - waited
        return waited

    def next_due(self, *, in_flight: int) -> float:
        """Seconds until `due` or `overdue` may change without news (for the gate's timer)."""
        if not self.enabled:
            return float("inf")
        now = self._clock()
        if self.probe_sent is not None:
            return max(0.0, self.probe_sent + self._policy.timeout - now)
        if in_flight:
            return float("inf")  # the reply is news
        return max(0.0, self.last_answer + self._policy.interval - now)
