"""The one retry policy for an API server that cannot answer.

A refused or broken connection, a timeout, HTTP 5xx or 429 (`ApiUnavailableError`) is tried again after a pause
that doubles from FIRST_PAUSE_SECONDS up to MAX_PAUSE_SECONDS (tenacity), each failed attempt logged with its
number and how long the API has been unreachable so far. Without a deadline it is tried for ever (the long-running
watchers: supervisor, nodewatch, gate); with one (a wait such as discovery's) until the deadline, then the last
error is raised. Every other error (ForbiddenError, 401, 404, 410 Gone) is raised at once: trying again cannot fix
it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type, wait_exponential

from arkouda_bootstrap.kube.api import ApiUnavailableError

log = logging.getLogger(__name__)

FIRST_PAUSE_SECONDS = 1.0
MAX_PAUSE_SECONDS = 30.0

T = TypeVar("T")


class ApiRetry:
    """Retries API requests per the policy above. `attempts()` is a tenacity Retrying for one request (attempts
    count from 1 again for the next request); `answer_arrived()` tells it that a long request (a watch) just got
    an answer, so an outage is measured from the last answer, not from the request's start. A caller that must
    not block (the gate's event loop) uses `pause_after(error)` and `request_succeeded()` instead and does the
    waiting itself.

    `clock` and `sleep` are injectable (tests use a fake clock); `stop` ends the retries early (a watcher being
    stopped): the last error is raised then too."""

    def __init__(
        self,
        what: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
        deadline: float | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self._what = what
        self._clock = clock
        self._sleep = sleep
        self._deadline = deadline
        self._stop = stop
        self._pause = wait_exponential(multiplier=FIRST_PAUSE_SECONDS, min=FIRST_PAUSE_SECONDS, max=MAX_PAUSE_SECONDS)
        self._answered = clock()  # the last sign of life: the start of an attempt, or an answer within it
        self._unreachable_since = self._answered
        self._failures = 0  # of pause_after since the last request_succeeded()

    def answer_arrived(self) -> None:
        self._answered = self._clock()

    def request_succeeded(self) -> None:
        """A request made without `attempts()` succeeded: the next failure starts a new outage."""
        self._failures = 0

    def pause_after(self, error: ApiUnavailableError) -> float:
        """Count a failed request made without `attempts()`, log it as they do, and return the pause before the
        next attempt."""
        self._failures += 1
        if self._failures == 1:
            self._answered = self._clock()
        state = RetryCallState(self.attempts(), fn=None, args=(), kwargs={})
        state.attempt_number = self._failures
        pause = self._wait(state)
        self._report(self._failures, error, pause)
        return pause

    def attempts(self) -> Retrying:
        return Retrying(
            retry=retry_if_exception_type(ApiUnavailableError),
            wait=self._wait,
            stop=self._should_stop,
            sleep=self._pause_for,
            before=self._before,
            before_sleep=self._log,
            reraise=True,
        )

    def call(self, request: Callable[[], T]) -> T:
        """`request()` with retries; its result."""
        return self.attempts()(request)

    def _pause_for(self, seconds: float) -> None:
        self._sleep(seconds)

    def _before(self, state: RetryCallState) -> None:
        self._answered = self._clock()

    def _wait(self, state: RetryCallState) -> float:
        pause = float(self._pause(state))
        if self._deadline is not None:
            pause = min(pause, max(0.0, self._deadline - self._clock()))
        return pause

    def _should_stop(self, state: RetryCallState) -> bool:
        if self._stop is not None and self._stop.is_set():
            return True
        return self._deadline is not None and self._clock() >= self._deadline

    def _log(self, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        pause = state.next_action.sleep if state.next_action is not None else 0.0
        self._report(state.attempt_number, error, pause)

    def _report(self, attempt: int, error: BaseException | None, pause: float) -> None:
        now = self._clock()
        if attempt == 1:
            self._unreachable_since = self._answered
        log.warning(
            "%s: attempt %d failed: %s; the API has been unreachable for %.0fs; attempt %d in %.1fs%s",
            self._what,
            attempt,
            error,
            now - self._unreachable_since,
            attempt + 1,
            pause,
            "" if self._deadline is None else f" ({max(0.0, self._deadline - now):.0f}s before the deadline)",
        )
