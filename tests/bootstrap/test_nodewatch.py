"""nodewatch: which pods count as stuck on a lost node, when they are force-deleted (fake clock), that the delete
is tied to the stuck pod's uid, the NodeLost Event, the `nodewatch` command line, and the force delete and the new
pod fields through the real client against the API server double."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from dataclasses import replace

import pytest
from apiserver_double import Answer, ApiServerDouble, serving
from arkouda_bootstrap.cli import main as cli
from arkouda_bootstrap.cli import nodewatch as nodewatch_cli
from arkouda_bootstrap.cli.options import Values
from arkouda_bootstrap.errors import BootstrapError, UsageError
from arkouda_bootstrap.kube.api import (
    KUEUE_FINALIZER,
    ApiUnavailableError,
    ForbiddenError,
    PodCondition,
    PodEvent,
    PodInfo,
    PodList,
    pod_from_json,
)
from arkouda_bootstrap.kube.ownership import OwnedBy
from arkouda_bootstrap.kube.podwatch import ChunkEnded
from arkouda_bootstrap.nodewatch import (
    KUEUE_SETTLE_SECONDS,
    KUEUE_STRANDED_SECONDS,
    MARK_SETTLE_SECONDS,
    UNCLAIMED_SECONDS,
    NodeWatchSettings,
    Reaper,
    impostor_event,
    node_lost_evidence,
    run_nodewatch,
    statefulset_of,
)
from arkouda_bootstrap.server.liveness import Liveness
from fakes import END, FakeClock, FakeKube, FakeNetwork, GoneError, make_pod
from kubernetes import client
from test_kube_models import wire

SERVER, LOCALE = "rel-arkouda-server", "rel-arkouda-locale"
SETTINGS = NodeWatchSettings(
    namespace="ns",
    selector="app.kubernetes.io/instance=rel",
    statefulsets=(SERVER, LOCALE),
    margin_seconds=10.0,
    chunk_seconds=5,
)

# what the node controller leaves on a pod of a node that stopped reporting (only Ready flipped)
NODE_CONTROLLER_MARK = (
    PodCondition(type="Ready", status="False"),
    PodCondition(type="ContainersReady", status="True"),
)
TAINT_MANAGER_MARK = (
    PodCondition(type="Ready", status="False"),
    PodCondition(type="ContainersReady", status="True"),
    PodCondition(
        type="DisruptionTarget",
        status="True",
        reason="DeletionByTaintManager",
        message="Taint manager: deleting due to NoExecute taint",
    ),
)
# what a live kubelet reports while it terminates a pod: both conditions False
KUBELET_TERMINATING = (
    PodCondition(type="Ready", status="False", reason="ContainersNotReady"),
    PodCondition(type="ContainersReady", status="False", reason="ContainersNotReady"),
)


def stuck(name: str, *, conditions: tuple[PodCondition, ...] = TAINT_MANAGER_MARK, grace: int = 30) -> PodInfo:
    return make_pod(
        name, conditions=conditions, deleting=True, deletion_grace_seconds=grace, node_name="node-2", uid=f"old-{name}"
    )


def reaper_with(*pods: PodInfo, margin: float = 10.0) -> tuple[Reaper, FakeKube, FakeClock]:
    kube, clock = FakeKube(pods={p.name: p for p in pods}), FakeClock()
    reaper = Reaper(kube, NodeWatchSettings(**{**SETTINGS.__dict__, "margin_seconds": margin}), clock=clock)
    reaper.observe(kube.list_pods(namespace="ns", selector=SETTINGS.selector))
    return reaper, kube, clock


def test_evidence_of_a_lost_node_is_the_taint_managers_or_the_node_controllers_mark() -> None:
    assert "taint manager" in (node_lost_evidence(make_pod("p", conditions=TAINT_MANAGER_MARK)) or "")
    assert "node controller" in (node_lost_evidence(make_pod("p", conditions=NODE_CONTROLLER_MARK)) or "")
    assert node_lost_evidence(make_pod("p", conditions=KUBELET_TERMINATING)) is None
    assert node_lost_evidence(make_pod("p", ready=True)) is None
    # a DisruptionTarget of another cause (preemption, an eviction through the API) is no evidence
    preempted = (
        *KUBELET_TERMINATING,
        PodCondition(type="DisruptionTarget", status="True", reason="PreemptionByScheduler"),
    )
    assert node_lost_evidence(make_pod("p", conditions=preempted)) is None


def test_only_pods_of_the_named_statefulsets_count() -> None:
    assert statefulset_of(f"{LOCALE}-0", SETTINGS.statefulsets) == LOCALE
    assert statefulset_of(f"{LOCALE}-12", SETTINGS.statefulsets) == LOCALE
    assert statefulset_of(f"{SERVER}-0", SETTINGS.statefulsets) == SERVER
    for other in (f"{LOCALE}-01", f"{LOCALE}-x", f"{LOCALE}", "rel-arkouda-keygen-abcde", f"{SERVER}-r2-xyz12"):
        assert statefulset_of(other, SETTINGS.statefulsets) is None, other


def test_a_stuck_locale_is_force_deleted_by_uid_once_its_grace_and_the_margin_passed() -> None:
    reaper, kube, clock = reaper_with(stuck(f"{LOCALE}-1", grace=30), make_pod(f"{LOCALE}-0"))
    clock.advance(39.9)
    assert reaper.reap_due() == []
    assert ("force_delete_pod", f"{LOCALE}-1") not in kube.calls
    clock.advance(0.1)
    assert reaper.reap_due() == [f"{LOCALE}-1"]
    assert f"{LOCALE}-1" not in kube.pods and f"{LOCALE}-0" in kube.pods
    [event] = kube.created_events
    assert (event.reason, event.type) == ("NodeLost", "Warning")
    assert (event.pod.name, event.pod.uid) == (f"{LOCALE}-1", f"old-{LOCALE}-1")
    assert "node node-2" in event.message and "taint manager" in event.message and "40s" in event.message
    assert reaper.reap_due() == []  # once
    assert kube.calls.count(("force_delete_pod", f"{LOCALE}-1")) == 1


def test_the_server_pod_is_reaped_the_same_way_from_the_node_controllers_mark() -> None:
    reaper, kube, clock = reaper_with(stuck(f"{SERVER}-0", conditions=NODE_CONTROLLER_MARK, grace=5), margin=3)
    clock.advance(8)
    assert reaper.reap_due() == [f"{SERVER}-0"]
    assert "node controller" in kube.created_events[0].message


def test_a_live_kubelets_termination_and_foreign_pods_are_never_forced() -> None:
    reaper, kube, clock = reaper_with(
        stuck(f"{LOCALE}-0", conditions=KUBELET_TERMINATING),
        stuck("rel-arkouda-keygen-x1"),
        make_pod(f"{LOCALE}-1", conditions=NODE_CONTROLLER_MARK),  # lost node, but not being deleted (yet)
    )
    clock.advance(3600)
    assert reaper.reap_due() == []
    assert not any(op == "force_delete_pod" for op, _ in kube.calls)
    assert kube.created_events == []


def test_a_pod_with_a_statefulset_pods_name_and_labels_but_not_its_owner_is_never_forced() -> None:
    # a hand-made pod that took the name of a deleted locale pod, then got stuck on a lost node
    impostor = replace(stuck(f"{LOCALE}-2"), controller=None)
    kube, clock = FakeKube(pods={impostor.name: impostor}), FakeClock()
    owned = OwnedBy(kube, namespace="ns", statefulsets=SETTINGS.statefulsets, on_impostor=impostor_event(kube))
    reaper = Reaper(kube, SETTINGS, clock=clock, owned=owned)
    reaper.observe(kube.list_pods(namespace="ns", selector=SETTINGS.selector))
    clock.advance(3600)
    assert reaper.reap_due() == []
    assert not any(op == "force_delete_pod" for op, _ in kube.calls)
    [event] = kube.created_events
    assert (event.reason, event.type, event.pod.name) == ("ImpostorPod", "Warning", f"{LOCALE}-2")
    assert f"ignoring pod {LOCALE}-2 (uid old-{LOCALE}-2)" in event.message


def test_the_clock_starts_when_the_deletion_is_seen_and_resets_for_a_new_pod() -> None:
    reaper, kube, clock = reaper_with(make_pod(f"{LOCALE}-0", conditions=NODE_CONTROLLER_MARK, uid=f"old-{LOCALE}-0"))
    clock.advance(100)  # NotReady for long, but nobody deleted it: not ours to force
    reaper.observe(kube.event("MODIFIED", stuck(f"{LOCALE}-0")))
    clock.advance(39)
    assert reaper.reap_due() == []
    # the kubelet came back and confirmed: DELETED; a new pod under the same name is fine and never touched
    reaper.observe(kube.event("DELETED", stuck(f"{LOCALE}-0")))
    reaper.observe(kube.event("ADDED", make_pod(f"{LOCALE}-0", uid="new")))
    clock.advance(3600)
    assert reaper.reap_due() == []
    assert kube.created_events == []


def test_a_replaced_pod_is_not_deleted_and_gets_no_event() -> None:
    reaper, kube, clock = reaper_with(stuck(f"{LOCALE}-0"))
    kube.pods[f"{LOCALE}-0"] = make_pod(f"{LOCALE}-0", uid="replacement")  # the watch has not told us yet
    clock.advance(60)
    assert reaper.reap_due() == []
    assert kube.pods[f"{LOCALE}-0"].uid == "replacement"
    assert kube.created_events == []
    assert kube.calls.count(("force_delete_pod", f"{LOCALE}-0")) == 1


def test_a_refused_delete_is_retried_at_the_next_check() -> None:
    reaper, kube, clock = reaper_with(stuck(f"{LOCALE}-0"))
    kube.fail_with["force_delete_pod"] = ForbiddenError(verb="delete", resource="pods", namespace="ns")
    clock.advance(60)
    assert reaper.reap_due() == []
    del kube.fail_with["force_delete_pod"]
    assert reaper.reap_due() == [f"{LOCALE}-0"]


def test_a_relist_forgets_pods_that_are_gone() -> None:
    reaper, _kube, clock = reaper_with(stuck(f"{LOCALE}-0"))
    reaper.observe(PodList(pods=(), resource_version="200"))
    clock.advance(60)
    assert reaper.reap_due() == []
    assert not reaper.due()


def run_until_reaped(kube: FakeKube, *, give_up_at: float) -> FakeClock:
    """run_nodewatch on a fake clock that each idle watch request moves by its timeout; stopped after the first
    Event (or at `give_up_at`)."""
    clock, stop = FakeClock(), threading.Event()

    def idle(seconds: int) -> None:
        clock.advance(seconds)
        if clock.now > give_up_at or kube.created_events:
            stop.set()

    kube.on_idle_watch = idle
    assert run_nodewatch(kube, SETTINGS, clock=clock, stop=stop, sleep=clock.sleep) == 0
    return clock


def test_run_nodewatch_reaps_a_pod_that_gets_stuck_while_it_watches() -> None:
    """The whole loop: list, watch chunks that end (no event comes from a dead node), the stuck locale forced
    after grace + margin of the fake clock, then stopped."""
    kube = FakeKube(pods={f"{LOCALE}-0": make_pod(f"{LOCALE}-0", uid=f"old-{LOCALE}-0")})
    kube.script(kube.event("MODIFIED", stuck(f"{LOCALE}-0")), END)
    clock = run_until_reaped(kube, give_up_at=120)
    assert [e.reason for e in kube.created_events] == ["NodeLost"]
    assert f"{LOCALE}-0" not in kube.pods
    assert 40 <= clock.now <= 40 + SETTINGS.chunk_seconds + 1  # acted at the first check after grace + margin


def test_run_nodewatch_rides_out_an_api_outage_and_still_reaps() -> None:
    """Refused connections, a timeout, HTTP 5xx and a 410 while it watches: nodewatch keeps going (it never ends
    for an unreachable API) and still force-deletes the pod that got stuck meanwhile."""
    kube = FakeKube(pods={f"{LOCALE}-0": make_pod(f"{LOCALE}-0", uid=f"old-{LOCALE}-0")})
    kube.fail_next["list_pods"] = [
        ApiUnavailableError("cannot reach the Kubernetes API to list pods: [Errno 111] Connection refused"),
        ApiUnavailableError("cannot reach the Kubernetes API to list pods: read timed out"),
    ]
    kube.script(
        ApiUnavailableError("watch pods in namespace ns failed: HTTP 502 Bad Gateway"),
        ApiUnavailableError("cannot reach the Kubernetes API to watch pods: [Errno 111] Connection refused"),
        GoneError("too old"),
        kube.event("MODIFIED", stuck(f"{LOCALE}-0")),
        END,
    )
    run_until_reaped(kube, give_up_at=300)
    assert [e.reason for e in kube.created_events] == ["NodeLost"]
    assert [op for op, _ in kube.calls].count("list_pods") == 4  # refused, timed out, listed, after the 410


def test_run_nodewatch_ends_on_missing_rbac_and_retries_an_unreachable_api() -> None:
    kube = FakeKube(fail_with={"list_pods": ForbiddenError(verb="list", resource="pods", namespace="ns")})
    with pytest.raises(BootstrapError, match="missing RBAC: list pods"):
        run_nodewatch(kube, SETTINGS, clock=FakeClock(), sleep=lambda _s: None)
    stop, waits = threading.Event(), []
    kube = FakeKube(
        fail_with={"list_pods": ApiUnavailableError("cannot reach the Kubernetes API to list pods: refused")}
    )

    def wait(seconds: float) -> None:
        waits.append(seconds)
        stop.set()

    assert run_nodewatch(kube, SETTINGS, clock=FakeClock(), stop=stop, sleep=wait) == 0
    assert waits == [1.0]  # the first pause of kube.retry; stopped during it, the watch ends quietly


def test_follow_items_other_than_pods_change_nothing() -> None:
    reaper, _kube, clock = reaper_with(stuck(f"{LOCALE}-0"))
    clock.advance(20)
    reaper.observe(ChunkEnded(resource_version="9"))
    clock.advance(20)
    assert [p.name for p, _ in reaper.due()] == [f"{LOCALE}-0"]


# -- command line ---------------------------------------------------------------------------------------------


def settings_from(args: list[str], env: dict[str, str] | None = None) -> NodeWatchSettings:
    parser = cli.build_parser()
    ns = parser.parse_args(["nodewatch", *args])
    values = Values(ns, cli.SUBCOMMANDS["nodewatch"].options, env or {})
    return nodewatch_cli.nodewatch_settings(values, namespace="ns")


def test_nodewatch_flags_and_environment() -> None:
    got = settings_from(
        ["--statefulsets", f"{SERVER}, {LOCALE}"],
        {"ARKOUDA_NODEWATCH_SELECTOR": "app.kubernetes.io/instance=rel", "ARKOUDA_NODEWATCH_MARGIN_SECONDS": "4"},
    )
    assert got.statefulsets == (SERVER, LOCALE)
    assert got.selector == "app.kubernetes.io/instance=rel"
    assert got.margin_seconds == 4.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--selector", "a=b"], "missing --statefulsets (ARKOUDA_NODEWATCH_STATEFULSETS)"),
        (["--statefulsets", "Bad_Name", "--selector", "a=b"], "--statefulsets (ARKOUDA_NODEWATCH_STATEFULSETS)"),
        (["--statefulsets", "s", "--selector", "nothing"], "--selector (ARKOUDA_NODEWATCH_SELECTOR)"),
        (["--statefulsets", "s", "--selector", "a=b", "--margin-seconds", "-1"], "--margin-seconds"),
    ],
)
def test_nodewatch_refuses_bad_values_naming_the_flag(args: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        settings_from(args)


# -- through the real client ----------------------------------------------------------------------------------


@pytest.fixture
def apiserver() -> Iterator[ApiServerDouble]:
    with serving() as double:
        yield double


PODS = "/api/v1/namespaces/ns/pods"


def test_force_delete_sends_grace_zero_with_the_uid_precondition(apiserver: ApiServerDouble) -> None:
    apiserver.answer(
        Answer("DELETE", f"{PODS}/a", body={"kind": "Pod"}),
        Answer("DELETE", f"{PODS}/b", status=409, body={"kind": "Status", "reason": "Conflict", "code": 409}),
        Answer("DELETE", f"{PODS}/c", status=404, body={"kind": "Status", "reason": "NotFound", "code": 404}),
        Answer("DELETE", f"{PODS}/d", status=403, body={"kind": "Status", "reason": "Forbidden", "code": 403}),
    )
    api = apiserver.api()
    assert api.force_delete_pod(namespace="ns", name="a", uid="u-a") is True
    assert api.force_delete_pod(namespace="ns", name="b", uid="u-b") is False  # the name is another pod's now
    assert api.force_delete_pod(namespace="ns", name="c", uid="u-c") is False
    with pytest.raises(BootstrapError, match="missing RBAC: delete pods in namespace ns"):
        api.force_delete_pod(namespace="ns", name="d", uid="u-d")
    body = apiserver.seen[0].body
    assert body is not None
    assert body["gracePeriodSeconds"] == 0 and body["preconditions"] == {"uid": "u-a"}
    # the body is a valid DeleteOptions for the client's own model
    options = client.ApiClient()._ApiClient__deserialize(body, "V1DeleteOptions")
    assert options.preconditions.uid == "u-a" and options.grace_period_seconds == 0


def test_pod_json_carries_its_node_and_deletion_grace() -> None:
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(
            name="p",
            namespace="ns",
            uid="u",
            deletion_timestamp=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
            deletion_grace_period_seconds=30,
        ),
        spec=client.V1PodSpec(node_name="node-2", containers=[client.V1Container(name="c")]),
    )
    info = pod_from_json(wire(pod))
    assert (info.node_name, info.deletion_grace_seconds, info.deleting) == ("node-2", 30, True)
    plain = pod_from_json(wire(client.V1Pod(metadata=client.V1ObjectMeta(name="q"))))
    assert (plain.node_name, plain.deletion_grace_seconds, plain.deleting) == ("", None, False)


# -- the data plane's evidence: a marked pod that does not answer is forced at once ------------------------------


def probed(*pods: PodInfo) -> tuple[Reaper, FakeKube, FakeClock, FakeNetwork, Liveness]:
    kube, clock, network = FakeKube(pods={p.name: p for p in pods}), FakeClock(), FakeNetwork()
    liveness = Liveness({}, connect=network.connect, clock=clock, kind="pod")
    reaper = Reaper(kube, replace(SETTINGS, ssh_port=2222), clock=clock, liveness=liveness)
    reaper.observe(kube.list_pods(namespace="ns", selector=SETTINGS.selector))
    return reaper, kube, clock, network, liveness


def probe_for(seconds: int, liveness: Liveness, clock: FakeClock) -> None:
    for _ in range(seconds // 5):
        liveness.probe_all()
        clock.advance(5)
    liveness.probe_all()


def test_a_marked_pod_that_missed_every_probe_for_the_bound_is_forced_at_once_not_after_eviction() -> None:
    lost = make_pod(f"{LOCALE}-1", ip="10.0.0.2", conditions=NODE_CONTROLLER_MARK, node_name="node-2", uid="u1")
    reaper, kube, clock, network, liveness = probed(lost, make_pod(f"{LOCALE}-0", ip="10.0.0.1"))
    network.down.add("10.0.0.2")
    probe_for(15, liveness, clock)
    assert reaper.reap_due() == []  # 15 s of misses: within the bound
    probe_for(5, liveness, clock)
    assert reaper.reap_due() == [f"{LOCALE}-1"]  # not being deleted: no eviction, no grace period waited for
    [event] = kube.created_events
    assert event.reason == "NodeLost" and event.pod.uid == "u1"
    assert event.message.startswith(
        f"pod {LOCALE}-1 on node node-2: the node controller marked it NotReady (its node stopped reporting), and "
        f"pod {LOCALE}-1 does not answer on the pod network: "
    )
    assert "sshd at 10.0.0.2:2222 missed over 20s" in event.message


def test_a_marked_pod_that_answers_is_left_alone_as_in_an_api_server_outage() -> None:
    marked = make_pod(f"{LOCALE}-1", ip="10.0.0.2", conditions=NODE_CONTROLLER_MARK, uid="u1")
    reaper, kube, clock, network, liveness = probed(marked)
    assert "10.0.0.2" not in network.down  # it answers every probe
    probe_for(60, liveness, clock)
    assert network.connects >= 12
    assert reaper.reap_due() == []
    assert not kube.created_events and f"{LOCALE}-1" in kube.pods


def test_a_pod_that_does_not_answer_on_a_node_that_reports_is_left_to_the_server() -> None:
    """A traffic drop inside one pod: the node is fine, the control plane marks nothing; the server's supervisor
    stops the program and waits (no pod to replace)."""
    dropped = make_pod(f"{LOCALE}-1", ip="10.0.0.2", uid="u1")
    reaper, kube, clock, network, liveness = probed(dropped)
    network.down.add("10.0.0.2")
    probe_for(60, liveness, clock)
    assert reaper.reap_due() == []
    assert not kube.created_events


def test_the_misses_of_a_pod_are_not_held_against_its_replacement() -> None:
    old = make_pod(f"{LOCALE}-1", ip="10.0.0.2", conditions=NODE_CONTROLLER_MARK, uid="u1")
    reaper, kube, clock, network, liveness = probed(old)
    network.down.update({"10.0.0.2", "10.0.0.9"})
    probe_for(20, liveness, clock)
    new = make_pod(f"{LOCALE}-1", ip="10.0.0.9", conditions=NODE_CONTROLLER_MARK, uid="u2")
    reaper.observe(PodEvent(type="MODIFIED", pod=new, resource_version="5"))
    assert reaper.reap_due() == []  # its own streak has just begun
    assert not kube.created_events


def test_nodewatch_probes_only_with_an_ssh_port() -> None:
    assert settings_from(["--statefulsets", "s", "--selector", "a=b"]).ssh_port is None
    got = settings_from(["--statefulsets", "s", "--selector", "a=b"], {"ARKOUDA_NODEWATCH_SSH_PORT": "2222"})
    assert got.ssh_port == 2222
    with pytest.raises(UsageError, match="--ssh-port"):
        settings_from(["--statefulsets", "s", "--selector", "a=b", "--ssh-port", "70000"])


# -- the node controller marks the pods before it taints the node: a replacement can be bound to the dead node -----


def test_the_data_planes_evidence_waits_a_moment_after_the_mark_for_the_nodes_taint() -> None:
    lost = make_pod(f"{LOCALE}-1", ip="10.0.0.2", node_name="node-2", uid="u1")
    reaper, kube, clock, network, liveness = probed(lost)
    network.down.add("10.0.0.2")
    probe_for(20, liveness, clock)  # lost on the data plane, not yet marked: the server's case, not nodewatch's
    assert reaper.reap_due() == []
    reaper.observe(PodEvent(type="MODIFIED", pod=replace(lost, conditions=NODE_CONTROLLER_MARK), resource_version="6"))
    assert reaper.reap_due() == []  # the mark has just come: the node may not be tainted yet
    assert f"{LOCALE}-1" in kube.pods and not kube.created_events
    assert reaper.settling() == MARK_SETTLE_SECONDS  # the loop waits this long, not for the next pod change
    clock.advance(MARK_SETTLE_SECONDS / 2)
    assert reaper.settling() == MARK_SETTLE_SECONDS / 2
    clock.advance(MARK_SETTLE_SECONDS / 2)
    assert reaper.settling() is None
    assert reaper.reap_due() == [f"{LOCALE}-1"]
    assert reaper.settling() is None  # done: nothing left to wait for


def unclaimed_replacement(uid: str, node: str = "node-2") -> PodInfo:
    """What the scheduler leaves: bound, its condition only; no kubelet has reported the pod."""
    return make_pod(
        f"{LOCALE}-1",
        ip=None,
        node_name=node,
        uid=uid,
        phase="Pending",
        conditions=(PodCondition(type="PodScheduled", status="True"),),
    )


def lost_and_reaped() -> tuple[Reaper, FakeKube, FakeClock]:
    lost = make_pod(f"{LOCALE}-1", ip="10.0.0.2", conditions=NODE_CONTROLLER_MARK, node_name="node-2", uid="u1")
    reaper, kube, clock, network, liveness = probed(lost, make_pod(f"{LOCALE}-0", node_name="node-1", uid="u0"))
    network.down.add("10.0.0.2")
    probe_for(20, liveness, clock)
    assert reaper.reap_due() == [f"{LOCALE}-1"]
    kube.created_events.clear()
    return reaper, kube, clock


def test_a_replacement_bound_to_the_lost_node_that_no_kubelet_takes_is_forced_too() -> None:
    reaper, kube, clock = lost_and_reaped()
    new = unclaimed_replacement("u2")
    kube.pods[new.name] = new
    reaper.observe(PodEvent(type="ADDED", pod=new, resource_version="7"))
    clock.advance(UNCLAIMED_SECONDS - 1)
    reaper.observe(ChunkEnded("100"))
    assert reaper.reap_due() == []  # a live kubelet would have reported it by now; this one gets the full time
    clock.advance(1)
    reaper.observe(ChunkEnded("100"))
    assert reaper.reap_due() == [f"{LOCALE}-1"]
    assert f"{LOCALE}-1" not in kube.pods  # the fake honours the uid precondition: u2 itself was deleted
    [event] = kube.created_events
    assert event.reason == "NodeLost" and event.pod.uid == "u2"
    assert "bound to this node, found lost here before, and no kubelet took it in 10s" in event.message


def test_a_replacement_on_another_node_or_taken_by_a_kubelet_is_left_alone() -> None:
    reaper, kube, clock = lost_and_reaped()
    elsewhere = unclaimed_replacement("u2", node="node-1")
    reaper.observe(PodEvent(type="ADDED", pod=elsewhere, resource_version="7"))
    clock.advance(60)
    reaper.observe(ChunkEnded("100"))
    assert reaper.reap_due() == []
    # the node came back: its kubelet took a pod bound there, so the node is not lost any more
    taken = make_pod(f"{LOCALE}-1", ip="10.0.0.7", node_name="node-2", uid="u3", phase="Pending", ready=False)
    reaper.observe(PodEvent(type="MODIFIED", pod=taken, resource_version="8"))
    later = unclaimed_replacement("u4")
    reaper.observe(PodEvent(type="MODIFIED", pod=later, resource_version="9"))
    clock.advance(60)
    reaper.observe(ChunkEnded("100"))
    assert reaper.reap_due() == []
    assert not kube.created_events


GROUP = "rel-arkouda-group"


def kueue_reaper(*pods: PodInfo) -> tuple[Reaper, FakeKube, FakeClock]:
    owners = {("ns", GROUP): {p.uid for p in pods}}  # Kueue lists every pod of the group as an owner
    kube, clock = FakeKube(pods={p.name: p for p in pods}, kueue_workloads=owners), FakeClock()
    reaper = Reaper(kube, replace(SETTINGS, kueue_workload=GROUP), clock=clock)
    reaper.observe(kube.list_pods(namespace="ns", selector=SETTINGS.selector))
    return reaper, kube, clock


def held(name: str, *, phase: str, grace: int = 30, finalizers: tuple[str, ...] = (KUEUE_FINALIZER,)) -> PodInfo:
    """A deleted pod of a Kueue group: live kubelet (no lost-node mark), Kueue's finalizer still on it."""
    return make_pod(name, phase=phase, conditions=KUBELET_TERMINATING, deleting=True, deletion_grace_seconds=grace,
                    uid=f"old-{name}", finalizers=finalizers)  # fmt: skip


def test_an_ended_pod_kueue_holds_makes_nodewatch_delete_the_workload_once() -> None:
    reaper, kube, clock = kueue_reaper(held(f"{LOCALE}-1", phase="Succeeded"), make_pod(f"{LOCALE}-0"))
    clock.advance(KUEUE_SETTLE_SECONDS - 0.1)
    reaper.reap_due()
    assert ("delete_kueue_workload", GROUP) not in kube.calls  # Kueue may still release it on its own
    clock.advance(0.1)
    assert reaper.reap_due() == []  # no pod is force-deleted for this
    assert not kube.kueue_workloads
    [event] = kube.created_events
    assert (event.reason, event.type, event.pod.name) == ("KueueWorkloadDeleted", "Warning", f"{LOCALE}-1")
    assert KUEUE_FINALIZER in event.message and f"deleted Kueue Workload {GROUP}" in event.message
    clock.advance(60)
    reaper.reap_due()
    assert kube.calls.count(("delete_kueue_workload", GROUP)) == 1


def test_a_terminating_pod_is_left_to_its_kubelet_however_long_it_takes() -> None:
    # a live pod (it may still answer: an API outage marks every pod) is never the reason to restart the group
    reaper, kube, clock = kueue_reaper(held(f"{LOCALE}-1", phase="Running", grace=30))
    clock.advance(600)
    reaper.reap_due()
    assert ("delete_kueue_workload", GROUP) not in kube.calls


def test_a_pod_force_deleted_from_a_lost_node_and_held_by_kueue_releases_the_group() -> None:
    lost = replace(stuck(f"{LOCALE}-1", grace=30), finalizers=(KUEUE_FINALIZER,))
    reaper, kube, clock = kueue_reaper(lost)
    clock.advance(40)
    assert reaper.reap_due() == [f"{LOCALE}-1"]  # forced, and still there: the finalizer keeps it
    kube.pods[f"{LOCALE}-1"] = lost
    reaper.observe(kube.list_pods(namespace="ns", selector=SETTINGS.selector))
    reaper.reap_due()
    assert not kube.kueue_workloads
    assert [e.reason for e in kube.created_events] == ["NodeLost", "KueueWorkloadDeleted"]


def test_a_newer_workload_under_the_same_name_is_not_deleted() -> None:
    # another replica deleted the pod's Workload already and Kueue made the group's next one
    reaper, kube, clock = kueue_reaper(held(f"{LOCALE}-1", phase="Failed"))
    kube.kueue_workloads[("ns", GROUP)] = {"uid-of-a-new-pod"}
    clock.advance(KUEUE_SETTLE_SECONDS)
    reaper.reap_due()
    assert kube.kueue_workloads == {("ns", GROUP): {"uid-of-a-new-pod"}}
    [event] = kube.created_events
    assert "found already gone or replaced" in event.message
    reaper.reap_due()
    assert kube.calls.count(("delete_kueue_workload", GROUP)) == 1


def test_without_kueues_finalizer_or_without_a_workload_nothing_is_deleted() -> None:
    reaper, kube, clock = kueue_reaper(held(f"{LOCALE}-1", phase="Failed", finalizers=("other/finalizer",)))
    clock.advance(120)
    reaper.reap_due()
    assert ("delete_kueue_workload", GROUP) not in kube.calls
    reaper, kube, clock = reaper_with(held(f"{LOCALE}-1", phase="Failed"))  # no --kueue-workload
    clock.advance(120)
    reaper.reap_due()
    assert ("delete_kueue_workload", GROUP) not in kube.calls and kube.created_events == []


def test_a_refused_workload_delete_is_retried_at_the_next_check() -> None:
    reaper, kube, clock = kueue_reaper(held(f"{LOCALE}-1", phase="Failed"))
    kube.fail_next["delete_kueue_workload"] = [
        ForbiddenError(verb="delete", resource="workloads.kueue.x-k8s.io", namespace="ns")
    ]
    clock.advance(KUEUE_SETTLE_SECONDS)
    reaper.reap_due()
    assert kube.kueue_workloads and kube.created_events == []
    reaper.reap_due()
    assert not kube.kueue_workloads and [e.reason for e in kube.created_events] == ["KueueWorkloadDeleted"]


GATED = (PodCondition(type="PodScheduled", status="False", reason="SchedulingGated"),)


def restarted_group(reaper: Reaper, kube: FakeKube, clock: FakeClock, *uids: str) -> None:
    """After nodewatch deleted the Workload: the group's pods recreated, gated, and a new admitted Workload."""
    for i, uid in enumerate(uids):
        kube.pods[f"{LOCALE}-{i}"] = make_pod(f"{LOCALE}-{i}", phase="Pending", ip=None, conditions=GATED, uid=uid)
    kube.kueue_workloads[("ns", GROUP)] = set(uids)
    kube.kueue_conditions[("ns", GROUP)] = (PodCondition(type="Admitted", status="True"),)
    reaper.observe(kube.list_pods(namespace="ns", selector=SETTINGS.selector))


def test_pods_kueue_left_gated_after_the_groups_restart_make_nodewatch_restart_it_again() -> None:
    # Kueue v0.19 admitted the recreated group and missed the gates of pods whose predecessors were terminating
    reaper, kube, clock = kueue_reaper(held(f"{LOCALE}-1", phase="Succeeded"), make_pod(f"{LOCALE}-0"))
    clock.advance(KUEUE_SETTLE_SECONDS)
    reaper.reap_due()
    assert [e.reason for e in kube.created_events] == ["KueueWorkloadDeleted"]  # the first restart
    restarted_group(reaper, kube, clock, "new-0", "new-1")
    clock.advance(KUEUE_STRANDED_SECONDS - 1)
    reaper.observe(ChunkEnded(resource_version="1"))
    reaper.reap_due()
    assert kube.kueue_workloads  # Kueue removes the gates within a second, normally
    clock.advance(1)
    reaper.observe(ChunkEnded(resource_version="1"))
    reaper.reap_due()
    assert not kube.kueue_workloads
    assert [e.pod.name for e in kube.created_events[1:]] == [f"{LOCALE}-0", f"{LOCALE}-1"]
    assert "still gated 30s after its group's restart while Kueue Workload" in kube.created_events[-1].message


def test_a_group_waiting_in_its_queue_is_left_alone_however_long() -> None:
    # all gated, never restarted here: queued, which is Kueue's business (and no Workload is read for it)
    pods = [make_pod(f"{LOCALE}-{i}", phase="Pending", ip=None, conditions=GATED, uid=f"q-{i}") for i in range(2)]
    reaper, kube, clock = kueue_reaper(*pods)
    clock.advance(3600)
    reaper.observe(ChunkEnded(resource_version="1"))
    reaper.reap_due()
    assert kube.created_events == []
    assert not [c for c in kube.calls if c[0] in ("delete_kueue_workload", "get_kueue_workload")]


def test_after_a_restart_a_queued_group_is_read_at_most_every_30s_and_left_alone() -> None:
    reaper, kube, clock = kueue_reaper(held(f"{LOCALE}-1", phase="Succeeded"), make_pod(f"{LOCALE}-0"))
    clock.advance(KUEUE_SETTLE_SECONDS)
    reaper.reap_due()
    restarted_group(reaper, kube, clock, "new-0", "new-1")
    kube.kueue_conditions[("ns", GROUP)] = (PodCondition(type="QuotaReserved", status="False", reason="Pending"),)
    for _ in range(24):  # two minutes of 5 s checks
        clock.advance(5)
        reaper.observe(ChunkEnded(resource_version="1"))
        reaper.reap_due()
    assert kube.kueue_workloads and len(kube.created_events) == 1
    assert 3 <= len([c for c in kube.calls if c[0] == "get_kueue_workload"]) <= 4


def test_the_pod_finalizers_are_read_from_the_api_object() -> None:
    pod = pod_from_json({"metadata": {"name": "p", "finalizers": [KUEUE_FINALIZER], "deletionTimestamp": "x"}})
    assert pod.finalizers == (KUEUE_FINALIZER,) and pod.deleting


def test_nodewatch_takes_the_kueue_workload_to_delete() -> None:
    base = ["--statefulsets", SERVER, "--selector", "a=b"]
    assert settings_from(base).kueue_workload is None
    got = settings_from(base, {"ARKOUDA_KUEUE_WORKLOAD": "rel-arkouda-group"})
    assert got.kueue_workload == "rel-arkouda-group"
