"""The launch's network check (server.netcheck): the baseline the probe hands over, the reading after the splash
line (once per launch, also from a real child's output through run_supervised), the report line's level, the
Event only on drops, a failing host named, the totals file the metrics sidecar reads, and `finish`: it waits for
a running check, runs one for a program that failed before its splash line, and cancels one on a lost locale."""

from __future__ import annotations

import logging
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from arkouda_bootstrap import netdrops
from arkouda_bootstrap.netdrops import Counters
from arkouda_bootstrap.server import netcheck
from arkouda_bootstrap.server.supervise import run_supervised
from arkouda_bootstrap.ssh import probe as sshprobe
from arkouda_bootstrap.ssh.client import Host

HOSTS = [Host("10.0.0.1", "ak-server-0"), Host("10.0.0.2", "ak-locale-1"), Host("10.0.0.3", "ak-locale-2")]
BASE = Counters(out_datagrams=100, in_datagrams=100)
SPLASH = "*              server listening on tcp://ak-server-0:5555               *"


class Reads:
    """The after-launch reads: per address a Counters or an exception to raise; records every call."""

    def __init__(self, answers: dict[str, Counters | Exception]) -> None:
        self.answers = answers
        self.calls: list[Host] = []
        self.lock = threading.Lock()

    def __call__(self, host: Host) -> Counters:
        with self.lock:
            self.calls.append(host)
        answer = self.answers[host.address]
        if isinstance(answer, Exception):
            raise answer
        return answer


def make_check(reads: Reads, tmp_path: Path, events: list[str]) -> netcheck.LaunchCheck:
    check = netcheck.LaunchCheck(read=reads, emit=events.append, totals=tmp_path / "launch" / "network.json", timeout=2)
    for host in HOSTS:
        check.baseline(host, BASE)
    check.launching(HOSTS)
    return check


def test_the_splash_line_starts_one_check_and_a_clean_launch_logs_info_without_event(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="arkouda_bootstrap.server.netcheck")
    reads = Reads({h.address: Counters(out_datagrams=130, in_datagrams=125) for h in HOSTS})
    events: list[str] = []
    check = make_check(reads, tmp_path, events)
    check.output("starting arkouda_server on 3 locales")
    assert not check.done.wait(0.2)
    assert reads.calls == []
    check.output(SPLASH)
    check.output(SPLASH)  # the real server prints its box once, but a second one must not check again
    assert check.done.wait(5)
    time.sleep(0.2)  # room for a second check, which must not come
    assert sorted(reads.calls, key=lambda h: h.address) == HOSTS
    assert check.line == "launch network check: no datagram dropped on 3 hosts (udp out 90, in 75)"
    assert events == []
    [record] = [r for r in caplog.records if r.name == "arkouda_bootstrap.server.netcheck"]
    assert record.levelno == logging.INFO
    assert record.getMessage().startswith(check.line + " (read in ")
    totals = netdrops.read_totals(tmp_path / "launch" / "network.json")
    assert totals is not None
    assert (totals.hosts, totals.checked, totals.dropping, totals.sender, totals.receiver) == (3, 3, 0, 0, 0)


def test_drops_log_a_warning_and_emit_the_same_line_naming_a_failed_and_an_unprobed_host(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    reads = Reads(
        {
            "10.0.0.1": Counters(out_datagrams=150, in_datagrams=140, sndbuf_errors=12, out_discards=12),
            "10.0.0.2": sshprobe.TransientProbeError("pod ak-locale-1 (10.0.0.2): cannot connect to port 2222"),
            "10.0.0.3": RuntimeError("boom"),
        }
    )
    events: list[str] = []
    check = netcheck.LaunchCheck(read=reads, emit=events.append, totals=tmp_path / "n.json", timeout=2)
    check.baseline(HOSTS[0], BASE)
    check.baseline(HOSTS[1], BASE)  # ak-locale-2's probe printed no counters: no baseline
    check.launching(HOSTS)
    summary = check.run()
    assert summary is not None
    assert summary.dropped == 12
    assert check.line is not None
    assert check.line.startswith(
        "launch network check: 12 datagrams dropped on 1 of 1 checked hosts (sender: SndbufErrors 12, "
        "OutDiscards 12; receiver: RcvbufErrors 0, InErrors 0); most: ak-server-0 (10.0.0.1) 12: GASNet resends"
    )
    assert check.line.endswith(
        "; not checked: pod ak-locale-1 (10.0.0.2): cannot connect to port 2222; "
        "ak-locale-2 (10.0.0.3): RuntimeError: boom"
    )
    assert events == [check.line]
    assert any(r.levelno == logging.WARNING and check.line in r.getMessage() for r in caplog.records)
    totals = netdrops.read_totals(tmp_path / "n.json")
    assert totals is not None
    assert (totals.sender, totals.hosts, totals.checked, totals.dropping) == (12, 3, 1, 1)


def test_a_host_that_never_answers_is_named_once_the_bound_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()

    def read(host: Host) -> Counters:
        if host.address == "10.0.0.2":
            release.wait(10)
        return BASE

    check = netcheck.LaunchCheck(read=read, emit=lambda _: None, totals=None, timeout=0.1)
    for host in HOSTS:
        check.baseline(host, BASE)
    check.launching(HOSTS)
    monkeypatch.setattr(netcheck, "JOIN_SLACK", 0.2)
    try:
        check.run()
    finally:
        release.set()
    assert check.line == (
        "launch network check: no datagram dropped on 2 of 3 hosts (udp out 0, in 0); not checked: "
        "ak-locale-1 (10.0.0.2): no reading within 0.3s"
    )


def test_without_a_host_list_the_splash_line_does_nothing(tmp_path: Path) -> None:
    reads = Reads({})
    check = netcheck.LaunchCheck(read=reads, emit=lambda _: None, totals=None, timeout=1)
    check.output(SPLASH)
    assert not check.done.wait(0.2)


def test_an_unwritable_totals_file_is_a_warning_not_a_failure(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    reads = Reads({h.address: BASE for h in HOSTS})
    check = netcheck.LaunchCheck(read=reads, emit=lambda _: None, totals=blocker / "network.json", timeout=1)
    check.launching(HOSTS[:1])
    check.baseline(HOSTS[0], BASE)
    assert check.run() is not None
    assert "cannot write the launch's network totals" in caplog.text


def test_the_childs_splash_line_through_run_supervised_checks_once(tmp_path: Path) -> None:
    """The program's output as the server copies it: the check starts from the copy thread, once."""
    reads = Reads({h.address: BASE for h in HOSTS})
    check = make_check(reads, tmp_path, [])
    script = f"print('hello'); print({SPLASH!r}); print({SPLASH!r}, flush=True)"
    outcome = run_supervised([sys.executable, "-c", script], env={}, output=check.output)
    assert outcome.exit_code == 0
    assert check.done.wait(5)
    time.sleep(0.2)
    assert len(reads.calls) == len(HOSTS)
    assert check.line == "launch network check: no datagram dropped on 3 hosts (udp out 0, in 0)"


def test_a_program_that_fails_before_its_splash_line_is_checked_as_it_exits(tmp_path: Path) -> None:
    reads = Reads({h.address: replace(BASE, sndbuf_errors=9, out_discards=9) for h in HOSTS})
    events: list[str] = []
    check = make_check(reads, tmp_path, events)
    check.finish(failed=True)  # here, in the caller's thread: the line is out when it returns
    assert check.done.is_set()
    assert check.line is not None
    assert check.line.startswith("launch network check: 27 datagrams dropped on 3 of 3 hosts (")
    assert events == [check.line]
    check.finish(failed=True)
    check.output(SPLASH)
    time.sleep(0.2)
    assert len(reads.calls) == len(HOSTS)  # once per launch, whichever comes first


def test_after_the_splash_line_a_failure_does_not_check_again(tmp_path: Path) -> None:
    reads = Reads({h.address: BASE for h in HOSTS})
    check = make_check(reads, tmp_path, [])
    check.output(SPLASH)
    check.finish(failed=True)
    assert check.done.is_set()
    assert len(reads.calls) == len(HOSTS)


class SlowReads(Reads):
    """Reads that wait for `gate` (or `delay` seconds) before answering."""

    def __init__(self, answers: dict[str, Counters | Exception], *, delay: float = 30) -> None:
        super().__init__(answers)
        self.gate = threading.Event()
        self.delay = delay

    def __call__(self, host: Host) -> Counters:
        self.gate.wait(self.delay)
        return super().__call__(host)


def test_finish_waits_for_the_check_a_splash_line_started_just_before_the_exit(tmp_path: Path) -> None:
    """A program that exits right after its splash line: the check's line, Event and file are out by the time
    finish returns (the server exits after it, which would kill a check still running)."""
    reads = SlowReads({h.address: replace(BASE, sndbuf_errors=2) for h in HOSTS}, delay=0.5)
    events: list[str] = []
    check = make_check(reads, tmp_path, events)
    check.output(SPLASH)
    check.finish()  # a clean exit: no check of its own, but the running one is waited for
    assert check.line is not None
    assert check.line.startswith("launch network check: 6 datagrams dropped on 3 of 3 hosts (")
    assert events == [check.line]
    totals = netdrops.read_totals(tmp_path / "launch" / "network.json")
    assert totals is not None
    assert totals.sender == 6


def test_a_lost_locale_cancels_the_running_check_at_once_and_it_reports_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="arkouda_bootstrap.server.netcheck")
    reads = SlowReads({h.address: replace(BASE, sndbuf_errors=5) for h in HOSTS})  # would wait up to 30 s
    events: list[str] = []
    check = make_check(reads, tmp_path, events)
    check.output(SPLASH)
    started = time.monotonic()
    check.finish(lost=True, failed=True)
    assert time.monotonic() - started < 2  # not the read bound (2 s timeout + 5 s slack)
    assert check.done.is_set()
    reads.gate.set()  # the reads of the lost launch come in after all
    time.sleep(0.3)
    assert events == []
    assert check.line is None
    assert not (tmp_path / "launch").exists()
    assert "launch network check cancelled: its launch is over" in caplog.text
    check.output(SPLASH)  # a late splash line of the old program starts nothing
    time.sleep(0.2)
    assert len(reads.calls) == len(HOSTS)


def test_a_check_not_done_within_the_bound_is_given_up_and_writes_nothing_later(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(netcheck, "JOIN_SLACK", 0.2)
    release = threading.Event()
    emitted: list[str] = []

    def emit(line: str) -> None:  # an API server that takes its time with the Event
        release.wait(10)
        emitted.append(line)

    reads = Reads({h.address: replace(BASE, rcvbuf_errors=1) for h in HOSTS})
    check = netcheck.LaunchCheck(read=reads, emit=emit, totals=tmp_path / "network.json", timeout=0.1)
    for host in HOSTS:
        check.baseline(host, BASE)
    check.launching(HOSTS)
    check.output(SPLASH)
    started = time.monotonic()
    check.finish()
    assert time.monotonic() - started < 2  # the read bound (0.3 s) plus the slack (0.2 s), not the Event's 10 s
    assert "launch network check not done within 0.5s: given up" in caplog.text
    release.set()
    assert check.done.wait(5)
    assert len(emitted) == 1  # it had begun before the bound passed
    assert not (tmp_path / "network.json").exists()
