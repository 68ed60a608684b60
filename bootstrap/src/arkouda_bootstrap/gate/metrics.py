"""The gate's own Prometheus metrics: its phase, the held and forwarded clients, and its sleeps and wakes.

Served on their own HTTP port (prometheus_client's server), which is also the gate pod's readiness probe: a
kubelet probe of the client port would be a client connection, and would wake a sleeping release.
Values are read at scrape time from the controller and the traffic record (ints and an enum, written by the
gate's event loop; a scrape may see a state one transition old, never a torn one).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client import start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from arkouda_bootstrap.gate.idle import Traffic
from arkouda_bootstrap.gate.sleepwake import Controller, Phase

log = logging.getLogger(__name__)


class GateCollector(Collector):
    def __init__(self, *, controller: Controller, traffic: Traffic) -> None:
        self._controller = controller
        self._traffic = traffic

    def collect(self) -> Iterator[Metric]:
        ctl = self._controller
        phase = GaugeMetricFamily(
            "arkouda_gate_phase", "1 for the release's current phase as the gate sees it", labels=["phase"]
        )
        for p in Phase:
            phase.add_metric([p.value], 1.0 if ctl.phase is p else 0.0)
        yield phase
        yield GaugeMetricFamily(
            "arkouda_gate_held_clients", "client connections held until the server is Ready", value=len(ctl.held)
        )
        snap = self._traffic.snapshot()
        yield GaugeMetricFamily(
            "arkouda_gate_open_connections", "client connections spliced to the server", value=snap.open_connections
        )
        yield GaugeMetricFamily(
            "arkouda_gate_requests_in_flight",
            "spliced connections with a request awaiting its reply",
            value=snap.in_flight,
        )
        yield CounterMetricFamily("arkouda_gate_sleeps", "times the idle release was scaled to 0", value=ctl.sleeps)
        yield CounterMetricFamily("arkouda_gate_wakes", "times the sleeping release was scaled up", value=ctl.wakes)
        yield CounterMetricFamily(
            "arkouda_gate_wake_timeouts", "wakes that missed their deadline", value=ctl.wake_timeouts
        )


def serve_metrics(*, port: int, controller: Controller, traffic: Traffic) -> None:
    """Serve /metrics on `port` (all addresses) from a daemon thread."""
    registry = CollectorRegistry()
    registry.register(GateCollector(controller=controller, traffic=traffic))
    start_http_server(port, registry=registry)
    log.info("gate metrics on :%d/metrics", port)
