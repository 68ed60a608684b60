"""The stand-in's Arkouda server side (docker/arkouda/standin/bin/arkouda_standin_server), run on 127.0.0.1 as a
subprocess in a temporary working directory: start-up files and token as Arkouda v2025.01.13 handles them, the
pinned client's connect handshake (replayed by arkouda_standin.client), the metrics daemon socket, the exits.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq
from conftest import STANDIN_LIB

from arkouda_standin import client, options, protocol
from arkouda_standin.protocol import request_bytes

SERVER = STANDIN_LIB.parent / "bin" / "arkouda_standin_server"
LOCALES = [
    {"id": i, "name": f"locale-{i}.example", "pid": 100 + i, "uid": 1000, "numPUs": 4 + i, "physicalMemory": 2**30}
    for i in range(3)
]
METRICS = "--ServerDaemon.daemonTypes=ServerDaemonType.DEFAULT,ServerDaemonType.METRICS"
CREATE_CONFIG_FIELDS = [
    "arkoudaVersion",
    "chplVersion",
    "pythonVersion",
    "ZMQVersion",
    "HDF5Version",
    "serverHostname",
    "ServerPort",
    "numLocales",
    "numNodes",
    "numPUs",
    "maxTaskPar",
    "physicalMemory",
    "distributionType",
    "LocaleConfigs",
    "authenticate",
    "logLevel",
    "logChannel",
    "regexMaxCaptures",
    "byteorder",
    "autoShutdown",
    "serverInfoNoSplash",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))  # noqa: S104 - the server binds tcp://*:<port>
        except OSError:
            return False
        return True


class Server:
    def __init__(self, proc: subprocess.Popen[str], *, port: int, metrics_port: int, cwd: Path) -> None:
        self.proc = proc
        self.port = port
        self.metrics_port = metrics_port
        self.cwd = cwd
        self.lines: list[str] = []
        self.listening = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if "server listening on" in line:
                self.listening.set()

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait(self, timeout: float = 20) -> int:
        code = self.proc.wait(timeout=timeout)
        time.sleep(0.2)  # let the reader thread take the last lines
        return code


def spawn(
    cwd: Path,
    *args: str,
    env: dict[str, str] | None = None,
    locales: list[dict[str, Any]] | None = None,
    pass_fds: tuple[int, ...] = (),
) -> Server:
    port, metrics_port = free_port(), free_port()
    table = LOCALES if locales is None else locales
    full_env = {
        "PATH": os.environ["PATH"],
        "ARKOUDA_STANDIN_NUMLOCALES": str(len(table)),
        "ARKOUDA_STANDIN_LOCALES": json.dumps(table),
        "METRICS_SERVER_PORT": str(metrics_port),
        **(env or {}),
    }
    cwd.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), f"--ServerPort={port}", "--logLevel=LogLevel.INFO", *args],
        cwd=cwd,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        pass_fds=pass_fds,
    )
    return Server(proc, port=port, metrics_port=metrics_port, cwd=cwd)


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for s in started:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait(timeout=10)


def start(servers: list[Server], cwd: Path, *args: str, env: dict[str, str] | None = None) -> Server:
    s = spawn(cwd, *args, env=env)
    servers.append(s)
    assert s.listening.wait(20), f"the stand-in did not start:\n{s.output}"
    return s


def ask(
    port: int, cmd: str, *, token: str | None = None, params: dict[str, str] | None = None, timeout: float = 5
) -> dict[str, Any] | None:
    """One request on a fresh REQ socket; None when no reply came within the timeout."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sock = ctx.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, int(timeout * 1000))
    try:
        sock.connect(f"tcp://127.0.0.1:{port}")
        sock.send(request_bytes(cmd, user="alice", token=token, params=params))
        try:
            answer: dict[str, Any] = json.loads(sock.recv())
        except zmq.Again:
            return None
        return answer
    finally:
        sock.close()
        ctx.term()


# --- the pinned client's handshake --------------------------------------------------------------------------


def test_handshake_replay_gets_every_field_with_its_type(servers: list[Server], tmp_path: Path) -> None:
    s = start(servers, tmp_path / "work")
    result = client.handshake(host="127.0.0.1", port=s.port, token=None, user="alice", timeout=10)
    assert result.connect_msg == f"connected to arkouda server tcp://*:{s.port}"
    config = result.config
    assert set(client.CONFIG_TYPES) <= set(config)
    assert config["numLocales"] == 3  # from ARKOUDA_STANDIN_LOCALES, i.e. the GASNet job
    assert [(c["id"], c["name"], c["numPUs"]) for c in config["LocaleConfigs"]] == [
        (0, "locale-0.example", 4),
        (1, "locale-1.example", 5),
        (2, "locale-2.example", 6),
    ]
    assert config["ServerPort"] == s.port
    assert config["regexMaxCaptures"] == 20
    assert config["logLevel"] == "INFO"
    assert config["authenticate"] is False
    assert "STAND-IN" in config["arkoudaVersion"]
    assert any("Version mismatch" in w for w in result.warnings)
    assert result.registration["parameter_classes"]["array"]["nd"] == [1]
    # the fields and their order of Arkouda v2026.07.15's createConfig (src/ServerConfig.chpl)
    assert list(config)[: len(CREATE_CONFIG_FIELDS)] == CREATE_CONFIG_FIELDS
    assert "maxArrayDims" not in config  # dropped in v2025.09.30
    assert config["pythonVersion"] == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert config["numNodes"] == 3  # one locale per pod: numLocales / numColocales
    assert [list(c) for c in config["LocaleConfigs"]] == [
        ["id", "name", "numPUs", "numColocales", "maxTaskPar", "physicalMemory"]
    ] * 3
    assert [c["numColocales"] for c in config["LocaleConfigs"]] == [1, 1, 1]
    # the reply record as the client parses it
    raw = ask(s.port, "ruok")
    assert raw is not None
    assert (raw["msg"], raw["msgType"], raw["user"]) == ("imok", "NORMAL", "alice")


@pytest.mark.parametrize(
    ("drop", "message"),
    [
        ("pythonVersion", "field 'pythonVersion' missing"),
        ("numNodes", "field 'numNodes' missing"),
        ("numColocales", r"LocaleConfigs\[0\]\.numColocales missing"),
    ],
)
def test_replay_refuses_a_config_without_the_new_release_fields(drop: str, message: str) -> None:
    """A server of the old pin (no pythonVersion, numNodes, numColocales) fails the replay, naming the field."""
    locales = [options.Locale(id=0, name="n0", pid=1, uid=1000, num_pus=2, physical_memory=2**30)]
    config = protocol.server_config(options.ServerOptions(), locales, hostname="h")
    config.pop(drop, None)
    for loc in config["LocaleConfigs"]:
        loc.pop(drop, None)
    with pytest.raises(client.HandshakeError, match=message):
        client.check_config(config)


def test_client_cli_prints_num_locales_and_checks_the_expected_count(servers: list[Server], tmp_path: Path) -> None:
    s = start(servers, tmp_path / "work")
    base = [sys.executable, "-m", "arkouda_standin.client", "--host", "127.0.0.1", "--port", str(s.port)]
    env = {**os.environ, "PYTHONPATH": str(STANDIN_LIB)}
    ok = subprocess.run([*base, "--expect-locales", "3"], capture_output=True, text=True, env=env, check=False)
    assert ok.returncode == 0, ok.stderr
    assert "replay of the requests the pinned Arkouda client" in ok.stdout
    assert ok.stdout.strip().splitlines()[-1] == "numLocales=3"
    wrong = subprocess.run([*base, "--expect-locales", "2"], capture_output=True, text=True, env=env, check=False)
    assert wrong.returncode == 1
    assert "numLocales=3, expected 2" in wrong.stderr


def test_client_gives_up_after_its_timeout_when_nothing_answers() -> None:
    begin = time.monotonic()
    with pytest.raises(client.HandshakeError, match=r"connect: no reply from tcp://127\.0\.0\.1:"):
        client.handshake(host="127.0.0.1", port=free_port(), token=None, user="u", timeout=1)
    assert time.monotonic() - begin < 10


def test_unknown_command_is_arkoudas_error_naming_the_standin(servers: list[Server], tmp_path: Path) -> None:
    s = start(servers, tmp_path / "work")
    answer = ask(s.port, "frobnicate")
    assert answer is not None
    assert answer["msgType"] == "ERROR"
    assert answer["msg"].startswith("Unrecognized command: frobnicate")
    assert "STAND-IN" in answer["msg"]
    table = ask(s.port, "standinlocales")
    assert table is not None
    assert json.loads(table["msg"])["locales"] == LOCALES


def test_standin_sleep_holds_the_client_port_for_the_given_time(servers: list[Server], tmp_path: Path) -> None:
    s = start(servers, tmp_path / "work")
    begin = time.monotonic()
    answer = ask(s.port, "standin_sleep", params={"seconds": "1.5"}, timeout=10)
    took = time.monotonic() - begin
    assert answer is not None
    assert (answer["msg"], answer["msgType"]) == ("slept 1.5 s", "NORMAL")
    assert 1.5 <= took < 8
    # the socket is blocked meanwhile (one REP socket): a request queued behind it waits for it
    for bad in ({}, {"seconds": "soon"}, {"seconds": "-1"}):
        err = ask(s.port, "standin_sleep", params=bad)
        assert err is not None
        assert err["msgType"] == "ERROR"
        assert "standin_sleep" in err["msg"]


def test_standin_wedge_answers_then_the_client_port_reads_nothing_while_the_process_lives(
    servers: list[Server], tmp_path: Path
) -> None:
    s = start(servers, tmp_path / "work", METRICS)
    answer = ask(s.port, "standin_wedge")
    assert answer is not None
    assert answer["msgType"] == "NORMAL"
    assert "wedged" in answer["msg"]
    assert ask(s.port, "ruok", timeout=2) is None  # the loop reads nothing any more
    assert s.proc.poll() is None
    assert ask(s.metrics_port, "getconfig") is not None  # the other daemon lives on
    s.proc.send_signal(signal.SIGTERM)
    assert s.wait() == 0


# --- start-up files and the token ---------------------------------------------------------------------------


def test_arkouda_directory_is_created_without_authenticate_and_no_token_is_kept(
    servers: list[Server], tmp_path: Path
) -> None:
    s = start(servers, tmp_path / "work")
    assert (s.cwd / ".arkouda").is_dir()
    assert not (s.cwd / ".arkouda" / "tokens.txt").exists()
    assert f"server listening on tcp://{socket.gethostname()}:{s.port}" in s.output
    assert "STAND-IN" in s.output.splitlines()[0]


def test_tokens_txt_wins_over_the_environment(servers: list[Server], tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / ".arkouda").mkdir(parents=True)
    (work / ".arkouda" / "tokens.txt").write_text("older\n  file-token \n")
    s = start(servers, work, "--authenticate", env={"ARKOUDA_SERVER_TOKEN": "env-token"})
    from_file = "file-token"
    result = client.handshake(host="127.0.0.1", port=s.port, token=from_file, user="alice", timeout=10)
    assert result.connect_msg == f"connected to arkouda server tcp://*:{s.port} as user alice with token file-token"
    assert result.config["authenticate"] is True
    assert "?token=file-token" in s.output
    assert (work / ".arkouda" / "tokens.txt").read_text() == "older\n  file-token \n"  # a token read is not appended


def test_env_token_is_taken_verbatim_and_a_stripped_one_halts_the_server(servers: list[Server], tmp_path: Path) -> None:
    s = start(servers, tmp_path / "work", "--authenticate=true", env={"ARKOUDA_SERVER_TOKEN": "s3cret\n"})
    assert (s.cwd / ".arkouda" / "tokens.txt").read_text() == "s3cret\n\n"
    verbatim = "s3cret\n"
    result = client.handshake(host="127.0.0.1", port=s.port, token=verbatim, user="alice", timeout=10)
    assert result.config["numLocales"] == 3
    token_file = tmp_path / "token"
    token_file.write_text("s3cret")
    refused = subprocess.run(
        [
            *(sys.executable, "-m", "arkouda_standin.client", "--host", "127.0.0.1", "--port", str(s.port)),
            *("--token-file", str(token_file), "--timeout", "3"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(STANDIN_LIB)},
        check=False,
    )
    assert refused.returncode == 1
    assert "connect: no reply" in refused.stderr
    assert "does not match server token" in refused.stderr  # the hint names the server's message
    # Arkouda v2025.01.13 throws the token error out of its daemon loop: no reply, the program halts.
    assert s.wait() == 1
    assert "Error: token s3cret does not match server token, check with server owner" in s.output


def test_missing_token_halts_with_arkoudas_message(servers: list[Server], tmp_path: Path) -> None:
    s = start(servers, tmp_path / "work", "--authenticate")
    generated = (s.cwd / ".arkouda" / "tokens.txt").read_text()
    assert len(generated) == 32
    assert generated.endswith("\n")
    assert generated[:-1].isalnum()
    assert f"?token={generated[:-1]}" in s.output
    assert ask(s.port, "connect", timeout=2) is None
    assert s.wait() == 1
    assert "Error: access to arkouda requires a token" in s.output


def test_working_directory_where_arkouda_cannot_be_created_halts_before_listening(
    servers: list[Server], tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / ".arkouda").write_text("a file where Arkouda wants its directory")
    s = spawn(work, "--authenticate")
    servers.append(s)
    assert s.wait() == 1
    assert "server listening" not in s.output
    assert f"in mkdir with path '{work / '.arkouda'}'" in s.output
    assert "make it writable" in s.output
    assert port_is_free(s.port)


def test_unwritable_working_directory_halts(servers: list[Server], tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes into a read-only directory; the test above covers the halt as root")
    work = tmp_path / "work"
    work.mkdir(mode=0o555)
    s = spawn(work)
    servers.append(s)
    assert s.wait() == 1
    assert "Permission denied" in s.output


# --- the metrics daemon -------------------------------------------------------------------------------------


def test_no_metrics_socket_without_the_metrics_daemon(servers: list[Server], tmp_path: Path) -> None:
    s = start(servers, tmp_path / "work", "--memTrack=true")
    assert port_is_free(s.metrics_port)  # METRICS_SERVER_PORT is set, yet nothing listens there
    assert not port_is_free(s.port)


def _metrics(port: int, category: str) -> Any:
    answer = ask(port, "metrics", params={"category": category})
    assert answer is not None, f"metrics {category}: no reply"
    assert answer["msgType"] == "NORMAL"
    assert answer["user"] == ""  # the metrics daemon's replies drop the user
    return json.loads(answer["msg"])


def test_metrics_count_the_client_requests(servers: list[Server], tmp_path: Path) -> None:
    s = start(servers, tmp_path / "work", "--memTrack=true", METRICS)
    connect = ask(s.metrics_port, "connect")
    assert connect is not None
    assert connect["msg"] == f"connected to arkouda metrics server tcp://*:{s.metrics_port}"
    before = {m["name"]: m["value"] for m in _metrics(s.metrics_port, "NUM_REQUESTS")}
    assert before == {"total": 0.0}
    for cmd in ("connect", "getconfig", "getconfig", "frobnicate"):
        assert ask(s.port, cmd) is not None
    counts = _metrics(s.metrics_port, "NUM_REQUESTS")
    assert {m["name"]: m["value"] for m in counts} == {
        "connect": 1.0,
        "getconfig": 2.0,
        "frobnicate": 1.0,
        "total": 4.0,
    }
    assert all(set(m) == {"name", "category", "scope", "timestamp", "value"} for m in counts)
    assert {(m["category"], m["scope"]) for m in counts} == {("NUM_REQUESTS", "GLOBAL")}
    everything = _metrics(s.metrics_port, "ALL")
    by_category: dict[str, list[dict[str, Any]]] = {}
    for m in everything:
        by_category.setdefault(m["category"], []).append(m)
    assert {m["name"] for m in by_category["RESPONSE_TIME"]} == {"connect", "getconfig", "frobnicate"}
    assert all(m["value"] >= 0 for m in by_category["AVG_RESPONSE_TIME"])
    users = [m for m in everything if m["scope"] == "USER"]
    assert {(m["user"], m["name"], m["value"]) for m in users} >= {("alice", "getconfig", 2.0), ("alice", "total", 4.0)}
    system = _metrics(s.metrics_port, "SYSTEM")
    assert [(m["name"], m["locale_num"]) for m in system][:2] == [
        ("arkouda_memory_used_per_locale", 0),
        ("arkouda_percent_memory_used_per_locale", 0),
    ]
    assert len(system) == 2 * len(LOCALES)
    info = _metrics(s.metrics_port, "MetricCategory.SERVER_INFO")
    assert info["number_of_locales"] == 3
    assert info["server_port"] == s.port
    config = ask(s.metrics_port, "getconfig")
    assert config is not None
    assert json.loads(config["msg"])["numLocales"] == 3


@pytest.mark.parametrize("flags", [["--memTrack=false"], ["--memTrack=true", "--trace=false"]])
def test_metrics_stay_empty_unless_trace_and_memtrack(servers: list[Server], tmp_path: Path, flags: list[str]) -> None:
    s = start(servers, tmp_path / "work", *flags, METRICS)
    assert ask(s.port, "getconfig") is not None
    assert [m["name"] for m in _metrics(s.metrics_port, "NUM_REQUESTS")] == ["total"]


def test_a_category_arkouda_does_not_handle_ends_only_the_metrics_daemon(servers: list[Server], tmp_path: Path) -> None:
    s = start(servers, tmp_path / "work", "--memTrack=true", METRICS)
    assert ask(s.metrics_port, "metrics", params={"category": "RESPONSE_TIME"}, timeout=2) is None
    assert ask(s.metrics_port, "getconfig", timeout=1) is None
    answer = ask(s.port, "ruok")
    assert answer is not None
    assert answer["msg"] == "imok"
    assert "Invalid MetricType" in s.output


def test_wrong_token_with_the_metrics_daemon_leaves_the_process_up_but_the_client_port_dead(
    servers: list[Server], tmp_path: Path
) -> None:
    s = start(servers, tmp_path / "work", "--authenticate", METRICS, env={"ARKOUDA_SERVER_TOKEN": "t"})
    wrong, right = "x", "t"
    assert ask(s.port, "connect", token=wrong, timeout=2) is None
    assert ask(s.port, "connect", token=right, timeout=2) is None
    assert s.proc.poll() is None
    assert ask(s.metrics_port, "getconfig") is not None
    s.proc.send_signal(signal.SIGTERM)
    assert s.wait() == 0


# --- the exits ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["flag", "env"])
def test_shutdown_exits_0_and_removes_the_connection_info(servers: list[Server], tmp_path: Path, how: str) -> None:
    info = tmp_path / "conn-info"
    if how == "flag":
        s = start(servers, tmp_path / "work", f"--serverConnectionInfo={info}")
    else:
        s = start(servers, tmp_path / "work", env={"ARKOUDA_SERVER_CONNECTION_INFO": str(info)})
    host = socket.gethostname()
    assert info.read_text() == f"{host} {s.port} tcp://{host}:{s.port}\n"
    assert ask(s.port, "connect") is not None
    answer = ask(s.port, "shutdown")
    assert answer is not None
    assert (answer["msg"], answer["msgType"], answer["user"]) == ("shutdown server (2 req)", "NORMAL", "")
    assert s.wait() == 0
    assert not info.exists()


def test_auto_shutdown_ends_the_server_on_disconnect(servers: list[Server], tmp_path: Path) -> None:
    s = start(servers, tmp_path / "work", "--autoShutdown=true")
    answer = ask(s.port, "disconnect")
    assert answer is not None
    assert answer["msg"] == "shutdown server (1 req)"
    assert s.wait() == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_server_cleanly(servers: list[Server], tmp_path: Path, sig: signal.Signals) -> None:
    s = start(servers, tmp_path / "work", METRICS)
    s.proc.send_signal(sig)
    assert s.wait() == 0
    assert f"{sig.name} received" in s.output


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ARKOUDA_STANDIN_LOCALES": None}, "ARKOUDA_STANDIN_LOCALES not set"),
        ({"ARKOUDA_STANDIN_LOCALES": "[{"}, "ARKOUDA_STANDIN_LOCALES is not JSON"),
        ({"ARKOUDA_STANDIN_NUMLOCALES": "2"}, "JSON array of ARKOUDA_STANDIN_NUMLOCALES=2 objects"),
        ({"ARKOUDA_STANDIN_NUMLOCALES": "zero"}, "ARKOUDA_STANDIN_NUMLOCALES must be a positive integer"),
        ({"ARKOUDA_STANDIN_LOCALES": '[{"id": 0}]', "ARKOUDA_STANDIN_NUMLOCALES": "1"}, "must be an object with keys"),
    ],
)
def test_missing_or_malformed_locale_environment_is_refused(
    tmp_path: Path, env: dict[str, str | None], message: str
) -> None:
    full = {
        "PATH": os.environ["PATH"],
        "ARKOUDA_STANDIN_NUMLOCALES": "3",
        "ARKOUDA_STANDIN_LOCALES": json.dumps(LOCALES),
    }
    for key, value in env.items():
        if value is None:
            full.pop(key)
        else:
            full[key] = value
    out = subprocess.run(
        [sys.executable, str(SERVER), f"--ServerPort={free_port()}"],
        cwd=tmp_path,
        env=full,
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert out.returncode == 2
    assert out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1
    assert message in out.stderr
    assert not (tmp_path / ".arkouda").exists()


# --- argument parsing (Chapel config constants) ------------------------------------------------------------


def test_arguments_parse_as_chapel_config_constants() -> None:
    o = options.parse_args(
        ["--ServerPort", "6000", "--authenticate", "--memTrack=true", METRICS, "--logLevel=LogLevel.DEBUG", "--x=1"],
        {"METRICS_SERVER_PORT": "7000"},
    )
    assert (o.server_port, o.authenticate, o.mem_track, o.trace, o.log_level) == (6000, True, True, True, "DEBUG")
    assert o.daemon_types == ("DEFAULT", "METRICS")
    assert o.metrics_enabled
    assert o.metrics_port == 7000
    assert not options.parse_args([], {}).metrics_enabled
    assert options.parse_args(["--ServerDaemon.daemonTypes=DEFAULT,STATUS"], {}).daemon_types == ("DEFAULT", "STATUS")
    with pytest.raises(options.UsageError, match=r"ServerDaemonType\.METRICS"):
        options.parse_args(["--ServerDaemon.daemonTypes=ServerDaemonType.METRIC"], {})
    with pytest.raises(options.UsageError, match="--memTrack takes true or false"):
        options.parse_args(["--memTrack=yes"], {})
