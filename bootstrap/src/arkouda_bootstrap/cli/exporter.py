"""`exporter`: its options and the ExporterSettings built from them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from arkouda_bootstrap import config
from arkouda_bootstrap.cli.options import Opt, Subcommand, Values
from arkouda_bootstrap.config import ExporterSettings
from arkouda_bootstrap.kube.api import KubeApi

EXPORTER = [
    Opt(
        "metrics_host",
        "--metrics-host",
        "ARKOUDA_METRICS_HOST",
        "host of Arkouda's metrics socket",
        config.DEFAULT_METRICS_HOST,
        doc="host of Arkouda's metrics socket (the sidecar shares the pod's network)",
    ),
    Opt(
        "metrics_port",
        "--metrics-port",
        "METRICS_SERVER_PORT",
        "port of Arkouda's metrics socket (ZeroMQ)",
        config.DEFAULT_METRICS_PORT,
        doc="its port (the same variable Arkouda reads)",
    ),
    Opt(
        "listen_host",
        "--listen-host",
        "ARKOUDA_EXPORTER_HOST",
        "address of the HTTP server",
        config.DEFAULT_EXPORTER_HOST,
    ),
    Opt(
        "listen_port",
        "--listen-port",
        "ARKOUDA_EXPORTER_PORT",
        "port of HTTP /metrics",
        config.DEFAULT_EXPORTER_PORT,
        doc="port of `/metrics`",
    ),
    Opt(
        "timeout",
        "--timeout",
        "ARKOUDA_EXPORTER_TIMEOUT",
        "seconds one poll of the metrics socket may take",
        config.DEFAULT_EXPORTER_TIMEOUT,
        doc="seconds one poll (both requests) may take; keep it below the scrape timeout",
    ),
    Opt(
        "launch_network_file",
        "--launch-network-file",
        "ARKOUDA_LAUNCH_NETWORK_FILE",
        "the server's last launch network check (JSON); absent: no arkouda_launch_* metrics",
        config.DEFAULT_LAUNCH_NETWORK_FILE,
        doc="the server's last launch network check, written by `server` (`<state-dir>/launch/network.json`); "
        "absent: no `arkouda_launch_*` metrics",
    ),
]


def exporter_settings(v: Values) -> ExporterSettings:
    return ExporterSettings(
        metrics_host=v.required("metrics_host"),
        metrics_port=v.port("metrics_port"),
        listen_host=v.required("listen_host"),
        listen_port=v.port("listen_port"),
        timeout=v.number("timeout"),
        launch_network_file=v.path("launch_network_file"),
    )


def run(v: Values, command: Sequence[str], api_factory: Callable[[], KubeApi]) -> int:
    from arkouda_bootstrap.exporter import run_exporter

    return run_exporter(exporter_settings(v))


COMMAND = Subcommand(
    name="exporter",
    help="serve Arkouda's metrics socket as Prometheus /metrics (the server pod's metrics sidecar)",
    epilog="Polls the socket at every scrape and serves until SIGTERM; a failed poll is logged and reported as "
    "arkouda_exporter_last_poll_ok 0.",
    tables={"exporter": EXPORTER},
    run=run,
)
