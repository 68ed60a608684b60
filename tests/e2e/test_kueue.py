"""Admission through Kueue (global.scheduling.queueName) on the local cluster's Kueue (hack/cluster/kueue.sh, the
module's own config/default at KUEUE_VERSION): a ClusterQueue with room for exactly one release, two releases in
its LocalQueue. The first is admitted whole and runs; the second waits in the queue with Kueue's reason, none of
its pods on a node (all gated); when the first is uninstalled (its Workload deleted by the chart's post-delete
hook), Kueue admits the second without a human.

The quota is measured, not guessed: the ClusterQueue starts large, the first release's admitted Workload says
what one release uses, and the quota is then set to one and a half times that. Skips, saying why, on a cluster
without Kueue.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest
from kubernetes import client

from kubehelpers import CHART, VALUES, Kube, all_ready, helm, image_args, release_pods, wait_for

log = logging.getLogger(__name__)

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
OPT_IN = "arkouda-k8s.test/kueue"  # the namespace label Kueue's webhooks act on here (hack/cluster/kueue.sh)
QUEUE = "arkouda"
RELEASES = ("first", "second")
N = 3
GATE = "kueue.x-k8s.io/admission"
RESOURCES = ("cpu", "memory")


def quantity(text: str) -> Decimal:
    """A Kubernetes quantity as a number (the suffixes Kueue writes: m, Ki, Mi, Gi, or none)."""
    for suffix, factor in (("m", Decimal("0.001")), ("Ki", 2**10), ("Mi", 2**20), ("Gi", 2**30)):
        if text.endswith(suffix):
            return Decimal(text[: -len(suffix)]) * factor
    return Decimal(text)


@pytest.fixture(scope="module")
def custom(kube: Kube) -> client.CustomObjectsApi:
    try:
        kube.apps.read_namespaced_deployment("kueue-controller-manager", "kueue-system")
    except client.ApiException as exc:
        if exc.status != 404:
            raise
        reason = "no Kueue on this cluster (make e2e installs it: E2E_KUEUE=1, hack/cluster/kueue.sh up)"
        print(f"SKIP test_kueue: {reason}")
        pytest.skip(reason)
    return client.CustomObjectsApi(kube.api)


@pytest.fixture(scope="module")
def ns(kube: Kube, make_namespace: Any, custom: client.CustomObjectsApi) -> Iterator[str]:
    name: str = make_namespace("kueue-e2e")
    kube.core.patch_namespace(name, {"metadata": {"labels": {OPT_IN: "enabled"}}})
    flavor, cq = f"{name}-flavor", f"{name}-cq"
    custom.create_cluster_custom_object(GROUP, VERSION, "resourceflavors", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor", "metadata": {"name": flavor}})
    custom.create_cluster_custom_object(GROUP, VERSION, "clusterqueues", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue", "metadata": {"name": cq},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}},
            "resourceGroups": [{"coveredResources": list(RESOURCES), "flavors": [{"name": flavor, "resources": [
                {"name": "cpu", "nominalQuota": "100"}, {"name": "memory", "nominalQuota": "1000Gi"}]}]}],
        }})
    custom.create_namespaced_custom_object(GROUP, VERSION, name, "localqueues", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue", "metadata": {"name": QUEUE, "namespace": name},
        "spec": {"clusterQueue": cq}})
    yield name
    for release in RELEASES:
        helm("uninstall", release, "-n", name, "--wait", "--timeout", "2m", check=False)
    for plural, obj in (("clusterqueues", cq), ("resourceflavors", flavor)):
        try:
            custom.delete_cluster_custom_object(GROUP, VERSION, plural, obj)
        except client.ApiException as exc:
            if exc.status != 404:
                raise


def install(ns: str, release: str) -> None:
    helm("install", release, str(CHART), "-n", ns, "-f", str(VALUES / "local.yaml"), *image_args(),
         "--set", f"global.numLocales={N}", "--set", f"global.scheduling.queueName={QUEUE}",
         "--set", "tests.enabled=false", timeout=300)  # fmt: skip


def workload(custom: client.CustomObjectsApi, ns: str, release: str) -> dict[str, Any] | None:
    """The release's Workload: Kueue names a pod group's Workload after the group (the chart's podGroupName)."""
    try:
        found: Any = custom.get_namespaced_custom_object(GROUP, VERSION, ns, "workloads", f"{release}-arkouda-group")
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return dict(found)


def condition(wl: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    return next((c for c in ((wl or {}).get("status") or {}).get("conditions", []) if c["type"] == kind), None)


def usage(wl: dict[str, Any]) -> dict[str, Decimal]:
    total = dict.fromkeys(RESOURCES, Decimal(0))
    for podset in wl["status"]["admission"]["podSetAssignments"]:
        for name, value in (podset.get("resourceUsage") or {}).items():
            if name in total:
                total[name] += quantity(value)
    return total


def test_one_release_runs_the_other_waits_in_the_queue_and_starts_when_the_first_is_gone(
        kube: Kube, ns: str, custom: client.CustomObjectsApi) -> None:
    first, second = RELEASES
    describe: Callable[[], str] = lambda: kube.describe_pods(ns)  # noqa: E731

    t0 = time.monotonic()
    install(ns, first)
    kube.watch_pods_until(ns, release_pods(first), all_ready(N), timeout=240, what=f"{first} Ready through Kueue")
    wl = wait_for(f"{first}'s Workload admitted", lambda: (w := workload(custom, ns, first)) and
                  (condition(w, "Admitted") or {}).get("status") == "True" and w, timeout=30, describe=describe)
    used = usage(wl)
    log.info("%s admitted and Ready in %.1f s; one release uses %s", first, time.monotonic() - t0, used)
    pods = kube.pods(ns, release_pods(first))
    assert {p.metadata.labels.get("kueue.x-k8s.io/pod-group-name") for p in pods} == {f"{first}-arkouda-group"}

    # room for one release and a half: the second cannot be admitted while the first holds its quota
    quota = {name: str((value * Decimal("1.5")).quantize(Decimal("0.001"))) for name, value in used.items()}
    cq = f"{ns}-cq"
    live: Any = custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", cq)
    spec = live["spec"]
    spec["resourceGroups"][0]["flavors"][0]["resources"] = [
        {"name": "cpu", "nominalQuota": quota["cpu"]}, {"name": "memory", "nominalQuota": quota["memory"]}]
    custom.patch_cluster_custom_object(GROUP, VERSION, "clusterqueues", cq, {"spec": spec})
    log.info("ClusterQueue %s quota now %s", cq, quota)

    install(ns, second)

    def queued() -> dict[str, Any] | None:
        w = workload(custom, ns, second)
        reserved = condition(w, "QuotaReserved")
        return reserved if reserved and reserved["status"] == "False" and reserved.get("message") else None

    reason = wait_for(f"{second} queued with a reason", queued, timeout=90, describe=describe)
    print(f"\n{second} queued: {reason['reason']}: {reason['message']}")
    assert "insufficient" in reason["message"].lower(), reason
    pods = kube.pods(ns, release_pods(second))
    assert len(pods) == N, describe()
    on_nodes = [p.metadata.name for p in pods if p.spec.node_name]
    assert not on_nodes, f"pods of the queued release on a node: {on_nodes}"
    ungated = [p.metadata.name for p in pods if GATE not in {g.name for g in p.spec.scheduling_gates or []}]
    assert not ungated, f"pods of the queued release without Kueue's gate: {ungated}"

    helm("uninstall", first, "-n", ns, "--wait", "--timeout", "3m", timeout=300)
    freed = time.monotonic()
    # the chart's post-delete hook deleted the Workload: Kueue's finalizer would otherwise keep the first release's
    # pods Terminating and its quota reserved until its waitForPodsReady timeout evicts it
    left = workload(custom, ns, first)  # Kueue's own finalizer may keep it a moment, already being deleted
    assert left is None or left["metadata"].get("deletionTimestamp"), "the first release's Workload outlived uninstall"
    kube.watch_pods_until(ns, release_pods(second), all_ready(N), timeout=300,
                          what=f"{second} admitted and Ready after {first} was uninstalled")
    print(f"{second} Ready {time.monotonic() - freed:.1f}s after {first} was uninstalled (quota freed)")
    admitted = condition(workload(custom, ns, second), "Admitted")
    assert admitted and admitted["status"] == "True", admitted


def test_a_replaced_pod_kueue_holds_is_released_by_nodewatch(kube: Kube, ns: str,
                                                              custom: client.CustomObjectsApi) -> None:
    """Kueue v0.19 keeps its finalizer on a deleted pod of an admitted group, and the StatefulSet cannot make the
    replacement under the same name; nodewatch deletes the Workload and the release comes back whole. Runs on the
    second release the test above left running."""
    _, second = RELEASES
    if not all_ready(N)(kube.pods(ns, release_pods(second))):
        pytest.skip(f"{second} is not running: the test above failed before it was Ready")
    victim = f"{second}-arkouda-locale-1"
    old_uid = kube.core.read_namespaced_pod(victim, ns).metadata.uid
    t0 = time.monotonic()
    kube.core.delete_namespaced_pod(victim, ns)

    def deleted_event() -> list[Any]:
        return [e for e in kube.events_for(ns, victim) if e.reason == "KueueWorkloadDeleted"]

    events = wait_for("nodewatch's KueueWorkloadDeleted Event", deleted_event, timeout=120, interval=2,
                      describe=lambda: kube.describe_pods(ns))
    print(f"\nKueueWorkloadDeleted after {time.monotonic() - t0:.1f}s: {events[0].message}")
    pods = kube.watch_pods_until(ns, release_pods(second), all_ready(N), timeout=300,
                                 what=f"{second} admitted and Ready again")
    print(f"{second} Ready again {time.monotonic() - t0:.1f}s after {victim} was deleted")
    assert next(p for p in pods if p.metadata.name == victim).metadata.uid != old_uid
    admitted = condition(workload(custom, ns, second), "Admitted")
    assert admitted and admitted["status"] == "True", admitted
