"""`nodewatch`: force-delete a release's StatefulSet pod that is stuck terminating on a lost node, so that its
StatefulSet recreates it on a remaining node (docs/node-loss.md has the timeline and why this is safe for our pods).

When a node dies, the node controller marks its pods NotReady and taints the node `unreachable:NoExecute`; the
taint manager then deletes the pods (after the chart's short tolerationSeconds), but only the kubelet of that node
can confirm a graceful deletion, so the pod stays Terminating and its StatefulSet never makes the replacement
(one pod per name). This watch acts only on pods that (1) belong to one of the named StatefulSets (by name and by
controller UID: kube.ownership; another pod with the labels is named in an Event `ImpostorPod` on it) and (2) carry
the node controller's or the taint manager's mark of a lost node, and then on one of two kinds of evidence:

- the data plane: the pod's sshd has missed every probe of this process for 20 s (server.liveness, the same bound
  as the server's supervisor). The control plane says the node stopped reporting, the pod network says the pod
  is gone: the pod is force-deleted at once, not evicted first, so the release does not wait for the taint
  manager, the pod's grace period and a margin (docs/node-loss.md has the timeline). A pod that still answers is
  left alone, whatever the control plane says: an API server outage marks every pod of every node so;
- the control plane alone (when the pod cannot be probed: no sshd port given, no address): the pod is being
  deleted and has outlived its own grace period plus a margin, as seen by this process; a kubelet that is alive
  confirms within the grace period.

The node controller marks the pods and taints the node unschedulable in separate steps: a replacement created in
between can be bound to the dead node, where no kubelet will ever start it. So the data-plane rule waits a moment
after the mark (MARK_SETTLE_SECONDS), and a pod of ours that is bound to a node this process found lost and that no
kubelet took within UNCLAIMED_SECONDS is force-deleted too (the scheduler then places it elsewhere).

The delete carries the pod's uid as precondition, so the replacement under the same name is never touched.

With a Kueue pod group (`kueue_workload`, global.scheduling.queueName) there is one more way a pod gets stuck:
Kueue (v0.19 and older, kubernetes-sigs/kueue#13830) keeps its finalizer on a pod of an admitted group after the
pod was deleted and its containers ended, and the StatefulSet cannot create the replacement under the same name.
Nothing but the Workload's deletion releases it, so once such a pod has ended (or was force-deleted here, as on a
lost node) the Workload that owns it is deleted (Event KueueWorkloadDeleted): Kueue deletes every pod of the
group, the StatefulSets make them again and Kueue admits the release anew.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.kube.api import KUEUE_FINALIZER, KubeApi, PodEvent, PodInfo, PodList, PodRef
from arkouda_bootstrap.kube.events import EventRecorder, Reason
from arkouda_bootstrap.kube.outage import OutageNotice
from arkouda_bootstrap.kube.ownership import OwnedBy
from arkouda_bootstrap.kube.podwatch import ChunkEnded, PodCache, follow_pods
from arkouda_bootstrap.server.liveness import Liveness, Target

log = logging.getLogger(__name__)

# Seconds past the pod's own deletion grace period before we act: a live kubelet that is merely slow (SIGKILL
# after the grace period, then the status update) confirms well within it.
DEFAULT_MARGIN_SECONDS = 10.0
# A dead node sends no more pod changes, so the stuck pods are re-checked after every watch request at the latest.
DEFAULT_CHUNK_SECONDS = 5
TAINT_MANAGER_REASON = "DeletionByTaintManager"
# Seconds from the first sight of a lost node's mark on a pod to its force-delete on the data plane's evidence: the
# node controller's taint that keeps the scheduler off the node follows the mark within its next pass (< 1 s).
MARK_SETTLE_SECONDS = 2.0
# Seconds a pod bound to a lost node may wait for a kubelet to take it (a live one reports the pod in about 1 s).
UNCLAIMED_SECONDS = 10.0
# Seconds an ended pod held only by Kueue's finalizer is left before its Workload is deleted: Kueue removes the
# finalizer itself when it can (a replacement already exists, the group finished), within its next reconcile.
KUEUE_SETTLE_SECONDS = 5.0
# After this process deleted the Workload (the group restarts): seconds a recreated pod may stay gated while Kueue
# says the group is admitted (it removes the gates within a second of its admission; v0.19 sometimes misses pods
# whose predecessors of the same name were still terminating, and they then wait forever), and how long after the
# delete that is looked for.
KUEUE_STRANDED_SECONDS = 30.0
KUEUE_RECHECK_WINDOW = 600.0


HELD = f", held by Kueue's finalizer {KUEUE_FINALIZER}, so its StatefulSet cannot recreate it"


def unclaimed(pod: PodInfo) -> bool:
    """Bound to a node, but no kubelet has reported it yet: only the scheduler's condition, no address, no
    container."""
    return (
        bool(pod.node_name)
        and not pod.pod_ip
        and not pod.containers
        and all(c.type == "PodScheduled" for c in pod.conditions)
    )


def node_lost_evidence(pod: PodInfo) -> str | None:
    """What on the pod says its node was lost, or None.

    The taint manager adds DisruptionTarget=True (reason DeletionByTaintManager) before it deletes a pod for a
    NoExecute taint (node unreachable / not ready). The node controller, when a node stops reporting, sets the
    pod's Ready condition to False and touches nothing else, whereas a kubelet always turns ContainersReady False
    together with Ready: Ready=False with ContainersReady=True is the node controller's mark."""
    disruption = pod.condition("DisruptionTarget")
    if disruption is not None and disruption.status == "True" and disruption.reason == TAINT_MANAGER_REASON:
        return "the taint manager evicted it for its node's NoExecute taint (unreachable or not ready)"
    ready, containers = pod.condition("Ready"), pod.condition("ContainersReady")
    if ready is not None and ready.status != "True" and containers is not None and containers.status == "True":
        return "the node controller marked it NotReady (its node stopped reporting)"
    return None


def statefulset_of(pod_name: str, statefulsets: Sequence[str]) -> str | None:
    """The StatefulSet among `statefulsets` whose pod this name is (`<statefulset>-<ordinal>`), or None."""
    for sts in statefulsets:
        if re.fullmatch(re.escape(sts) + r"-(0|[1-9][0-9]*)", pod_name):
            return sts
    return None


@dataclass(frozen=True)
class NodeWatchSettings:
    namespace: str
    selector: str
    statefulsets: tuple[str, ...]
    margin_seconds: float = DEFAULT_MARGIN_SECONDS
    chunk_seconds: int = DEFAULT_CHUNK_SECONDS
    ssh_port: int | None = None  # the pods' sshd, probed for the data-plane evidence; None: control plane only
    kueue_workload: str | None = None  # the release's Kueue Workload (pod group), deleted when Kueue holds a pod


class Reaper:
    """Keeps the followed pods and, on `reap_due`, force-deletes those stuck on a lost node long enough."""

    def __init__(
        self,
        api: KubeApi,
        settings: NodeWatchSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        owned: Callable[[PodInfo], bool] | None = None,
        liveness: Liveness | None = None,
    ):
        self._api = api
        self._settings = settings
        self._clock = clock
        self._owned = owned
        self._liveness = liveness  # probed by run_nodewatch's probe thread; its targets follow the pods here
        self._cache = PodCache(keep=self._ours)
        self._deleting_since: dict[str, float] = {}  # by uid: when this process first saw the deletion
        self._marked_since: dict[str, float] = {}  # by uid: when this process first saw a lost node's mark
        self._done: set[str] = set()  # uids already force-deleted (or found gone)
        # node -> uids of our pods on it when this process found it lost; a pod bound there later that a kubelet
        # takes proves the node alive again
        self._lost_nodes: dict[str, set[str]] = {}
        self._unclaimed_since: dict[str, float] = {}  # by uid: bound to a lost node, not taken by a kubelet
        self._kueue_done: set[str] = set()  # uids of pods for which the Workload was deleted
        self._gated_since: dict[str, float] = {}  # by uid: when this process first saw the pod gated
        self._restarted_at: float | None = None  # when this process last deleted the Workload
        self._next_look = 0.0  # the next read of the Workload for stranded pods

    def observe(self, item: PodList | PodEvent | ChunkEnded) -> None:
        self._cache.apply(item)
        pods = self._cache.pods.values()
        now = self._clock()
        live = {p.uid for p in pods}
        for pod in pods:
            if pod.deleting:
                self._deleting_since.setdefault(pod.uid, now)
            if node_lost_evidence(pod) is not None:
                self._marked_since.setdefault(pod.uid, now)
            else:  # a kubelet that reported again cleared it
                self._marked_since.pop(pod.uid, None)
            before = self._lost_nodes.get(pod.node_name)
            if before is not None and pod.uid not in before:
                if unclaimed(pod):
                    self._unclaimed_since.setdefault(pod.uid, now)
                else:
                    log.info("node %s runs pod %s again: its kubelet is back", pod.node_name, pod.name)
                    del self._lost_nodes[pod.node_name]
        for uid in set(self._deleting_since) - {p.uid for p in pods if p.deleting}:
            del self._deleting_since[uid]
        for uid in set(self._marked_since) - live:
            del self._marked_since[uid]  # a pod gone from a relist
        still = {p.uid for p in pods if unclaimed(p)}
        self._unclaimed_since = {uid: t for uid, t in self._unclaimed_since.items() if uid in still}
        self._done &= live
        self._kueue_done &= live
        gated = {p.uid for p in pods if p.gated and not p.deleting}
        self._gated_since = {uid: self._gated_since.get(uid, now) for uid in gated}
        port = self._settings.ssh_port
        if self._liveness is not None and port is not None:
            self._liveness.retarget({p.name: Target(pod=p.name, address=p.pod_ip, port=port) for p in pods if p.pod_ip})

    def _unanswered(self, pod: PodInfo) -> str | None:
        """The data plane's evidence: this pod (at its current address) missed every probe for the bound."""
        liveness = self._liveness
        if liveness is None or pod.name not in liveness.pods or liveness.target(pod.name).address != pod.pod_ip:
            return None
        return liveness.lost(pod.name)

    def _ours(self, pod: PodInfo) -> bool:
        named = statefulset_of(pod.name, self._settings.statefulsets) is not None
        return named and (self._owned is None or self._owned(pod))

    def due(self) -> list[tuple[PodInfo, str]]:
        """(pod, the whole evidence in words) of every pod to force-delete now."""
        now = self._clock()
        found = []
        for pod in self._cache.pods.values():
            if pod.uid in self._done:
                continue
            bound = self._unclaimed_since.get(pod.uid)
            if bound is not None and now - bound >= UNCLAIMED_SECONDS and pod.node_name in self._lost_nodes:
                found.append(
                    (
                        pod,
                        f"it was bound to this node, found lost here before, and no kubelet took it in "
                        f"{now - bound:.0f}s (the scheduler placed it before the node was tainted)",
                    )
                )
                continue
            evidence = node_lost_evidence(pod)
            if evidence is None:
                continue
            settled = now - self._marked_since.get(pod.uid, now) >= MARK_SETTLE_SECONDS
            if settled and (unanswered := self._unanswered(pod)) is not None:
                found.append((pod, f"{evidence}, and {unanswered}"))
                continue
            if not pod.deleting:
                continue
            age = now - self._deleting_since.get(pod.uid, now)
            grace, margin = pod.deletion_grace_seconds or 0, self._settings.margin_seconds
            if age >= grace + margin:
                found.append(
                    (
                        pod,
                        f"{evidence}; still Terminating {age:.0f}s after its deletion was seen (grace {grace}s + "
                        f"margin {margin:g}s)",
                    )
                )
        return found

    def held_by_kueue(self) -> list[tuple[PodInfo, str]]:
        """(pod, why) of every pod whose deletion only Kueue's finalizer holds now (with kueue_workload only)."""
        if self._settings.kueue_workload is None:
            return []
        now = self._clock()
        found = []
        for pod in self._cache.pods.values():
            if not pod.deleting or KUEUE_FINALIZER not in pod.finalizers or pod.uid in self._kueue_done:
                continue
            age = now - self._deleting_since.get(pod.uid, now)
            if pod.phase in ("Succeeded", "Failed") and age >= KUEUE_SETTLE_SECONDS:
                found.append((pod, f"it ended ({pod.phase}) {age:.0f}s ago{HELD}"))
            elif pod.uid in self._done:  # force-deleted here (a lost node): no kubelet will report it ended
                found.append((pod, f"it was force-deleted and is still there {age:.0f}s after its deletion{HELD}"))
        return found

    def stranded_by_kueue(self) -> list[tuple[PodInfo, str]]:
        """(pod, why) of every pod of the group recreated after this process deleted its Workload that is still
        gated KUEUE_STRANDED_SECONDS while Kueue says the group is admitted: Kueue v0.19 sometimes admits such a
        group without removing the gates of pods whose predecessors of the same name were still terminating.
        Looked at for KUEUE_RECHECK_WINDOW after the delete only, the Workload read at most every
        KUEUE_STRANDED_SECONDS (a gated group is otherwise queued, which is Kueue's business)."""
        workload = self._settings.kueue_workload
        restarted = self._restarted_at
        now = self._clock()
        if workload is None or restarted is None or now - restarted > KUEUE_RECHECK_WINDOW or now < self._next_look:
            return []
        gated = [
            (pod, now - max(since, restarted))
            for pod in self._cache.pods.values()
            if (since := self._gated_since.get(pod.uid)) is not None and pod.uid not in self._kueue_done
        ]
        if not any(age >= KUEUE_STRANDED_SECONDS for _, age in gated):
            return []
        self._next_look = now + KUEUE_STRANDED_SECONDS
        try:
            found = self._api.get_kueue_workload(namespace=self._settings.namespace, name=workload)
        except BootstrapError as exc:
            log.warning("cannot read Kueue Workload %s: %s", workload, exc)
            return []
        admitted = found.condition("Admitted") if found is not None else None
        if found is None or admitted is None or admitted.status != "True":
            return []
        return [
            (
                pod,
                f"it is still gated {age:.0f}s after its group's restart while Kueue Workload {workload} says "
                "Admitted: Kueue did not remove its gate",
            )
            for pod, age in gated
            if age >= KUEUE_STRANDED_SECONDS and pod.uid in found.owner_uids
        ]

    def settling(self) -> float | None:
        """Seconds until the first marked pod that does not answer may be forced (its mark is younger than
        MARK_SETTLE_SECONDS), or None: the caller waits that long instead of for the next pod change."""
        now = self._clock()
        waits = [
            MARK_SETTLE_SECONDS - (now - since)
            for pod in self._cache.pods.values()
            if (since := self._marked_since.get(pod.uid)) is not None
            and pod.uid not in self._done
            and now - since < MARK_SETTLE_SECONDS
            and self._unanswered(pod) is not None
        ]
        return max(0.0, min(waits)) if waits else None

    def reap_due(self) -> list[str]:
        """Force-delete what is due; returns the names deleted. A refused delete (RBAC) is logged and retried at
        the next check; a pod already gone or replaced counts as done."""
        reaped = []
        for pod, evidence in self.due():
            if pod.node_name and pod.node_name not in self._lost_nodes:
                on_it = {p.uid for p in self._cache.pods.values() if p.node_name == pod.node_name}
                self._lost_nodes[pod.node_name] = on_it
            try:
                deleted = self._api.force_delete_pod(
                    namespace=pod.namespace or self._settings.namespace, name=pod.name, uid=pod.uid
                )
            except BootstrapError as exc:
                log.error("cannot force-delete pod %s stuck on lost node %s: %s", pod.name, pod.node_name, exc)
                continue
            self._done.add(pod.uid)
            if not deleted:
                log.info("pod %s (uid %s) was already gone or replaced", pod.name, pod.uid)
                continue
            node = pod.node_name or "(unknown)"
            message = (
                f"pod {pod.name} on node {node}: {evidence}; its node's kubelet, the only one that could confirm "
                "a deletion, does not report: force-deleted so that its StatefulSet recreates it on a remaining node"
            )
            log.warning("%s", message)
            recorder = EventRecorder(
                self._api, PodRef(namespace=pod.namespace or self._settings.namespace, name=pod.name, uid=pod.uid)
            )
            # nodewatch's replicas act alike: the pod's uid makes it one Event
            recorder.emit(Reason.NODE_LOST, message, once_as=f"nodelost-{pod.uid}")
            reaped.append(pod.name)
        self._release_kueue_group()
        return reaped

    def _release_kueue_group(self) -> None:
        """Delete the Workload when Kueue's finalizer holds a pod of the group (one delete for all such pods)."""
        held = self.held_by_kueue() + self.stranded_by_kueue()
        workload = self._settings.kueue_workload
        if not held or workload is None:
            return
        ns = self._settings.namespace
        try:
            # only the Workload that owns this pod: another replica may have deleted it already, and Kueue reuses
            # the name for the group's next one
            deleted = self._api.delete_kueue_workload(namespace=ns, name=workload, owner_uid=held[0][0].uid)
        except BootstrapError as exc:
            log.error("cannot delete Kueue Workload %s that holds pod(s) %s: %s", workload,
                      ", ".join(p.name for p, _ in held), exc)  # fmt: skip
            return
        if deleted:
            self._restarted_at, self._next_look = self._clock(), 0.0
        for pod, why in held:
            self._kueue_done.add(pod.uid)
            done = "deleted" if deleted else "found already gone or replaced:"
            message = (
                f"pod {pod.name}: {why}: {done} Kueue Workload {workload}; Kueue "
                "deletes every pod of the group and admits the release again when they are recreated"
            )
            log.warning("%s", message)
            recorder = EventRecorder(self._api, PodRef(namespace=pod.namespace or ns, name=pod.name, uid=pod.uid))
            recorder.emit(Reason.KUEUE_WORKLOAD_DELETED, message, once_as=f"kueue-{pod.uid}")


def impostor_event(api: KubeApi) -> Callable[[PodInfo, str], None]:
    """The Event `ImpostorPod` goes on the impostor itself (this Deployment's pod tells no story of its own)."""

    def emit(pod: PodInfo, message: str) -> None:
        on_it = EventRecorder(api, PodRef(namespace=pod.namespace, name=pod.name, uid=pod.uid))
        on_it.emit(Reason.IMPOSTOR_POD, message)

    return emit


def run_nodewatch(
    api: KubeApi,
    settings: NodeWatchSettings,
    *,
    clock: Callable[[], float] = time.monotonic,
    stop: threading.Event | None = None,
    sleep: Callable[[float], object] | None = None,
) -> int:
    """Follow the pods and reap stuck ones until `stop` is set (never, in the pod). An unreachable API is retried
    for ever (kube.retry); an error no retry can fix, e.g. missing RBAC to list/watch pods, ends it (one line,
    non-zero: the chart's Role is wrong)."""
    stop = stop or threading.Event()
    wait = sleep or stop.wait
    owned = OwnedBy(
        api, namespace=settings.namespace, statefulsets=settings.statefulsets, on_impostor=impostor_event(api)
    )
    liveness = Liveness({}, kind="pod") if settings.ssh_port is not None else None
    reaper = Reaper(api, settings, clock=clock, owned=owned, liveness=liveness)
    log.info(
        "watching pods of %s (selector %s) for pods of a lost node (%s; else terminating past grace + %gs)",
        ", ".join(settings.statefulsets),
        settings.selector,
        f"sshd port {settings.ssh_port} probed every {liveness.policy.interval:g}s, lost after "
        f"{liveness.policy.lost_after:g}s"
        if liveness is not None
        else "not probed",
        settings.margin_seconds,
    )
    if liveness is not None:
        threading.Thread(target=_probe, args=(liveness, stop), name="nodewatch-probe", daemon=True).start()
    followed = follow_pods(
        api,
        namespace=settings.namespace,
        selector=settings.selector,
        chunk_seconds=settings.chunk_seconds,
        clock=clock,
        sleep=wait,
        stop=stop,
        listener=OutageNotice(doing="no stuck pod can be seen or force-deleted; nodewatch waits"),
    )
    with contextlib.closing(followed):
        for item in followed:
            reaper.observe(item)
            reaper.reap_due()
            # a lost pod whose mark is settling is forced when it has settled, not at the next pod change
            while (settle := reaper.settling()) is not None and not stop.is_set():
                wait(settle)
                reaper.reap_due()
            if stop.is_set():
                break
    return 0


def _probe(liveness: Liveness, stop: threading.Event) -> None:
    """Probe every followed pod each interval (the streaks the reaper reads) until `stop`."""
    for _ in liveness.rounds(stop):
        pass
