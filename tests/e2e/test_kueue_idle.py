"""The idle gate and Kueue together (global.idle.enabled with global.scheduling.queueName) on the local cluster's
Kueue: a ClusterQueue with room for one release, two releases in its LocalQueue.

Top to bottom: the sleeper (idle gate) is admitted and runs, the waiter queues behind it holding no node; the
sleeper goes idle and sleeps, its gate deletes its Workload (QuotaReleased) and the waiter is admitted without a
human. A client then wakes the sleeper while the waiter holds the quota: the sleeper's pods wait in the queue,
gated, the gate says so (WakeQueued, Kueue's reason), and at the wake deadline the client's error and the
WakeTimeout Event name the queue and Kueue's reason; the sleeper goes back to 0 and leaves the queue. Once the
waiter is uninstalled, the next client of the sleeper is served after one wake. Skips, saying why, on a cluster
without Kueue.
"""

from __future__ import annotations

import logging
import sys
import threading
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
    kueue_or_skip,
    queued_reason,
    usage,
    workload,
)

from kubehelpers import (
    CHART,
    REPO_ROOT,
    VALUES,
    Kube,
    all_ready,
    helm,
    image_args,
    port_forward,
    ready_gate_pod,
    release_pods,
    wait_for,
)

sys.path.insert(0, str(REPO_ROOT / "docker" / "arkouda" / "standin" / "lib"))
from arkouda_standin.client import HandshakeError, handshake

log = logging.getLogger(__name__)

SLEEPER, WAITER = "sleeper", "waiter"
N = 2
# long enough that the waiter is queued behind the awake sleeper before it sleeps, under the concurrent phase
IDLE_SECONDS = 60
WAKE_SECONDS = 45
IDLE_VALUES = [
    "--set", "global.idle.enabled=true",
    "--set", f"global.idle.timeoutSeconds={IDLE_SECONDS}",
    "--set", f"global.idle.wake.timeoutSeconds={WAKE_SECONDS}",
    "--set", "global.idle.wake.backoffSeconds=5",
]  # fmt: skip


@pytest.fixture(scope="module")
def custom(kube: Kube) -> client.CustomObjectsApi:
    return kueue_or_skip(kube, "test_kueue_idle")


@pytest.fixture(scope="module")
def queue(kube: Kube, make_namespace: Any, custom: client.CustomObjectsApi) -> Iterator[Queue]:
    made = Queue(kube, custom, make_namespace("kq-idle-e2e"))
    yield made
    made.delete((SLEEPER, WAITER))


def install(ns: str, release: str, *extra: str) -> None:
    helm("install", release, str(CHART), "-n", ns, "-f", str(VALUES / "local.yaml"), *image_args(),
         "--set", f"global.numLocales={N}", "--set", f"global.scheduling.queueName={QUEUE}",
         "--set", "tests.enabled=false", *extra, timeout=300)  # fmt: skip


def gate_events(kube: Kube, ns: str, reason: str) -> list[Any]:
    gate = ready_gate_pod(kube, ns, SLEEPER, timeout=60)
    found = [e for e in kube.events_for(ns, gate) if e.reason == reason]
    return sorted(found, key=lambda e: e.metadata.creation_timestamp)


def test_a_sleeping_release_gives_its_quota_to_the_queued_one(
        kube: Kube, queue: Queue, custom: client.CustomObjectsApi) -> None:
    ns = queue.ns
    describe: Callable[[], str] = lambda: kube.describe_pods(ns)  # noqa: E731
    install(ns, SLEEPER, *IDLE_VALUES)
    kube.watch_pods_until(ns, release_pods(SLEEPER), all_ready(N), timeout=240, what=f"{SLEEPER} Ready")
    wl = wait_for(f"{SLEEPER}'s Workload admitted", lambda: admitted_workload(custom, ns, SLEEPER), timeout=30,
                  describe=describe)
    quota = queue.fit(usage(wl), Decimal("1.5"))
    log.info("ClusterQueue %s quota now %s: room for one release", queue.cq, quota)

    install(ns, WAITER)
    reason = wait_for(f"{WAITER} queued behind the awake {SLEEPER}",
                      lambda: queued_reason(workload(custom, ns, WAITER)), timeout=90, describe=describe)  # fmt: skip
    print(f"\n{WAITER} queued: {reason['message']}")
    assert "insufficient" in reason["message"].lower(), reason
    assert not gate_events(kube, ns, "IdleDraining"), f"{SLEEPER} slept before {WAITER} was queued: raise IDLE_SECONDS"
    waiting = kube.pods(ns, release_pods(WAITER))
    assert waiting and not [p.metadata.name for p in waiting if p.spec.node_name], describe()

    drained = wait_for(f"{SLEEPER} idle: IdleDraining", lambda: gate_events(kube, ns, "IdleDraining"),
                       timeout=IDLE_SECONDS + 120, interval=2, describe=describe)  # fmt: skip
    slept = time.monotonic()
    released = wait_for(f"{SLEEPER}'s gate: QuotaReleased", lambda: gate_events(kube, ns, "QuotaReleased"),
                        timeout=60, interval=1, describe=describe)  # fmt: skip
    print(f"{SLEEPER}: {drained[0].message}\n{SLEEPER}: {released[0].message}")
    assert f"LocalQueue {QUEUE}" in released[0].message
    kube.watch_pods_until(ns, release_pods(WAITER), all_ready(N), timeout=240,
                          what=f"{WAITER} admitted and Ready once {SLEEPER} slept")  # fmt: skip
    print(f"{WAITER} Ready {time.monotonic() - slept:.1f}s after {SLEEPER}'s IdleDraining was seen")
    assert admitted(workload(custom, ns, WAITER))
    kube.watch_pods_until(ns, release_pods(SLEEPER), lambda pods: not pods, timeout=120,
                          what=f"no pod of {SLEEPER} left")  # fmt: skip
    left = workload(custom, ns, SLEEPER)
    assert left is None or left["metadata"].get("deletionTimestamp"), f"{SLEEPER}'s Workload outlived its sleep"


def test_a_wake_while_the_queue_is_full_waits_gated_and_its_client_gets_the_queues_reason(
        kube: Kube, queue: Queue, custom: client.CustomObjectsApi) -> None:
    ns = queue.ns
    if not all_ready(N)(kube.pods(ns, release_pods(WAITER))):
        pytest.skip(f"{WAITER} does not hold the quota: the test above failed before it was Ready")
    outcome: dict[str, Any] = {}

    def client_of_the_sleeper(port: int) -> None:
        began = time.monotonic()
        try:
            handshake(host="127.0.0.1", port=port, token=None, user="e2e", timeout=WAKE_SECONDS + 75)
        except HandshakeError as exc:
            outcome["error"] = str(exc)
        outcome["took"] = time.monotonic() - began

    with port_forward(ns, f"{SLEEPER}-arkouda-server", 5555) as port:
        worker = threading.Thread(target=client_of_the_sleeper, args=(port,), daemon=True)
        worker.start()
        queued = wait_for(f"{SLEEPER}'s gate: WakeQueued", lambda: gate_events(kube, ns, "WakeQueued"),
                          timeout=60, interval=1, describe=lambda: kube.describe_pods(ns))  # fmt: skip
        print(f"\n{SLEEPER} woken and queued: {queued[0].message}")
        assert f"queued in LocalQueue {QUEUE}" in queued[0].message and "insufficient" in queued[0].message.lower()
        pods = kube.pods(ns, release_pods(SLEEPER))
        assert not [p.metadata.name for p in pods if p.spec.node_name], "a pod of the queued wake is on a node"
        assert all(ADMISSION_GATE in {g.name for g in p.spec.scheduling_gates or []} for p in pods), pods
        worker.join(timeout=WAKE_SECONDS + 90)
    assert not worker.is_alive(), "the client of the queued wake got no answer"
    print(f"client of the queued wake: error after {outcome.get('took', 0):.1f}s: {outcome.get('error')}")
    error = outcome.get("error", "")
    assert f"not Ready after {WAKE_SECONDS} s" in error and f"queued in LocalQueue {QUEUE}" in error, outcome
    assert "insufficient" in error.lower(), error
    timeout = gate_events(kube, ns, "WakeTimeout")
    assert timeout and f"LocalQueue {QUEUE}" in timeout[-1].message, [e.message for e in timeout]
    # back to 0 and out of the queue: its gated pods gone, its Workload deleted; the waiter untouched
    kube.watch_pods_until(ns, release_pods(SLEEPER), lambda pods: not pods, timeout=120,
                          what=f"no pod of {SLEEPER} left after the missed wake")  # fmt: skip
    assert len(gate_events(kube, ns, "QuotaReleased")) >= 2
    assert all_ready(N)(kube.pods(ns, release_pods(WAITER)))


def test_once_the_queue_has_room_the_next_client_wakes_the_sleeper_through_kueue(
        kube: Kube, queue: Queue, custom: client.CustomObjectsApi) -> None:
    ns = queue.ns
    helm("uninstall", WAITER, "-n", ns, "--wait", "--timeout", "3m", timeout=240)
    with port_forward(ns, f"{SLEEPER}-arkouda-server", 5555) as port:
        began = time.monotonic()
        reply = handshake(host="127.0.0.1", port=port, token=None, user="e2e", timeout=WAKE_SECONDS + 75)
        print(f"\n{SLEEPER} woken through the queue and answered in {time.monotonic() - began:.1f}s: {reply}")
    assert admitted(workload(custom, ns, SLEEPER))
    awake = gate_events(kube, ns, "Awake")
    assert awake, "no Awake Event on the sleeper's gate"
