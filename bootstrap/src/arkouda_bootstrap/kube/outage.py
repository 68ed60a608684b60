"""How an API outage is told: one line when it begins (the progress output: the user sees why nothing moves),
and, once the API answers again, one line and one Event `ApiOutage` with its length (so `kubectl describe pod`
keeps it after the fact). An `OutageNotice` is the kube.retry.OutageListener the long-running parts pass to
follow_pods and ApiRetry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from arkouda_bootstrap.kube.events import Reason

log = logging.getLogger(__name__)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


class OutageNotice:
    """`doing` says what waits for the API, e.g. `the server waits for its locales (the wait deadline is paused)`;
    `report` prints a progress line (None: the log only); `emit` records the Event (EventRecorder.emit, or a
    hop onto the gate's event loop; None: no Event)."""

    def __init__(
        self,
        *,
        doing: str,
        report: Callable[[str], None] | None = None,
        emit: Callable[[Reason, str], object] | None = None,
    ) -> None:
        self._doing = doing
        self._report = report
        self._emit = emit

    def _say(self, line: str) -> None:
        if self._report is not None:
            self._report(line)
        else:
            log.warning("%s", line)

    def began(self, *, error: BaseException) -> None:
        self._say(f"the Kubernetes API is unreachable ({_first_line(error)}); {self._doing} until it answers")

    def ended(self, *, seconds: float, error: BaseException) -> None:
        self._say(f"the Kubernetes API answers again after {seconds:.0f}s")
        if self._emit is not None:
            self._emit(
                Reason.API_OUTAGE,
                f"the Kubernetes API was unreachable for {seconds:.0f}s ({_first_line(error)}); "
                f"{self._doing} meanwhile, and resumed",
            )
