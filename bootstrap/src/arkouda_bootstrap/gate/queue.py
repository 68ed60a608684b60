"""A release admitted through Kueue (global.scheduling.queueName) as the idle gate sees it.

The server pod and the locale pods are one Kueue pod group, one Workload named after the group. Kueue (v0.19)
keeps its finalizer on the group's pods after their deletion and keeps the Workload admitted, holding its quota,
until the Workload itself is deleted. So when the gate scales the release to 0 (a sleep, a wake given up) it
deletes the Workload: Kueue frees the quota for the queue and lets the pods go. A wake's new pods make a new
Workload of the same name that waits in the queue; meanwhile every pod is SchedulingGated, and what the gate
tells a client and puts in its Events is Kueue's own reason (the Workload's QuotaReserved condition).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.kube.api import KUEUE_FINALIZER, PodInfo, WorkloadInfo

log = logging.getLogger(__name__)


class QueueApi(Protocol):
    def get_kueue_workload(self, *, namespace: str, name: str) -> WorkloadInfo | None: ...

    def delete_kueue_workload(
        self, *, namespace: str, name: str, owner_uid: str | None = None, uid: str | None = None
    ) -> bool: ...


@dataclass
class KueueGroup:
    """The release's pod group: `workload` (the chart's pod-group name) in LocalQueue `queue`."""

    api: QueueApi
    namespace: str
    workload: str
    queue: str
    _released: set[str] = field(default_factory=set)  # pods whose Workload was deleted here

    def held(self, pods: Sequence[PodInfo]) -> list[PodInfo]:
        """The pods being deleted that Kueue's finalizer holds and whose Workload was not deleted here yet."""
        self._released &= {p.uid for p in pods}
        return [p for p in pods if p.deleting and KUEUE_FINALIZER in p.finalizers and p.uid not in self._released]

    def release(self, pods: Sequence[PodInfo]) -> bool:
        """Delete the Workload that owns the held pods among `pods` (only that one: Kueue reuses the name for the
        group's next Workload); True when it was deleted now. Raises BootstrapError when the API refuses."""
        held = self.held(pods)
        if not held:
            return False
        deleted = self.api.delete_kueue_workload(namespace=self.namespace, name=self.workload, owner_uid=held[0].uid)
        self._released.update(p.uid for p in held)
        log.info(
            "Kueue Workload %s %s (pods %s held by %s)",
            self.workload,
            "deleted" if deleted else "already gone or replaced",
            ", ".join(p.name for p in held),
            KUEUE_FINALIZER,
        )
        return deleted

    @staticmethod
    def gated(pods: Sequence[PodInfo]) -> PodInfo | None:
        """The first pod not scheduled because a scheduling gate (Kueue's admission) is still on it."""
        return next((pod for pod in pods if pod.gated and not pod.deleting), None)

    def waiting_reason(self, pod: PodInfo) -> str:
        """Why `pod` is not scheduled, in Kueue's words: the Workload's QuotaReserved message (e.g. `couldn't
        assign flavors to pod set ...: insufficient quota for cpu ...`). Never raises: the reason goes to a
        client that must get an answer."""
        return self.waiting(pod).text

    def waiting(self, pod: PodInfo) -> Waiting:
        """`waiting_reason`, and whether Kueue has said it yet (it makes the Workload once every pod of the group
        exists, then tries to admit it: a moment after the pods)."""
        where = f"pod {pod.name} is queued in LocalQueue {self.queue} (Kueue Workload {self.workload})"
        try:
            workload = self.api.get_kueue_workload(namespace=self.namespace, name=self.workload)
        except BootstrapError as exc:
            return Waiting(f"{where}; the Workload could not be read: {exc}", said=False)
        if workload is None or workload.deleting:
            return Waiting(f"{where}: Kueue has not made the Workload yet", said=False)
        reserved, admitted = workload.condition("QuotaReserved"), workload.condition("Admitted")
        if admitted is not None and admitted.status == "True":
            return Waiting(f"{where}: admitted, the gates are being removed", said=True, admitted=True)
        if reserved is not None and reserved.status == "False" and (reserved.message or reserved.reason):
            return Waiting(f"{where}: {reserved.message or reserved.reason}", said=True)
        return Waiting(f"{where}: not admitted yet", said=False)


@dataclass(frozen=True)
class Waiting:
    text: str
    said: bool  # Kueue's own reason (or its admission) is in `text`
    admitted: bool = False  # not queued after all: Kueue admitted the group, the gates are being removed
