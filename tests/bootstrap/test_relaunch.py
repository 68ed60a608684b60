"""server.run_server's relaunch policy after lost locales, with prepare and launch replaced by named test
doubles (the real path, with real ssh and a real child process, is test_server_flow's relaunch test)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from arkouda_bootstrap.config import RELAUNCH_RESET_SECONDS, Launcher, ServerSettings
from arkouda_bootstrap.errors import EXIT_LOCALE_LOST, BootstrapError
from arkouda_bootstrap.kube.events import EventRecorder, Reason
from arkouda_bootstrap.netdrops import Counters
from arkouda_bootstrap.server import launch
from arkouda_bootstrap.server import main as server
from arkouda_bootstrap.server.netcheck import SPLASH, LaunchCheck
from arkouda_bootstrap.server.supervise import Outcome
from arkouda_bootstrap.ssh import client as ssh
from arkouda_bootstrap.ssh.identity import Identity
from fakes import FakeKube


class Clock:
    """Test double of time.monotonic; each launch advances it by the scripted run time."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def settings(tmp_path: Path, *, max_relaunches: int) -> ServerSettings:
    return ServerSettings(
        namespace="ns",
        num_locales=2,
        selector="app=x",
        pod_name="r-arkouda-server-0",
        pod_ip="10.0.0.1",
        port=2222,
        secret_dir=tmp_path / "secret",
        state_dir=tmp_path / "state",
        timeout=60,
        launcher=Launcher.NONE,
        command=("/bin/true",),
        max_relaunches=max_relaunches,
    )


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[list[Outcome], list[float], Clock]:
    """Replace prepare_server and the supervised launch: each launch pops the next (outcome, run time)."""
    outcomes: list[Outcome] = []
    run_times: list[float] = []
    clock = Clock()
    plan = launch.LaunchPlan(argv=["/bin/true"], env={}, files={})
    prepared = server.Prepared(
        hosts=[ssh.Host(address="10.0.0.1", pod="r-arkouda-server-0")],
        locales=[],
        plan=plan,
        client=ssh.ClientFiles(config=tmp_path / "c", wrapper=tmp_path / "w", control_dir=None),
        identity=Identity(user="u", uid=1000, gid=1000, home=str(tmp_path), env={}),
    )

    def fake_prepare(*_args: object, **_kwargs: object) -> server.Prepared:
        return prepared

    def fake_launch(*_args: object, **_kwargs: object) -> Outcome:
        clock.now += run_times.pop(0)
        return outcomes.pop(0)

    monkeypatch.setattr(server, "prepare_server", fake_prepare)
    monkeypatch.setattr(server, "_launch_supervised", fake_launch)
    return outcomes, run_times, clock


def test_relaunches_after_each_loss_and_returns_the_final_status(
    scripted: tuple[list[Outcome], list[float], Clock], tmp_path: Path
) -> None:
    outcomes, run_times, clock = scripted
    outcomes += [Outcome(143, "locale pod a was deleted"), Outcome(143, "locale pod b was deleted"), Outcome(7)]
    run_times += [5, 5, 5]
    api = FakeKube()
    lines: list[str] = []
    code = server.run_server(api, settings(tmp_path, max_relaunches=2), report=lines.append, clock=clock)
    assert code == 7
    assert [e.reason for e in api.created_events] == ["Relaunching", "Relaunching"]
    assert "(relaunch 2/2 in a row)" in lines[-1]
    assert not outcomes


def test_too_many_losses_in_a_row_exit_for_kubernetes(
    scripted: tuple[list[Outcome], list[float], Clock], tmp_path: Path
) -> None:
    outcomes, run_times, clock = scripted
    outcomes += [Outcome(143, "locale pod a was deleted")] * 3
    run_times += [5, 5, 5]
    with pytest.raises(BootstrapError) as info:
        server.run_server(FakeKube(), settings(tmp_path, max_relaunches=2), report=lambda _: None, clock=clock)
    assert info.value.exit_code == EXIT_LOCALE_LOST
    assert "2 relaunches in a row already (--max-relaunches, server.maxRelaunches)" in str(info.value)


def test_a_long_run_starts_a_fresh_count(scripted: tuple[list[Outcome], list[float], Clock], tmp_path: Path) -> None:
    outcomes, run_times, clock = scripted
    outcomes += [Outcome(143, "lost")] * 3 + [Outcome(0)]
    run_times += [5, RELAUNCH_RESET_SECONDS, 5, 5]
    lines: list[str] = []
    assert server.run_server(FakeKube(), settings(tmp_path, max_relaunches=2), report=lines.append, clock=clock) == 0
    assert [line[line.rindex("(") :] for line in lines] == [
        "(relaunch 1/2 in a row)",
        "(relaunch 1/2 in a row)",
        "(relaunch 2/2 in a row)",
    ]


def test_a_loss_while_we_are_being_stopped_is_not_relaunched(
    scripted: tuple[list[Outcome], list[float], Clock], tmp_path: Path
) -> None:
    outcomes, run_times, clock = scripted
    outcomes += [Outcome(143, "locale pod a is terminating", signalled=True)]
    run_times += [5]
    api = FakeKube()
    with pytest.raises(BootstrapError, match="not relaunching: we are being stopped") as info:
        server.run_server(api, settings(tmp_path, max_relaunches=5), report=lambda _: None, clock=clock)
    assert info.value.exit_code == EXIT_LOCALE_LOST
    assert [e.reason for e in api.created_events] == []


# ----------------------------------------------------------------------------------------------------------
# the launch's network check ends before run_server returns or relaunches

HOST = ssh.Host(address="10.0.0.1", pod="r-arkouda-server-0")
DROPPED = Counters(sndbuf_errors=4)


class Launches:
    """prepare_server and the supervised launch replaced: each prepare builds a fresh LaunchCheck that emits
    through run_server's recorder (as the real one does) and reads with `read`; each launch runs the next
    scripted program against that check and returns its outcome."""

    def __init__(self, tmp_path: Path, read: Callable[[ssh.Host], Counters]) -> None:
        self.tmp_path = tmp_path
        self.read = read
        self.checks: list[LaunchCheck] = []
        self.programs: list[Callable[[LaunchCheck], Outcome]] = []

    def prepare(self, *_args: object, recorder: EventRecorder, **_kwargs: object) -> server.Prepared:
        check = LaunchCheck(
            read=self.read,
            emit=lambda line: recorder.emit(Reason.DATAGRAMS_DROPPED, line),
            totals=self.tmp_path / "launch" / "network.json",
            timeout=30,
        )
        check.baseline(HOST, Counters())
        check.launching([HOST])
        self.checks.append(check)
        return server.Prepared(
            hosts=[HOST],
            locales=[],
            plan=launch.LaunchPlan(argv=["/bin/true"], env={}, files={}),
            client=ssh.ClientFiles(config=self.tmp_path / "c", wrapper=self.tmp_path / "w", control_dir=None),
            identity=Identity(user="u", uid=1000, gid=1000, home=str(self.tmp_path), env={}),
            check=check,
        )

    def launch(self, prepared: server.Prepared) -> Outcome:
        assert prepared.check is not None
        return self.programs.pop(0)(prepared.check)


def scripted_launches(monkeypatch: pytest.MonkeyPatch, launches: Launches) -> None:
    monkeypatch.setattr(server, "prepare_server", launches.prepare)
    monkeypatch.setattr(server, "_launch_supervised", lambda _api, prepared, *_a, **_k: launches.launch(prepared))


def test_a_program_that_exits_right_after_its_splash_line_still_gets_its_check(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The check started at the splash line is still reading when the program exits: run_server waits for it, so
    its Event and file are out before the server exits (which would end a thread still running)."""

    def read(_: ssh.Host) -> Counters:
        time.sleep(0.5)
        return DROPPED

    launches = Launches(tmp_path, read)
    scripted_launches(monkeypatch, launches)

    def program(check: LaunchCheck) -> Outcome:
        check.output(f"*  {SPLASH} tcp://r-arkouda-server-0:5555  *")
        return Outcome(0)

    launches.programs.append(program)
    api = FakeKube()
    assert server.run_server(api, settings(tmp_path, max_relaunches=2), report=lambda _: None) == 0
    assert [e.reason for e in api.created_events] == ["DatagramsDropped"]
    assert api.created_events[0].message.startswith("launch network check: 4 datagrams dropped on 1 of 1 hosts (")
    assert (tmp_path / "launch" / "network.json").exists()


def test_a_lost_locale_cancels_the_check_before_the_relaunch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The lost launch's check, still reading (its pods are being replaced), reports nothing: no Event after
    `Relaunching`, no file for the next launch's check to be confused with; and the relaunch does not wait for
    its reads."""
    gate = threading.Event()

    def read(_: ssh.Host) -> Counters:
        gate.wait(30)
        return DROPPED

    launches = Launches(tmp_path, read)
    scripted_launches(monkeypatch, launches)

    def lost_after_the_splash(check: LaunchCheck) -> Outcome:
        check.output(SPLASH)
        return Outcome(143, "locale pod r-arkouda-locale-0 was deleted")

    def clean_run(_: LaunchCheck) -> Outcome:
        gate.set()  # the old launch's reads come in now, during the relaunched program's run
        assert launches.checks[0].done.wait(5)
        time.sleep(0.2)
        return Outcome(0)

    launches.programs += [lost_after_the_splash, clean_run]
    api = FakeKube()
    started = time.monotonic()
    assert server.run_server(api, settings(tmp_path, max_relaunches=2), report=lambda _: None) == 0
    assert time.monotonic() - started < 10  # not the 30 s read
    assert [e.reason for e in api.created_events] == ["Relaunching"]
    assert launches.checks[0].line is None
    assert not (tmp_path / "launch").exists()


def test_a_program_that_fails_before_its_splash_line_is_checked_before_run_server_returns(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    launches = Launches(tmp_path, lambda _: DROPPED)
    scripted_launches(monkeypatch, launches)
    launches.programs.append(lambda _: Outcome(1))
    api = FakeKube()
    assert server.run_server(api, settings(tmp_path, max_relaunches=2), report=lambda _: None) == 1
    assert [e.reason for e in api.created_events] == ["DatagramsDropped"]


# ----------------------------------------------------------------------------------------------------------
# a launch whose worker could not connect back to the launcher is relaunched, not exited from

SPAWN_REFUSED = (
    "*** FATAL ERROR: Got an xSocket while spawning worker process: connect() failed while creating a connect "
    "socket (111:Connection refused)"
)


def test_a_worker_that_could_not_connect_back_is_relaunched_in_place(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """After an API server outage the NetworkPolicy enforcer may not admit a new locale's traffic to the server
    pod yet: amudprun fails at the spawn. run_server relaunches (an Event says why) instead of exiting, which
    would restart the container."""
    launches = Launches(tmp_path, lambda _: Counters())
    monkeypatch.setattr(server, "prepare_server", launches.prepare)
    programs: list[tuple[list[str], Outcome]] = [([SPAWN_REFUSED], Outcome(143)), ([], Outcome(0))]

    def fake_launch(*_args: object, output: Callable[[str], None] | None = None, **_kwargs: object) -> Outcome:
        lines, outcome = programs.pop(0)
        assert output is not None  # arkouda mode: the output is tapped
        for line in lines:
            output(line)
        return outcome

    monkeypatch.setattr(server, "_launch_supervised", fake_launch)
    api = FakeKube()
    assert server.run_server(api, settings(tmp_path, max_relaunches=2), report=lambda _: None) == 0
    relaunching = [e.message for e in api.created_events if e.reason == "Relaunching"]
    assert len(relaunching) == 1 and "could not connect back to the launcher" in relaunching[0], relaunching
    assert "Connection refused" in relaunching[0]


def test_a_failed_launch_without_that_line_still_exits_with_its_status(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    launches = Launches(tmp_path, lambda _: Counters())
    monkeypatch.setattr(server, "prepare_server", launches.prepare)

    def fake_launch(*_args: object, output: Callable[[str], None] | None = None, **_kwargs: object) -> Outcome:
        assert output is not None
        output("*** FATAL ERROR: something else went wrong")
        return Outcome(1)

    monkeypatch.setattr(server, "_launch_supervised", fake_launch)
    api = FakeKube()
    assert server.run_server(api, settings(tmp_path, max_relaunches=2), report=lambda _: None) == 1
    assert not [e for e in api.created_events if e.reason == "Relaunching"]
