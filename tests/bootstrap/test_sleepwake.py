"""The gate's sleep/wake controller against FakeKube (the kube seam's test double, with StatefulSet replica
counts) and FakeClock: which StatefulSets it scales, in which order, which Events it emits, when it holds,
forwards or fails a request. No sleeps, no sockets."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from arkouda_bootstrap.config import GateSettings
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.gate.idle import Traffic
from arkouda_bootstrap.gate.queue import KueueGroup
from arkouda_bootstrap.gate.sleepwake import (
    WAKE_ANNOTATION,
    Backend,
    Controller,
    Phase,
    StatefulSetMissingError,
)
from arkouda_bootstrap.kube.api import (
    ApiUnavailableError,
    ForbiddenError,
    PodCondition,
    PodEvent,
    PodInfo,
    PodList,
    PodRef,
)
from arkouda_bootstrap.kube.events import EventRecorder
from fakes import FakeClock, FakeKube, make_pod

SERVER, LOCALE = "r-arkouda-server", "r-arkouda-locale"
SETTINGS = GateSettings(
    namespace="ns",
    pod_name="r-arkouda-gate-abc",
    release_selector="app.kubernetes.io/instance=r",
    server_statefulset=SERVER,
    locale_statefulset=LOCALE,
    num_locales=3,
    server_port=5555,
    listen_port=5555,
    idle_timeout=60,
    wake_timeout=100,
    wake_backoff=30,
    sleep_when_idle=True,
)
UNSCHEDULABLE = (
    "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are "
    "available: 1 Preemption is not helpful for scheduling."
)


@dataclass
class FakeRequest:
    """Test double of a checked client request: records what the controller did with it."""

    received_at: float
    session: bytes = b"client"
    forwarded: list[tuple[str, int]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def forward(self, backend: Backend) -> None:
        self.forwarded.append((backend.host, backend.port))

    def fail(self, message: str) -> None:
        self.failed.append(message)


@dataclass
class Named(FakeRequest):
    """Test double of a request that records, in a list shared with the others, when it was forwarded."""

    name: str = ""
    order: list[str] = field(default_factory=list)

    def forward(self, backend: Backend) -> None:
        self.order.append(self.name)


def phase_of(ctl: Controller) -> Phase:
    return ctl.phase  # read through a function: mypy would narrow the attribute between two steps


def server_pod(*, ready: bool = True, ip: str | None = "10.1.0.7", **kwargs: Any) -> PodInfo:
    return make_pod(
        f"{SERVER}-0",
        ip=ip,
        ready=ready,
        labels={"app.kubernetes.io/component": "server"},
        **kwargs,
    )


def locale_pod(i: int, *, ready: bool = True, **kwargs: Any) -> PodInfo:
    return make_pod(
        f"{LOCALE}-{i}",
        ready=ready,
        labels={"app.kubernetes.io/component": "locale"},
        **kwargs,
    )


def gate_pod(annotations: dict[str, str] | None = None) -> PodInfo:
    return make_pod(
        SETTINGS.pod_name,
        labels={"app.kubernetes.io/component": "gate"},
        annotations=dict(annotations or {}),
    )


def listing(*pods: PodInfo) -> PodList:
    return PodList(pods=tuple(pods), resource_version="1")


def build(
    *, server: int = 1, locale: int = 2, settings: GateSettings = SETTINGS
) -> tuple[Controller, FakeKube, FakeClock, Traffic]:
    api = FakeKube(replicas={SERVER: server, LOCALE: locale})
    clock = FakeClock()
    traffic = Traffic(clock=clock)
    events = EventRecorder(api, PodRef(namespace="ns", name=settings.pod_name, uid="g"))
    ctl = Controller(settings=settings, scale=api, events=events, traffic=traffic, clock=clock)
    ctl.start()
    return ctl, api, clock, traffic


def scale_calls(api: FakeKube) -> list[str]:
    return [arg for op, arg in api.calls if op == "set_replicas"]


def reasons(api: FakeKube) -> list[str]:
    return [e.reason for e in api.created_events]


def asleep(api: FakeKube, ctl: Controller, clock: FakeClock) -> None:
    """Drive an awake release to sleep: idle timeout, then every pod gone."""
    ctl.on_pods(listing(server_pod(), locale_pod(0), locale_pod(1), gate_pod()))
    ctl.step()
    clock.advance(61)
    ctl.step()
    ctl.on_pods(listing(gate_pod()))
    ctl.step()
    assert phase_of(ctl) is Phase.ASLEEP


def test_a_fresh_install_gets_its_locale_count_from_the_gate() -> None:
    # the chart leaves replicas out: both StatefulSets start with Kubernetes' default of 1
    ctl, api, _, _ = build(server=1, locale=1)
    assert phase_of(ctl) is Phase.AWAKE
    assert scale_calls(api) == [f"{LOCALE}=2"]


def test_a_gate_restarted_while_asleep_keeps_the_release_asleep() -> None:
    ctl, api, _, _ = build(server=0, locale=0)
    assert phase_of(ctl) is Phase.DRAINING
    assert scale_calls(api) == []
    ctl.on_pods(listing(gate_pod()))
    ctl.step()
    assert phase_of(ctl) is Phase.ASLEEP
    assert reasons(api) == ["Asleep"]
    assert scale_calls(api) == []


def test_missing_statefulset_is_its_own_error() -> None:
    api = FakeKube(replicas={SERVER: 1})
    clock = FakeClock()
    ctl = Controller(
        settings=SETTINGS,
        scale=api,
        events=EventRecorder(api, None),
        traffic=Traffic(clock=clock),
        clock=clock,
    )
    with pytest.raises(StatefulSetMissingError, match=f"StatefulSet {LOCALE} not found in namespace ns"):
        ctl.start()


def test_idle_release_scales_the_server_first_then_the_locales_and_says_so() -> None:
    ctl, api, clock, _ = build()
    ctl.on_pods(listing(server_pod(), locale_pod(0), locale_pod(1), gate_pod()))
    assert ctl.step() == pytest.approx(30)  # at most MAX_STEP_SECONDS between looks
    clock.advance(59)
    assert ctl.step() == pytest.approx(1)
    assert scale_calls(api) == []
    clock.advance(1)
    ctl.step()
    assert phase_of(ctl) is Phase.DRAINING
    assert scale_calls(api) == [f"{SERVER}=0", f"{LOCALE}=0"]
    assert api.replicas == {SERVER: 0, LOCALE: 0}
    draining = api.created_events[-1]
    assert (draining.reason, draining.type, draining.pod.name) == (
        "IdleDraining",
        "Normal",
        SETTINGS.pod_name,
    )
    assert "no traffic for 60 s" in draining.message
    # terminating pods still hold their nodes: Asleep only when none is left
    ctl.on_pods(listing(replace(server_pod(), deleting=True), gate_pod()))
    ctl.step()
    assert phase_of(ctl) is Phase.DRAINING
    ctl.on_pods(listing(gate_pod()))
    ctl.step()
    assert phase_of(ctl) is Phase.ASLEEP
    assert reasons(api) == ["IdleDraining", "Asleep"]


def test_a_starting_or_relaunching_release_is_never_put_to_sleep() -> None:
    ctl, api, clock, _ = build()
    ctl.on_pods(listing(server_pod(ready=False), locale_pod(0), locale_pod(1)))
    clock.advance(10_000)
    ctl.step()
    assert phase_of(ctl) is Phase.AWAKE
    assert scale_calls(api) == [] and reasons(api) == []


def test_a_long_request_is_never_cut() -> None:
    ctl, api, clock, traffic = build()
    ctl.on_pods(listing(server_pod(), locale_pod(0), locale_pod(1)))
    traffic.request_started()
    for _ in range(24):
        clock.advance(3600)
        ctl.step()
    assert phase_of(ctl) is Phase.AWAKE and scale_calls(api) == []
    traffic.request_ended()
    clock.advance(60)
    ctl.step()
    assert phase_of(ctl) is Phase.DRAINING


def test_idle_time_counts_from_ready_not_from_the_gate_start() -> None:
    ctl, api, clock, _ = build()
    ctl.on_pods(listing(server_pod(ready=False)))
    clock.advance(500)
    ctl.step()
    ctl.on_pods(listing(server_pod()))
    ctl.step()
    assert phase_of(ctl) is Phase.AWAKE
    clock.advance(59)
    ctl.step()
    assert phase_of(ctl) is Phase.AWAKE and scale_calls(api) == []
    clock.advance(1)
    ctl.step()
    assert phase_of(ctl) is Phase.DRAINING


def test_a_client_of_an_awake_release_goes_straight_to_the_server_pod() -> None:
    ctl, _, clock, _ = build()
    ctl.on_pods(listing(server_pod()))
    client = FakeRequest(received_at=clock())
    ctl.request_arrived(client)
    assert client.forwarded == [("10.1.0.7", 5555)]
    assert ctl.held == []


def test_a_request_to_a_sleeping_release_wakes_it_and_is_forwarded_when_the_server_is_ready() -> None:
    ctl, api, clock, _ = build()
    asleep(api, ctl, clock)
    before = len(scale_calls(api))
    client = FakeRequest(received_at=clock())
    ctl.request_arrived(client)
    assert client.forwarded == [] and ctl.held == [client]
    assert ctl.step() == pytest.approx(30)  # the deadline (100 s) is further than one look
    assert phase_of(ctl) is Phase.WAKING
    # locales first: the server's bootstrap waits for them
    assert scale_calls(api)[before:] == [f"{LOCALE}=2", f"{SERVER}=1"]
    assert api.created_events[-1].reason == "Waking"
    assert "client request" in api.created_events[-1].message
    clock.advance(12)
    ctl.on_pods(listing(server_pod(ready=False), locale_pod(0), locale_pod(1), gate_pod()))
    ctl.step()
    assert client.forwarded == []
    clock.advance(3)
    ctl.on_pods(listing(server_pod(ip="10.1.0.9"), locale_pod(0), locale_pod(1), gate_pod()))
    ctl.step()
    assert phase_of(ctl) is Phase.AWAKE
    assert client.forwarded == [("10.1.0.9", 5555)]
    awake = api.created_events[-1]
    assert awake.reason == "Awake" and "15.0 s after the wake" in awake.message
    # the idle time starts at Ready, not at the last traffic before the sleep
    clock.advance(59)
    ctl.step()
    assert phase_of(ctl) is Phase.AWAKE


def test_a_wake_that_misses_its_deadline_fails_the_client_with_the_schedulers_reason_then_backs_off() -> None:
    ctl, api, clock, _ = build()
    asleep(api, ctl, clock)
    first = FakeRequest(received_at=clock())
    ctl.request_arrived(first)
    ctl.step()
    pending = server_pod(
        ready=False,
        ip=None,
        phase="Pending",
        conditions=(
            PodCondition(
                type="PodScheduled",
                status="False",
                reason="Unschedulable",
                message=UNSCHEDULABLE,
            ),
        ),
    )
    ctl.on_pods(listing(pending, gate_pod()))
    clock.advance(99)
    ctl.step()
    assert first.failed == []
    clock.advance(1)
    ctl.step()
    assert phase_of(ctl) is Phase.DRAINING
    assert api.replicas == {SERVER: 0, LOCALE: 0}
    timeout = api.created_events[-1]
    assert (timeout.reason, timeout.type) == ("WakeTimeout", "Warning")
    assert f"pod {SERVER}-0 is not scheduled: {UNSCHEDULABLE}" in timeout.message
    assert "next wake attempt in 30 s" in timeout.message
    assert len(first.failed) == 1 and UNSCHEDULABLE in first.failed[0]
    assert ctl.held == []
    # back-off: a client arriving now is held, nothing is scaled until the back-off has passed
    ctl.on_pods(listing(gate_pod()))
    ctl.step()
    scaled = len(scale_calls(api))
    second = FakeRequest(received_at=clock())
    ctl.request_arrived(second)
    assert ctl.step() == pytest.approx(30)
    clock.advance(29)
    ctl.step()
    assert len(scale_calls(api)) == scaled and phase_of(ctl) is Phase.ASLEEP
    clock.advance(1)
    ctl.step()
    assert phase_of(ctl) is Phase.WAKING
    ctl.on_pods(listing(server_pod(), locale_pod(0), locale_pod(1), gate_pod()))
    ctl.step()
    assert second.forwarded == [("10.1.0.7", 5555)] and second.failed == []


def test_the_wake_timeout_event_is_recorded_before_the_client_that_caused_the_wake_is_told() -> None:
    ctl, api, clock, _ = build()
    asleep(api, ctl, clock)
    told: list[list[str]] = []

    @dataclass
    class Witness(FakeRequest):
        """Test double of a request that records which Events existed when it was failed."""

        def fail(self, message: str) -> None:
            told.append(reasons(api))
            super().fail(message)

    client = Witness(received_at=clock())
    ctl.request_arrived(client)
    clock.advance(0.5)  # the loop sees the request a moment after it arrived
    ctl.step()
    assert phase_of(ctl) is Phase.WAKING
    clock.advance(99.5)
    ctl.step()
    assert len(told) == 1 and told[0][-1] == "WakeTimeout"
    assert "not Ready after 100 s" in client.failed[0]


def test_consecutive_missed_wakes_back_off_longer() -> None:
    ctl, api, clock, _ = build()
    asleep(api, ctl, clock)
    for expected in ("30 s", "60 s", "120 s"):
        ctl.request_arrived(FakeRequest(received_at=clock()))
        ctl.step()
        clock.advance(100)
        ctl.step()
        timeouts = [e.message for e in api.created_events if e.reason == "WakeTimeout"]
        assert f"next wake attempt in {expected}" in timeouts[-1]
        clock.advance(1000)


def test_a_client_held_past_the_wake_timeout_while_the_server_starts_gets_an_error() -> None:
    ctl, api, clock, _ = build()
    ctl.on_pods(listing(server_pod(ready=False), locale_pod(0), locale_pod(1)))
    client = FakeRequest(received_at=clock())
    ctl.request_arrived(client)
    assert ctl.step() == pytest.approx(30)  # at most MAX_STEP_SECONDS between looks
    clock.advance(100)
    ctl.step()
    assert len(client.failed) == 1 and f"pod {SERVER}-0 is Running but not Ready" in client.failed[0]
    assert scale_calls(api) == []  # a starting release is left alone


def test_the_wake_annotation_wakes_a_sleeping_release_and_its_start_value_does_not() -> None:
    api = FakeKube(replicas={SERVER: 0, LOCALE: 0})
    clock = FakeClock()
    ctl = Controller(
        settings=SETTINGS,
        scale=api,
        events=EventRecorder(api, PodRef(namespace="ns", name=SETTINGS.pod_name)),
        traffic=Traffic(clock=clock),
        clock=clock,
    )
    ctl.start()
    ctl.on_pods(listing(gate_pod({WAKE_ANNOTATION: "old"})))
    ctl.step()
    assert phase_of(ctl) is Phase.ASLEEP
    ctl.on_pods(
        PodEvent(
            type="MODIFIED",
            pod=gate_pod({WAKE_ANNOTATION: "1700000000"}),
            resource_version="2",
        )
    )
    ctl.step()
    assert phase_of(ctl) is Phase.WAKING
    assert api.replicas == {SERVER: 1, LOCALE: 2}
    assert "wake requested" in api.created_events[-1].message


def test_missing_rbac_for_the_scale_is_an_event_and_an_error() -> None:
    ctl, api, clock, _ = build()
    ctl.on_pods(listing(server_pod()))
    api.fail_with["set_replicas"] = ForbiddenError(verb="patch", resource="statefulsets/scale", namespace="ns")
    clock.advance(61)
    with pytest.raises(BootstrapError, match="missing RBAC: patch statefulsets/scale"):
        ctl.step()
    assert reasons(api) == ["RbacMissing"]


def test_another_refused_change_is_tried_again_after_a_fixed_pause() -> None:
    ctl, api, clock, _ = build()
    ctl.on_pods(listing(server_pod()))
    api.fail_with["set_replicas"] = BootstrapError("patch statefulsets/scale in namespace ns: not found")
    clock.advance(61)
    assert [ctl.step(), ctl.step()] == [5.0, 5.0]
    assert phase_of(ctl) is Phase.AWAKE


def test_an_unreachable_api_is_retried_with_the_one_backoff_without_changing_phase(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ctl, api, clock, _ = build()
    ctl.on_pods(listing(server_pod()))
    api.fail_with["set_replicas"] = ApiUnavailableError("patch statefulsets/scale in namespace ns failed: HTTP 500")
    clock.advance(61)
    assert [ctl.step() for _ in range(7)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]  # kube.retry's pauses
    assert phase_of(ctl) is Phase.AWAKE
    del api.fail_with["set_replicas"]
    ctl.step()
    assert phase_of(ctl) is Phase.DRAINING
    assert "attempt 7 failed: patch statefulsets/scale in namespace ns failed: HTTP 500" in caplog.text
    # a success ended that outage: the next one starts again from the first pause
    api.fail_with["set_replicas"] = ApiUnavailableError("cannot reach the Kubernetes API to patch statefulsets/scale")
    ctl.request_arrived(FakeRequest(received_at=clock()))
    assert ctl.step() == 1.0
    assert phase_of(ctl) is Phase.DRAINING


def test_held_requests_are_bounded_per_client_and_in_total_and_the_refusal_names_the_limit() -> None:
    s = replace(SETTINGS, max_held=3, max_held_per_session=1)
    ctl, api, clock, _ = build(settings=s)
    asleep(api, ctl, clock)
    a1 = FakeRequest(received_at=clock(), session=b"a")
    a2 = FakeRequest(received_at=clock(), session=b"a")
    ctl.request_arrived(a1)
    ctl.request_arrived(a2)  # a REQ client has one request at a time: a second one is not held
    assert ctl.held == [a1]
    assert a2.failed == [
        "the gate already holds 1 request(s) of this client until the server is Ready (limit 1 per client)"
    ]
    others = [FakeRequest(received_at=clock(), session=bytes([i])) for i in range(3)]
    for request in others:
        ctl.request_arrived(request)
    assert ctl.held == [a1, others[0], others[1]]
    assert others[2].failed and "limit 3, server.gate.maxHeldRequests" in others[2].failed[0]
    assert all(not r.failed for r in (a1, others[0], others[1]))


def test_requests_held_before_the_server_was_ready_go_first() -> None:
    ctl, api, clock, _ = build()
    asleep(api, ctl, clock)
    order: list[str] = []
    held = [Named(received_at=clock(), session=bytes([i]), name=f"held{i}", order=order) for i in range(3)]
    for request in held:
        ctl.request_arrived(request)
    ctl.step()  # the wake
    ctl.on_pods(listing(server_pod(ip="10.1.0.9"), locale_pod(0), locale_pod(1)))
    ctl.step()  # WAKING -> AWAKE: forwards the held ones, in order
    ctl.request_arrived(Named(received_at=clock(), session=b"new", name="new", order=order))
    assert order == ["held0", "held1", "held2", "new"]


def test_a_request_arriving_before_the_controller_saw_ready_still_waits_its_turn() -> None:
    """The pod watch reports Ready; a request that arrives before the next step() is forwarded after the held
    ones, not before them."""
    s = replace(SETTINGS, sleep_when_idle=False)
    ctl, _, clock, _ = build(settings=s)
    order: list[str] = []
    ctl.on_pods(listing(server_pod(ready=False)))
    for i in range(2):
        ctl.request_arrived(Named(received_at=clock(), session=bytes([i]), name=f"held{i}", order=order))
    ctl.on_pods(listing(server_pod(ready=True)))
    ctl.request_arrived(Named(received_at=clock(), session=b"new", name="new", order=order))
    assert order == ["held0", "held1", "new"]


def test_without_idle_sleep_the_controller_never_reads_nor_scales_the_statefulsets() -> None:
    s = replace(SETTINGS, sleep_when_idle=False)
    ctl, api, clock, _ = build(settings=s, locale=7)
    ctl.on_pods(listing(server_pod(), locale_pod(0), locale_pod(1), gate_pod()))
    for _ in range(10):
        clock.advance(10_000)
        ctl.step()
    assert phase_of(ctl) is Phase.AWAKE
    assert [op for op, _ in api.calls if op in ("get_replicas", "set_replicas")] == []
    assert api.replicas == {SERVER: 1, LOCALE: 7}
    # a restarting server: requests wait for it (up to the wake timeout), nothing is scaled
    ctl.on_pods(listing(server_pod(ready=False)))
    request = FakeRequest(received_at=clock())
    ctl.request_arrived(request)
    clock.advance(101)
    ctl.step()
    assert request.failed and "not Ready after 100 s" in request.failed[0]
    assert scale_calls(api) == []


def test_only_the_server_pod_found_unresponsive_stops_being_a_backend() -> None:
    """A pod without a uid (as a test double or a bench reports it) is a backend; the one the gate found
    unresponsive is not, even while the watch still shows it Ready, and its successor is."""
    s = replace(SETTINGS, sleep_when_idle=False)
    ctl, _, clock, _ = build(settings=s)
    ctl.on_pods(listing(replace(server_pod(), uid="")))
    assert ctl.backend() is not None
    ctl.on_pods(listing(server_pod(uid="old")))
    ctl.unresponsive_uid = "old"
    assert ctl.backend() is None
    request = FakeRequest(received_at=clock())
    ctl.request_arrived(request)
    assert ctl.held == [request]
    ctl.on_pods(listing(server_pod(uid="new")))
    ctl.step()
    assert request.forwarded == [("10.1.0.7", 5555)]


# -- admission through Kueue (gate/queue.py) -------------------------------------------------------------------

KUEUE = replace(SETTINGS, kueue_workload="r-arkouda-group", kueue_queue="arkouda")
HELD: dict[str, Any] = {"deleting": True, "finalizers": ("kueue.x-k8s.io/managed",)}
GATED = (PodCondition(type="PodScheduled", status="False", reason="SchedulingGated",
                      message="Scheduling is blocked due to non-empty scheduling gates"),)  # fmt: skip
NO_QUOTA = (
    "couldn't assign flavors to pod set 5f7b: insufficient quota for cpu in flavor default, previously considered "
    "podsets requests (3) + current podset request (3) > maximum capacity (4.5)"
)


def build_kueue() -> tuple[Controller, FakeKube, FakeClock]:
    api = FakeKube(replicas={SERVER: 1, LOCALE: 2})
    clock = FakeClock()
    events = EventRecorder(api, PodRef(namespace="ns", name=KUEUE.pod_name, uid="g"))
    queue = KueueGroup(api=api, namespace="ns", workload="r-arkouda-group", queue="arkouda")
    ctl = Controller(settings=KUEUE, scale=api, events=events, traffic=Traffic(clock=clock), clock=clock, queue=queue)
    ctl.start()
    return ctl, api, clock


def group(*, uid: str = "", **kwargs: Any) -> tuple[PodInfo, ...]:
    """The release's three pods, each `kwargs` (and uids ending in `uid`: a wake makes new pods)."""
    return (
        server_pod(uid=f"s{uid}", **kwargs),
        locale_pod(0, uid=f"l0{uid}", **kwargs),
        locale_pod(1, uid=f"l1{uid}", **kwargs),
    )


def idle_until(ctl: Controller, clock: FakeClock, *, asleep: bool) -> None:
    """An awake release of three pods goes idle: scaled to 0 (DRAINING), and with `asleep` its pods gone too."""
    ctl.on_pods(listing(*group(), gate_pod()))
    ctl.step()
    clock.advance(61)
    ctl.step()
    if asleep:
        ctl.on_pods(listing(gate_pod()))
        ctl.step()
        assert phase_of(ctl) is Phase.ASLEEP


def test_a_sleep_through_kueue_deletes_the_workload_of_the_held_pods_once_and_says_the_quota_is_free() -> None:
    ctl, api, clock = build_kueue()
    api.kueue_workloads[("ns", "r-arkouda-group")] = {"s", "l0", "l1"}
    idle_until(ctl, clock, asleep=False)
    assert phase_of(ctl) is Phase.DRAINING and api.replicas == {SERVER: 0, LOCALE: 0}
    assert ("ns", "r-arkouda-group") in api.kueue_workloads  # nothing is held yet: the pods are not deleting
    ctl.on_pods(listing(*group(**HELD), gate_pod()))
    ctl.step()
    assert ("ns", "r-arkouda-group") not in api.kueue_workloads
    released = [e for e in api.created_events if e.reason == "QuotaReleased"]
    assert len(released) == 1 and "deleted Kueue Workload r-arkouda-group" in released[0].message
    assert "LocalQueue arkouda" in released[0].message
    # the same pods seen again (another watch event) are not a reason for another delete or Event
    deletes = [c for c in api.calls if c[0] == "delete_kueue_workload"]
    ctl.on_pods(listing(*group(**HELD), gate_pod()))
    ctl.step()
    assert [c for c in api.calls if c[0] == "delete_kueue_workload"] == deletes
    ctl.on_pods(listing(gate_pod()))
    ctl.step()
    assert phase_of(ctl) is Phase.ASLEEP
    assert reasons(api).count("QuotaReleased") == 1


def test_only_the_workload_that_owns_the_held_pods_is_deleted() -> None:
    ctl, api, clock = build_kueue()
    idle_until(ctl, clock, asleep=False)
    api.kueue_workloads[("ns", "r-arkouda-group")] = {"s-next", "l0-next"}  # the group's next Workload
    ctl.on_pods(listing(*group(**HELD), gate_pod()))
    ctl.step()
    assert api.kueue_workloads[("ns", "r-arkouda-group")] == {"s-next", "l0-next"}
    assert "QuotaReleased" not in reasons(api)


def test_a_queued_wake_says_kueues_reason_and_its_client_and_wake_timeout_name_the_queue() -> None:
    ctl, api, clock = build_kueue()
    idle_until(ctl, clock, asleep=True)
    assert phase_of(ctl) is Phase.ASLEEP
    client = FakeRequest(received_at=clock())
    ctl.request_arrived(client)
    ctl.step()
    assert phase_of(ctl) is Phase.WAKING
    # the new pods are gated; Kueue made their Workload and could not admit it
    api.kueue_workloads[("ns", "r-arkouda-group")] = {"s2", "l02", "l12"}
    api.kueue_conditions[("ns", "r-arkouda-group")] = (
        PodCondition(type="QuotaReserved", status="False", reason="Pending", message=NO_QUOTA),
    )
    ctl.on_pods(listing(*group(uid="2", ready=False, ip=None, phase="Pending", conditions=GATED), gate_pod()))
    ctl.step()
    queued = [e for e in api.created_events if e.reason == "WakeQueued"]
    assert len(queued) == 1 and "queued in LocalQueue arkouda (Kueue Workload r-arkouda-group)" in queued[0].message
    assert NO_QUOTA in queued[0].message
    clock.advance(50)
    ctl.step()
    assert reasons(api).count("WakeQueued") == 1 and client.failed == []
    clock.advance(50)
    ctl.step()
    timeout = api.created_events[-1]
    assert timeout.reason == "WakeTimeout" and "LocalQueue arkouda" in timeout.message and NO_QUOTA in timeout.message
    assert len(client.failed) == 1 and "not Ready after 100 s" in client.failed[0]
    assert "queued in LocalQueue arkouda" in client.failed[0] and NO_QUOTA in client.failed[0]
    # scaled back to 0: the queued Workload goes too (it would hold the release's place, and Kueue's finalizer the
    # gated pods)
    assert api.replicas == {SERVER: 0, LOCALE: 0}
    ctl.on_pods(listing(*group(uid="2", ready=False, ip=None, phase="Pending", conditions=GATED, **HELD), gate_pod()))
    ctl.step()
    assert ("ns", "r-arkouda-group") not in api.kueue_workloads
    assert reasons(api)[-1] == "QuotaReleased"


def test_a_workload_that_cannot_be_read_still_gives_the_client_an_answer_naming_the_queue() -> None:
    ctl, api, clock = build_kueue()
    ctl.on_pods(listing(*group(ready=False, ip=None, phase="Pending", conditions=GATED), gate_pod()))
    api.fail_with["get_kueue_workload"] = ApiUnavailableError("the API server did not answer")
    client = FakeRequest(received_at=clock())
    ctl.request_arrived(client)
    clock.advance(100)
    ctl.step()
    assert len(client.failed) == 1 and "queued in LocalQueue arkouda" in client.failed[0]
    assert "could not be read: the API server did not answer" in client.failed[0]


def test_a_refused_workload_delete_is_tried_again_and_a_missing_rbac_verb_ends_the_gate() -> None:
    ctl, api, clock = build_kueue()
    api.kueue_workloads[("ns", "r-arkouda-group")] = {"s", "l0", "l1"}
    idle_until(ctl, clock, asleep=False)
    ctl.on_pods(listing(*group(**HELD), gate_pod()))
    api.fail_next["delete_kueue_workload"] = [BootstrapError("workloads.kueue.x-k8s.io is being replaced")]
    assert ctl.step() == pytest.approx(5)
    assert ("ns", "r-arkouda-group") in api.kueue_workloads
    ctl.step()
    assert ("ns", "r-arkouda-group") not in api.kueue_workloads
    ctl2, api2, clock2 = build_kueue()
    idle_until(ctl2, clock2, asleep=False)
    ctl2.on_pods(listing(*group(**HELD), gate_pod()))
    api2.fail_with["delete_kueue_workload"] = ForbiddenError(
        verb="delete", resource="workloads.kueue.x-k8s.io", namespace="ns"
    )
    with pytest.raises(ForbiddenError):
        ctl2.step()
    assert reasons(api2)[-1] == "RbacMissing" and "delete workloads.kueue.x-k8s.io" in api2.created_events[-1].message


def test_wake_queued_waits_a_few_looks_for_kueues_reason_and_then_says_what_it_knows() -> None:
    ctl, api, clock = build_kueue()
    idle_until(ctl, clock, asleep=True)
    ctl.request_arrived(FakeRequest(received_at=clock()))
    ctl.step()
    gated = listing(*group(uid="2", ready=False, ip=None, phase="Pending", conditions=GATED), gate_pod())
    ctl.on_pods(gated)
    assert ctl.step() == pytest.approx(2)  # no Workload yet: look again in 2 s, nothing told
    assert "WakeQueued" not in reasons(api)
    api.kueue_workloads[("ns", "r-arkouda-group")] = {"s2", "l02", "l12"}
    clock.advance(2)
    ctl.step()  # made, not tried yet
    assert "WakeQueued" not in reasons(api)
    api.kueue_conditions[("ns", "r-arkouda-group")] = (
        PodCondition(type="QuotaReserved", status="False", reason="Pending", message=NO_QUOTA),
    )
    clock.advance(2)
    ctl.step()
    queued = [e.message for e in api.created_events if e.reason == "WakeQueued"]
    assert len(queued) == 1 and NO_QUOTA in queued[0]
    assert [c for c in api.calls if c[0] == "get_kueue_workload"] == [("get_kueue_workload", "r-arkouda-group")] * 3
    # a Workload Kueue never explains: told as it is after QUEUE_LOOKS reads, and no more reads for the Event
    ctl2, api2, clock2 = build_kueue()
    idle_until(ctl2, clock2, asleep=True)
    ctl2.request_arrived(FakeRequest(received_at=clock2()))
    ctl2.step()
    ctl2.on_pods(gated)
    for _ in range(10):
        ctl2.step()
        clock2.advance(2)
    told = [e.message for e in api2.created_events if e.reason == "WakeQueued"]
    assert len(told) == 1 and "Kueue has not made the Workload yet" in told[0]
    assert len([c for c in api2.calls if c[0] == "get_kueue_workload"]) == 5


def test_a_release_queued_at_install_gets_queued_on_its_server_pod_once_and_no_wake_event() -> None:
    ctl, api, _ = build_kueue()
    api.kueue_workloads[("ns", "r-arkouda-group")] = {"s", "l0", "l1"}
    api.kueue_conditions[("ns", "r-arkouda-group")] = (
        PodCondition(type="QuotaReserved", status="False", reason="Pending", message=NO_QUOTA),
    )
    ctl.on_pods(listing(*group(ready=False, ip=None, phase="Pending", conditions=GATED), gate_pod()))
    ctl.step()
    ctl.step()
    queued = [e for e in api.created_events if e.reason == "Queued"]
    assert len(queued) == 1 and queued[0].pod.name == f"{SERVER}-0" and queued[0].pod.uid == "s"
    assert NO_QUOTA in queued[0].message and "LocalQueue arkouda" in queued[0].message
    assert "WakeQueued" not in reasons(api) and phase_of(ctl) is Phase.AWAKE


def test_through_kueue_a_wake_waits_until_the_old_pods_are_gone() -> None:
    ctl, api, clock = build_kueue()
    api.kueue_workloads[("ns", "r-arkouda-group")] = {"s", "l0", "l1"}
    idle_until(ctl, clock, asleep=False)
    client = FakeRequest(received_at=clock())
    ctl.request_arrived(client)
    ctl.step()
    assert phase_of(ctl) is Phase.DRAINING and api.replicas == {SERVER: 0, LOCALE: 0}  # old pods still listed
    ctl.on_pods(listing(*group(**HELD), gate_pod()))  # deleting, kept by Kueue's finalizer
    ctl.step()
    assert ("ns", "r-arkouda-group") not in api.kueue_workloads and phase_of(ctl) is Phase.DRAINING
    ctl.on_pods(listing(gate_pod()))
    ctl.step()
    assert phase_of(ctl) is Phase.WAKING and api.replicas == {SERVER: 1, LOCALE: 2}
    assert reasons(api).count("QuotaReleased") == 1 and client.failed == []


def test_requests_that_outlived_their_deadline_in_an_api_outage_are_answered_and_wake_nothing() -> None:
    ctl, api, clock, _ = build()
    asleep(api, ctl, clock)
    client = FakeRequest(received_at=clock())
    ctl.request_arrived(client)
    api.fail_with["set_replicas"] = ApiUnavailableError("connection refused")
    ctl.step()  # the wake's scale-up fails: the API is away
    clock.advance(150)
    del api.fail_with["set_replicas"]
    ctl.step()
    assert len(client.failed) == 1 and "not Ready after 100 s" in client.failed[0]
    assert phase_of(ctl) is Phase.ASLEEP and "WakeTimeout" not in reasons(api) and "Waking" not in reasons(api)


def test_an_admitted_group_whose_gates_are_being_removed_is_not_told_queued() -> None:
    ctl, api, _ = build_kueue()
    api.kueue_workloads[("ns", "r-arkouda-group")] = {"s", "l0", "l1"}
    api.kueue_conditions[("ns", "r-arkouda-group")] = (
        PodCondition(type="QuotaReserved", status="True"),
        PodCondition(type="Admitted", status="True"),
    )
    ctl.on_pods(listing(*group(ready=False, ip=None, phase="Pending", conditions=GATED), gate_pod()))
    ctl.step()
    ctl.step()
    assert "Queued" not in reasons(api) and "WakeQueued" not in reasons(api)
    assert [c for c in api.calls if c[0] == "get_kueue_workload"] == [("get_kueue_workload", "r-arkouda-group")]
