"""`gate`: its options and the GateSettings built from them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, cast

from arkouda_bootstrap import config
from arkouda_bootstrap.cli.options import Opt, Subcommand, Values
from arkouda_bootstrap.config import GateSettings
from arkouda_bootstrap.kube.api import KubeApi, resolve_namespace

if TYPE_CHECKING:
    from arkouda_bootstrap.gate.main import GateApi

GATE = [
    Opt(
        "pod_name",
        "--pod-name",
        "POD_NAME",
        "this pod's name (downward API): Events go there",
        unset="(required)",
        doc="its own pod (Events, the wake annotation)",
    ),
    Opt(
        "release_selector",
        "--release-selector",
        "ARKOUDA_RELEASE_SELECTOR",
        "label selector of the release's pods (server, locales, gate)",
        unset="(required)",
        doc="label selector of the release's pods",
    ),
    Opt(
        "server_statefulset",
        "--server-statefulset",
        "ARKOUDA_SERVER_STATEFULSET",
        "the server StatefulSet",
        unset="(required)",
        doc="the server StatefulSet (1 awake, 0 asleep)",
    ),
    Opt(
        "locale_statefulset",
        "--locale-statefulset",
        "ARKOUDA_LOCALE_STATEFULSET",
        "the locale StatefulSet",
        unset="(required)",
        doc="the locale StatefulSet (numLocales-1 awake, 0 asleep)",
    ),
    Opt(
        "num_locales",
        "--num-locales",
        "ARKOUDA_NUM_LOCALES",
        "locales incl. the server (awake: n-1 locales)",
        unset="(required)",
        doc="numLocales, the server included",
    ),
    Opt(
        "listen_port",
        "--listen-port",
        "ARKOUDA_GATE_PORT",
        "client port the gate listens on",
        config.DEFAULT_SERVER_PORT,
        doc="the port clients connect to",
    ),
    Opt(
        "server_port",
        "--server-port",
        "ARKOUDA_SERVER_PORT",
        "the server pod's client port",
        config.DEFAULT_SERVER_PORT,
    ),
    Opt(
        "metrics_port",
        "--metrics-port",
        "ARKOUDA_GATE_METRICS_PORT",
        "HTTP port of the gate's Prometheus /metrics (and its readiness probe: not the client port, where a probe "
        "would wake the release)",
        config.DEFAULT_GATE_METRICS_PORT,
        doc="HTTP port of its Prometheus `/metrics` and readiness probe (a probe on the client port would wake the "
        "release)",
    ),
    Opt(
        "idle_timeout",
        "--idle-timeout",
        "ARKOUDA_IDLE_TIMEOUT",
        "seconds without traffic and with no request in flight before the release is scaled to 0",
        config.DEFAULT_IDLE_TIMEOUT,
        doc="seconds idle before the release is scaled to 0",
    ),
    Opt(
        "connection_is_activity",
        "--connection-is-activity",
        "ARKOUDA_IDLE_CONNECTION_IS_ACTIVITY",
        "an open client connection keeps the release awake",
        boolean=True,
        doc="an open client connection keeps it awake",
    ),
    Opt(
        "wake_timeout",
        "--wake-timeout",
        "ARKOUDA_WAKE_TIMEOUT",
        "seconds a wake may take before the held clients get an error",
        config.DEFAULT_WAKE_TIMEOUT,
        doc="seconds a wake may take",
    ),
    Opt(
        "wake_backoff",
        "--wake-backoff",
        "ARKOUDA_WAKE_BACKOFF",
        "seconds before the next wake after one missed its deadline (doubling for each miss in a row)",
        config.DEFAULT_WAKE_BACKOFF,
        doc="pause after a missed wake deadline",
    ),
]


def gate_settings(v: Values, *, namespace: str) -> GateSettings:
    return GateSettings(
        namespace=namespace,
        pod_name=v.required("pod_name"),
        release_selector=v.parsed("release_selector", config.parse_selector),
        server_statefulset=v.parsed("server_statefulset", config.parse_name),
        locale_statefulset=v.parsed("locale_statefulset", config.parse_name),
        num_locales=v.integer("num_locales", minimum=1),
        server_port=v.port("server_port"),
        listen_port=v.port("listen_port"),
        metrics_port=v.port("metrics_port"),
        # parse_float already refuses 0 and below: every one of these is a positive number of seconds
        idle_timeout=v.number("idle_timeout"),
        connection_is_activity=v.boolean("connection_is_activity"),
        wake_timeout=v.number("wake_timeout"),
        wake_backoff=v.number("wake_backoff"),
    )


def run(v: Values, command: Sequence[str], api_factory: Callable[[], KubeApi]) -> int:
    from arkouda_bootstrap.gate.main import run_gate

    gate = replace(gate_settings(v, namespace=""), namespace=resolve_namespace(v.raw("namespace")))
    return run_gate(cast("GateApi", api_factory()), gate)


COMMAND = Subcommand(
    name="gate",
    help="own the client port: forward to the server, scale to 0 when idle, wake for a client",
    epilog="Runs until SIGTERM. Splices each client connection to the server pod (bytes never parsed); a client "
    "arriving while the release sleeps is held until the server pod is Ready. Events on its own pod: IdleDraining, "
    "Asleep, Waking, Awake, WakeTimeout. A new value of the annotation arkouda-k8s.io/wake on its pod wakes the "
    "release.",
    tables={"gate": GATE},
    run=run,
)
