"""Kubernetes Events on the server pod, so `kubectl describe pod` tells the story (and NodeLost or
KueueWorkloadDeleted, which `nodewatch` puts on the pod it force-deleted or that Kueue held).

Reasons (docs/interfaces.md): LocalesReady, KeysPending, ProbeFailed, Launched, LocaleLost, Relaunching,
WaitTimeout, ImpostorPod, and for every refusal a user can fix: SecretInvalid, RbacMissing, WorkDirUnusable,
SecondaryNetworkMissing; ApiOutage when the API answers again after an outage; DatagramsDropped when the launch's
network check found drops. Failing to emit an
Event is logged, never fatal.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from enum import StrEnum

from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.kube.api import ConflictError, KubeApi, PodRef

log = logging.getLogger(__name__)


class Reason(StrEnum):
    LOCALES_READY = "LocalesReady"
    # a pod of this release serves other keys of the release than ours: waiting for it to reload the Secret
    KEYS_PENDING = "KeysPending"
    PROBE_FAILED = "ProbeFailed"
    LAUNCHED = "Launched"
    LOCALE_LOST = "LocaleLost"
    # a locale pod turned NotReady (the control plane's opinion) while it answers on the pod network: no stop
    LOCALE_NOT_READY = "LocaleNotReady"
    RELAUNCHING = "Relaunching"
    WAIT_TIMEOUT = "WaitTimeout"
    # a pod with the release's labels that its StatefulSets do not own (kube.ownership): named, then ignored
    IMPOSTOR_POD = "ImpostorPod"
    # mpi job mode (`server --scale-down-when-done`), on the launcher pod and its Job: how the one run ended, then
    # the locale StatefulSet scaled to 0 (or why it could not be)
    RUN_SUCCEEDED = "RunSucceeded"
    RUN_FAILED = "RunFailed"
    LOCALES_RELEASED = "LocalesReleased"
    LOCALES_KEPT = "LocalesKept"
    # the server's wait timed out: its locale StatefulSet went to 0 (LocalesReleased, above) and, after a
    # back-off, is asked for its locale pods again (server.giveback)
    LOCALES_REQUESTED = "LocalesRequested"
    # a pod stuck terminating on a lost node was force-deleted so that its StatefulSet recreates it
    NODE_LOST = "NodeLost"
    # a pod of a Kueue pod group ended but Kueue's finalizer kept it, so its StatefulSet could not recreate it: the
    # group's Workload was deleted (Kueue then deletes the group's pods and admits the release anew)
    KUEUE_WORKLOAD_DELETED = "KueueWorkloadDeleted"
    SECRET_INVALID = "SecretInvalid"
    RBAC_MISSING = "RbacMissing"
    WORK_DIR_UNUSABLE = "WorkDirUnusable"
    # the idle gate, on its own pod: scaling to zero after the idle timeout, all pods gone, scaling up for a
    # client or a wake request, the server Ready again, and a wake that missed its deadline (and why)
    IDLE_DRAINING = "IdleDraining"
    ASLEEP = "Asleep"
    WAKING = "Waking"
    AWAKE = "Awake"
    WAKE_TIMEOUT = "WakeTimeout"
    # with Kueue (gate/queue.py): the woken release waits for admission in its LocalQueue (Kueue's reason), and
    # the release scaled to 0 had its Workload deleted, so its quota is free for the queue
    WAKE_QUEUED = "WakeQueued"
    QUOTA_RELEASED = "QuotaReleased"
    # with Kueue, on the gated server pod itself: the release waits in its LocalQueue, with Kueue's reason
    QUEUED = "Queued"
    # the gate's health check: the server's request loop stopped answering (its pod is deleted for a relaunch),
    # and answers again
    SERVER_UNRESPONSIVE = "ServerUnresponsive"
    SERVER_ANSWERING = "ServerAnswering"
    # the idle gate's checkpoint (global.idle.checkpoint): saved before the sleep (size, time), loaded after the
    # wake; a save that failed or would not bring everything back, a load that failed, one made at another size
    CHECKPOINTED = "Checkpointed"
    RESTORED = "Restored"
    CHECKPOINT_INCOMPLETE = "CheckpointIncomplete"
    CHECKPOINT_FAILED = "CheckpointFailed"
    RESTORE_FAILED = "RestoreFailed"
    CHECKPOINT_SIZE_MISMATCH = "CheckpointSizeMismatch"
    # a pod has no address on --network-attachment (its network-status annotation is missing or lacks it)
    SECONDARY_NETWORK_MISSING = "SecondaryNetworkMissing"
    # the pre-launch probe ended processes a previous launch left on a host (its server pod was lost with its node)
    LEFTOVERS_ENDED = "LeftoversEnded"
    # the launch's network check: datagrams were dropped at start-up (netdrops; a launch that drops none says so
    # in the log only)
    DATAGRAMS_DROPPED = "DatagramsDropped"
    # the Kubernetes API was unreachable for a while (how long; what waited meanwhile), once it answers again
    API_OUTAGE = "ApiOutage"


WARNINGS = frozenset(
    {
        Reason.PROBE_FAILED,
        Reason.LOCALE_LOST,
        Reason.WAIT_TIMEOUT,
        Reason.IMPOSTOR_POD,
        Reason.RUN_FAILED,
        Reason.LOCALES_KEPT,
        Reason.NODE_LOST,
        Reason.KUEUE_WORKLOAD_DELETED,
        Reason.SECRET_INVALID,
        Reason.RBAC_MISSING,
        Reason.WORK_DIR_UNUSABLE,
        Reason.WAKE_TIMEOUT,
        Reason.SERVER_UNRESPONSIVE,
        Reason.SECONDARY_NETWORK_MISSING,
        Reason.CHECKPOINT_INCOMPLETE,
        Reason.CHECKPOINT_FAILED,
        Reason.RESTORE_FAILED,
        Reason.CHECKPOINT_SIZE_MISMATCH,
        Reason.API_OUTAGE,
        Reason.DATAGRAMS_DROPPED,
    }
)


class EventRecorder:
    def __init__(self, api: KubeApi | None, pod: PodRef | None) -> None:
        self._api = api
        self._pod = pod

    def emit(self, reason: Reason, message: str, *, once_as: str | None = None) -> None:
        """Record `reason` on the pod. With `once_as`, at most once for that key in the pod's namespace, whoever
        records it (the Event is named `<pod>.<once_as>`): two replicas that act alike tell it once."""
        if self._api is None or self._pod is None:
            log.debug("no pod to attach event %s to", reason)
            return
        try:
            self._api.create_event(
                pod=self._pod,
                reason=reason.value,
                message=message,
                type_="Warning" if reason in WARNINGS else "Normal",
                name=f"{self._pod.name}.{once_as}" if once_as is not None else None,
            )
        except ConflictError:
            log.info("event %s on pod %s was already recorded (%s)", reason.value, self._pod.name, once_as)
        except Exception as exc:  # noqa: BLE001 - an Event is a nicety; never let it fail the launch
            log.warning("could not emit event %s on pod %s: %s", reason.value, self._pod.name, exc)

    def regarding(self, pod: PodRef) -> EventRecorder:
        """A recorder of Events on another pod, through the same API."""
        return EventRecorder(self._api, pod)

    @contextlib.contextmanager
    def on_error(self, reason: Reason, *, of: type[BootstrapError] = BootstrapError) -> Iterator[None]:
        """Emit `reason` with the error's one line when the block refuses with a BootstrapError of type `of`, then
        re-raise."""
        try:
            yield
        except of as exc:
            self.emit(reason, str(exc))
            raise
