"""Two releases that cannot both fit, on a cluster without Kueue: each gets half of the room it needs (the
deadlock), the first server whose wait times out gives its locale pods back, the other release takes the room
and runs, and no locale pod of the one left waiting is on a node; it starts without a human once the first is
uninstalled. The Events of both servers are printed as one timeline.

"Room" is an extended resource the test advertises on one node (`arkouda-k8s.test/slot`) and every locale pod
of both releases asks for one: two releases of three locales (a server and two locale pods each) need four
slots, and the node gets two. Nothing else in the cluster asks for it, so the modules running beside this one
cannot change the outcome, and the test runs the same on one node or three.

The deadlock is made, not waited for: with one slot, release A gets one locale pod placed; B's locale pods carry
a PriorityClass that orders them first in the scheduler's queue without preempting anything
(preemptionPolicy: Never), so the second slot goes to B.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from test_multinode import schedulable_nodes

from kubehelpers import CHART, VALUES, Kube, all_ready, helm, image_args, release_pods, wait_for

log = logging.getLogger(__name__)

SLOT = "arkouda-k8s.test/slot"
SLOTS = 2
RELEASES = ("pair-a", "pair-b")
N = 3  # numLocales: the server pod and two locale pods, each of which asks for a slot
WAIT_S = 40  # server.waitTimeoutSeconds: covers B's install and the scheduler's back-off below
SCHEDULER_MAX_BACKOFF_S = 10  # kube-scheduler's default podMaxBackoffSeconds
BACKOFF_S = 10  # server.releaseBackoffSeconds (the server waits 10-20 s)
# one round of a waiting server: wait, give back, back off (at most twice the setting), ask again
ROUND_S = WAIT_S + 2 * BACKOFF_S
TIMELINE = ("WaitTimeout", "LocalesReleased", "LocalesRequested", "LocalesReady", "Launched")


def _patch_slots(kube: Kube, node: str, value: str | None) -> None:
    """Advertise (or, with None, withdraw) the extended resource on the node's status, as Kubernetes documents
    for resources no device plugin manages; the kubelet keeps what it does not manage."""
    path = "/status/capacity/" + SLOT.replace("~", "~0").replace("/", "~1")
    patch = [{"op": "add", "path": path, "value": value}] if value is not None else [{"op": "remove", "path": path}]
    kube.core.patch_node_status(node, patch)


def _set_slots(kube: Kube, node: str, slots: int) -> None:
    _patch_slots(kube, node, str(slots))
    wait_for(f"{slots} {SLOT} allocatable on {node}",
             lambda: (kube.core.read_node(node).status.allocatable or {}).get(SLOT) == str(slots), timeout=30)


@pytest.fixture(scope="module")
def slot_node(kube: Kube) -> Iterator[str]:
    node = schedulable_nodes(kube)[0]
    _set_slots(kube, node, 1)
    yield node
    _patch_slots(kube, node, None)


@pytest.fixture(scope="module")
def first_in_queue(kube: Kube) -> Iterator[str]:
    api = client.SchedulingV1Api(kube.api)
    name = "pair-e2e-first-in-queue"
    api.create_priority_class(client.V1PriorityClass(
        metadata=client.V1ObjectMeta(name=name), value=1000, preemption_policy="Never",
        description="test_two_releases: B's locale pods ahead of A's in the scheduler's queue, preempting nothing"))
    yield name
    api.delete_priority_class(name)


@pytest.fixture(scope="module")
def ns(make_namespace: Any) -> str:
    name: str = make_namespace("pair-e2e")
    return name


def install(ns: str, release: str, tmp_path: Path, *, priority_class: str = "") -> None:
    slot = {"requests": {"cpu": "10m", "memory": "64Mi", SLOT: "1"}, "limits": {"memory": "512Mi", SLOT: "1"}}
    values = {
        "global": {"numLocales": N},
        "locale": {"resources": slot, "priorityClassName": priority_class},
        "server": {"waitTimeoutSeconds": WAIT_S, "releaseBackoffSeconds": BACKOFF_S},
        "tests": {"enabled": False},
    }
    path = tmp_path / f"{release}.yaml"
    path.write_text(yaml.safe_dump(values))
    helm("install", release, str(CHART), "-n", ns, "-f", str(VALUES / "local.yaml"), "-f", str(path),
         *image_args(), timeout=300)


def placed(pods: list[Any]) -> list[str]:
    return sorted(p.metadata.name for p in pods if p.spec.node_name and p.metadata.deletion_timestamp is None)


def unschedulable(pods: list[Any]) -> list[str]:
    return sorted(p.metadata.name for p in pods if any(
        c.type == "PodScheduled" and c.reason == "Unschedulable" for c in (p.status.conditions or [])))


def ready_releases(kube: Kube, ns: str) -> list[str]:
    return [r for r in RELEASES if all_ready(N)(kube.pods(ns, release_pods(r)))]


def timeline(kube: Kube, ns: str, t0: float) -> str:
    rows = []
    for release in RELEASES:
        for e in kube.events_for(ns, f"{release}-arkouda-server-0"):
            if e.reason not in TIMELINE:
                continue
            when = e.last_timestamp or e.event_time or e.first_timestamp or e.metadata.creation_timestamp
            count = f" (x{e.count})" if (e.count or 1) > 1 else ""
            rows.append((when.timestamp() - t0, f"{release} {e.reason}{count}: {e.message}"))
    return "\n".join(f"  +{t:6.1f}s  {text}" for t, text in sorted(rows))


def locales(release: str) -> str:
    return f"{release_pods(release)},app.kubernetes.io/component=locale"


def test_two_releases_that_do_not_both_fit(
        kube: Kube, ns: str, slot_node: str, first_in_queue: str, tmp_path: Path) -> None:
    a, b = RELEASES
    t0 = dt.datetime.now(dt.UTC).timestamp()
    describe: Callable[[], str] = lambda: kube.describe_pods(ns) + "\n" + timeline(kube, ns, t0)  # noqa: E731

    # the deadlock: A gets the one slot for one of its two locale pods, B (first in the queue) the second slot
    install(ns, a, tmp_path)
    kube.watch_pods_until(ns, locales(a), lambda ps: len(placed(ps)) == 1 and len(unschedulable(ps)) == 1,
                          timeout=60, what=f"one locale pod of {a} placed on the one slot, the other unschedulable")
    install(ns, b, tmp_path, priority_class=first_in_queue)
    kube.watch_pods_until(ns, locales(b), lambda ps: len(unschedulable(ps)) == 2, timeout=60,
                          what=f"both locale pods of {b} unschedulable")
    # past the scheduler's longest per-pod back-off, A's and B's pending pods are both in its active queue when
    # the slot appears, and the queue's order (priority) decides who gets it
    time.sleep(SCHEDULER_MAX_BACKOFF_S + 1)
    _set_slots(kube, slot_node, SLOTS)
    kube.watch_pods_until(ns, locales(b), lambda ps: len(placed(ps)) == 1, timeout=60,
                          what=f"one locale pod of {b} placed on the second slot")
    half = {r: placed(kube.pods(ns, locales(r))) for r in RELEASES}
    assert all(len(v) == 1 for v in half.values()), f"not the deadlock the test makes: {half}\n{describe()}"
    log.info("deadlock made: each release has one of its two locale pods placed: %s", half)

    # the first server to time out gives its pods back; the other release takes the slot and runs
    first = wait_for("one of the two releases Ready", lambda: ready_releases(kube, ns), timeout=3 * ROUND_S,
                     interval=2, describe=describe)
    assert len(first) == 1, f"both releases Ready on {SLOTS} slots: {first}"
    winner, waiting = first[0], next(r for r in RELEASES if r != first[0])
    log.info("%s Ready; %s waits:\n%s", winner, waiting, timeline(kube, ns, t0))
    server = f"{waiting}-arkouda-server-0"
    given_back = [e for e in kube.events_for(ns, server) if e.reason == "LocalesReleased"]
    assert given_back, f"{winner} got its second slot without {waiting} giving one back:\n{describe()}"

    # while the winner runs, no locale pod of the waiting one is on a node: gone while it backs off, Pending after
    kube.watch_pods_until(ns, locales(waiting), lambda ps: not placed(ps), timeout=60,
                          what=f"no locale pod of {waiting} on a node")
    assert ready_releases(kube, ns) == [winner], describe()

    # the waiting one starts on its own once the room is free
    helm("uninstall", winner, "-n", ns, "--wait", "--timeout", "3m", timeout=300)
    freed = time.monotonic()
    kube.watch_pods_until(ns, release_pods(waiting), all_ready(N), timeout=ROUND_S + 120,
                          what=f"{waiting} Ready after {winner} was uninstalled")
    print(f"\n{waiting} Ready {time.monotonic() - freed:.1f}s after {winner} was uninstalled; timeline "
          f"(from the first install, both servers' Events):\n{timeline(kube, ns, t0)}")
    helm("uninstall", waiting, "-n", ns, "--wait", "--timeout", "3m", timeout=300)
