"""Supervision with real child processes: exit codes, signal forwarding, termination on a lost locale
(the locale events come from FakeKube, the test double of the kube seam)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.kube.api import ApiUnavailableError, ForbiddenError, GoneError, PodCondition, PodInfo
from arkouda_bootstrap.kube.ownership import OwnedBy
from arkouda_bootstrap.server.supervise import LocaleMonitor, exit_status, lost_reason, run_supervised
from fakes import FakeKube, make_pod

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


def test_lost_reasons() -> None:
    tracked = make_pod("r-1", ip="10.0.0.2", uid="u1")
    assert lost_reason(tracked, "MODIFIED", make_pod("r-1", ip="10.0.0.2", uid="u1")) is None
    assert lost_reason(tracked, "DELETED", tracked) == "locale pod r-1 was deleted"
    assert lost_reason(tracked, "LISTED", None) == "locale pod r-1 was deleted"
    assert lost_reason(tracked, "MODIFIED", make_pod("r-1", ip="10.0.0.7", uid="u1")) == (
        "locale pod r-1 changed IP 10.0.0.2 -> 10.0.0.7"
    )
    assert lost_reason(tracked, "ADDED", make_pod("r-1", ip="10.0.0.2", uid="u2")) == (
        "locale pod r-1 was replaced (uid u1 -> u2)"
    )
    not_ready = make_pod(
        "r-1",
        ip="10.0.0.2",
        uid="u1",
        conditions=(PodCondition(type="Ready", status="False", reason="ContainersNotReady"),),
    )
    assert lost_reason(tracked, "MODIFIED", not_ready) == "locale pod r-1 turned NotReady (Running: ContainersNotReady)"
    assert lost_reason(tracked, "MODIFIED", make_pod("r-1", ip="10.0.0.2", uid="u1", deleting=True)) == (
        "locale pod r-1 is terminating"
    )


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
        api.pods["r-0"] = make_pod("r-0", ip="10.0.0.1", ready=False)  # changed while the watch was "expired"
        api.script(GoneError("too old"))
        wait_until(lambda: lost, 10)
    finally:
        monitor.stop()
    assert lost == ["locale pod r-0 turned NotReady (Running: not ready)"]
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


def test_monitor_survives_api_errors_without_killing_the_program() -> None:
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
