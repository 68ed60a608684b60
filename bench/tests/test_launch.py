"""Pure parts of the launch bench: log timestamps and lines, /proc stat and schedstat, the process tree."""

from __future__ import annotations

import pytest

from arkouda_bench.launch import (
    client_cpu,
    launch_ended,
    parse_launch_log,
    parse_snapshot,
    parse_stat,
    parse_timestamp,
)
from arkouda_bench.sshd import BenchSetupError

# Lines as `kubectl logs --timestamps` showed them for a 2-locale release (shortened after `ssh=`).
T = "2026-12-01T04:26:"
SI = "arkouda_server_real STAND-IN: locale"
UDP = "(GASNet-EX 2024.5.0, UDP conduit)"
AMS = "after exchanging active messages with 1 locale(s)"
LOG = f"""\
{T}26.794776923Z 2026-12-01 04:26:26,794 INFO arkouda_bootstrap.ssh.client: ssh probe: all 2 hosts answered
{T}27.226284096Z {SI} 1 of 2 joined the GASNet job {UDP}: host=l0
{T}27.226512034Z {SI} 0 of 2 joined the GASNet job {UDP}: host=s0
{T}27.250775060Z {SI} 0 of 2 passed the GASNet barrier {AMS}: host=s0
{T}27.250790713Z WARNING: a GASNet warning line
{T}27.260000000Z {SI} 1 of 2 passed the GASNet barrier {AMS}: host=l0
{T}27.313296623Z *                 server listening on tcp://ak-arkouda-server-0:5555                 *
"""

BASE = parse_timestamp("2026-12-01T04:26:27Z")


def test_timestamps_keep_nanoseconds_and_zones() -> None:
    assert parse_timestamp("2026-12-01T04:26:27.250775060Z") - BASE == pytest.approx(0.250775060, abs=1e-6)
    assert parse_timestamp("2026-12-01T05:26:27+01:00") == BASE
    with pytest.raises(ValueError, match="RFC 3339"):
        parse_timestamp("04:26:27")


def test_launch_log_takes_each_locales_lines_after_the_start() -> None:
    launch = parse_launch_log(LOG, n=2, since=BASE)
    assert sorted(launch.joined) == [0, 1]
    assert max(launch.barrier.values()) - BASE == pytest.approx(0.26, abs=1e-6)
    assert launch.listening is not None
    assert launch.listening - BASE == pytest.approx(0.313296623, abs=1e-6)
    assert launch.warnings == ("WARNING: a GASNet warning line",)
    assert launch.complete(2)
    assert not launch.complete(3)


def test_launch_log_ignores_an_earlier_launch_and_refuses_another_n() -> None:
    later = parse_launch_log(LOG, n=2, since=BASE + 0.255)
    assert sorted(later.barrier) == [1]
    assert later.joined == {}
    assert not later.complete(2)
    with pytest.raises(BenchSetupError, match="reports 2 locales, expected 4"):
        parse_launch_log(LOG, n=4, since=BASE)


# /proc/<pid>/stat of an ssh client seen in the server container (utime..cstime changed to 1 3 4 5).
SSH_STAT = "34 (ssh) S 29 7 1 0 -1 4194560 644 638 0 2 1 3 4 5 20 0 1 0 204623 11890688 2044 0 0"


def test_stat_fields() -> None:
    p = parse_stat(SSH_STAT)
    assert (p.pid, p.comm, p.ppid, p.start_ticks, p.own_ticks, p.reaped_ticks) == (
        34,
        "ssh",
        29,
        204623,
        4,
        9,
    )
    odd = parse_stat(SSH_STAT.replace("(ssh)", "(a) b (c)"))
    assert (odd.comm, odd.ppid, odd.start_ticks) == ("a) b (c", 29, 204623)
    assert p.own_seconds == pytest.approx(0.04)


def _stat(pid: int, comm: str, ppid: int, *, start: int = 1000, own: tuple[int, int] = (0, 0),
          reaped: tuple[int, int] = (0, 0)) -> str:  # fmt: skip
    fields = ["S", str(ppid), *["0"] * 9, *map(str, own), *map(str, reaped), "20", "0", "1", "0", str(start)]
    return f"stat {pid} ({comm}) {' '.join(fields)} 0 0"


def test_snapshot_sums_amudprun_descendants_and_dates_its_start() -> None:
    text = "\n".join([
        "now 1000.50",
        "uptime 200.00 100.00",
        _stat(7, "python3", 1, own=(90, 10)),
        _stat(24, "amudprun", 7, start=19_000, own=(1, 1), reaped=(2, 0)),
        "schedstat 24 3830183 6297722 52",
        _stat(29, "sh", 24, own=(0, 1)),
        "schedstat 29 1000000 0 1",
        _stat(34, "ssh", 29, own=(1, 0), reaped=(0, 1)),
        "schedstat 34 20000000 0 3",
        _stat(30, "sh", 24),
        _stat(35, "ssh", 30, own=(2, 0)),
        "schedstat 35",
        "stat ",
    ])  # fmt: skip
    snap = parse_snapshot(text)
    cpu = client_cpu(snap)
    assert cpu.amudprun == (24, 19_000)
    assert cpu.amudprun_start == pytest.approx(1000.50 - (200.00 - 190.00))
    assert cpu.amudprun_own == pytest.approx(0.003830183)
    assert cpu.amudprun_reaped == pytest.approx(0.02)
    # sh 29: 1 ms (schedstat); ssh 34: 20 ms + 10 ms reaped; sh 30: nothing; ssh 35: no schedstat, 2 ticks.
    assert cpu.clients == pytest.approx(0.001 + 0.030 + 0.0 + 0.020)
    assert cpu.ssh_processes == 2
    assert cpu.clients_reaped == pytest.approx(0.010)


def test_snapshot_needs_the_clocks_and_one_amudprun() -> None:
    with pytest.raises(BenchSetupError, match="without 'now'"):
        parse_snapshot(_stat(24, "amudprun", 7))
    snap = parse_snapshot("now 1\nuptime 1 1\n" + _stat(7, "python3", 1))
    with pytest.raises(BenchSetupError, match="expected one amudprun process"):
        client_cpu(snap)


def test_a_launch_that_ended_names_the_exit_and_the_first_gasnet_error() -> None:
    text = (
        f"{T}20.000000000Z *** FATAL ERROR: an older launch's failure\n"
        f"{T}27.226284096Z {SI} 1 of 2 joined the GASNet job {UDP}: host=l0\n"
        f"{T}40.100000000Z *** Caught a fatal signal (proc 28): SIGABRT(6)\n"
        f"{T}40.200000000Z *** Caught a fatal signal (proc 54): SIGABRT(6)\n"
        f"{T}41.000000000Z 2026-12-01 04:26:41,000 INFO arkouda_bootstrap.server.supervise: pid 264 "
        "exited with status 143\n"
    )
    assert launch_ended(text[: text.index(f"{T}41")], since=BASE) == ""
    ended = launch_ended(text, since=BASE)
    assert ended.startswith("*** Caught a fatal signal (proc 28)")
    assert ended.endswith("pid 264 exited with status 143")
