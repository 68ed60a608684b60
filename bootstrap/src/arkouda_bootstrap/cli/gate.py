"""`gate`: its options and the GateSettings built from them."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from arkouda_bootstrap import config
from arkouda_bootstrap.cli.options import Opt, Subcommand, Values
from arkouda_bootstrap.config import GateSettings
from arkouda_bootstrap.errors import UsageError
from arkouda_bootstrap.kube.api import KubeApi, resolve_namespace

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
        "HTTP port of the gate's Prometheus /metrics and its readiness /readyz (not the client port, where a probe "
        "would be a client)",
        config.DEFAULT_GATE_METRICS_PORT,
        doc="HTTP port of its Prometheus `/metrics` and readiness `/readyz` (a probe on the client port would be a "
        "client)",
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
    # the request checks, the held-request bound and the health check
    Opt(
        "sleep_when_idle",
        "--sleep-when-idle",
        "ARKOUDA_IDLE_ENABLED",
        "scale the release to 0 when idle and wake it for a request (without: never scale)",
        boolean=True,
        doc="scale to 0 when idle, wake for a request",
    ),
    Opt(
        "token_file",
        "--token-file",
        "ARKOUDA_GATE_TOKEN_FILE",
        "the release's token (server.authenticate): a request without it is refused (default: no token check)",
        unset="(unset: no check)",
        doc="the release's token",
    ),
    Opt(
        "allow_shutdown",
        "--allow-shutdown",
        "ARKOUDA_GATE_ALLOW_SHUTDOWN",
        "forward `shutdown`",
        boolean=True,
        doc="forward a client's `shutdown`",
    ),
    Opt(
        "max_envelope_bytes",
        "--max-envelope-bytes",
        "ARKOUDA_GATE_MAX_ENVELOPE_BYTES",
        "a request's JSON envelope above this size is refused unparsed",
        config.DEFAULT_GATE_MAX_ENVELOPE_BYTES,
        doc="largest JSON envelope parsed",
    ),
    Opt(
        "max_message_bytes",
        "--max-message-bytes",
        "ARKOUDA_GATE_MAX_MESSAGE_BYTES",
        "a client frame above this size ends its connection unread (the gate's memory holds one message)",
        config.DEFAULT_GATE_MAX_MESSAGE_BYTES,
        doc="largest frame taken from a client",
    ),
    Opt(
        "max_held",
        "--max-held-requests",
        "ARKOUDA_GATE_MAX_HELD_REQUESTS",
        "requests held while the server is not Ready, in total (one per client)",
        config.DEFAULT_GATE_MAX_HELD,
        doc="requests held in total while not Ready",
    ),
    Opt(
        "health_interval",
        "--health-interval",
        "ARKOUDA_GATE_HEALTH_INTERVAL",
        "seconds without an answer from the server before the gate checks its request loop (0: never)",
        config.DEFAULT_GATE_HEALTH_INTERVAL,
        doc="quiet seconds before `ruok` (0: no check)",
    ),
    Opt(
        "health_timeout",
        "--health-timeout",
        "ARKOUDA_GATE_HEALTH_TIMEOUT",
        "seconds the check may go unanswered before the server pod is deleted (relaunched)",
        config.DEFAULT_GATE_HEALTH_TIMEOUT,
        doc="unanswered seconds before the server pod is deleted",
    ),
    # saving before the sleep, loading after the wake (gate/checkpoint.py)
    Opt(
        "checkpoint_path",
        "--checkpoint-path",
        "ARKOUDA_GATE_CHECKPOINT_PATH",
        "with --sleep-when-idle: save a checkpoint (save_checkpoint) into this directory of the shared volume before "
        "the sleep and load it after the wake; the same path in the server and the gate (default: no checkpoint)",
        unset="(unset: no checkpoint)",
        doc="directory on the shared volume for the save before a sleep and the load after a wake",
    ),
    Opt(
        "checkpoint_on_unsaved",
        "--checkpoint-on-unsaved",
        "ARKOUDA_GATE_CHECKPOINT_ON_UNSAVED",
        "when the checkpoint would not bring everything back (an object Arkouda does not save, a failed save): "
        "stayAwake (nothing is lost; a Warning says why) or sleep (the next client is told what was lost)",
        config.DEFAULT_CHECKPOINT_ON_UNSAVED,
        doc="`stayAwake` or `sleep` when the checkpoint is incomplete or failed",
    ),
    Opt(
        "checkpoint_timeout",
        "--checkpoint-timeout",
        "ARKOUDA_GATE_CHECKPOINT_TIMEOUT",
        "seconds the save (or the load) may take before the gate gives up on it",
        config.DEFAULT_CHECKPOINT_TIMEOUT,
        doc="seconds a save or load may take",
    ),
    Opt(
        "kueue_workload",
        "--kueue-workload",
        "ARKOUDA_KUEUE_WORKLOAD",
        "with --kueue-queue: the release is one Kueue pod group of this name (global.scheduling.queueName); the gate "
        "deletes its Workload whenever it scales the release to 0, so Kueue frees the quota (Event QuotaReleased), "
        "and names Kueue's reason while a woken release waits for admission (Event WakeQueued)",
        unset="(none: no Kueue)",
        doc="the release's Kueue pod group / Workload, deleted at each scale to 0",
    ),
    Opt(
        "kueue_queue",
        "--kueue-queue",
        "ARKOUDA_KUEUE_QUEUE",
        "with --kueue-workload: the LocalQueue the release is admitted through, named in the gate's errors and Events",
        unset="(none: no Kueue)",
        doc="the release's Kueue LocalQueue, named in errors and Events",
    ),
]


def gate_settings(v: Values, *, namespace: str) -> GateSettings:
    workload, queue = v.opt("kueue_workload"), v.opt("kueue_queue")
    if bool((v.raw("kueue_workload") or "").strip()) != bool((v.raw("kueue_queue") or "").strip()):
        raise UsageError(
            f"{workload.flag} ({workload.env}) and {queue.flag} ({queue.env}) go together: set both or neither"
        )
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
        sleep_when_idle=v.boolean("sleep_when_idle"),
        token_file=v.optional("token_file", lambda value, **_: Path(value.strip())),
        allow_shutdown=v.boolean("allow_shutdown"),
        max_envelope_bytes=v.integer("max_envelope_bytes", minimum=64),
        max_message_bytes=v.integer("max_message_bytes", minimum=1024),
        max_held=v.integer("max_held", minimum=1),
        # 0 turns the health check off; any other value is a positive number of seconds
        health_interval=0.0 if v.required("health_interval") == "0" else v.number("health_interval"),
        health_timeout=v.number("health_timeout"),
        checkpoint_path=v.optional("checkpoint_path", config.parse_absolute_path) or "",
        checkpoint_on_unsaved=v.parsed(
            "checkpoint_on_unsaved",
            functools.partial(config.parse_choice, choices=config.CHECKPOINT_ON_UNSAVED_CHOICES),
        ),
        checkpoint_timeout=v.number("checkpoint_timeout"),
        kueue_workload=v.optional("kueue_workload", config.parse_name),
        kueue_queue=v.optional("kueue_queue", lambda value, **_: value.strip()),
    )


def run(v: Values, command: Sequence[str], api_factory: Callable[[], KubeApi]) -> int:
    from arkouda_bootstrap.gate.main import run_gate

    gate = replace(gate_settings(v, namespace=""), namespace=resolve_namespace(v.raw("namespace")))
    return run_gate(api_factory(), gate)


COMMAND = Subcommand(
    name="gate",
    help="own the client port: check and forward requests, check the server, sleep when idle",
    epilog="Runs until SIGTERM. Ends each client's ZeroMQ session, checks every request (envelope, size, token, "
    "shutdown) and answers a failing one itself; forwards the others to the server pod, holding them while it is "
    "not Ready. Events on its own pod: IdleDraining, Asleep, Waking, Awake, WakeTimeout, ServerUnresponsive, "
    "ServerAnswering; with --checkpoint-path also Checkpointed, Restored, CheckpointIncomplete, CheckpointFailed, "
    "RestoreFailed, CheckpointSizeMismatch; with --kueue-workload also WakeQueued, QuotaReleased. A new value of "
    "the annotation arkouda-k8s.io/wake on its pod wakes the release.",
    tables={"gate": GATE},
    run=run,
)
