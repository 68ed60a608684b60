"""The one retry policy for an API server that cannot answer.

A refused or broken connection, a timeout, HTTP 5xx or 429 (`ApiUnavailableError`) is tried again after a pause
that doubles from FIRST_PAUSE_SECONDS up to MAX_PAUSE_SECONDS (tenacity), each failed attempt logged with its
number and how long the API has been unreachable so far. Without a deadline it is tried for ever (the long-running
watchers: supervisor, nodewatch, gate); with one (a wait such as discovery's) only an outage that began after the
deadline had passed ends, with its last error. Every other error (ForbiddenError, 401, 404, 410 Gone) is raised at
once: trying again cannot fix it.

A deadline is a `Deadline`: the time the API was unreachable does not count against it (it moves later by every
outage's length, and cannot pass during one), because what it bounds (locales coming up, a wake) cannot be seen,
and mostly cannot even progress, without the control plane; an API outage of any length is therefore a wait, never
a timeout. An `OutageListener` hears when an outage begins (the first failed attempt after an answer) and when it
ends (the next answer), with its length: the callers turn that into one progress line and one Event.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type, wait_exponential

from arkouda_bootstrap.kube.api import ApiUnavailableError

log = logging.getLogger(__name__)

FIRST_PAUSE_SECONDS = 1.0
MAX_PAUSE_SECONDS = 30.0

T = TypeVar("T")


class OutageListener(Protocol):
    """Told once when the API stops answering and once when it answers again (kube.outage.OutageNotice)."""

    def began(self, *, error: BaseException) -> None: ...

    def ended(self, *, seconds: float, error: BaseException) -> None:
        """`seconds`: from the last answer before the outage to the first after it; `error`: its first failure."""
        ...


class Deadline:
    """A time of `clock` that API outages move later: while `pause()`d it cannot pass, and `resume()` adds the
    paused time to it. ApiRetry pauses it for the length of every outage it sees."""

    def __init__(self, at: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._at = at
        self._clock = clock
        self._paused_since: float | None = None
        self.excluded = 0.0  # seconds of outages added so far

    @classmethod
    def after(cls, seconds: float, *, clock: Callable[[], float] = time.monotonic) -> Deadline:
        return cls(clock() + seconds, clock=clock)

    def pause(self, *, since: float) -> None:
        if self._paused_since is None:
            self._paused_since = since

    def resume(self) -> None:
        if self._paused_since is not None:
            paused = max(0.0, self._clock() - self._paused_since)
            self._at += paused
            self.excluded += paused
            self._paused_since = None

    @property
    def at(self) -> float:
        """The deadline now (during a pause: as if the pause ended now)."""
        if self._paused_since is None:
            return self._at
        return self._at + max(0.0, self._clock() - self._paused_since)

    def left(self) -> float:
        return self.at - self._clock()

    def passed(self) -> bool:
        """During a pause: only when it had passed before the pause began."""
        return self._clock() >= self.at


class ApiRetry:
    """Retries API requests per the policy above. `attempts()` is a tenacity Retrying for one request (attempts
    count from 1 again for the next request); `answer_arrived()` tells it that a long request (a watch) just got
    an answer, so an outage is measured from the last answer, not from the request's start. A caller that must
    not block (the gate's event loop) uses `pause_after(error)` and `request_succeeded()` instead and does the
    waiting itself.

    An outage begins with the first failed attempt after an answer and ends with the next answer (a request that
    succeeded, or a watch event): `deadline` is paused for its length and `listener` told of both ends.

    `clock` and `sleep` are injectable (tests use a fake clock); `stop` ends the retries early (a watcher being
    stopped): the last error is raised then too."""

    def __init__(
        self,
        what: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
        deadline: Deadline | None = None,
        stop: threading.Event | None = None,
        listener: OutageListener | None = None,
    ) -> None:
        self._what = what
        self._clock = clock
        self._sleep = sleep
        self._deadline = deadline
        self._stop = stop
        self._listener = listener
        self._pause = wait_exponential(multiplier=FIRST_PAUSE_SECONDS, min=FIRST_PAUSE_SECONDS, max=MAX_PAUSE_SECONDS)
        self._answered = clock()  # the last sign of life: the start of an attempt, or an answer within it
        self._outage_since: float | None = None  # the last sign of life before the failures of this outage
        self._outage_error: BaseException | None = None  # its first failure
        self._failures = 0  # of pause_after since the last request_succeeded()

    @property
    def unreachable(self) -> bool:
        """An outage is going on (a request failed, none succeeded since)."""
        return self._outage_since is not None

    def answer_arrived(self) -> None:
        self._answered = self._clock()
        self._outage_over()

    def request_succeeded(self) -> None:
        """A request succeeded (one made without `attempts()`, or a whole watch): an outage, if any, is over and
        the next failure starts a new one."""
        self._failures = 0
        self._outage_over()

    def pause_after(self, error: ApiUnavailableError) -> float:
        """Count a failed request made without `attempts()`, log it as they do, and return the pause before the
        next attempt."""
        self._failures += 1
        if self._failures == 1:
            self._answered = self._clock()
        self._outage_began(error)
        state = RetryCallState(self.attempts(), fn=None, args=(), kwargs={})
        state.attempt_number = self._failures
        pause = float(self._pause(state))
        self._report(self._failures, error, pause)
        return pause

    def attempts(self) -> Retrying:
        return Retrying(
            retry=retry_if_exception_type(ApiUnavailableError),
            wait=self._pause,
            stop=self._should_stop,
            sleep=self._pause_for,
            before=self._before,
            after=self._failed,
            before_sleep=self._log,
            reraise=True,
        )

    def call(self, request: Callable[[], T]) -> T:
        """`request()` with retries; its result."""
        result = self.attempts()(request)
        self.request_succeeded()
        return result

    def _pause_for(self, seconds: float) -> None:
        self._sleep(seconds)

    def _before(self, state: RetryCallState) -> None:
        self._answered = self._clock()

    def _failed(self, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        if error is not None:
            self._outage_began(error)

    def _outage_began(self, error: BaseException) -> None:
        if self._outage_since is not None:
            return
        self._outage_since = self._answered
        self._outage_error = error
        if self._deadline is not None:
            self._deadline.pause(since=self._answered)
        if self._listener is not None:
            self._listener.began(error=error)

    def _outage_over(self) -> None:
        since, error = self._outage_since, self._outage_error
        if since is None or error is None:
            return
        self._outage_since = self._outage_error = None
        if self._deadline is not None:
            self._deadline.resume()
        seconds = self._clock() - since
        log.warning("%s: the API answers again after %.0fs", self._what, seconds)
        if self._listener is not None:
            self._listener.ended(seconds=seconds, error=error)

    def _should_stop(self, state: RetryCallState) -> bool:
        if self._stop is not None and self._stop.is_set():
            return True
        # a paused deadline passes only when it had passed before the outage began
        return self._deadline is not None and self._deadline.passed()

    def _log(self, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        pause = state.next_action.sleep if state.next_action is not None else 0.0
        self._report(state.attempt_number, error, pause)

    def _report(self, attempt: int, error: BaseException | None, pause: float) -> None:
        now = self._clock()
        since = self._outage_since if self._outage_since is not None else self._answered
        log.warning(
            "%s: attempt %d failed: %s; the API has been unreachable for %.0fs; attempt %d in %.1fs%s",
            self._what,
            attempt,
            error,
            now - since,
            attempt + 1,
            pause,
            "" if self._deadline is None else " (the deadline waits while the API is unreachable)",
        )
