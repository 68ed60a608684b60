"""Kubernetes Events on the server pod, so `kubectl describe pod` tells the story.

Reasons (docs/interfaces.md): LocalesReady, ProbeFailed, Launched, LocaleLost, Relaunching, WaitTimeout.
Failing to emit an Event is logged, never fatal.
"""

from __future__ import annotations

import logging
from enum import StrEnum

from arkouda_bootstrap.kube import KubeApi, PodRef

log = logging.getLogger(__name__)


class Reason(StrEnum):
    LOCALES_READY = "LocalesReady"
    PROBE_FAILED = "ProbeFailed"
    LAUNCHED = "Launched"
    LOCALE_LOST = "LocaleLost"
    RELAUNCHING = "Relaunching"
    WAIT_TIMEOUT = "WaitTimeout"


WARNINGS = frozenset({Reason.PROBE_FAILED, Reason.LOCALE_LOST, Reason.WAIT_TIMEOUT})


class EventRecorder:
    def __init__(self, api: KubeApi | None, pod: PodRef | None) -> None:
        self._api = api
        self._pod = pod

    def emit(self, reason: Reason, message: str) -> None:
        if self._api is None or self._pod is None:
            log.debug("no pod to attach event %s to", reason)
            return
        try:
            self._api.create_event(
                pod=self._pod,
                reason=reason.value,
                message=message,
                type_="Warning" if reason in WARNINGS else "Normal",
            )
        except Exception as exc:  # noqa: BLE001 - an Event is a nicety; never let it fail the launch
            log.warning("could not emit event %s on pod %s: %s", reason.value, self._pod.name, exc)
