"""server.run_server's relaunch policy after lost locales, with prepare and launch replaced by named test
doubles (the real path, with real ssh and a real child process, is test_server_flow's relaunch test)."""

from __future__ import annotations

from pathlib import Path

import pytest
from arkouda_bootstrap.config import RELAUNCH_RESET_SECONDS, Launcher, ServerSettings
from arkouda_bootstrap.errors import EXIT_LOCALE_LOST, BootstrapError
from arkouda_bootstrap.server import launch
from arkouda_bootstrap.server import main as server
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
