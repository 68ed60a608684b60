"""Supervision with real child processes: exit codes, signal forwarding, termination on a lost locale
(the locale events come from FakeKube, the test double of the kube seam)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.kube.api import (
    ApiUnavailableError,
    ContainerState,
    ForbiddenError,
    GoneError,
    PodCondition,
    PodInfo,
)
from arkouda_bootstrap.kube.ownership import OwnedBy
from arkouda_bootstrap.server.liveness import Liveness, ProbePolicy, Target, tcp_connect
from arkouda_bootstrap.server.supervise import (
    Action,
    LocaleMonitor,
    Outcome,
    Verdict,
    exit_status,
    judge,
    run_supervised,
)
from fakes import FakeClock, FakeKube, FakeNetwork, make_pod

PY = sys.executable
REPO = Path(__file__).resolve().parents[2]


def monitored(*locales: PodInfo, chunk_seconds: int = 1) -> tuple[FakeKube, LocaleMonitor]:
    """A blocking FakeKube that holds `locales`, and a LocaleMonitor tracking them."""
    api = FakeKube(block=True)
    for pod in locales:
        api.pods[pod.name] = pod
    monitor = LocaleMonitor(api, namespace="ns", selector="s=1", locales=locales, chunk_seconds=chunk_seconds)
    return api, monitor


def wait_until(condition: Callable[[], object], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)


def child_script(tmp_path: Path, body: str) -> list[str]:
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(body))
    return [PY, str(script)]


def test_exit_code_propagates() -> None:
    assert run_supervised([PY, "-c", "raise SystemExit(7)"], env=os.environ).exit_code == 7
    assert run_supervised([PY, "-c", "pass"], env=os.environ).exit_code == 0
    killed = run_supervised([PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"], env=os.environ)
    assert killed.exit_code == 128 + signal.SIGKILL
    assert exit_status(-15) == 143


def test_missing_command_is_one_line() -> None:

    with pytest.raises(BootstrapError, match="cannot start /nonexistent/prog"):
        run_supervised(["/nonexistent/prog"], env=os.environ)


HARNESS = """
import os, sys
from arkouda_bootstrap.server.supervise import run_supervised
sys.exit(run_supervised(sys.argv[1:], env=os.environ).exit_code)
"""

TRAPPING_CHILD = """
import signal, sys, time, pathlib
marker = pathlib.Path(sys.argv[1])
def handler(signum, frame):
    marker.write_text(signal.Signals(signum).name)
    sys.exit(40 + signum)
signal.signal(signal.SIGTERM, handler)
signal.signal(signal.SIGINT, handler)
marker.write_text("ready")
time.sleep(60)
sys.exit(1)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_are_forwarded_and_child_code_returned(tmp_path: Path, sig: signal.Signals) -> None:
    marker = tmp_path / "marker"
    child = child_script(tmp_path, TRAPPING_CHILD)
    env = dict(os.environ, PYTHONPATH=str(REPO / "bootstrap" / "src"))
    # the harness gets its own process group so only it receives our signal (as under tini in a pod)
    harness = subprocess.Popen([PY, "-c", HARNESS, *child, str(marker)], env=env, start_new_session=True)
    try:
        wait_until(lambda: marker.exists() and marker.read_text() == "ready")
        assert marker.read_text() == "ready"
        harness.send_signal(sig)
        assert harness.wait(timeout=30) == 40 + sig
        assert marker.read_text() == sig.name
    finally:
        if harness.poll() is None:
            harness.kill()


# -- the decision table (server.supervise), one test per row ---------------------------------------------------

TRACKED = make_pod(
    "r-1",
    ip="10.0.0.2",
    uid="u1",
    node_name="node-2",
    containers=(
        ContainerState(name="init", state="terminated", reason="Completed", exit_code=0),
        ContainerState(name="sshd", state="running", ready=True, restart_count=0),
    ),
)
NODE_CONTROLLER_NOT_READY = (
    PodCondition(type="Ready", status="False", reason="NodeNotReady"),
    PodCondition(type="ContainersReady", status="True"),
)


def answering(result: bool) -> Callable[[], bool]:
    """A probe double that says whether the locale answered, and fails the test if it was not asked for."""
    return lambda: result


def never_asked() -> bool:
    raise AssertionError("the locale was probed although the pod is Ready or already lost")


def test_row_1_the_program_exiting_by_itself_is_its_own_outcome() -> None:
    _, monitor = monitored(TRACKED)
    outcome = run_supervised([PY, "-c", "raise SystemExit(3)"], env=os.environ, monitor=monitor, settle_seconds=0.3)
    assert outcome == Outcome(exit_code=3)  # no locale named within the settle window: the program's own exit


def test_row_2_a_deleted_or_vanished_pod_stops_the_program() -> None:
    assert judge(TRACKED, "DELETED", TRACKED, answers=never_asked) == Verdict(Action.STOP, "locale pod r-1 was deleted")
    assert judge(TRACKED, "LISTED", None, answers=never_asked).why == "locale pod r-1 was deleted"


def test_row_3_a_replaced_pod_stops_the_program() -> None:
    replaced = replace(TRACKED, uid="u2")
    assert judge(TRACKED, "ADDED", replaced, answers=never_asked) == Verdict(
        Action.STOP, "locale pod r-1 was replaced (uid u1 -> u2)"
    )


def test_row_4_a_terminating_pod_stops_the_program() -> None:
    assert judge(TRACKED, "MODIFIED", replace(TRACKED, deleting=True), answers=never_asked) == Verdict(
        Action.STOP, "locale pod r-1 is terminating"
    )


def test_row_5_a_new_ip_stops_the_program() -> None:
    assert judge(TRACKED, "MODIFIED", replace(TRACKED, pod_ip="10.0.0.7"), answers=never_asked) == Verdict(
        Action.STOP, "locale pod r-1 changed IP 10.0.0.2 -> 10.0.0.7"
    )


def test_row_6_a_restarted_or_terminated_container_stops_the_program() -> None:
    init, sshd = TRACKED.containers
    restarted = replace(TRACKED, containers=(init, replace(sshd, restart_count=1)))
    assert judge(TRACKED, "MODIFIED", restarted, answers=never_asked) == Verdict(
        Action.STOP, "locale pod r-1: its container sshd restarted (restart count 0 -> 1)"
    )
    ended = replace(
        TRACKED, containers=(init, ContainerState(name="sshd", state="terminated", reason="Error", exit_code=137))
    )
    assert judge(TRACKED, "MODIFIED", ended, answers=never_asked) == Verdict(
        Action.STOP, "locale pod r-1: its container sshd terminated (Error 137)"
    )
    # the init container was terminated at the launch already: that is no evidence
    assert judge(TRACKED, "MODIFIED", TRACKED, answers=never_asked) == Verdict(Action.NONE)


def test_row_7_not_ready_while_the_locale_answers_is_recorded_and_the_program_runs_on() -> None:
    not_ready = replace(TRACKED, conditions=NODE_CONTROLLER_NOT_READY)
    assert judge(TRACKED, "MODIFIED", not_ready, answers=answering(True)) == Verdict(
        Action.RECORD,
        "locale pod r-1 on node node-2 turned NotReady (Running: NodeNotReady) but answers on the pod network: "
        "the program keeps running",
    )


def test_row_8_not_ready_without_an_answer_waits_for_the_probes_bound() -> None:
    not_ready = replace(TRACKED, conditions=NODE_CONTROLLER_NOT_READY)
    assert judge(TRACKED, "MODIFIED", not_ready, answers=answering(False)) == Verdict(
        Action.WAIT,
        "locale pod r-1 on node node-2 turned NotReady (Running: NodeNotReady) and does not answer on the pod network",
    )


def liveness_of(*pods: PodInfo, network: FakeNetwork, **kwargs: Any) -> Liveness:
    targets = {p.name: Target(pod=p.name, address=p.pod_ip or "", port=2222) for p in pods}
    return Liveness(targets, connect=network.connect, **kwargs)


def test_row_9_a_locale_that_misses_every_probe_for_the_bound_is_lost_whatever_ready_says() -> None:
    clock, network = FakeClock(), FakeNetwork()
    liveness = liveness_of(TRACKED, network=network, clock=clock)
    network.down.add("10.0.0.2")
    assert liveness.probe_all() == []
    for _ in range(3):
        clock.advance(5)
        assert liveness.probe_all() == []  # 15 s of misses: within the bound
    clock.advance(5)
    assert liveness.probe_all() == [
        "locale r-1 does not answer on the pod network: 5 connects to its sshd at 10.0.0.2:2222 missed over 20s "
        "(last: no answer within 3s)"
    ]


class SlowNetwork(FakeNetwork):
    """Test double: a connect to a down address takes the whole timeout on the fake clock, as a real one does."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock

    def connect(self, address: str, port: int, timeout: float) -> str | None:
        if address in self.down:
            self.clock.advance(timeout)
        return super().connect(address, port, timeout)


class Rounds(threading.Event):
    """Test double of the stop Event: its wait moves the fake clock instead of sleeping, and keeps the waits."""

    def __init__(self, clock: FakeClock, *, last: int) -> None:
        super().__init__()
        self.clock, self.last = clock, last
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None
        self.waits.append(timeout)
        self.clock.advance(timeout)
        return len(self.waits) > self.last


def test_row_9_rounds_start_an_interval_apart_however_long_the_misses_take() -> None:
    clock = FakeClock()
    network = SlowNetwork(clock)
    liveness = liveness_of(TRACKED, network=network, clock=clock)
    network.down.add("10.0.0.2")
    stop = Rounds(clock, last=5)
    lost = list(liveness.rounds(stop))
    assert stop.waits == [5.0, 2.0, 2.0, 2.0, 2.0, 2.0]  # each round's 3 s timeout is part of its interval
    assert lost[:4] == [[], [], [], []]
    # the 5th round starts 20 s after the 1st: lost at its end, not after 5 x (5 + 3) s
    assert lost[4] == [
        "locale r-1 does not answer on the pod network: 5 connects to its sshd at 10.0.0.2:2222 missed over 23s "
        "(last: no answer within 3s)"
    ]


def test_row_9_a_drop_shorter_than_the_bound_is_forgotten_once_the_locale_answers() -> None:
    clock, network = FakeClock(), FakeNetwork()
    liveness = liveness_of(TRACKED, network=network, clock=clock)
    network.refused.add("10.0.0.2")  # refused counts as a miss as well (sshd gone)
    for _ in range(4):  # 0, 5, 10, 15 s
        assert liveness.probe_all() == []
        clock.advance(5)
    network.refused.clear()
    assert liveness.probe_all() == []  # answered at 20 s: the streak is over
    network.refused.add("10.0.0.2")
    for _ in range(4):
        clock.advance(5)
        assert liveness.probe_all() == []  # a new streak, measured from its own first miss
    clock.advance(5)
    assert liveness.probe_all()[0].endswith(
        "5 connects to its sshd at 10.0.0.2:2222 missed over 20s (last: Connection refused)"
    )


def lose(liveness: Liveness, clock: FakeClock) -> None:
    """Probe until the bound is over (every target down or not)."""
    for _ in range(5):
        liveness.probe_all()
        clock.advance(5)


def test_a_relaunch_holds_back_the_lost_locale_until_it_answers_again() -> None:
    """The traffic drop: the pod stays (its node is Ready), so only an answer ends the hold."""
    clock, network = FakeClock(), FakeNetwork()
    other = make_pod("r-2", ip="10.0.0.3", uid="u-2")
    liveness = liveness_of(TRACKED, other, network=network, clock=clock)
    network.down.add("10.0.0.2")
    lose(liveness, clock)
    held = liveness.held_back({"r-1": TRACKED.uid, "r-2": "u-2"})
    assert held.pods == ["r-1"]  # only the lost one
    assert held.reason(other) is None
    assert held.reason(TRACKED) == "does not answer on the pod network at 10.0.0.2:2222: no answer within 3s"
    connects = network.connects
    assert held.reason(TRACKED) is not None and network.connects == connects  # asked at most once per interval
    network.down.clear()
    assert held.reason(TRACKED) is not None  # not asked again yet
    clock.advance(5)
    assert held.reason(TRACKED) is None and held.pods == []  # it answers: it counts again, for good
    network.down.add("10.0.0.2")
    assert held.reason(TRACKED) is None


def test_a_relaunch_takes_the_replacement_of_a_lost_locale_at_once() -> None:
    """The node loss: the old pod is held (the control plane may still call it Ready); the new one is not."""
    clock, network = FakeClock(), FakeNetwork()
    liveness = liveness_of(TRACKED, network=network, clock=clock)
    network.down.add("10.0.0.2")
    lose(liveness, clock)
    held = liveness.held_back({"r-1": TRACKED.uid})
    assert held.reason(TRACKED) is not None
    connects = network.connects
    assert held.reason(replace(TRACKED, uid="new-uid", pod_ip="10.0.0.9")) is None
    assert network.connects == connects  # a new pod is not probed here: the launch's own ssh probe does that
    assert held.pods == []


def test_retargeting_forgets_the_streak_of_a_pod_gone_or_moved() -> None:
    clock, network = FakeClock(), FakeNetwork()
    other = make_pod("r-2", ip="10.0.0.3", uid="u-2")
    liveness = liveness_of(TRACKED, other, network=network, clock=clock, kind="pod")
    network.down.update({"10.0.0.2", "10.0.0.3"})
    lose(liveness, clock)
    assert (liveness.lost("r-1") or "").startswith("pod r-1 does not answer")
    kept = Target(pod="r-2", address="10.0.0.3", port=2222)
    liveness.retarget({"r-1": Target(pod="r-1", address="10.0.0.7", port=2222), "r-2": kept})
    assert liveness.lost("r-1") is None  # a new pod under the name: no misses yet
    assert liveness.lost("r-2") is not None  # unchanged: its streak goes on
    liveness.retarget({"r-1": Target(pod="r-1", address="10.0.0.7", port=2222)})
    assert liveness.pods == ["r-1"]
    liveness.retarget({"r-1": Target(pod="r-1", address="10.0.0.7", port=2222), "r-2": kept})
    assert liveness.lost("r-2") is None  # gone and back: a fresh start


def test_the_monitor_records_not_ready_once_per_spell_and_stops_only_on_the_probes_bound() -> None:
    """Rows 7 and 9 together, with real threads: the node controller's NotReady while the locale answers is one
    Event and no stop; the locale then stops answering and the probe thread stops the program."""
    network = FakeNetwork()
    liveness = liveness_of(TRACKED, network=network, policy=ProbePolicy(interval=0.05, timeout=0.01, lost_after=0.3))
    api = FakeKube(block=True)
    api.pods["r-1"] = TRACKED
    notes: list[str] = []
    monitor = LocaleMonitor(
        api,
        namespace="ns",
        selector="s=1",
        locales=[TRACKED],
        chunk_seconds=1,
        liveness=liveness,
        on_note=notes.append,
    )
    lost: list[str] = []
    monitor.start(lost.append)
    try:
        not_ready = replace(TRACKED, conditions=NODE_CONTROLLER_NOT_READY)
        api.script(api.event("MODIFIED", not_ready), api.event("MODIFIED", not_ready))
        wait_until(lambda: api.watch_script.qsize() == 0 and notes, 5)
        time.sleep(0.5)  # longer than the bound: the locale answers, so nothing stops
        assert lost == []
        assert notes == [
            "locale pod r-1 on node node-2 turned NotReady (Running: NodeNotReady) but answers on the pod network: "
            "the program keeps running"
        ]
        network.down.add("10.0.0.2")
        wait_until(lambda: lost, 5)
    finally:
        monitor.stop()
    assert len(lost) == 1 and lost[0].startswith("locale r-1 does not answer on the pod network: ")


def test_row_10_an_unreachable_api_is_waited_out_and_the_program_runs_on() -> None:
    """An unreachable API is not a lost locale: the monitor retries and still catches the real loss later."""
    tracked = make_pod("r-0", ip="10.0.0.1")
    api, monitor = monitored(tracked)
    api.fail_with["list_pods"] = ApiUnavailableError("cannot reach the Kubernetes API")
    lost: list[str] = []
    monitor.start(lost.append)
    try:
        wait_until(lambda: [c[0] for c in api.calls].count("list_pods") >= 2, 10)
        assert lost == []
        del api.fail_with["list_pods"]
        api.script(api.event("DELETED", tracked))
        wait_until(lambda: lost, 10)
    finally:
        monitor.stop()
    assert lost == ["locale pod r-0 was deleted"]


IGNORING_CHILD = """
import signal, sys, time, pathlib
signal.signal(signal.SIGTERM, signal.SIG_IGN)
pathlib.Path(sys.argv[1]).write_text("ready")
time.sleep(60)
"""


def test_lost_locale_terminates_child_with_grace_then_sigkill(tmp_path: Path) -> None:
    locales = [make_pod("r-0", ip="10.0.0.1"), make_pod("r-1", ip="10.0.0.2")]
    api, monitor = monitored(*locales)
    marker = tmp_path / "marker"
    reported: list[str] = []

    def started(pid: int) -> None:
        wait_until(marker.exists)
        api.script(api.event("DELETED", locales[1]))

    outcome = run_supervised(
        [*child_script(tmp_path, IGNORING_CHILD), str(marker)],
        env=os.environ,
        monitor=monitor,
        grace_seconds=0.5,
        on_started=started,
        on_lost=reported.append,
    )
    assert outcome.lost_reason == "locale pod r-1 was deleted"
    assert reported == ["locale pod r-1 was deleted"]
    assert outcome.exit_code == 128 + signal.SIGKILL  # it ignored SIGTERM, so the grace period ended in SIGKILL


def test_lost_locale_graceful_child_gets_sigterm(tmp_path: Path) -> None:
    api, monitor = monitored(make_pod("r-0", ip="10.0.0.1"))
    marker = tmp_path / "marker"

    def started(pid: int) -> None:
        wait_until(lambda: marker.exists() and marker.read_text() == "ready")
        api.script(api.event("MODIFIED", make_pod("r-0", ip="10.0.0.99")))

    outcome = run_supervised(
        [*child_script(tmp_path, TRAPPING_CHILD), str(marker)],
        env=os.environ,
        monitor=monitor,
        grace_seconds=20,
        on_started=started,
    )
    assert outcome.lost_reason == "locale pod r-0 changed IP 10.0.0.1 -> 10.0.0.99"
    assert outcome.exit_code == 40 + signal.SIGTERM
    assert marker.read_text() == "SIGTERM"


def test_monitor_relists_after_410_and_sees_what_changed() -> None:
    api, monitor = monitored(make_pod("r-0", ip="10.0.0.1"))
    lost: list[str] = []
    monitor.start(lost.append)
    try:
        del api.pods["r-0"]  # deleted while the watch was "expired"
        api.script(GoneError("too old"))
        wait_until(lambda: lost, 10)
    finally:
        monitor.stop()
    assert lost == ["locale pod r-0 was deleted"]
    assert [c[0] for c in api.calls].count("list_pods") == 2


def test_monitor_ignores_healthy_and_untracked_changes() -> None:
    tracked = make_pod("r-0", ip="10.0.0.1")
    api, monitor = monitored(tracked)
    lost: list[str] = []
    monitor.start(lost.append)
    try:
        api.script(api.event("MODIFIED", tracked), api.event("DELETED", make_pod("r-7")))
        wait_until(lambda: not api.watch_script.qsize(), 3)
        time.sleep(0.2)
    finally:
        monitor.stop()
    assert api.watch_script.qsize() == 0
    assert lost == []


def test_monitor_counts_a_pod_that_takes_a_tracked_name_without_its_statefulset_as_gone() -> None:
    # After locale r-0 was deleted and replaced by a pod of the same name that the StatefulSet does not own, the
    # locale is gone: the impostor is never mistaken for the tracked pod coming back.
    tracked = make_pod("r-0", ip="10.0.0.1")
    api = FakeKube(block=True)
    api.pods["r-0"] = tracked
    named: list[str] = []
    owned = OwnedBy(api, namespace="ns", statefulsets=["r"], on_impostor=lambda pod, msg: named.append(pod.name))
    monitor = LocaleMonitor(api, namespace="ns", selector="s=1", locales=[tracked], chunk_seconds=1, owned=owned)
    lost: list[str] = []
    monitor.start(lost.append)
    try:
        api.script(api.event("MODIFIED", make_pod("r-0", ip="10.0.0.1", uid=tracked.uid, controller=None)))
        wait_until(lambda: lost, 10)
    finally:
        monitor.stop()
    assert lost == ["locale pod r-0 was deleted"]
    assert named == ["r-0"]


def test_sigterm_during_startup_is_delivered_to_the_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGTERM that arrives while the child is being started is kept and forwarded once it exists."""

    real_popen = subprocess.Popen
    marker = tmp_path / "marker"

    def popen_after_sigterm(*args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signal.SIGTERM)  # handled (queued) by the bootstrap's handler, not fatal
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen_after_sigterm)
    # the child traps SIGTERM once its handler is installed; until then the default action ends it: both prove
    # the signal reached the child instead of killing the supervisor
    outcome = run_supervised([*child_script(tmp_path, TRAPPING_CHILD), str(marker)], env=os.environ)
    assert outcome.exit_code in (40 + signal.SIGTERM, 128 + signal.SIGTERM)


def test_an_error_no_retry_fixes_ends_the_monitoring_not_the_program(caplog: pytest.LogCaptureFixture) -> None:
    api, monitor = monitored(make_pod("r-0", ip="10.0.0.1"))
    lost: list[str] = []
    monitor.start(lost.append)
    api.script(ForbiddenError(verb="watch", resource="pods", namespace="ns"))
    wait_until(lambda: "locale monitor stopped" in caplog.text, 10)
    monitor.stop()
    assert lost == []
    assert "locale monitor stopped: missing RBAC: watch pods in namespace ns" in caplog.text


def test_a_launcher_that_exits_before_the_watch_sees_the_loss_still_counts_as_a_lost_locale(tmp_path: Path) -> None:
    """amudprun ends the job by itself when a locale's ssh session drops, often before the pod's deletion reaches
    the watch: the failed exit must still come out as a lost locale (relaunch in place), not a program failure."""
    locales = [make_pod("r-0", ip="10.0.0.1"), make_pod("r-1", ip="10.0.0.2")]
    api, monitor = monitored(*locales, chunk_seconds=5)
    marker = tmp_path / "exited"
    reported: list[str] = []

    def started(pid: int) -> None:
        def later() -> None:
            wait_until(marker.exists)
            time.sleep(0.3)  # the deletion arrives after the launcher is gone
            api.script(api.event("DELETED", locales[1]))

        threading.Thread(target=later, daemon=True).start()

    exits_255 = f"import pathlib, sys; pathlib.Path({str(marker)!r}).write_text('x'); sys.exit(255)"
    outcome = run_supervised(
        [PY, "-c", exits_255],
        env=os.environ,
        monitor=monitor,
        settle_seconds=10,
        on_started=started,
        on_lost=reported.append,
    )
    assert (outcome.exit_code, outcome.lost_reason) == (255, "locale pod r-1 was deleted")
    assert reported == ["locale pod r-1 was deleted"]


def test_a_failed_exit_without_a_lost_locale_is_the_programs_own_after_the_settle_window() -> None:
    _, monitor = monitored(make_pod("r-0", ip="10.0.0.1"))
    t0 = time.monotonic()
    outcome = run_supervised([PY, "-c", "raise SystemExit(3)"], env=os.environ, monitor=monitor, settle_seconds=0.5)
    assert (outcome.exit_code, outcome.lost_reason) == (3, None)
    assert time.monotonic() - t0 < 5
    # a clean exit does not wait at all
    t0 = time.monotonic()
    assert run_supervised([PY, "-c", "pass"], env=os.environ, monitor=monitor, settle_seconds=30).exit_code == 0
    assert time.monotonic() - t0 < 5


# -- the probe itself (server.liveness.tcp_connect) against real local sockets ---------------------------------


def listener(greeting: bytes | None) -> tuple[socket.socket, threading.Thread, list[bytes]]:
    """A TCP listener on loopback that greets each connection with `greeting` (None: says nothing) and keeps what
    the prober sent back."""
    server = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = server.accept()
            with conn:
                if greeting is not None:
                    conn.sendall(greeting)
                conn.settimeout(1)
                with contextlib.suppress(OSError):
                    received.append(conn.recv(64))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return server, thread, received


def test_the_probe_counts_only_sshds_greeting_as_an_answer() -> None:
    server, thread, received = listener(b"SSH-2.0-OpenSSH_9.2p1\r\n")
    with server:
        assert tcp_connect("127.0.0.1", server.getsockname()[1], 2) is None
        thread.join(3)
    assert received == [b"SSH-2.0-arkouda-liveness\r\n"]
    server, thread, _ = listener(None)
    with server:
        assert tcp_connect("127.0.0.1", server.getsockname()[1], 0.3) == "no answer within 0.3s"
    server, thread, _ = listener(b"HTTP/1.1 400\r\n")
    with server:
        assert tcp_connect("127.0.0.1", server.getsockname()[1], 2) == "no ssh greeting (got b'HTTP/1.1 400\\r\\n')"
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    assert tcp_connect("127.0.0.1", port, 2) == "Connection refused"


def test_an_output_tap_that_raises_never_stops_the_copy(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A tap that fails at every line (e.g. it cannot start a thread under the pod's pids limit): every line is
    still copied, so the pipe never fills and the program is never blocked on a write. The failure is logged
    once. The program gives itself 20 s (SIGALRM) to write far more than a pipe holds."""
    argv = child_script(
        tmp_path,
        """
        import signal, sys
        signal.alarm(20)
        for i in range(5000):
            print(f"line {i:05d} " + "x" * 90)
        print("stderr too", file=sys.stderr)
        """,
    )
    seen: list[str] = []

    def tap(line: str) -> None:
        seen.append(line)
        raise RuntimeError("can't start new thread")

    outcome = run_supervised(argv, env=os.environ, output=tap)
    assert outcome.exit_code == 0  # not 142: never blocked until the alarm
    copied = capfd.readouterr().out.splitlines()
    assert copied == [f"line {i:05d} " + "x" * 90 for i in range(5000)] + ["stderr too"]
    assert seen == copied
    failures = [r for r in caplog.records if "output tap failed" in r.getMessage()]
    assert len(failures) == 1
    assert failures[0].exc_info is not None
