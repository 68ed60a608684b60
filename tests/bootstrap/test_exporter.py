"""The exporter against a ZeroMQ REP test double of Arkouda's metrics socket (MetricsSocketDouble), scraped over
real HTTP: every metric category of the reply shapes in src/MetricsMsg.chpl (v2025.01.13), and bad replies (no
reply, not JSON, an error reply, a bad field), after each of which the exporter keeps serving, reports the poll
as failed and logs one line saying why."""

from __future__ import annotations

import json
import logging
import queue
import socket
import threading
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq
from arkouda_bootstrap import exporter, netdrops
from arkouda_bootstrap.cli import exporter as exporter_cli
from arkouda_bootstrap.cli import main as cli
from arkouda_bootstrap.cli.options import COMMON, Values
from arkouda_bootstrap.config import DEFAULT_EXPORTER_HOST, ExporterSettings
from arkouda_bootstrap.errors import EXIT_FAILURE, EXIT_USAGE
from prometheus_client.parser import text_string_to_metric_families

Reply = Callable[[dict[str, Any]], bytes | None]  # None: swallow the request (the peer never answers)


def envelope(msg: str, msg_type: str = "NORMAL") -> bytes:
    """A reply as the server's serialize() makes it (MsgTuple: msg, msgType, msgFormat, user, payload)."""
    return json.dumps(
        {"msg": msg, "msgType": msg_type, "msgFormat": "STRING", "user": "arkouda-exporter", "payload": ""}
    ).encode()


def metric(name: str, category: str, value: float, scope: str = "GLOBAL", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "category": category,
        "scope": scope,
        "timestamp": "2025-01-13T10:00:00.000000",
        "value": value,
        **extra,
    }


def locale_metric(name: str, value: float, num: int) -> dict[str, Any]:
    return metric(
        name,
        "SYSTEM",
        value,
        scope="LOCALE",
        locale_num=num,
        locale_name=f"ak-{num}",
        locale_hostname=f"10.0.0.{num + 1}",
    )


# Category ALL holds every other category (exportAllMetrics): NUM_REQUESTS with its total, RESPONSE_TIME,
# AVG_RESPONSE_TIME, TOTAL_RESPONSE_TIME, TOTAL_MEMORY_USED (GB), SYSTEM per locale, SERVER, USER-scoped
# NUM_REQUESTS, NUM_ERRORS with its total.
ALL = [
    metric("create", "NUM_REQUESTS", 3.0),
    metric("getconfig", "NUM_REQUESTS", 1.0),
    metric("total", "NUM_REQUESTS", 4.0),
    metric("create", "RESPONSE_TIME", 0.25),
    metric("create", "AVG_RESPONSE_TIME", 0.5),
    metric("create", "TOTAL_RESPONSE_TIME", 1.5),
    metric("create", "TOTAL_MEMORY_USED", 2.5),
    locale_metric("arkouda_memory_used_per_locale", 1048576.0, 0),
    locale_metric("arkouda_percent_memory_used_per_locale", 12.5, 0),
    locale_metric("arkouda_memory_used_per_locale", 2097152.0, 1),
    locale_metric("arkouda_percent_memory_used_per_locale", 25.0, 1),
    metric("arkouda_number_of_connections", "SERVER", 2.0),
    metric("create", "NUM_REQUESTS", 3.0, scope="USER", user="alice"),
    metric("total", "NUM_REQUESTS", 3.0, scope="USER", user="alice"),
    metric("sort", "NUM_ERRORS", 1.0),
    metric("total", "NUM_ERRORS", 1.0),
    metric("future", "SOMETHING_NEW", 7.0),  # a category a newer server might add: skipped, not an error
]
SERVER_INFO = {
    "hostname": "ak-arkouda-server-0",
    "version": "v2025.01.13",
    "server_port": 5555,
    "locales": [
        {
            "name": f"ak-{i}",
            "id": str(i),
            "hostname": f"10.0.0.{i + 1}",
            "number_of_processing_units": 4,
            "physical_memory": 8589934592,
            "max_number_of_tasks": 4,
        }
        for i in range(2)
    ],
    "number_of_locales": 2,
}


def good(request: dict[str, Any]) -> bytes:
    category = json.loads(json.loads(request["args"])[0])["val"]
    return envelope(json.dumps(ALL if category == "ALL" else SERVER_INFO))


class MetricsSocketDouble:
    """Test double of Arkouda's metrics daemon (its REP socket): answers each request with the next scripted
    reply (or `default` when the script is empty) and records the requests. It is a ROUTER, which speaks the
    REP side of the REQ/REP exchange but can also leave a request unanswered, like a hung server, and still
    take the next request on the same port (a REP socket would have to be rebound)."""

    def __init__(self, default: Reply = good) -> None:
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.socket = self.context.socket(zmq.ROUTER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.port = self.socket.bind_to_random_port("tcp://127.0.0.1")
        self.script: queue.Queue[Reply] = queue.Queue()
        self.default = default
        self.requests: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            if not self.socket.poll(50):
                continue
            peer, empty, body = self.socket.recv_multipart()  # REQ's envelope: its identity, "", the request
            request = json.loads(body)
            self.requests.append(request)
            try:
                reply = self.script.get_nowait()(request)
            except queue.Empty:
                reply = self.default(request)
            if reply is not None:
                self.socket.send_multipart([peer, empty, reply])

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.socket.close(linger=0)
        self.context.term()


@pytest.fixture
def double() -> Iterator[MetricsSocketDouble]:
    d = MetricsSocketDouble()
    yield d
    d.close()


@pytest.fixture
def running(double: MetricsSocketDouble) -> Iterator[exporter.Exporter]:
    settings = ExporterSettings(metrics_port=double.port, listen_host="127.0.0.1", listen_port=0, timeout=0.5)
    # listen_port 0 is refused by the CLI's validation; start_exporter itself takes it (a free port)
    running = exporter.start_exporter(settings)
    yield running
    running.close()


def scrape(running: exporter.Exporter) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{running.port}/metrics", timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def loc(num: int) -> tuple[tuple[str, str], ...]:
    return (("hostname", f"10.0.0.{num + 1}"), ("locale", str(num)), ("locale_name", f"ak-{num}"))


def test_every_category_becomes_prometheus_metrics(double: MetricsSocketDouble, running: exporter.Exporter) -> None:
    got = scrape(running)
    expected = {
        ("arkouda_requests_total", ()): 4.0,
        ("arkouda_command_requests_total", (("command", "create"),)): 3.0,
        ("arkouda_command_requests_total", (("command", "getconfig"),)): 1.0,
        ("arkouda_command_last_response_seconds", (("command", "create"),)): 0.25,
        ("arkouda_command_avg_response_seconds", (("command", "create"),)): 0.5,
        ("arkouda_command_response_seconds_total", (("command", "create"),)): 1.5,
        ("arkouda_command_memory_used_bytes_total", (("command", "create"),)): 2.5e9,
        ("arkouda_locale_memory_used_bytes", loc(0)): 1048576.0,
        ("arkouda_locale_memory_used_percent", loc(0)): 12.5,
        ("arkouda_locale_memory_used_bytes", loc(1)): 2097152.0,
        ("arkouda_locale_memory_used_percent", loc(1)): 25.0,
        ("arkouda_server_metric", (("name", "arkouda_number_of_connections"),)): 2.0,
        ("arkouda_user_command_requests_total", (("command", "create"), ("user", "alice"))): 3.0,
        ("arkouda_user_requests_total", (("user", "alice"),)): 3.0,
        ("arkouda_command_errors_total", (("command", "sort"),)): 1.0,
        ("arkouda_errors_total", ()): 1.0,
        (
            "arkouda_server_info",
            (("hostname", "ak-arkouda-server-0"), ("server_port", "5555"), ("version", "v2025.01.13")),
        ): 1.0,
        ("arkouda_locales", ()): 2.0,
        ("arkouda_locale_processing_units", loc(0)): 4.0,
        ("arkouda_locale_physical_memory_bytes", loc(1)): 8589934592.0,
        ("arkouda_locale_max_tasks", loc(1)): 4.0,
        ("arkouda_exporter_last_poll_ok", ()): 1.0,
        ("arkouda_exporter_poll_failures_total", (("reason", "timeout"),)): 0.0,
    }
    for key, value in expected.items():
        assert got.get(key) == value, key
    assert not any("future" in str(key) for key in got)
    assert 0 <= got[("arkouda_exporter_poll_duration_seconds", ())] < 0.5


def test_requests_have_the_clients_shape(double: MetricsSocketDouble, running: exporter.Exporter) -> None:
    scrape(running)
    assert [r["cmd"] for r in double.requests] == ["metrics", "metrics"]
    first = double.requests[0]
    assert set(first) == {"user", "token", "cmd", "format", "args", "size"}
    assert (first["format"], first["size"]) == ("STRING", 1)
    params = [json.loads(p) for r in double.requests for p in json.loads(r["args"])]
    assert params == [
        {"key": "category", "dtype": "str", "val": "ALL"},
        {"key": "category", "dtype": "str", "val": "SERVER_INFO"},
    ]


def swallow(_: dict[str, Any]) -> bytes | None:
    return None


def not_json(_: dict[str, Any]) -> bytes:
    return b"{not json"


def error_reply(_: dict[str, Any]) -> bytes:
    return envelope("Error: Invalid MetricType\nmore detail", "ERROR")


def bad_value(_: dict[str, Any]) -> bytes:
    return envelope(json.dumps([metric("create", "NUM_REQUESTS", "three")]))  # type: ignore[arg-type]


def msg_not_json(_: dict[str, Any]) -> bytes:
    return envelope("[{")


@pytest.mark.parametrize(
    ("reply", "reason", "says"),
    [
        (swallow, "timeout", "metrics ALL: no reply within 0.5s"),
        (not_json, "malformed", "metrics ALL: reply is not JSON"),
        (msg_not_json, "malformed", "metrics ALL: msg is not JSON"),
        (error_reply, "error_reply", "metrics ALL: server answered with an error: Error: Invalid MetricType"),
        (bad_value, "malformed", "metrics ALL: metric 0: field value is 'three', not a number"),
    ],
)
def test_a_bad_reply_fails_the_poll_logs_one_line_and_the_next_poll_recovers(
    double: MetricsSocketDouble,
    running: exporter.Exporter,
    caplog: pytest.LogCaptureFixture,
    reply: Reply,
    reason: str,
    says: str,
) -> None:
    double.script.put(reply)
    with caplog.at_level(logging.DEBUG, logger="arkouda_bootstrap.exporter"):
        failed = scrape(running)
    assert failed[("arkouda_exporter_last_poll_ok", ())] == 0.0
    assert failed[("arkouda_exporter_poll_failures_total", (("reason", reason),))] == 1.0
    assert not any(name.startswith("arkouda_") and "exporter" not in name for name, _ in failed)  # nothing stale
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1
    assert says in lines[0].getMessage() and "\n" not in lines[0].getMessage()
    assert f"failed ({reason})" in lines[0].getMessage()
    # the exporter keeps serving, and after a timeout its new REQ socket gets the next reply
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="arkouda_bootstrap.exporter"):
        again = scrape(running)
    assert again[("arkouda_exporter_last_poll_ok", ())] == 1.0
    assert again[("arkouda_requests_total", ())] == 4.0
    assert again[("arkouda_exporter_poll_failures_total", (("reason", reason),))] == 1.0
    assert any("succeeds again" in r.getMessage() for r in caplog.records)


def test_the_same_failure_again_is_not_logged_again(
    double: MetricsSocketDouble, running: exporter.Exporter, caplog: pytest.LogCaptureFixture
) -> None:
    double.script.put(error_reply)
    double.script.put(error_reply)
    double.script.put(not_json)
    with caplog.at_level(logging.INFO, logger="arkouda_bootstrap.exporter"):
        for _ in range(3):
            scrape(running)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert "error_reply" in warnings[0] and "malformed" in warnings[1]


def test_a_failure_in_server_info_fails_the_whole_poll(double: MetricsSocketDouble, running: exporter.Exporter) -> None:
    double.script.put(good)
    double.script.put(lambda _: envelope(json.dumps({"version": "v", "hostname": "h", "server_port": 1})))
    got = scrape(running)
    assert got[("arkouda_exporter_last_poll_ok", ())] == 0.0
    assert got[("arkouda_exporter_poll_failures_total", (("reason", "malformed"),))] == 1.0


def test_nothing_listening_is_a_timeout_and_the_exporter_still_serves() -> None:
    with zmq.Context() as ctx, ctx.socket(zmq.REP) as probe:
        port = probe.bind_to_random_port("tcp://127.0.0.1")  # a port that was free, then closed again
    settings = ExporterSettings(metrics_port=port, listen_host="127.0.0.1", listen_port=0, timeout=0.2)
    running = exporter.start_exporter(settings)
    try:
        got = scrape(running)
        assert got[("arkouda_exporter_last_poll_ok", ())] == 0.0
        assert got[("arkouda_exporter_poll_failures_total", (("reason", "timeout"),))] == 1.0
    finally:
        running.close()


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ({"not": "a list"}, "metrics reply is dict, not a list"),
        (["x"], "metric 0 is str, not an object"),
        ([{"category": "NUM_REQUESTS", "value": 1}], "metric 0: field name is None, not a string"),
        ([metric("x", "NUM_REQUESTS", True)], "field value is True, not a number"),
        ([metric("x", "NUM_REQUESTS", 1, scope="USER")], "field user is None"),
        ([{**locale_metric("arkouda_memory_used_per_locale", 1, 0), "locale_hostname": None}], "locale_hostname"),
    ],
)
def test_parse_metrics_names_the_bad_field(payload: Any, says: str) -> None:
    with pytest.raises(exporter.PollError) as err:
        exporter.parse_metrics(payload, {})
    assert err.value.reason == "malformed" and says in str(err.value)


def test_cli_builds_settings_from_env_and_flags() -> None:
    ns = cli.build_parser().parse_args(["exporter", "--listen-port", "9100"])
    env = {"METRICS_SERVER_PORT": "6001", "ARKOUDA_EXPORTER_TIMEOUT": "2.5"}
    s = exporter_cli.exporter_settings(Values(ns, [*COMMON, *exporter_cli.EXPORTER], env))
    assert s == ExporterSettings(
        metrics_host="127.0.0.1",
        metrics_port=6001,
        listen_host=DEFAULT_EXPORTER_HOST,
        listen_port=9100,
        timeout=2.5,
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"METRICS_SERVER_PORT": "0"}, "--metrics-port (METRICS_SERVER_PORT): 0 is less than 1"),
        ({"ARKOUDA_EXPORTER_PORT": "http"}, "--listen-port (ARKOUDA_EXPORTER_PORT): 'http' is not an integer"),
        ({"ARKOUDA_EXPORTER_TIMEOUT": "0"}, "--timeout (ARKOUDA_EXPORTER_TIMEOUT): '0' must be greater than 0"),
    ],
)
def test_bad_exporter_input_is_one_line_naming_flag_and_env(
    env: dict[str, str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["exporter"], environ=env)
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert message in err and err.count("\n") == 1


def test_a_busy_listen_port_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = cli.main(
            ["exporter"], environ={"ARKOUDA_EXPORTER_HOST": "127.0.0.1", "ARKOUDA_EXPORTER_PORT": str(port)}
        )
    err = capsys.readouterr().err
    assert code == EXIT_FAILURE
    assert err.startswith(
        f"arkouda-bootstrap: error: --listen-port (ARKOUDA_EXPORTER_PORT): cannot listen on 127.0.0.1:{port}: "
    )
    assert err.count("\n") == 1


def test_run_exporter_stops_on_its_event(double: MetricsSocketDouble) -> None:
    stop = threading.Event()
    settings = ExporterSettings(metrics_port=double.port, listen_host="127.0.0.1", listen_port=0, timeout=0.5)
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(exporter.run_exporter(settings, stop=stop)))
    thread.start()
    stop.set()
    thread.join(10)
    assert result == [0]


def test_the_last_launchs_network_check_is_served_from_its_file_at_every_scrape(
    double: MetricsSocketDouble, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "launch" / "network.json"
    settings = ExporterSettings(
        metrics_port=double.port, listen_host="127.0.0.1", listen_port=0, timeout=0.5, launch_network_file=path
    )
    running = exporter.start_exporter(settings)
    try:
        # no launch checked yet: no family at all (not zeros, which would claim a clean launch)
        assert not any(name.startswith("arkouda_launch_") for name, _ in scrape(running))
        netdrops.write_totals(
            path, netdrops.Totals(sender=168, receiver=34, hosts=64, checked=63, dropping=40, checked_at=1765000000.0)
        )
        got = scrape(running)
        assert {k: v for k, v in got.items() if k[0].startswith("arkouda_launch_")} == {
            ("arkouda_launch_datagrams_dropped", (("side", "sender"),)): 168.0,
            ("arkouda_launch_datagrams_dropped", (("side", "receiver"),)): 34.0,
            ("arkouda_launch_hosts", ()): 64.0,
            ("arkouda_launch_hosts_checked", ()): 63.0,
            ("arkouda_launch_hosts_dropping", ()): 40.0,
            ("arkouda_launch_network_check_timestamp_seconds", ()): 1765000000.0,
        }
        # Arkouda's own metrics still come along
        assert got[("arkouda_exporter_last_poll_ok", ())] == 1.0
        # the next launch replaces the file: read again at the next scrape
        netdrops.write_totals(
            path, netdrops.Totals(sender=0, receiver=0, hosts=64, checked=64, dropping=0, checked_at=1765000100.0)
        )
        assert scrape(running)[("arkouda_launch_datagrams_dropped", (("side", "sender"),))] == 0.0
        # a file that is not ours: the families go, one warning line, the scrape still answers
        path.write_text("not json")
        for _ in range(2):
            got = scrape(running)
            assert not any(name.startswith("arkouda_launch_") for name, _ in got)
            assert got[("arkouda_exporter_last_poll_ok", ())] == 1.0
        warnings = [r for r in caplog.records if "cannot read the launch network check" in r.getMessage()]
        assert len(warnings) == 1
        assert warnings[0].levelno == logging.WARNING
    finally:
        running.close()


@pytest.mark.parametrize("value", ["Infinity", "-Infinity", "NaN", "1e999"])
def test_a_launch_file_with_a_non_finite_number_is_unreadable_and_the_scrape_still_answers(
    double: MetricsSocketDouble, tmp_path: Path, caplog: pytest.LogCaptureFixture, value: str
) -> None:
    path = tmp_path / "network.json"
    fields = {"sender": 1, "receiver": 2, "hosts": 3, "checked": 3, "dropping": 1, "checked_at": 1765000000.0}
    path.write_text(json.dumps(fields).replace('"sender": 1', f'"sender": {value}'))
    settings = ExporterSettings(
        metrics_port=double.port, listen_host="127.0.0.1", listen_port=0, timeout=0.5, launch_network_file=path
    )
    running = exporter.start_exporter(settings)
    try:
        for _ in range(2):
            got = scrape(running)
            assert not any(name.startswith("arkouda_launch_") for name, _ in got)
            assert got[("arkouda_exporter_last_poll_ok", ())] == 1.0
    finally:
        running.close()
    warnings = [r for r in caplog.records if "cannot read the launch network check" in r.getMessage()]
    assert len(warnings) == 1
    assert "field sender is" in warnings[0].getMessage()


def test_cli_takes_the_launch_network_file_from_env() -> None:
    ns = cli.build_parser().parse_args(["exporter"])
    env = {"ARKOUDA_LAUNCH_NETWORK_FILE": "/run/arkouda/launch/other.json"}
    s = exporter_cli.exporter_settings(Values(ns, [*COMMON, *exporter_cli.EXPORTER], env))
    assert s.launch_network_file == Path("/run/arkouda/launch/other.json")
    default = exporter_cli.exporter_settings(Values(ns, [*COMMON, *exporter_cli.EXPORTER], {}))
    assert default.launch_network_file == Path("/run/arkouda/launch/network.json")
