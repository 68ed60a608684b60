"""The gate's own Prometheus metrics and its readiness, on one HTTP port (not the client port: a kubelet probe
there would be a client).

/metrics: the release's phase, held requests, requests in flight, open client connections, the requests the gate
answered itself (by reason), the server's health check, sleeps and wakes. /readyz: 200 while the server's
request loop is not known to be dead (asleep and waking included: the gate then holds requests), else 503.
Values are read at scrape time from the gate (ints and an enum written by its event loop; a scrape may see a
state one transition old, never a torn one).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from arkouda_bootstrap.gate.envelope import Refusal
from arkouda_bootstrap.gate.sleepwake import Phase

if TYPE_CHECKING:
    from arkouda_bootstrap.gate.main import Gate

log = logging.getLogger(__name__)


@dataclass
class GateStats:
    """Counters of the gate's event loop since its start."""

    refused: Counter[Refusal] = field(default_factory=Counter)
    forwarded: int = 0
    unresponsive: int = 0
    relaunches: int = 0


class GateCollector(Collector):
    def __init__(self, gate: Gate) -> None:
        self._gate = gate

    def collect(self) -> Iterator[Metric]:
        gate = self._gate
        ctl = gate.controller
        phase = GaugeMetricFamily(
            "arkouda_gate_phase", "1 for the release's current phase as the gate sees it", labels=["phase"]
        )
        for p in Phase:
            phase.add_metric([p.value], 1.0 if ctl.phase is p else 0.0)
        yield phase
        yield GaugeMetricFamily(
            "arkouda_gate_held_requests", "client requests held until the server is Ready", value=len(ctl.held)
        )
        snap = gate.traffic.snapshot()
        yield GaugeMetricFamily(
            "arkouda_gate_open_connections", "client connections open at the gate", value=snap.open_connections
        )
        yield GaugeMetricFamily(
            "arkouda_gate_requests_in_flight",
            "client requests held or at the server, not answered",
            value=snap.in_flight,
        )
        yield CounterMetricFamily(
            "arkouda_gate_forwarded_requests", "client requests forwarded to the server", value=gate.stats.forwarded
        )
        refused = CounterMetricFamily(
            "arkouda_gate_refused_requests",
            "client requests the gate answered with an error itself, never forwarded (or lost with the server)",
            labels=["reason"],
        )
        for reason in Refusal:
            refused.add_metric([reason.value], float(gate.stats.refused[reason]))
        yield refused
        yield GaugeMetricFamily(
            "arkouda_gate_server_answering",
            "1 unless the server's request loop stopped answering the gate's health check",
            value=1.0 if gate.health.answering else 0.0,
        )
        yield CounterMetricFamily(
            "arkouda_gate_server_unresponsive",
            "health checks the server did not answer in time (each deletes the server pod)",
            value=gate.stats.unresponsive,
        )
        yield CounterMetricFamily("arkouda_gate_sleeps", "times the idle release was scaled to 0", value=ctl.sleeps)
        yield CounterMetricFamily("arkouda_gate_wakes", "times the sleeping release was scaled up", value=ctl.wakes)
        yield CounterMetricFamily(
            "arkouda_gate_wake_timeouts", "wakes that missed their deadline", value=ctl.wake_timeouts
        )


def serve_metrics(*, port: int, gate: Gate, host: str = "") -> ThreadingHTTPServer:
    """Serve /metrics and /readyz on `port` (all addresses) from a daemon thread."""
    registry = CollectorRegistry()
    registry.register(GateCollector(gate))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] == "/readyz":
                ok = gate.ready
                code, body, kind = (
                    (200, b"ok\n", "text/plain")
                    if ok
                    else (503, b"the server's request loop does not answer\n", "text/plain")
                )
            elif self.path.split("?")[0] == "/metrics":
                code, body, kind = 200, generate_latest(registry), CONTENT_TYPE_LATEST
            else:
                code, body, kind = 404, b"/metrics or /readyz\n", "text/plain"
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("metrics: %s", format % args)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="gate-metrics", daemon=True).start()
    log.info("gate metrics on :%d/metrics, readiness on :%d/readyz", server.server_address[1], server.server_address[1])
    return server
