"""Discovery logic (list, then watch from resourceVersion, 410 relist, deadline) driven by FakeKube."""

from __future__ import annotations

import datetime as dt

import pytest
from arkouda_bootstrap.errors import EXIT_TIMEOUT, BootstrapError
from arkouda_bootstrap.kube.api import (
    ApiUnavailableError,
    ContainerState,
    EventInfo,
    ForbiddenError,
    GoneError,
    PodCondition,
    PodInfo,
)
from arkouda_bootstrap.kube.outage import OutageNotice
from arkouda_bootstrap.server.discovery import (
    EVENTS_MIN_INTERVAL,
    WaitTimeoutError,
    evaluate,
    order_pods,
    ordinal,
    pod_reason,
    wait_for_locales,
)
from fakes import END, FakeClock, FakeKube, make_pod

UNSCHEDULABLE = (
    PodCondition(
        type="PodScheduled",
        status="False",
        reason="Unschedulable",
        message="0/3 nodes are available: 3 Insufficient cpu.",
    ),
)


def test_ordinal_from_label_wins_over_name() -> None:
    assert ordinal(make_pod("x-arkouda-locale-7")) == 7
    assert ordinal(make_pod("weird-name", labels={"apps.kubernetes.io/pod-index": "3"})) == 3
    with pytest.raises(BootstrapError, match="pod weird matches the locale selector but has no StatefulSet ordinal"):
        ordinal(make_pod("weird"))


def test_order_is_by_ordinal_not_api_or_lexical_order() -> None:
    pods = [make_pod(f"r-arkouda-locale-{n}") for n in (10, 2, 1, 0, 11)]
    assert [p.name for p in order_pods(pods)] == [f"r-arkouda-locale-{n}" for n in (0, 1, 2, 10, 11)]


def test_duplicate_ordinal_is_a_selector_error() -> None:
    with pytest.raises(BootstrapError, match="same ordinal 1"):
        order_pods([make_pod("a-1"), make_pod("b-1")])


def test_progress_line_names_the_waiting_pod_and_its_reason() -> None:
    names = [f"arkouda-locale-{n}" for n in range(7)]
    pods = {name: make_pod(name) for name in names}
    pods["arkouda-locale-4"] = make_pod("arkouda-locale-4", ip=None, phase="Pending", conditions=UNSCHEDULABLE)
    progress, ready = evaluate(pods, expected=7)
    assert progress.line == (
        "6/7 locales ready; waiting for arkouda-locale-4 (Pending: 0/3 nodes are available: 3 Insufficient cpu)"
    )
    assert not progress.done
    assert len(ready) == 6
    # 3/7 with the others not created yet: the missing pods by name
    few = {
        k: v
        for k, v in pods.items()
        if k in {"arkouda-locale-0", "arkouda-locale-1", "arkouda-locale-2", "arkouda-locale-4"}
    }
    progress, _ = evaluate(few, expected=7)
    assert progress.line == (
        "3/7 locales ready; waiting for arkouda-locale-4 (Pending: 0/3 nodes are available: 3 Insufficient cpu), "
        "arkouda-locale-3, arkouda-locale-5, arkouda-locale-6 (not created yet)"
    )
    progress, ready = evaluate(pods | {"arkouda-locale-4": make_pod("arkouda-locale-4")}, expected=7)
    assert progress.done
    assert progress.line == "7/7 locales ready"
    assert [p.name for p in ready] == names


def test_many_waiting_are_summarised() -> None:
    pods = {f"r-{n}": make_pod(f"r-{n}", ready=False) for n in range(6)}
    progress, _ = evaluate(pods, expected=6)
    assert progress.line.startswith("0/6 locales ready; waiting for r-0 (Running: not ready), r-1")
    assert progress.line.endswith("r-2 (Running: not ready) and 3 more")


def test_reasons_from_container_states_and_events() -> None:
    crash = make_pod(
        "p-1",
        ready=False,
        containers=(ContainerState(name="sshd", state="waiting", reason="CrashLoopBackOff", message="back-off 10s"),),
    )
    assert pod_reason(crash) == "Running: sshd: CrashLoopBackOff: back-off 10s"
    creating = make_pod(
        "p-2",
        ready=False,
        phase="Pending",
        ip=None,
        containers=(ContainerState(name="sshd", state="waiting", reason="ContainerCreating"),),
    )
    events = [
        EventInfo(
            type="Warning", reason="FailedMount", message="old", last_seen=dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        ),
        EventInfo(
            type="Warning",
            reason="FailedMount",
            message='secret "x" not found',
            last_seen=dt.datetime(2026, 1, 2, tzinfo=dt.UTC),
        ),
        EventInfo(type="Normal", reason="Scheduled", message="ok"),
    ]
    assert pod_reason(creating, events) == 'Pending: FailedMount: secret "x" not found'
    assert pod_reason(creating) == "Pending: sshd: ContainerCreating"
    not_ready = make_pod("p-3", ready=False, containers=(ContainerState(name="sshd", state="running", ready=False),))
    assert pod_reason(not_ready) == "Running: not ready: sshd"
    term = make_pod(
        "p-4", ready=False, containers=(ContainerState(name="sshd", state="terminated", reason="Error", exit_code=2),)
    )
    assert pod_reason(term) == "Running: sshd: Error (exit 2)"


def test_list_then_watch_from_resource_version_until_ready() -> None:
    api = FakeKube(list_rv=100)
    api.pods["r-arkouda-locale-1"] = make_pod("r-arkouda-locale-1", ip="10.0.0.2")
    api.pods["r-arkouda-locale-0"] = make_pod(
        "r-arkouda-locale-0", ip=None, ready=False, phase="Pending", conditions=UNSCHEDULABLE
    )
    api.script(api.event("MODIFIED", make_pod("r-arkouda-locale-0", ip="10.0.0.1")))
    lines: list[str] = []
    pods = wait_for_locales(api, namespace="ns", selector="s=1", expected=2, timeout=60, report=lines.append)
    assert [p.name for p in pods] == ["r-arkouda-locale-0", "r-arkouda-locale-1"]
    assert [p.pod_ip for p in pods] == ["10.0.0.1", "10.0.0.2"]
    assert lines == [
        "1/2 locales ready; waiting for r-arkouda-locale-0 (Pending: 0/3 nodes are available: 3 Insufficient cpu)",
        "2/2 locales ready",
    ]
    assert ("watch_pods", "100") in api.calls  # watched from the list's resourceVersion


def test_one_line_per_change_only() -> None:
    api = FakeKube()
    pending = make_pod("r-0", ip=None, ready=False, phase="Pending", conditions=UNSCHEDULABLE)
    api.pods["r-0"] = pending
    api.script(api.event("MODIFIED", pending), api.event("MODIFIED", pending), api.event("MODIFIED", make_pod("r-0")))
    lines: list[str] = []
    wait_for_locales(api, namespace="ns", selector="s=1", expected=1, timeout=60, report=lines.append)
    assert len(lines) == 2


def test_410_gone_relists() -> None:
    api = FakeKube(list_rv=5)
    api.pods["r-0"] = make_pod("r-0", ready=False)
    api.script(GoneError("too old"))
    api.pods_after_relist = None  # type: ignore[attr-defined]
    lines: list[str] = []

    # after the 410, the second list sees the pod ready
    original = api.list_pods
    count = {"n": 0}

    def list_pods(*, namespace: str, selector: str):  # type: ignore[no-untyped-def]
        count["n"] += 1
        if count["n"] == 2:
            api.pods["r-0"] = make_pod("r-0")
        return original(namespace=namespace, selector=selector)

    api.list_pods = list_pods  # type: ignore[method-assign]
    pods = wait_for_locales(api, namespace="ns", selector="s=1", expected=1, timeout=60, report=lines.append)
    assert [p.name for p in pods] == ["r-0"]
    assert count["n"] == 2


def test_deleted_pod_counts_against_ready() -> None:
    api = FakeKube()
    api.pods["r-0"] = make_pod("r-0", ready=False)
    api.script(api.event("DELETED", make_pod("r-0", ready=False)), api.event("ADDED", make_pod("r-0")))
    lines: list[str] = []
    wait_for_locales(api, namespace="ns", selector="s=1", expected=1, timeout=60, report=lines.append, line_interval=0)
    assert lines[1] == "0/1 locales ready; waiting for ordinal 0 (not created yet)"


def test_deadline_raises_with_last_progress_and_uses_bounded_watches() -> None:
    clock = FakeClock()
    api = FakeKube(on_idle_watch=clock.advance)
    api.pods["r-1"] = make_pod("r-1")
    api.pods["r-0"] = make_pod("r-0", ip=None, ready=False, phase="Pending", conditions=UNSCHEDULABLE)
    lines: list[str] = []
    with pytest.raises(WaitTimeoutError) as err:
        wait_for_locales(
            api,
            namespace="ns",
            selector="s=1",
            expected=2,
            timeout=25,
            report=lines.append,
            clock=clock,
            chunk_seconds=10,
        )
    assert err.value.exit_code == EXIT_TIMEOUT
    assert str(err.value) == (
        "timed out after 25s: 1/2 locales ready; waiting for r-0 (Pending: 0/3 nodes are available: 3 Insufficient cpu)"
    )
    watches = [c for c in api.calls if c[0] == "watch_pods"]
    assert len(watches) == 3  # 10 s + 10 s + 5 s chunks, no busy loop


def test_events_reason_shown_and_events_forbidden_is_not_fatal() -> None:
    clock = FakeClock()
    api = FakeKube(on_idle_watch=clock.advance)
    api.pods["r-0"] = make_pod("r-0", ready=False, phase="Pending", ip=None)
    api.pod_events["r-0"] = [EventInfo(type="Warning", reason="FailedMount", message="no secret")]
    lines: list[str] = []
    with pytest.raises(WaitTimeoutError):
        wait_for_locales(api, namespace="ns", selector="s=1", expected=1, timeout=1, report=lines.append, clock=clock)
    assert lines[0] == "0/1 locales ready; waiting for r-0 (Pending: FailedMount: no secret)"
    api2 = FakeKube(
        on_idle_watch=clock.advance,
        fail_with={"list_pod_events": ForbiddenError(verb="list", resource="events", namespace="ns")},
    )
    api2.pods["r-0"] = make_pod("r-0", ready=False, phase="Pending", ip=None)
    with pytest.raises(WaitTimeoutError):
        wait_for_locales(api2, namespace="ns", selector="s=1", expected=1, timeout=1, report=lines.append, clock=clock)


def timed_out(
    api: FakeKube, clock: FakeClock, *, expected: int, timeout: float, chunk_seconds: int = 10
) -> tuple[list[str], WaitTimeoutError]:
    """The progress lines and the timeout of a wait for the locales of StatefulSet r-arkouda-locale."""
    lines: list[str] = []
    with pytest.raises(WaitTimeoutError) as err:
        wait_for_locales(
            api,
            namespace="ns",
            selector="s=1",
            expected=expected,
            timeout=timeout,
            report=lines.append,
            clock=clock,
            chunk_seconds=chunk_seconds,
            statefulset="r-arkouda-locale",
        )
    return lines, err.value


QUOTA_REFUSAL = (
    'create Pod r-arkouda-locale-1 in StatefulSet r-arkouda-locale failed error: pods "r-arkouda-locale-1" is '
    "forbidden: exceeded quota: q, requested: cpu=2, used: cpu=2, limited: cpu=3"
)


def test_a_locale_its_statefulset_cannot_create_shows_the_admission_refusal_read_at_most_every_few_seconds() -> None:
    clock = FakeClock()
    api = FakeKube(on_idle_watch=clock.advance)
    api.pods["r-arkouda-locale-0"] = make_pod("r-arkouda-locale-0")
    api.statefulset_events["r-arkouda-locale"] = [
        EventInfo(type="Normal", reason="SuccessfulCreate", message="create Pod r-arkouda-locale-0 ... successful"),
        EventInfo(
            type="Warning",
            reason="FailedCreate",
            message="old refusal",
            last_seen=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        ),
        EventInfo(
            type="Warning",
            reason="FailedCreate",
            message=QUOTA_REFUSAL,
            last_seen=dt.datetime(2026, 1, 2, tzinfo=dt.UTC),
        ),
    ]
    lines, err = timed_out(api, clock, expected=2, timeout=60, chunk_seconds=1)
    refused = f"1/2 locales ready; waiting for r-arkouda-locale-1 (FailedCreate: {QUOTA_REFUSAL})"
    assert lines == [refused]
    assert str(err) == f"timed out after 60s: {refused}"  # the WaitTimeout Event's message
    # a progress line per watch chunk (60 of them), the Events read once per EVENTS_MIN_INTERVAL only
    reads = [c for c in api.calls if c[0] == "list_statefulset_events"]
    assert 1 < len(reads) <= 60 / EVENTS_MIN_INTERVAL + 1


def test_without_a_refusal_or_events_rights_a_missing_locale_is_not_created_yet() -> None:
    clock = FakeClock()
    for api in (
        FakeKube(on_idle_watch=clock.advance),
        FakeKube(
            on_idle_watch=clock.advance,
            fail_with={"list_statefulset_events": ForbiddenError(verb="list", resource="events", namespace="ns")},
        ),
    ):
        lines, _ = timed_out(api, clock, expected=1, timeout=5)
        assert lines == ["0/1 locales ready; waiting for r-arkouda-locale-0 (not created yet)"]


def test_no_locales_needed_for_one_locale() -> None:
    api = FakeKube()
    assert wait_for_locales(api, namespace="ns", selector="s=1", expected=0, timeout=1, report=print) == []
    assert api.calls == []


def test_rbac_error_on_list_is_one_line() -> None:
    api = FakeKube(fail_with={"list_pods": ForbiddenError(verb="list", resource="pods", namespace="ns")})
    with pytest.raises(BootstrapError, match="^missing RBAC: list pods in namespace ns$"):
        wait_for_locales(api, namespace="ns", selector="s=1", expected=1, timeout=1, report=print)


REFUSED = ApiUnavailableError("cannot reach the Kubernetes API to watch pods: [Errno 111] Connection refused")


def test_an_api_outage_longer_than_the_timeout_is_waited_out_and_named_in_the_progress() -> None:
    api = FakeKube()
    api.pods["r-0"] = make_pod("r-0", ready=False)
    api.fail_next["watch_pods"] = [REFUSED for _ in range(10)]  # pauses 1 + 2 + 4 + 8 + 16 + 5 x 30 = 181 s
    api.script(api.event("MODIFIED", make_pod("r-0")))
    clock, lines = FakeClock(), list[str]()
    notice = OutageNotice(doing="the server waits for its locales", report=lines.append)
    pods = wait_for_locales(
        api,
        namespace="ns",
        selector="s=1",
        expected=1,
        timeout=60,
        report=lines.append,
        clock=clock,
        sleep=clock.sleep,
        listener=notice,
    )
    assert [p.name for p in pods] == ["r-0"]
    assert clock.now == 181.0
    assert lines == [
        "0/1 locales ready; waiting for r-0 (Running: not ready)",
        f"the Kubernetes API is unreachable ({REFUSED}); the server waits for its locales until it answers",
        "the Kubernetes API answers again after 181s",
        "1/1 locales ready",
    ]


def test_the_timeout_does_not_count_the_time_the_api_was_unreachable() -> None:
    api = FakeKube()
    api.pods["r-0"] = make_pod("r-0", ready=False)
    api.fail_next["watch_pods"] = [REFUSED for _ in range(10)]
    clock = FakeClock()
    with pytest.raises(WaitTimeoutError) as err:
        wait_for_locales(
            api,
            namespace="ns",
            selector="s=1",
            expected=1,
            timeout=60,
            report=print,
            clock=clock,
            sleep=clock.sleep,
        )
    assert err.value.exit_code == EXIT_TIMEOUT
    assert str(err.value) == (
        "timed out after 60s (not counting 181s while the Kubernetes API was unreachable): "
        "0/1 locales ready; waiting for r-0 (Running: not ready)"
    )
    assert clock.now == 241.0


def test_an_outage_while_events_are_read_hides_them_only_until_the_next_read() -> None:
    clock = FakeClock()
    api = FakeKube(on_idle_watch=clock.advance)  # every watch lasts its full 10 s
    api.pods["r-0"] = make_pod("r-0", ready=False)
    api.pod_events["r-0"] = [EventInfo(type="Warning", reason="FailedMount", message="no volume")]
    api.fail_next["list_pod_events"] = [REFUSED]
    with pytest.raises(WaitTimeoutError) as err:
        wait_for_locales(
            api,
            namespace="ns",
            selector="s=1",
            expected=1,
            timeout=30,
            report=print,
            clock=clock,
            sleep=clock.sleep,
        )
    assert str(err.value) == "timed out after 30s: 0/1 locales ready; waiting for r-0 (Running: FailedMount: no volume)"


def test_extra_pods_beyond_expected_are_ignored() -> None:
    api = FakeKube()
    for n in range(3):
        api.pods[f"r-{n}"] = make_pod(f"r-{n}", ip=f"10.0.0.{n}")
    api.pods["r-5"] = make_pod("r-5", ready=False)  # left over from a larger release
    pods = wait_for_locales(api, namespace="ns", selector="s=1", expected=3, timeout=1, report=lambda _: None)
    assert [p.name for p in pods] == ["r-0", "r-1", "r-2"]


def test_rewatch_after_a_chunk_resumes_from_the_last_resource_version() -> None:
    api = FakeKube(list_rv=100)
    api.pods["r-0"] = make_pod("r-0", ready=False)
    first = api.event("MODIFIED", make_pod("r-0", ready=False, ip="10.0.0.5"))
    api.script(first, END, api.event("MODIFIED", make_pod("r-0", ip="10.0.0.5")))
    pods = wait_for_locales(api, namespace="ns", selector="s=1", expected=1, timeout=60, report=lambda _: None)
    assert [p.pod_ip for p in pods] == ["10.0.0.5"]
    assert [c for c in api.calls if c[0] == "watch_pods"] == [
        ("watch_pods", "100"),
        ("watch_pods", first.resource_version),
    ]


def test_watches_ending_at_once_do_not_busy_loop() -> None:
    clock = FakeClock()
    api = FakeKube()  # empty script, no idle hook: every watch returns immediately without events
    api.pods["r-0"] = make_pod("r-0", ready=False)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(seconds)

    with pytest.raises(WaitTimeoutError):
        wait_for_locales(
            api, namespace="ns", selector="s=1", expected=1, timeout=3, report=lambda _: None, clock=clock, sleep=sleep
        )
    assert slept == [1, 1, 1]
    assert [c[0] for c in api.calls].count("watch_pods") == 3


def test_rollout_in_ordinal_order_looks_events_up_at_most_once_per_interval() -> None:
    """In an OrderedReady rollout the first waiting pod changes on every Ready: the Events lookups for the
    progress line must not grow with the number of locales (the API requests stay constant in N)."""
    clock = FakeClock()
    api = FakeKube()
    n = 50
    for i in range(n):
        api.pods[f"r-{i}"] = make_pod(f"r-{i}", ready=False, phase="Pending", ip=None)
    api.script(*(api.event("MODIFIED", make_pod(f"r-{i}", ip=f"10.0.0.{i + 1}", rv="2")) for i in range(n)))
    lines: list[str] = []
    pods = wait_for_locales(
        api, namespace="ns", selector="s=1", expected=n, timeout=60, report=lines.append, clock=clock, line_interval=0
    )
    assert len(pods) == n
    assert len(lines) == n + 1  # one line per change when lines are not throttled
    assert [c for c in api.calls if c[0] == "list_pod_events"] == [("list_pod_events", "r-0")]


def test_progress_lines_are_throttled_in_a_rollout_but_each_change_shows_when_the_chunk_ends() -> None:
    """At most one line per interval while pods change (a line per event costs a pass over every pod), yet a
    change is never hidden for longer than a watch chunk, and the last line is N/N."""
    clock = FakeClock()  # does not advance: every event arrives within the interval
    api = FakeKube()
    n = 50
    for i in range(n):
        api.pods[f"r-{i}"] = make_pod(f"r-{i}", ready=False, phase="Pending", ip=None)
    stuck = make_pod(
        f"r-{n - 1}",
        ready=False,
        phase="Pending",
        ip=None,
        containers=(ContainerState(name="sshd", state="waiting", reason="ImagePullBackOff"),),
    )
    api.script(
        *(api.event("MODIFIED", make_pod(f"r-{i}", ip=f"10.0.0.{i + 1}", rv="2")) for i in range(n - 1)),
        api.event("MODIFIED", stuck),
        END,
        api.event("MODIFIED", make_pod(f"r-{n - 1}", ip="10.0.1.1", rv="3")),
    )
    lines: list[str] = []
    pods = wait_for_locales(
        api, namespace="ns", selector="s=1", expected=n, timeout=60, report=lines.append, clock=clock
    )
    assert len(pods) == n
    assert lines == [
        "0/50 locales ready; waiting for r-0 (Pending), r-1 (Pending), r-2 (Pending) and 47 more",
        "49/50 locales ready; waiting for r-49 (Pending: sshd: ImagePullBackOff)",
        "50/50 locales ready",
    ]


def test_events_are_looked_up_again_after_the_interval() -> None:
    api = FakeKube()
    for i in range(3):
        api.pods[f"r-{i}"] = make_pod(f"r-{i}", ready=False, phase="Pending", ip=None)
    api.script(*(api.event("MODIFIED", make_pod(f"r-{i}", ip=f"10.0.0.{i + 1}", rv="2")) for i in range(3)))
    now = 0.0

    def slow_clock() -> float:  # every reading is one interval after the previous one
        nonlocal now
        now += EVENTS_MIN_INTERVAL
        return now

    wait_for_locales(
        api, namespace="ns", selector="s=1", expected=3, timeout=600, report=lambda _: None, clock=slow_clock
    )
    assert [c[1] for c in api.calls if c[0] == "list_pod_events"] == ["r-0", "r-1", "r-2"]


def test_on_ready_announces_each_locale_once_as_it_turns_ready_and_again_on_a_new_ip() -> None:
    api = FakeKube()
    api.pods["r-1"] = make_pod("r-1", ip="10.0.0.2")
    api.pods["r-0"] = make_pod("r-0", ip=None, ready=False, phase="Pending")
    api.pods["r-2"] = make_pod("r-2", ip=None, ready=False, phase="Pending")
    announced: list[tuple[str, str | None, int]] = []
    lines: list[str] = []

    def report(line: str) -> None:
        lines.append(line)

    api.script(
        api.event("MODIFIED", make_pod("r-0", ip="10.0.0.1")),
        api.event("MODIFIED", make_pod("r-0", ip="10.0.0.1")),  # same pod, same IP: not again
        api.event("MODIFIED", make_pod("r-1", ip="10.0.0.9")),  # recreated with another IP: again
        api.event("MODIFIED", make_pod("r-2", ip="10.0.0.3")),
    )
    pods = wait_for_locales(
        api,
        namespace="ns",
        selector="s=1",
        expected=3,
        timeout=60,
        report=report,
        on_ready=lambda p: announced.append((p.name, p.pod_ip, len(lines))),
    )
    assert [(name, ip) for name, ip, _ in announced] == [
        ("r-1", "10.0.0.2"),
        ("r-0", "10.0.0.1"),
        ("r-1", "10.0.0.9"),
        ("r-2", "10.0.0.3"),
    ]
    # announced while discovery was still waiting (before the N/N line), not after it
    assert all(n_lines < len(lines) for _, _, n_lines in announced)
    assert lines[-1] == "3/3 locales ready"
    assert [p.pod_ip for p in pods] == ["10.0.0.1", "10.0.0.9", "10.0.0.3"]


def test_a_held_back_locale_counts_only_once_hold_lets_it_go_asked_again_at_each_chunk_end() -> None:
    """A locale the last run lost for not answering: Ready to the control plane, yet not taken until it answers
    (liveness.HeldBack is the real `hold`; this one is a named stand-in that answers on its third question)."""
    api = FakeKube()
    api.pods["r-arkouda-locale-0"] = make_pod("r-arkouda-locale-0", ip="10.0.0.1")
    asked: list[str] = []

    def hold(pod: PodInfo) -> str | None:
        asked.append(pod.name)
        return None if len(asked) >= 3 else "does not answer on the pod network at 10.0.0.1:2222: no answer"

    api.script(END)
    lines: list[str] = []
    pods = wait_for_locales(api, namespace="ns", selector="s=1", expected=1, timeout=60, report=lines.append, hold=hold)
    assert [p.name for p in pods] == ["r-arkouda-locale-0"]
    assert lines == [
        "0/1 locales ready; waiting for r-arkouda-locale-0 (does not answer on the pod network at 10.0.0.1:2222: "
        "no answer)",
        "1/1 locales ready",
    ]
    assert ("watch_pods", "100") in api.calls  # it waited for the chunk's end, no pod changed meanwhile


def test_a_held_locale_that_turned_not_ready_is_named_for_not_answering() -> None:
    """Its traffic dropped: the kubelet's readiness probe fails for the same reason, and the line says the reason
    that can be acted on (the pod network), not "not ready"; a pod the hold does not know keeps its own reason."""
    pods = {
        "r-0": make_pod("r-0", ip="10.0.0.1", ready=False),
        "r-1": make_pod("r-1", ip="10.0.0.2", ready=False),
    }
    why = "does not answer on the pod network at 10.0.0.1:2222: timed out"
    progress, ready = evaluate(pods, expected=2, hold=lambda p: why if p.name == "r-0" else None)
    assert progress.line == f"0/2 locales ready; waiting for r-0 ({why}), r-1 (Running: not ready)"
    assert ready == []
