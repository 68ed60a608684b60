"""The `exporter` subcommand: Arkouda's metrics in the Prometheus text format.

Arkouda started with --ServerDaemon.daemonTypes=ServerDaemonType.DEFAULT,ServerDaemonType.METRICS answers
`metrics` requests on a ZeroMQ REP socket (METRICS_SERVER_PORT), which Prometheus cannot scrape. At every scrape
the collector asks that socket for category ALL and SERVER_INFO (src/MetricsMsg.chpl at v2025.01.13) and turns
the JSON into metric families; a failed poll still answers the scrape, with the exporter's own health only.
Polling at scrape time (not on a timer of ours) is what Prometheus' exporter guidelines ask for.

It also serves the server's last launch network check (netdrops: datagrams dropped during the start-up), from
the small file the server writes in its state dir, read at every scrape too.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zmq
from prometheus_client import start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from arkouda_bootstrap import netdrops
from arkouda_bootstrap.config import ExporterSettings
from arkouda_bootstrap.errors import BootstrapError

log = logging.getLogger(__name__)

# The user name in our requests; the metrics daemon neither checks it nor the token (ServerDaemon.chpl).
EXPORTER_USER = "arkouda-exporter"
# Why a poll failed: the label values of arkouda_exporter_poll_failures_total.
TIMEOUT, MALFORMED, ERROR_REPLY = "timeout", "malformed", "error_reply"
REASONS = (TIMEOUT, MALFORMED, ERROR_REPLY)
GB = 1e9  # TOTAL_MEMORY_USED arrives in GB (bytes / 10^9)

LOCALE_LABELS = ("locale", "locale_name", "hostname")


class PollError(Exception):
    """One failed poll: `reason` is one of REASONS, str() the one log line's detail."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True)
class Family:
    name: str
    kind: str  # "counter" or "gauge"
    help: str
    labels: tuple[str, ...] = ()


def _f(name: str, kind: str, text: str, *labels: str) -> Family:
    return Family(name, kind, text, labels)


# What we serve, keyed by our own name. Counters are given without _total (prometheus_client appends it).
FAMILIES = {
    f.name: f
    for f in (
        _f("arkouda_requests", "counter", "Requests the Arkouda server handled (NUM_REQUESTS total)."),
        _f("arkouda_command_requests", "counter", "Requests per command (NUM_REQUESTS).", "command"),
        _f("arkouda_user_requests", "counter", "Requests per user (NUM_REQUESTS, USER scope, total).", "user"),
        _f(
            "arkouda_user_command_requests",
            "counter",
            "Requests per user and command (NUM_REQUESTS, USER scope).",
            "user",
            "command",
        ),
        _f("arkouda_errors", "counter", "Requests answered with an error (NUM_ERRORS total)."),
        _f("arkouda_command_errors", "counter", "Errors per command (NUM_ERRORS).", "command"),
        _f(
            "arkouda_command_last_response_seconds",
            "gauge",
            "Response time of the command's latest request (RESPONSE_TIME).",
            "command",
        ),
        _f(
            "arkouda_command_avg_response_seconds",
            "gauge",
            "Mean response time of the command (AVG_RESPONSE_TIME).",
            "command",
        ),
        _f(
            "arkouda_command_response_seconds",
            "counter",
            "Sum of the command's response times (TOTAL_RESPONSE_TIME).",
            "command",
        ),
        _f(
            "arkouda_command_memory_used_bytes",
            "counter",
            "Sum over the command's requests of the memory in use after each (TOTAL_MEMORY_USED, GB as bytes).",
            "command",
        ),
        _f(
            "arkouda_locale_memory_used_bytes",
            "gauge",
            "Memory Arkouda uses on the locale (SYSTEM arkouda_memory_used_per_locale).",
            *LOCALE_LABELS,
        ),
        _f(
            "arkouda_locale_memory_used_percent",
            "gauge",
            "Memory used as a percentage of memMax (SYSTEM arkouda_percent_memory_used_per_locale).",
            *LOCALE_LABELS,
        ),
        _f("arkouda_server_metric", "gauge", "A server-scoped counter of Arkouda (SERVER), by name.", "name"),
        _f(
            "arkouda_server_info",
            "gauge",
            "Always 1; the server's version, host and port (SERVER_INFO).",
            "version",
            "hostname",
            "server_port",
        ),
        _f("arkouda_locales", "gauge", "Number of locales (SERVER_INFO)."),
        _f("arkouda_locale_processing_units", "gauge", "Processing units of the locale (SERVER_INFO).", *LOCALE_LABELS),
        _f(
            "arkouda_locale_physical_memory_bytes",
            "gauge",
            "Physical memory of the locale's host (SERVER_INFO).",
            *LOCALE_LABELS,
        ),
        _f("arkouda_locale_max_tasks", "gauge", "Chapel's maxTaskPar on the locale (SERVER_INFO).", *LOCALE_LABELS),
    )
}

# category (and scope) of an Arkouda metric → our family; the per-command categories share one shape.
_PER_COMMAND = {
    "RESPONSE_TIME": "arkouda_command_last_response_seconds",
    "AVG_RESPONSE_TIME": "arkouda_command_avg_response_seconds",
    "TOTAL_RESPONSE_TIME": "arkouda_command_response_seconds",
    "TOTAL_MEMORY_USED": "arkouda_command_memory_used_bytes",
}
_SYSTEM = {
    "arkouda_memory_used_per_locale": "arkouda_locale_memory_used_bytes",
    "arkouda_percent_memory_used_per_locale": "arkouda_locale_memory_used_percent",
}

Samples = dict[str, dict[tuple[str, ...], float]]


def request_message(category: str) -> bytes:
    """The `metrics` request as arkouda's client builds it (message.py): args is a JSON list of JSON-encoded
    ParameterObjs, size their count. The metrics daemon has no error handling around the request, so only
    categories its select knows are ever sent (a bad one would end that daemon's loop)."""
    param = json.dumps({"key": "category", "dtype": "str", "val": category})
    return json.dumps(
        {
            "user": EXPORTER_USER,
            "token": "",
            "cmd": "metrics",
            "format": "STRING",
            "args": json.dumps([param]),
            "size": 1,
        }
    ).encode()


def reply_payload(raw: bytes) -> Any:
    """The JSON inside a reply's `msg`; PollError for a reply that is not JSON or is an error."""
    try:
        reply = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise PollError(MALFORMED, f"reply is not JSON ({exc})") from None
    if not isinstance(reply, dict) or not isinstance(reply.get("msg"), str):
        raise PollError(MALFORMED, "reply has no string field msg")
    if reply.get("msgType") == "ERROR":
        first = reply["msg"].strip().splitlines()[0] if reply["msg"].strip() else "(empty)"
        raise PollError(ERROR_REPLY, f"server answered with an error: {first[:200]}")
    try:
        return json.loads(reply["msg"])
    except ValueError as exc:
        raise PollError(MALFORMED, f"msg is not JSON ({exc})") from None


def _number(entry: Mapping[str, Any], key: str, where: str) -> float:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PollError(MALFORMED, f"{where}: field {key} is {value!r}, not a number")
    return float(value)


def _text(entry: Mapping[str, Any], key: str, where: str) -> str:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise PollError(MALFORMED, f"{where}: field {key} is {value!r}, not a string")
    return str(value)


def _locale_labels(entry: Mapping[str, Any], where: str, *, num: str, name: str, host: str) -> tuple[str, ...]:
    return (_text(entry, num, where), _text(entry, name, where), _text(entry, host, where))


def parse_metrics(payload: Any, samples: Samples) -> None:
    """Category ALL: a list of Metric objects (name, category, scope, value; LocaleMetric adds locale_num,
    locale_name, locale_hostname; UserMetric adds user). Unknown categories are skipped (a newer server)."""
    if not isinstance(payload, list):
        raise PollError(MALFORMED, f"metrics reply is {type(payload).__name__}, not a list")
    for i, entry in enumerate(payload):
        where = f"metric {i}"
        if not isinstance(entry, dict):
            raise PollError(MALFORMED, f"{where} is {type(entry).__name__}, not an object")
        name, category = _text(entry, "name", where), _text(entry, "category", where)
        value = _number(entry, "value", where)
        family: str | None = None
        labels: tuple[str, ...] = ()
        if category in ("NUM_REQUESTS", "NUM_ERRORS"):
            what = "requests" if category == "NUM_REQUESTS" else "errors"
            if entry.get("scope") == "USER" or "user" in entry:
                user = _text(entry, "user", where)
                family, labels = (
                    ("arkouda_user_requests", (user,))
                    if name == "total"
                    else ("arkouda_user_command_requests", (user, name))
                )
            else:
                family, labels = (f"arkouda_{what}", ()) if name == "total" else (f"arkouda_command_{what}", (name,))
        elif category in _PER_COMMAND:
            family, labels = _PER_COMMAND[category], (name,)
            if category == "TOTAL_MEMORY_USED":
                value *= GB
        elif category == "SYSTEM":
            family = _SYSTEM.get(name)
            if family is not None:
                labels = _locale_labels(entry, where, num="locale_num", name="locale_name", host="locale_hostname")
        elif category == "SERVER":
            family, labels = "arkouda_server_metric", (name,)
        if family is None:
            log.debug("skipping %s: category %s, name %s", where, category, name)
            continue
        samples.setdefault(family, {})[labels] = value


def parse_server_info(payload: Any, samples: Samples) -> None:
    """Category SERVER_INFO: one ServerInfo object (hostname, version, server_port, number_of_locales, locales:
    LocaleInfo objects with id, name, hostname, number_of_processing_units, physical_memory,
    max_number_of_tasks)."""
    if not isinstance(payload, dict):
        raise PollError(MALFORMED, f"server info reply is {type(payload).__name__}, not an object")
    labels = tuple(_text(payload, k, "server info") for k in ("version", "hostname", "server_port"))
    samples.setdefault("arkouda_server_info", {})[labels] = 1.0
    locales = payload.get("locales")
    if not isinstance(locales, list):
        raise PollError(MALFORMED, "server info: field locales is not a list")
    samples.setdefault("arkouda_locales", {})[()] = float(
        _number(payload, "number_of_locales", "server info") if "number_of_locales" in payload else len(locales)
    )
    for i, loc in enumerate(locales):
        where = f"server info locale {i}"
        if not isinstance(loc, dict):
            raise PollError(MALFORMED, f"{where} is {type(loc).__name__}, not an object")
        key = _locale_labels(loc, where, num="id", name="name", host="hostname")
        for field, family in (
            ("number_of_processing_units", "arkouda_locale_processing_units"),
            ("physical_memory", "arkouda_locale_physical_memory_bytes"),
            ("max_number_of_tasks", "arkouda_locale_max_tasks"),
        ):
            samples.setdefault(family, {})[key] = _number(loc, field, where)


class MetricsSocket:
    """A REQ socket to the metrics daemon with a deadline per request. REQ is lockstep (send, receive, send…):
    after a timeout the socket would wait for the lost reply forever and refuse the next send, so it is closed
    (LINGER 0 drops the unsent request) and the next request gets a new one."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]], endpoint: str) -> None:
        self._context = context
        self.endpoint = endpoint
        self._socket: zmq.Socket[bytes] | None = None

    def request(self, message: bytes, *, timeout: float) -> bytes:
        if self._socket is None:
            self._socket = self._context.socket(zmq.REQ)
            self._socket.setsockopt(zmq.LINGER, 0)
            self._socket.connect(self.endpoint)
        millis = max(1, int(timeout * 1000))
        self._socket.setsockopt(zmq.SNDTIMEO, millis)  # a REQ without a peer blocks in send
        self._socket.setsockopt(zmq.RCVTIMEO, millis)
        try:
            self._socket.send(message)
            return self._socket.recv()
        except zmq.Again:
            self.reset()
            raise PollError(TIMEOUT, "no reply") from None

    def reset(self) -> None:
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None


class ArkoudaCollector(Collector):
    """Polls the metrics socket at every scrape (one at a time: the REQ socket is not thread-safe) and yields
    Arkouda's metrics plus arkouda_exporter_last_poll_ok, _poll_duration_seconds and _poll_failures_total."""

    def __init__(self, socket: MetricsSocket, *, timeout: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._socket = socket
        self._timeout = timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._failures = dict.fromkeys(REASONS, 0)
        self._last_failure: str | None = None

    def describe(self) -> list[Metric]:
        return []  # registering must not poll

    def poll(self) -> Samples:
        """Both requests within one deadline of `timeout` seconds."""
        samples: Samples = {}
        deadline = self._clock() + self._timeout
        for category, parse in (("ALL", parse_metrics), ("SERVER_INFO", parse_server_info)):
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise PollError(TIMEOUT, f"no reply within {self._timeout:g}s")
            try:
                raw = self._socket.request(request_message(category), timeout=remaining)
                parse(reply_payload(raw), samples)
            except PollError as exc:
                detail = f"no reply within {self._timeout:g}s" if exc.reason == TIMEOUT else str(exc)
                raise PollError(exc.reason, f"metrics {category}: {detail}") from None
        return samples

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            start = self._clock()
            try:
                samples, ok = self.poll(), True
            except PollError as exc:
                samples, ok = {}, False
                self._failures[exc.reason] += 1
                self._log_failure(exc)
            else:
                if self._last_failure is not None:
                    log.info("poll of %s succeeds again", self._socket.endpoint)
                self._last_failure = None
            duration = self._clock() - start
            failures = dict(self._failures)
        yield from families(samples)
        yield GaugeMetricFamily(
            "arkouda_exporter_last_poll_ok",
            "1 when this scrape's poll of Arkouda's metrics socket succeeded.",
            value=1.0 if ok else 0.0,
        )
        yield GaugeMetricFamily(
            "arkouda_exporter_poll_duration_seconds",
            "Duration of this scrape's poll of the metrics socket.",
            value=duration,
        )
        counter = CounterMetricFamily(
            "arkouda_exporter_poll_failures", "Failed polls of the metrics socket, by reason.", labels=["reason"]
        )
        for reason, count in failures.items():
            counter.add_metric([reason], float(count))
        yield counter

    def _log_failure(self, exc: PollError) -> None:
        """One WARNING line per failure that differs from the previous poll's (a server that is still starting
        would otherwise log at every scrape); the same failure again is DEBUG."""
        text = f"poll of {self._socket.endpoint} failed ({exc.reason}): {exc}"
        if exc.reason == TIMEOUT:
            text += " (is arkouda_server running with --ServerDaemon.daemonTypes=...,ServerDaemonType.METRICS?)"
        if self._last_failure == exc.reason:
            log.debug("%s", text)
        else:
            log.warning("%s", text)
        self._last_failure = exc.reason


class LaunchNetworkCollector(Collector):
    """The server's last launch network check (netdrops.Totals, a file it replaces atomically), read at every
    scrape. No file (no launch checked yet, or another launcher) serves no arkouda_launch_* family at all."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._last_error: str | None = None

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        try:
            totals = netdrops.read_totals(self._path)
        except Exception as exc:  # noqa: BLE001 - whatever is wrong with this file must not fail the whole scrape
            # told once per distinct error: the file is rewritten at the next launch only
            text = f"cannot read the launch network check {self._path} (no arkouda_launch_* metrics): {exc}"
            if text != self._last_error:
                log.warning("%s", text)
            self._last_error = text
            return
        self._last_error = None
        if totals is None:
            return
        dropped = GaugeMetricFamily(
            "arkouda_launch_datagrams_dropped",
            "Datagrams dropped on the last launch's hosts during its start-up, by side "
            "(sender: SndbufErrors/OutDiscards, receiver: RcvbufErrors/InErrors of /proc/net/snmp).",
            labels=["side"],
        )
        dropped.add_metric(["sender"], float(totals.sender))
        dropped.add_metric(["receiver"], float(totals.receiver))
        yield dropped
        for name, text, value in (
            ("arkouda_launch_hosts", "Hosts of the last launch.", totals.hosts),
            ("arkouda_launch_hosts_checked", "Hosts of the last launch whose drops could be counted.", totals.checked),
            ("arkouda_launch_hosts_dropping", "Hosts that dropped datagrams during the last launch.", totals.dropping),
        ):
            yield GaugeMetricFamily(name, text, value=float(value))
        yield GaugeMetricFamily(
            "arkouda_launch_network_check_timestamp_seconds",
            "When the last launch's network check ran (Unix time).",
            value=totals.checked_at,
        )


def families(samples: Samples) -> Iterable[Metric]:
    for name, by_labels in samples.items():
        spec = FAMILIES[name]
        family: Metric
        if spec.kind == "counter":
            family = CounterMetricFamily(name, spec.help, labels=list(spec.labels))
        else:
            family = GaugeMetricFamily(name, spec.help, labels=list(spec.labels))
        for labels, value in sorted(by_labels.items()):
            family.add_metric(list(labels), value)
        yield family


@dataclass
class Exporter:
    """A running exporter: the HTTP server (its own thread) and the socket; `port` is the bound port."""

    settings: ExporterSettings
    context: zmq.Context[zmq.Socket[bytes]]
    socket: MetricsSocket
    httpd: Any
    port: int

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.socket.reset()
        self.context.term()


def start_exporter(settings: ExporterSettings) -> Exporter:
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    socket = MetricsSocket(context, f"tcp://{settings.metrics_host}:{settings.metrics_port}")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ArkoudaCollector(socket, timeout=settings.timeout))
    registry.register(LaunchNetworkCollector(settings.launch_network_file))
    try:
        httpd, _ = start_http_server(settings.listen_port, addr=settings.listen_host, registry=registry)
    except OSError as exc:
        context.term()
        raise BootstrapError(
            f"--listen-port (ARKOUDA_EXPORTER_PORT): cannot listen on {settings.listen_host}:{settings.listen_port}: "
            f"{exc.strerror or exc}"
        ) from None
    port = int(httpd.server_address[1])
    log.info(
        "serving /metrics on %s:%d; polling %s at every scrape (timeout %gs)",
        settings.listen_host,
        port,
        socket.endpoint,
        settings.timeout,
    )
    return Exporter(settings=settings, context=context, socket=socket, httpd=httpd, port=port)


def run_exporter(settings: ExporterSettings, *, stop: threading.Event | None = None) -> int:
    """Serves until `stop` is set; without one, until SIGTERM or SIGINT (handlers installed only once the port
    is bound, so a start-up error leaves the caller's handlers alone). Then shuts down cleanly."""
    exporter = start_exporter(settings)
    if stop is None:
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
    try:
        stop.wait()
    finally:
        exporter.close()
    log.info("exporter stopped")
    return 0
