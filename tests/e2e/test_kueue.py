"""Admission through Kueue (global.scheduling.queueName) on the local cluster's Kueue (hack/cluster/kueue.sh, the
module's own config/default at KUEUE_VERSION): a ClusterQueue with room for exactly one release, two releases in
its LocalQueue. The first is admitted whole and runs; the second waits in the queue with Kueue's reason, none of
its pods on a node (all gated), and its `helm test` fails at once saying so; when the first is uninstalled (its
Workload deleted by the chart's post-delete hook), Kueue admits the second without a human.

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
from kueuehelpers import (
    ADMISSION_GATE,
    QUEUE,
    Queue,
    admitted,
    admitted_workload,
    condition,
    kueue_or_skip,
    queued_reason,
    usage,
    workload,
)

from kubehelpers import CHART, VALUES, Kube, all_ready, helm, image_args, release_pods, wait_for

log = logging.getLogger(__name__)

RELEASES = ("first", "second")
N = 3


@pytest.fixture(scope="module")
def custom(kube: Kube) -> client.CustomObjectsApi:
    return kueue_or_skip(kube, "test_kueue")


@pytest.fixture(scope="module")
def queue(kube: Kube, make_namespace: Any, custom: client.CustomObjectsApi) -> Iterator[Queue]:
    made = Queue(kube, custom, make_namespace("kueue-e2e"))
    yield made
    made.delete(RELEASES)


@pytest.fixture(scope="module")
def ns(queue: Queue) -> str:
    return queue.ns


def install(ns: str, release: str, *, tests: bool = False) -> None:
    helm("install", release, str(CHART), "-n", ns, "-f", str(VALUES / "local.yaml"), *image_args(),
         "--set", f"global.numLocales={N}", "--set", f"global.scheduling.queueName={QUEUE}",
         "--set", f"tests.enabled={str(tests).lower()}", timeout=300)  # fmt: skip


def test_one_release_runs_the_other_waits_in_the_queue_and_starts_when_the_first_is_gone(
        kube: Kube, ns: str, queue: Queue, custom: client.CustomObjectsApi) -> None:
    first, second = RELEASES
    describe: Callable[[], str] = lambda: kube.describe_pods(ns)  # noqa: E731

    t0 = time.monotonic()
    install(ns, first)
    kube.watch_pods_until(ns, release_pods(first), all_ready(N), timeout=240, what=f"{first} Ready through Kueue")
    wl = wait_for(f"{first}'s Workload admitted", lambda: admitted_workload(custom, ns, first), timeout=30,
                  describe=describe)
    used = usage(wl)
    log.info("%s admitted and Ready in %.1f s; one release uses %s", first, time.monotonic() - t0, used)
    pods = kube.pods(ns, release_pods(first))
    assert {p.metadata.labels.get("kueue.x-k8s.io/pod-group-name") for p in pods} == {f"{first}-arkouda-group"}

    # room for one release and a half: the second cannot be admitted while the first holds its quota
    quota = queue.fit(used, Decimal("1.5"))
    log.info("ClusterQueue %s quota now %s", queue.cq, quota)

    install(ns, second, tests=True)

    reason = wait_for(f"{second} queued with a reason", lambda: queued_reason(workload(custom, ns, second)),
                      timeout=90, describe=describe)
    print(f"\n{second} queued: {reason['reason']}: {reason['message']}")
    assert "insufficient" in reason["message"].lower(), reason
    pods = kube.pods(ns, release_pods(second))
    assert len(pods) == N, describe()
    on_nodes = [p.metadata.name for p in pods if p.spec.node_name]
    assert not on_nodes, f"pods of the queued release on a node: {on_nodes}"
    ungated = [p.metadata.name for p in pods if ADMISSION_GATE not in {g.name for g in p.spec.scheduling_gates or []}]
    assert not ungated, f"pods of the queued release without Kueue's gate: {ungated}"
    # the gate tells it on the server pod itself (kubectl describe pod), in Kueue's words
    server = f"{second}-arkouda-server-0"
    told = wait_for(f"Queued Event on {server}",
                    lambda: [e for e in kube.events_for(ns, server) if e.reason == "Queued"], timeout=60,
                    describe=describe)  # fmt: skip
    print(f"Queued on {server}: {told[0].message}")
    assert f"queued in LocalQueue {QUEUE}" in told[0].message and "insufficient" in told[0].message.lower()
    # helm test of the queued release says so at once, in Kueue's words, instead of running into its timeout
    began = time.monotonic()
    tested = helm("test", second, "-n", ns, "--logs", "--timeout", "3m", timeout=240, check=False)
    said = tested.stdout + tested.stderr
    print(f"helm test of the queued {second}: exit {tested.returncode} after {time.monotonic() - began:.1f}s")
    assert tested.returncode != 0, said
    assert f"FAIL: the release is queued in LocalQueue {QUEUE}" in said and "insufficient" in said.lower(), said

    helm("uninstall", first, "-n", ns, "--wait", "--timeout", "3m", timeout=300)
    freed = time.monotonic()
    # the chart's post-delete hook deleted the Workload: Kueue's finalizer would otherwise keep the first release's
    # pods Terminating and its quota reserved until its waitForPodsReady timeout evicts it
    left = workload(custom, ns, first)  # Kueue's own finalizer may keep it a moment, already being deleted
    assert left is None or left["metadata"].get("deletionTimestamp"), "the first release's Workload outlived uninstall"
    kube.watch_pods_until(ns, release_pods(second), all_ready(N), timeout=300,
                          what=f"{second} admitted and Ready after {first} was uninstalled")
    print(f"{second} Ready {time.monotonic() - freed:.1f}s after {first} was uninstalled (quota freed)")
    assert admitted(workload(custom, ns, second)), condition(workload(custom, ns, second), "Admitted")


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
    assert admitted(workload(custom, ns, second)), condition(workload(custom, ns, second), "Admitted")


def test_helm_upgrade_refuses_another_group_while_the_pods_run(kube: Kube, ns: str) -> None:
    """The chart's lookup of the locale StatefulSet: a running queued release keeps its queue and its size."""
    _, second = RELEASES
    if not all_ready(N)(kube.pods(ns, release_pods(second))):
        pytest.skip(f"{second} is not running: a test above failed before it was Ready")
    refused = helm("upgrade", second, str(CHART), "-n", ns, "--reuse-values", "--set", f"global.numLocales={N + 1}",
                   timeout=120, check=False)  # fmt: skip
    said = refused.stdout + refused.stderr
    print(f"\nhelm upgrade to numLocales {N + 1}: exit {refused.returncode}: {said.strip()[-300:]}")
    assert refused.returncode != 0, said
    assert f'helm upgrade changes the Kueue pod group of release {second} while its pods run' in said, said
    assert f'group size "{N}" -> "{N + 1}"' in said, said
    assert all_ready(N)(kube.pods(ns, release_pods(second)))  # untouched
