"""The arkouda_server STAND-IN (a test double for Arkouda's launcher and server) on the host: argument and
environment parsing as Chapel's launcher and GASNet's AMUDP ssh spawner do it, the spawn command line, a
whole launch through a fake ssh. The server side: test_standin_server.py."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from arkouda_standin import config, spawn, udp
from arkouda_standin.config import UsageError

HERE = Path(__file__).resolve().parent
STANDIN = HERE.parents[1] / "docker" / "arkouda" / "standin"
FAKE_SSH = HERE / "fake_ssh.py"


# --- arguments ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "n"),
    [(["-nl", "3"], 3), (["--numLocales=4"], 4), (["--numLocales", "2"], 2), (["--x=1", "-nl", "1"], 1)],
)
def test_num_locales_forms(argv: list[str], n: int) -> None:
    assert config.parse_args(argv).num_locales == n


def test_program_args_pass_through_and_server_port() -> None:
    a = config.parse_args(["-nl", "2", "--ServerPort=6000", "--logLevel=DEBUG", "--authenticate"])
    assert a.server_port == 6000
    assert a.authenticate
    assert a.program_args == ["--ServerPort=6000", "--logLevel=DEBUG", "--authenticate"]
    assert config.parse_args(["-nl", "1", "--ServerPort", "7000"]).server_port == 7000
    assert config.parse_args(["-nl", "1"]).server_port == 5555


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "Specify number of locales"),
        (["-nl"], "needs a value"),
        (["-nl", "0"], "positive integer"),
        (["-nl", "x"], "positive integer"),
        (["-nl", "1", "--ServerPort=99999"], "--ServerPort"),
    ],
)
def test_bad_arguments_name_the_fix(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        config.parse_args(argv)


# --- environment --------------------------------------------------------------------------------------------


def test_servers_split_on_amudp_delimiters() -> None:
    assert config.split_servers(" a,b/c;d:e  f ") == ["a", "b", "c", "d", "e", "f"]


def test_prefix_order_gasnet_then_amudp_then_bare() -> None:
    env = {"SSH_CMD": "bare", "AMUDP_SSH_CMD": "amudp", "GASNET_SSH_CMD": "gasnet"}
    assert config.getenv_prefixed(env, "SSH_CMD", "ssh") == "gasnet"
    del env["GASNET_SSH_CMD"]
    assert config.getenv_prefixed(env, "SSH_CMD", "ssh") == "amudp"
    del env["AMUDP_SSH_CMD"]
    assert config.getenv_prefixed(env, "SSH_CMD", "ssh") == "bare"
    assert config.getenv_prefixed({}, "SSH_CMD", "ssh") == "ssh"


def test_parse_env_defaults_and_values() -> None:
    env = {
        "GASNET_SSH_SERVERS": "10.0.0.1 10.0.0.2 10.0.0.3",
        "GASNET_MASTERIP": "10.0.0.1",
        "SSH_OPTIONS": "-F /run/arkouda/ssh_config",
        "ARKOUDA_SERVER_TOKEN": "s3cret",
    }
    s = config.parse_env(env, num_locales=2, cwd="/work")
    assert s.servers == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert (s.ssh_cmd, s.ssh_options, s.remote_path) == ("ssh", "-F /run/arkouda/ssh_config", "/work")
    assert (s.master_ip, s.master_ip_source) == ("10.0.0.1", "GASNET_MASTERIP")
    assert s.selected["ARKOUDA_SERVER_TOKEN"] == "<redacted>"  # noqa: S105 - the redaction marker
    fallback = config.parse_env({"SSH_SERVERS": "h", "CHPL_RT_MASTERIP": "10.1.1.1"}, num_locales=1, cwd="/")
    assert (fallback.master_ip, fallback.master_ip_source) == ("10.1.1.1", "CHPL_RT_MASTERIP")
    assert config.parse_env({"SSH_SERVERS": "h"}, num_locales=1, cwd="/").master_ip == socket.gethostname()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "SSH_SERVERS is missing"),
        ({"SSH_SERVERS": "a b"}, r"request for \(3\).*Only \(2\)"),
        ({"SSH_SERVERS": "a b c", "GASNET_SPAWNFN": "L"}, "GASNET_SPAWNFN"),
    ],
)
def test_bad_environment_names_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        config.parse_env(env, num_locales=3, cwd="/")


# --- the spawn command line ---------------------------------------------------------------------------------


def test_quoting_matches_amudp() -> None:
    assert spawn.quote_for_remote("it's") == "'it'\\''s'"
    assert spawn.quote_for_local("a$b") == "'a\\$b'"
    assert spawn.quote_for_local('say "hi"') == "'say \\\"hi\\\"'"


def test_command_line_puts_the_spawner_options_before_the_users() -> None:
    cmd = spawn.build_command(
        ssh_cmd="ssh",
        openssh=True,
        ssh_options="-F /run/arkouda/ssh_config -p 2222",
        host="10.0.0.2",
        remote_path="/opt/arkouda/bin",
        extra_env={"K": "v"},
        argv=["/opt/arkouda/bin/arkouda_server_real", "--ServerPort=5555"],
    )
    words = shlex.split(cmd)
    assert words[:5] == ["ssh", "-o", "StrictHostKeyChecking no", "-o", "FallBackToRsh no"]
    assert words[5:10] == ["-F", "/run/arkouda/ssh_config", "-p", "2222", "10.0.0.2"]
    remote = shlex.split(words[10])
    assert remote[:3] == ["cd", "/opt/arkouda/bin", ";"]
    assert remote[3:] == ["env", "K=v", "/opt/arkouda/bin/arkouda_server_real", "--ServerPort=5555"]
    assert words[11:] == ["<", "/dev/null"]
    plain = spawn.build_command(
        ssh_cmd="rsh", openssh=False, ssh_options="", host="h", remote_path="/", extra_env={}, argv=["x"]
    )
    assert "StrictHostKeyChecking" not in plain


# --- a whole launch through the fake ssh --------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _launch(
    tmp_path: Path, *, hosts: str, n: int, extra_env: dict[str, str] | None = None, port: int | None = None
) -> subprocess.Popen[str]:
    env = {
        "PATH": os.environ["PATH"],
        "GASNET_SSH_SERVERS": hosts,
        "GASNET_SSH_CMD": str(FAKE_SSH),
        "GASNET_SSH_OPTIONS": "-F /dev/null",
        "GASNET_MASTERIP": "127.0.0.1",
        "GASNET_SSH_REMOTE_PATH": str(STANDIN / "bin"),
        "FAKE_SSH_LOG": str(tmp_path / "ssh.log"),
        "ARKOUDA_STANDIN_TIMEOUT": "90",
        **(extra_env or {}),
    }
    return subprocess.Popen(
        [
            sys.executable,
            str(STANDIN / "bin" / "arkouda_server"),
            "-nl",
            str(n),
            f"--ServerPort={port or _free_port()}",
            "--logLevel=INFO",
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.fixture
def launched(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int, list[str]]]:
    port = _free_port()
    proc = _launch(tmp_path, hosts="127.0.0.1,localhost 127.0.0.1", n=2, port=port)
    lines: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if "server listening" in line:
            break
    threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True).start()
    yield proc, port, lines
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=10)


def test_launch_reports_every_locale_in_host_order(
    launched: tuple[subprocess.Popen[str], int, list[str]], tmp_path: Path
) -> None:
    _, _, lines = launched
    report = json.loads(next(x for x in lines if x.startswith("STANDIN-LAUNCH-REPORT ")).split(" ", 1)[1])
    assert report["standIn"] is True
    assert report["numLocales"] == 2
    assert [loc["locale"] for loc in report["locales"]] == [0, 1]
    for loc in report["locales"]:
        assert loc["binary"] == str((STANDIN / "bin" / "arkouda_server_real").resolve())
        assert loc["cwd"] == str(STANDIN / "bin")
        assert loc["args"] == [loc["args"][0], "--logLevel=INFO"]
        assert loc["uid"] == os.getuid()
    # every locale heard every other over UDP (GASNet's udp conduit needs that between the pods)
    assert report["locales"][0]["udp"] == {"peers": [1], "missing": []}
    assert report["locales"][1]["udp"] == {"peers": [0], "missing": []}
    calls = [json.loads(x) for x in (tmp_path / "ssh.log").read_text().splitlines()]
    assert sorted(c["host"] for c in calls) == ["127.0.0.1", "localhost"]  # only the first -nl hosts
    for c in calls:
        assert c["options"][:4] == ["-o", "StrictHostKeyChecking no", "-o", "FallBackToRsh no"]
        assert c["options"][4:] == ["-F", "/dev/null"]


def test_a_lost_locale_ends_the_server_non_zero(launched: tuple[subprocess.Popen[str], int, list[str]]) -> None:
    proc, _, lines = launched
    report = json.loads(next(x for x in lines if x.startswith("STANDIN-LAUNCH-REPORT ")).split(" ", 1)[1])
    os.kill(report["locales"][1]["pid"], 15)
    assert proc.wait(timeout=15) == 1
    deadline = time.monotonic() + 5
    while not any("locale 1 on host localhost lost" in x for x in lines) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert any("locale 1 on host localhost lost" in x for x in lines), lines


def test_unreachable_host_fails_the_launch_naming_it(tmp_path: Path) -> None:
    proc = _launch(tmp_path, hosts="127.0.0.1 badhost", n=2, extra_env={"FAKE_SSH_UNREACHABLE": "badhost"})
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "locale 1 on host badhost failed: ssh exited with status 255" in out


def test_usage_error_exits_2(tmp_path: Path) -> None:
    proc = _launch(tmp_path, hosts="a", n=2)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "Only (1) machines available" in out


# --- the UDP check among locales ----------------------------------------------------------------------------


def test_udp_mesh_hears_live_peers_and_names_silent_ones() -> None:
    a, b = udp.Mesh(0), udp.Mesh(1)
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind(("127.0.0.1", 0))  # bound but never answers: like a pod whose UDP is dropped
    try:
        result: dict[str, list[int]] = {}
        t = threading.Thread(target=lambda: result.update(b=b.exchange({0: ("127.0.0.1", a.port)}, timeout=60)))
        t.start()
        # live peers: returns as soon as each was heard (the timeout is only a cap)
        assert a.exchange({1: ("127.0.0.1", b.port)}, timeout=60) == []
        t.join(60)
        assert result["b"] == []
        # a silent peer is named once the time is up
        assert a.exchange({1: ("127.0.0.1", b.port), 2: ("127.0.0.1", silent.getsockname()[1])}, timeout=1) == [2]
    finally:
        a.close()
        b.close()
        silent.close()


def test_sigterm_before_the_locales_reported_stops_cleanly(tmp_path: Path) -> None:
    # The locale's host never answers (a fake ssh that just sleeps): SIGTERM must end the launcher promptly.
    slow = tmp_path / "slow-ssh"
    slow.write_text('#!/bin/sh\n[ "$1" = -V ] && exit 0\nexec sleep 60\n')
    slow.chmod(0o755)
    proc = _launch(tmp_path, hosts="h1", n=1, extra_env={"GASNET_SSH_CMD": str(slow)})
    assert proc.stdout is not None
    for line in proc.stdout:
        if "exec(/bin/sh" in line:
            break
    proc.terminate()
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 143, out
    assert "interrupted before every locale reported" in out
