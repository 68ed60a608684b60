"""Command line: argparse with an environment variable behind every flag (flags win), and every user error
turned into one line on stderr plus a non-zero exit (see errors.py for the codes)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, cast

from arkouda_bootstrap import __version__, config
from arkouda_bootstrap.config import (
    ExporterSettings,
    GateSettings,
    HostsFrom,
    KeygenSettings,
    Launcher,
    LocaleSettings,
    Registration,
    ServerSettings,
    SlurmSource,
    SshTuning,
)
from arkouda_bootstrap.errors import BootstrapError, UsageError
from arkouda_bootstrap.kube import netstatus
from arkouda_bootstrap.kube.api import KubeApi, KubernetesApi, resolve_namespace
from arkouda_bootstrap.nodewatch import NodeWatchSettings

if TYPE_CHECKING:
    from arkouda_bootstrap.server.jobrun import JobSettings

log = logging.getLogger(__name__)

PROG = "arkouda-bootstrap"
SECRET_SUFFIX = "-arkouda-ssh"


@dataclass(frozen=True)
class Opt:
    """One option: its flags, env var, default (string form of config's DEFAULT_*, parsed like the env var) and
    help."""

    dest: str
    flag: str
    env: str | None
    help: str
    default: str | None = None
    boolean: bool = False
    metavar: str | None = None


COMMON = [
    Opt("log_level", "--log-level", "ARKOUDA_LOG_LEVEL", "DEBUG, INFO, WARNING or ERROR", "INFO"),
    Opt(
        "namespace",
        "--namespace",
        "POD_NAMESPACE",
        "namespace (default: the pod's service account namespace)",
    ),
]
SSH_DIRS = [
    Opt(
        "secret_dir",
        "--secret-dir",
        "ARKOUDA_SSH_DIR",
        "where the SSH Secret is mounted",
        str(config.DEFAULT_SECRET_DIR),
    ),
    Opt(
        "state_dir",
        "--state-dir",
        "ARKOUDA_STATE_DIR",
        "writable state dir (emptyDir; server --hosts-from slurm: $TMPDIR/arkouda-bootstrap-<uid>-<job id>)",
        str(config.DEFAULT_STATE_DIR),
    ),
    Opt("port", "--port", "ARKOUDA_SSH_PORT", "sshd port", str(config.DEFAULT_SSH_PORT)),
    Opt("kex", "--kex-algorithms", "ARKOUDA_SSH_KEX", "OpenSSH KexAlgorithms list", config.DEFAULT_KEX),
    Opt("ciphers", "--ciphers", "ARKOUDA_SSH_CIPHERS", "OpenSSH Ciphers list", config.DEFAULT_CIPHERS),
]
KEYGEN = [
    Opt("secret_name", "--secret-name", "ARKOUDA_SSH_SECRET", "name of the SSH Secret (<release>-arkouda-ssh)"),
    Opt("release", "--release", "ARKOUDA_RELEASE", "Helm release (labels; default: from --secret-name)"),
    Opt(
        "with_token",
        "--with-token",
        "ARKOUDA_WITH_TOKEN",
        "also store a random Arkouda auth token",
        boolean=True,
    ),
    Opt(
        "rotation_id",
        "--rotation-id",
        "ARKOUDA_SSH_ROTATION_ID",
        "replace the keys (and token) once per new id: the id is recorded in the Secret, and the same id again "
        "(a replayed `helm upgrade --reuse-values`) changes nothing",
    ),
    Opt("delete", "--delete", "ARKOUDA_SSH_DELETE", "delete the Secret (post-delete hook)", boolean=True),
    Opt(
        "test_objects",
        "--test-objects",
        "ARKOUDA_TEST_OBJECTS",
        "with --delete: also delete the helm test Pod and ConfigMap of this name (Helm leaves test hooks behind)",
    ),
]
LOCALE = [
    *SSH_DIRS,
    Opt(
        "secret_poll",
        "--secret-poll-seconds",
        "ARKOUDA_SECRET_POLL_SECONDS",
        "seconds between checks of the mounted Secret; changed keys are installed and sshd reloaded",
        str(config.DEFAULT_SECRET_POLL_SECONDS),
    ),
]
SERVER = [
    Opt(
        "hosts_from",
        "--hosts-from",
        "ARKOUDA_HOSTS_FROM",
        "kubernetes (the locale pods) or slurm (the job's allocation, batch host first)",
        HostsFrom.KUBERNETES.value,
    ),
    # with --hosts-from slurm optional: it must then equal the allocation's node count
    Opt("num_locales", "--num-locales", "ARKOUDA_NUM_LOCALES", "number of locales incl. this server (>= 1)"),
    Opt("selector", "--selector", "ARKOUDA_LOCALE_SELECTOR", "label selector of the locale pods"),
    Opt("pod_name", "--pod-name", "POD_NAME", "this pod's name (downward API)"),
    Opt("pod_ip", "--pod-ip", "POD_IP", "this pod's IPv4 address (downward API)"),
    Opt(
        "network_attachment",
        "--network-attachment",
        "ARKOUDA_NETWORK_ATTACHMENT",
        "NetworkAttachmentDefinition (<name> or <namespace>/<name>) whose addresses (network-status annotation) "
        "the hosts are reached at, instead of the pod IPs",
        "",
    ),
    *SSH_DIRS,
    Opt(
        "timeout",
        "--timeout",
        "ARKOUDA_WAIT_TIMEOUT",
        "seconds to wait for the locales",
        f"{config.DEFAULT_WAIT_TIMEOUT:g}",
    ),
    Opt("launcher", "--launcher", "ARKOUDA_LAUNCHER", "arkouda, mpi or none", Launcher.ARKOUDA.value),
    Opt("slots", "--slots", "ARKOUDA_MPI_SLOTS", "MPI slots per host in the hostfile", str(config.DEFAULT_SLOTS)),
    Opt("omp_threads", "--omp-threads", "OMP_NUM_THREADS", "OMP_NUM_THREADS for the launched program"),
    Opt(
        "work_dir",
        "--work-dir",
        "ARKOUDA_WORK_DIR",
        "arkouda: every locale's working directory (GASNET_SSH_REMOTE_PATH), writable at the same path in every "
        "pod; .arkouda/ and the token file go there (default: the launcher's own)",
    ),
    Opt(
        "prewarm",
        "--prewarm",
        "ARKOUDA_SSH_PREWARM",
        "open an ssh ControlMaster per host first",
        boolean=True,
    ),
    Opt("no_supervise", "--no-supervise", "ARKOUDA_NO_SUPERVISE", "exec the command instead", boolean=True),
    Opt(
        "connect_timeout",
        "--connect-timeout",
        "ARKOUDA_SSH_CONNECT_TIMEOUT",
        "ssh ConnectTimeout (s)",
        str(config.DEFAULT_CONNECT_TIMEOUT),
    ),
    Opt(
        "probe_attempts",
        "--probe-attempts",
        "ARKOUDA_PROBE_ATTEMPTS",
        "ssh probe attempts per host",
        str(config.DEFAULT_PROBE_ATTEMPTS),
    ),
    Opt(
        "max_relaunches",
        "--max-relaunches",
        "ARKOUDA_MAX_RELAUNCHES",
        "relaunches in place after lost locales, in a row, before exiting",
        str(config.DEFAULT_MAX_RELAUNCHES),
    ),
    Opt(
        "ssh_dir",
        "--ssh-dir",
        "ARKOUDA_USER_SSH_DIR",
        "slurm: the user's ssh directory (client key id_ed25519 or id_rsa)",
        config.DEFAULT_USER_SSH_DIR,
    ),
    Opt(
        "known_hosts",
        "--known-hosts",
        "ARKOUDA_SSH_KNOWN_HOSTS",
        "slurm: known_hosts file that pins every node's ssh-ed25519 host key (default: <ssh-dir>/known_hosts)",
    ),
    Opt(
        "host_ip",
        "--host-ip",
        "ARKOUDA_HOST_IP",
        "slurm: this node's IPv4 for the other nodes and the registered Service (default: its name resolved)",
    ),
    Opt(
        "register_service",
        "--register-service",
        "ARKOUDA_REGISTER_SERVICE",
        "slurm: publish the server as this Service (+ EndpointSlice) in a Kubernetes cluster while it runs",
    ),
    Opt("kube_namespace", "--kube-namespace", "ARKOUDA_KUBE_NAMESPACE", "slurm: namespace of --register-service"),
    Opt("kubeconfig", "--kubeconfig", "KUBECONFIG", "slurm: kubeconfig file of the identity --register-service uses"),
    Opt(
        "service_port",
        "--service-port",
        "ARKOUDA_SERVICE_PORT",
        "slurm: port of --register-service (default: the command's --ServerPort, else 5555)",
    ),
    Opt(
        "scale_down_when_done",
        "--scale-down-when-done",
        "ARKOUDA_SCALE_DOWN_WHEN_DONE",
        "run the program once (the launcher of a Kubernetes Job), then scale this StatefulSet (the locale pods) to 0 "
        "and record the outcome in one line: Events on this pod and its Job, the termination message, the exit code",
    ),
    Opt(
        "termination_log",
        "--termination-log",
        "ARKOUDA_TERMINATION_LOG",
        "with --scale-down-when-done: where the one-line outcome is written (the container's terminationMessagePath)",
        "/dev/termination-log",
    ),
]
EXPORTER = [
    Opt(
        "metrics_host",
        "--metrics-host",
        "ARKOUDA_METRICS_HOST",
        "host of Arkouda's metrics socket",
        config.DEFAULT_METRICS_HOST,
    ),
    Opt(
        "metrics_port",
        "--metrics-port",
        "METRICS_SERVER_PORT",
        "port of Arkouda's metrics socket (ZeroMQ)",
        str(config.DEFAULT_METRICS_PORT),
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
        str(config.DEFAULT_EXPORTER_PORT),
    ),
    Opt(
        "timeout",
        "--timeout",
        "ARKOUDA_EXPORTER_TIMEOUT",
        "seconds one poll of the metrics socket may take",
        f"{config.DEFAULT_EXPORTER_TIMEOUT:g}",
    ),
]
NODEWATCH = [
    Opt(
        "statefulsets",
        "--statefulsets",
        "ARKOUDA_NODEWATCH_STATEFULSETS",
        "comma-separated StatefulSets whose pods may be force-deleted when stuck terminating on a lost node",
    ),
    Opt("selector", "--selector", "ARKOUDA_NODEWATCH_SELECTOR", "label selector of the pods to follow"),
    Opt(
        "margin",
        "--margin-seconds",
        "ARKOUDA_NODEWATCH_MARGIN_SECONDS",
        "seconds past a pod's deletion grace period before it is force-deleted",
        "10",
    ),
]
GATE = [
    Opt("pod_name", "--pod-name", "POD_NAME", "this pod's name (downward API): Events go there"),
    Opt("listen_port", "--listen-port", "ARKOUDA_GATE_PORT", "client port the gate listens on", "5555"),
    Opt("server_port", "--server-port", "ARKOUDA_SERVER_PORT", "the server pod's client port", "5555"),
    Opt(
        "metrics_port",
        "--metrics-port",
        "ARKOUDA_GATE_METRICS_PORT",
        "HTTP port of the gate's Prometheus /metrics (and its readiness probe: not the client port, where a probe "
        "would wake the release)",
        "9557",
    ),
    Opt(
        "release_selector",
        "--release-selector",
        "ARKOUDA_RELEASE_SELECTOR",
        "label selector of the release's pods (server, locales, gate)",
    ),
    Opt("server_statefulset", "--server-statefulset", "ARKOUDA_SERVER_STATEFULSET", "the server StatefulSet"),
    Opt("locale_statefulset", "--locale-statefulset", "ARKOUDA_LOCALE_STATEFULSET", "the locale StatefulSet"),
    Opt("num_locales", "--num-locales", "ARKOUDA_NUM_LOCALES", "locales incl. the server (awake: n-1 locales)"),
    Opt(
        "idle_timeout",
        "--idle-timeout",
        "ARKOUDA_IDLE_TIMEOUT",
        "seconds without traffic and with no request in flight before the release is scaled to 0",
        f"{config.DEFAULT_IDLE_TIMEOUT:g}",
    ),
    Opt(
        "connection_is_activity",
        "--connection-is-activity",
        "ARKOUDA_IDLE_CONNECTION_IS_ACTIVITY",
        "an open client connection keeps the release awake",
        boolean=True,
    ),
    Opt(
        "wake_timeout",
        "--wake-timeout",
        "ARKOUDA_WAKE_TIMEOUT",
        "seconds a wake may take before the held clients get an error",
        f"{config.DEFAULT_WAKE_TIMEOUT:g}",
    ),
    Opt(
        "wake_backoff",
        "--wake-backoff",
        "ARKOUDA_WAKE_BACKOFF",
        "seconds before the next wake after one missed its deadline (doubling for each miss in a row)",
        f"{config.DEFAULT_WAKE_BACKOFF:g}",
    ),
    # the request checks, the held-request bound and the health check
    Opt(
        "sleep_when_idle",
        "--sleep-when-idle",
        "ARKOUDA_IDLE_ENABLED",
        "scale the release to 0 when idle and wake it for a request (without: never scale)",
        boolean=True,
    ),
    Opt(
        "token_file",
        "--token-file",
        "ARKOUDA_GATE_TOKEN_FILE",
        "the release's token (server.authenticate): a request without it is refused (default: no token check)",
    ),
    Opt("allow_shutdown", "--allow-shutdown", "ARKOUDA_GATE_ALLOW_SHUTDOWN", "forward `shutdown`", boolean=True),
    Opt(
        "max_envelope_bytes",
        "--max-envelope-bytes",
        "ARKOUDA_GATE_MAX_ENVELOPE_BYTES",
        "a request's JSON envelope above this size is refused unparsed",
        str(config.DEFAULT_GATE_MAX_ENVELOPE_BYTES),
    ),
    Opt(
        "max_message_bytes",
        "--max-message-bytes",
        "ARKOUDA_GATE_MAX_MESSAGE_BYTES",
        "a client frame above this size ends its connection unread (the gate's memory holds one message)",
        str(config.DEFAULT_GATE_MAX_MESSAGE_BYTES),
    ),
    Opt(
        "max_held",
        "--max-held-requests",
        "ARKOUDA_GATE_MAX_HELD_REQUESTS",
        "requests held while the server is not Ready, in total (one per client)",
        str(config.DEFAULT_GATE_MAX_HELD),
    ),
    Opt(
        "health_interval",
        "--health-interval",
        "ARKOUDA_GATE_HEALTH_INTERVAL",
        "seconds without an answer from the server before the gate checks its request loop (0: never)",
        f"{config.DEFAULT_GATE_HEALTH_INTERVAL:g}",
    ),
    Opt(
        "health_timeout",
        "--health-timeout",
        "ARKOUDA_GATE_HEALTH_TIMEOUT",
        "seconds the check may go unanswered before the server pod is deleted (relaunched)",
        f"{config.DEFAULT_GATE_HEALTH_TIMEOUT:g}",
    ),
]
SUBCOMMANDS: dict[str, tuple[str, list[Opt]]] = {
    "keygen": ("create/validate/rotate/delete the release's SSH Secret (Helm hook)", KEYGEN),
    "locale": ("run the unprivileged sshd and reload it with changed keys (locale pods, server pod's sshd)", LOCALE),
    "server": ("wait for locales, probe them over ssh, launch and supervise the command after --", SERVER),
    "exporter": ("serve Arkouda's metrics socket as Prometheus /metrics (the server pod's metrics sidecar)", EXPORTER),
    "nodewatch": ("force-delete the release's pods stuck terminating on a lost node (docs/node-loss.md)", NODEWATCH),
    "gate": ("own the client port: check and forward requests, check the server, sleep when idle", GATE),
}


EPILOGS = {
    "gate": "Runs until SIGTERM. Ends each client's ZeroMQ session, checks every request (envelope, size, token, "
    "shutdown) and answers a failing one itself; forwards the others to the server pod, holding them while it is "
    "not Ready. Events on its own pod: IdleDraining, Asleep, Waking, Awake, WakeTimeout, ServerUnresponsive, "
    "ServerAnswering. A new value of the annotation arkouda-k8s.io/wake on its pod wakes the release.",
    "nodewatch": "Runs until stopped; a pod is force-deleted (uid precondition, Event NodeLost) only when it is "
    "terminating, carries the node controller's or the taint manager's mark and outlived its grace period.",
    "server": "Everything after `--` is the command to launch (arkouda: -nl N is appended), e.g. "
    "arkouda-bootstrap server -- /opt/arkouda/bin/arkouda_server --ServerPort=5555; in a Slurm batch script: "
    "arkouda-bootstrap server --hosts-from slurm -- /path/arkouda_server --ServerPort=5555",
    "keygen": "Exits 0 when the Secret was created or already valid; an invalid Secret is an error naming the field.",
    "locale": "Runs `sshd -D -e` as its child (sshd logs to stderr), forwards SIGTERM/SIGINT to it and exits with "
    "its status; a changed mounted Secret is validated, installed and loaded into sshd with SIGHUP.",
    "exporter": "Polls the socket at every scrape and serves until SIGTERM; a failed poll is logged and reported "
    "as arkouda_exporter_last_poll_ok 0.",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        sub = self.prog[len(PROG) :].strip()
        raise UsageError(f"{sub}: {message}" if sub else message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Entrypoint of the Arkouda-on-Kubernetes images.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="subcommand", metavar="{" + ",".join(SUBCOMMANDS) + "}", parser_class=_Parser)
    for name, (text, opts) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=text, description=text, epilog=EPILOGS.get(name))
        for opt in [*COMMON, *opts]:
            env = f" [env {opt.env}]" if opt.env else ""
            default = f" (default {opt.default})" if opt.default is not None else ""
            if opt.boolean:
                p.add_argument(opt.flag, dest=opt.dest, action="store_true", default=None, help=opt.help + env)
            else:
                p.add_argument(opt.flag, dest=opt.dest, default=None, help=opt.help + default + env)
    return parser


class Values:
    """Flag value, else env var, else default; raw strings handed to config's validators."""

    def __init__(self, ns: argparse.Namespace, opts: Sequence[Opt], environ: Mapping[str, str]) -> None:
        self._ns = ns
        self._opts = {o.dest: o for o in opts}
        self._environ = environ

    @property
    def environ(self) -> Mapping[str, str]:
        return self._environ

    def opt(self, dest: str) -> Opt:
        return self._opts[dest]

    def raw(self, dest: str) -> str | None:
        opt = self._opts[dest]
        value = getattr(self._ns, dest, None)
        if value is True:
            return "true"
        if value is not None and value is not False:
            return str(value)
        if opt.env and self._environ.get(opt.env, "").strip():
            return self._environ[opt.env]
        return opt.default

    def given(self, dest: str) -> bool:
        """Set by flag or env var (not just defaulted)."""
        opt = self._opts[dest]
        value = getattr(self._ns, dest, None)
        return (value is not None and value is not False) or bool(opt.env and self._environ.get(opt.env, "").strip())

    def required(self, dest: str) -> str:
        value = self.raw(dest)
        if value is None or not value.strip():
            opt = self._opts[dest]
            raise UsageError(f"missing {config.source(opt.flag, opt.env)}: {opt.help}")
        return value.strip()

    def boolean(self, dest: str) -> bool:
        opt = self._opts[dest]
        return config.parse_bool(self.raw(dest) or "", flag=opt.flag, env=opt.env)

    def integer(self, dest: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
        opt = self._opts[dest]
        return config.parse_int(self.required(dest), flag=opt.flag, env=opt.env, minimum=minimum, maximum=maximum)

    def port(self, dest: str = "port") -> int:
        opt = self._opts[dest]
        return config.parse_port(self.required(dest), flag=opt.flag, env=opt.env)

    def path(self, dest: str) -> Path:
        return Path(self.required(dest))

    def tuning(self) -> SshTuning:
        kex, ciphers = self.opt("kex"), self.opt("ciphers")
        return SshTuning(
            kex_algorithms=config.parse_algorithms(self.required("kex"), flag=kex.flag, env=kex.env),
            ciphers=config.parse_algorithms(self.required("ciphers"), flag=ciphers.flag, env=ciphers.env),
        )


def keygen_settings(v: Values, *, namespace: str) -> KeygenSettings:
    o = v.opt("secret_name")
    secret_name = config.parse_name(v.required("secret_name"), flag=o.flag, env=o.env)
    release = v.raw("release")
    if not release:
        if not secret_name.endswith(SECRET_SUFFIX):
            raise UsageError(f"missing --release (ARKOUDA_RELEASE): cannot derive it from {secret_name}")
        release = secret_name[: -len(SECRET_SUFFIX)]
    raw_rotation = v.raw("rotation_id")
    ro = v.opt("rotation_id")
    rotation_id = config.parse_rotation_id(raw_rotation, flag=ro.flag, env=ro.env) if raw_rotation else None
    delete = v.boolean("delete")
    if rotation_id and delete:
        raise UsageError("--rotation-id and --delete exclude each other")
    test_objects = v.raw("test_objects")
    if test_objects:
        to = v.opt("test_objects")
        if not delete:
            raise UsageError(f"{config.source(to.flag, to.env)} needs --delete (it is part of the uninstall clean-up)")
        test_objects = config.parse_name(test_objects, flag=to.flag, env=to.env)
    return KeygenSettings(
        namespace=namespace,
        secret_name=secret_name,
        release=release,
        with_token=v.boolean("with_token"),
        rotation_id=rotation_id,
        delete=delete,
        test_objects=test_objects or None,
    )


def locale_settings(v: Values) -> LocaleSettings:
    return LocaleSettings(
        secret_dir=v.path("secret_dir"),
        state_dir=v.path("state_dir"),
        port=v.port(),
        tuning=v.tuning(),
        secret_poll_seconds=v.integer("secret_poll", minimum=1, maximum=3600),
    )


def server_settings(v: Values, *, namespace: str, command: Sequence[str]) -> ServerSettings:
    def o(dest: str) -> dict[str, str | None]:
        opt = v.opt(dest)
        return {"flag": opt.flag, "env": opt.env}

    launcher_raw = v.required("launcher").lower()
    try:
        launcher = Launcher(launcher_raw)
    except ValueError:
        raise UsageError(f"--launcher (ARKOUDA_LAUNCHER): {launcher_raw!r} is not one of arkouda, mpi, none") from None
    omp = v.raw("omp_threads")
    omp_threads = (
        config.parse_int(omp, minimum=1, flag="--omp-threads", env="OMP_NUM_THREADS") if omp and omp.strip() else None
    )
    timeout_opt = v.opt("timeout")
    hosts_raw = v.required("hosts_from").lower()
    try:
        hosts_from = HostsFrom(hosts_raw)
    except ValueError:
        raise UsageError(f"--hosts-from (ARKOUDA_HOSTS_FROM): {hosts_raw!r} is not one of kubernetes, slurm") from None
    slurm = slurm_source(v) if hosts_from is HostsFrom.SLURM else None
    network_attachment = (v.raw("network_attachment") or "").strip()
    if network_attachment:
        if slurm is not None:
            raise UsageError("--network-attachment (ARKOUDA_NETWORK_ATTACHMENT) needs --hosts-from kubernetes")
        netstatus.Attachment.parse(network_attachment)  # refuse a malformed name now, not after the wait
    if slurm is None and v.given("register_service"):
        raise UsageError(
            "--register-service (ARKOUDA_REGISTER_SERVICE) needs --hosts-from slurm: in Kubernetes the chart's own "
            "Service reaches the server"
        )
    if slurm is not None:
        # the pod fields mean nothing here; the host list and our address come from the allocation at run time
        num_locales = v.integer("num_locales", minimum=1) if v.given("num_locales") else 0
        selector, pod_name, pod_ip = "", "", ""
        port = v.port() if v.given("port") else config.SLURM_SSH_PORT
        state_dir = v.path("state_dir") if v.given("state_dir") else config.slurm_state_dir(v.environ)
    else:
        num_locales = v.integer("num_locales", minimum=1)
        selector = config.parse_selector(
            v.required("selector"), flag=o("selector")["flag"] or "", env=o("selector")["env"]
        )
        pod_name = v.required("pod_name")
        pod_ip = config.parse_ipv4(v.required("pod_ip"), flag="--pod-ip", env="POD_IP")
        port = v.port()
        state_dir = v.path("state_dir")
    return ServerSettings(
        namespace=namespace,
        num_locales=num_locales,
        selector=selector,
        pod_name=pod_name,
        pod_ip=pod_ip,
        port=port,
        secret_dir=v.path("secret_dir"),
        state_dir=state_dir,
        timeout=config.parse_float(v.required("timeout"), flag=timeout_opt.flag, env=timeout_opt.env),
        launcher=launcher,
        slots=v.integer("slots", minimum=1),
        omp_threads=omp_threads,
        work_dir=Path(v.required("work_dir")) if v.raw("work_dir") else None,
        tuning=v.tuning(),
        prewarm=v.boolean("prewarm"),
        supervise=not v.boolean("no_supervise"),
        command=tuple(command),
        connect_timeout=v.integer("connect_timeout", minimum=1, maximum=600),
        probe_attempts=v.integer("probe_attempts", minimum=1, maximum=100),
        max_relaunches=v.integer("max_relaunches", minimum=0, maximum=1000),
        slurm=slurm,
        network_attachment=network_attachment,
    )


def slurm_source(v: Values) -> SlurmSource:
    """The --hosts-from slurm options; --register-service needs its namespace and kubeconfig."""
    known_hosts = v.raw("known_hosts")
    host_ip = v.raw("host_ip")
    register: Registration | None = None
    if v.given("register_service"):
        ro = v.opt("register_service")
        name = config.parse_name(v.required("register_service"), flag=ro.flag, env=ro.env)
        if "." in name:  # a Service name is a DNS label
            raise UsageError(f"{config.source(ro.flag, ro.env)}: {name!r} is not a Service name (no dots)")
        no = v.opt("kube_namespace")
        if not v.given("kube_namespace"):
            raise UsageError(f"--register-service needs {config.source(no.flag, no.env)}: the Service's namespace")
        if not v.given("kubeconfig"):
            raise UsageError(
                "--register-service needs --kubeconfig (KUBECONFIG): the credentials of the identity allowed to "
                "create the Service (docs/slurm/rbac.yaml)"
            )
        sp = v.opt("service_port")
        register = Registration(
            name=name,
            namespace=config.parse_name(v.required("kube_namespace"), flag=no.flag, env=no.env),
            kubeconfig=Path(v.required("kubeconfig")).expanduser(),
            port=config.parse_port(v.required("service_port"), flag=sp.flag, env=sp.env)
            if v.given("service_port")
            else None,
        )
    elif v.given("kube_namespace") or v.given("service_port"):
        raise UsageError(
            "--kube-namespace and --service-port only go with --register-service (ARKOUDA_REGISTER_SERVICE)"
        )
    return SlurmSource(
        ssh_dir=Path(v.required("ssh_dir")).expanduser(),
        known_hosts=Path(known_hosts).expanduser() if known_hosts and known_hosts.strip() else None,
        host_ip=config.parse_ipv4(host_ip, flag="--host-ip", env="ARKOUDA_HOST_IP")
        if host_ip and host_ip.strip()
        else None,
        slots_given=v.given("slots"),
        register=register,
    )


def job_settings(v: Values, server: ServerSettings) -> JobSettings | None:
    """--scale-down-when-done (a Kubernetes Job's launcher); None without it."""
    if not v.given("scale_down_when_done"):
        return None
    from arkouda_bootstrap.server.jobrun import JobSettings  # imports the server's modules: only when it runs

    so = v.opt("scale_down_when_done")
    if server.slurm is not None:
        raise UsageError(f"{config.source(so.flag, so.env)} needs --hosts-from kubernetes (it scales the locale pods)")
    if not server.supervise:
        raise UsageError(f"{config.source(so.flag, so.env)} needs the bootstrap to stay: drop --no-supervise")
    if not server.command:
        raise UsageError(f"{config.source(so.flag, so.env)}: no command given after `--` to run once")
    return JobSettings(
        statefulset=config.parse_name(v.required("scale_down_when_done"), flag=so.flag, env=so.env),
        termination_log=v.path("termination_log"),
    )


def exporter_settings(v: Values) -> ExporterSettings:
    t = v.opt("timeout")
    return ExporterSettings(
        metrics_host=v.required("metrics_host"),
        metrics_port=v.port("metrics_port"),
        listen_host=v.required("listen_host"),
        listen_port=v.port("listen_port"),
        timeout=config.parse_float(v.required("timeout"), flag=t.flag, env=t.env),
    )


def gate_settings(v: Values, *, namespace: str) -> GateSettings:
    def seconds(dest: str) -> float:
        o = v.opt(dest)
        value = config.parse_float(v.required(dest), flag=o.flag, env=o.env)
        if value <= 0:
            raise UsageError(f"{config.source(o.flag, o.env)}: {value:g} is not a positive number of seconds")
        return value

    def name(dest: str) -> str:
        o = v.opt(dest)
        return config.parse_name(v.required(dest), flag=o.flag, env=o.env)

    sel = v.opt("release_selector")
    return GateSettings(
        namespace=namespace,
        pod_name=v.required("pod_name"),
        release_selector=config.parse_selector(v.required("release_selector"), flag=sel.flag, env=sel.env),
        server_statefulset=name("server_statefulset"),
        locale_statefulset=name("locale_statefulset"),
        num_locales=v.integer("num_locales", minimum=1),
        server_port=v.port("server_port"),
        listen_port=v.port("listen_port"),
        metrics_port=v.port("metrics_port"),
        idle_timeout=seconds("idle_timeout"),
        connection_is_activity=v.boolean("connection_is_activity"),
        wake_timeout=seconds("wake_timeout"),
        wake_backoff=seconds("wake_backoff"),
        sleep_when_idle=v.boolean("sleep_when_idle"),
        token_file=v.path("token_file") if (v.raw("token_file") or "").strip() else None,
        allow_shutdown=v.boolean("allow_shutdown"),
        max_envelope_bytes=v.integer("max_envelope_bytes", minimum=64),
        max_message_bytes=v.integer("max_message_bytes", minimum=1024),
        max_held=v.integer("max_held", minimum=1),
        health_interval=0.0 if v.required("health_interval").strip() == "0" else seconds("health_interval"),
        health_timeout=seconds("health_timeout"),
    )


def nodewatch_settings(v: Values, *, namespace: str) -> NodeWatchSettings:
    so, mo = v.opt("statefulsets"), v.opt("margin")
    names = tuple(n.strip() for n in v.required("statefulsets").split(",") if n.strip())
    for name in names:
        config.parse_name(name, flag=so.flag, env=so.env)
    selector = v.opt("selector")
    return NodeWatchSettings(
        namespace=namespace,
        selector=config.parse_selector(v.required("selector"), flag=selector.flag, env=selector.env),
        statefulsets=names,
        margin_seconds=config.parse_float(v.required("margin"), flag=mo.flag, env=mo.env),
    )


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Everything after the first `--` is the command to launch, never parsed as our flags."""
    args = list(argv)
    if "--" in args:
        i = args.index("--")
        return args[:i], args[i + 1 :]
    return args, []


def setup_logging(level_name: str) -> None:
    level = logging.getLevelName(level_name.strip().upper())
    if not isinstance(level, int):
        raise UsageError(f"--log-level (ARKOUDA_LOG_LEVEL): {level_name!r} is not DEBUG, INFO, WARNING or ERROR")
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True
    )
    # the client logs every request at DEBUG; keep ours readable
    logging.getLogger("kubernetes").setLevel(max(level, logging.INFO))
    logging.getLogger("urllib3").setLevel(max(level, logging.WARNING))


def dispatch(
    argv: Sequence[str],
    *,
    environ: Mapping[str, str],
    api_factory: Callable[[], KubeApi],
) -> int:
    own, command = split_command(argv)
    parser = build_parser()
    ns = parser.parse_args(own)
    if ns.subcommand is None:
        raise UsageError(f"{PROG}: choose a subcommand: {', '.join(SUBCOMMANDS)} (see --help)")
    opts = [*COMMON, *SUBCOMMANDS[ns.subcommand][1]]
    values = Values(ns, opts, environ)
    setup_logging(values.required("log_level"))
    if command and ns.subcommand != "server":
        raise UsageError(f"{ns.subcommand} takes no command after `--`")

    if ns.subcommand == "nodewatch":
        from arkouda_bootstrap.nodewatch import run_nodewatch

        watch = nodewatch_settings(values, namespace="")
        return run_nodewatch(api_factory(), replace(watch, namespace=resolve_namespace(values.raw("namespace"))))
    if ns.subcommand == "gate":
        from arkouda_bootstrap.gate.main import GateApi, run_gate

        gate = gate_settings(values, namespace="")
        gate = replace(gate, namespace=resolve_namespace(values.raw("namespace")))
        return run_gate(cast("GateApi", api_factory()), gate)
    if ns.subcommand == "exporter":
        from arkouda_bootstrap.exporter import run_exporter

        return run_exporter(exporter_settings(values))
    if ns.subcommand == "locale":
        from arkouda_bootstrap.locale import run_locale

        return run_locale(locale_settings(values))
    # validate the flags first, so a bad flag is reported before a missing namespace
    if ns.subcommand == "keygen":
        from arkouda_bootstrap.keygen import run_keygen

        keygen = keygen_settings(values, namespace="")
        keygen = replace(keygen, namespace=resolve_namespace(values.raw("namespace")))
        print(run_keygen(api_factory(), keygen), flush=True)
        return 0
    from arkouda_bootstrap.server.main import run_server

    server = server_settings(values, namespace="", command=command)
    if server.slurm is not None:
        # no Kubernetes API on this path (only --register-service talks to one, with its own kubeconfig)
        from arkouda_bootstrap.slurm.main import run_slurm_server

        return run_slurm_server(server, environ=environ)
    job = job_settings(values, server)
    server = replace(server, namespace=resolve_namespace(values.raw("namespace")))
    if job is not None:
        from arkouda_bootstrap.server.jobrun import run_job

        return run_job(api_factory(), server, job)
    return run_server(api_factory(), server)


def main(
    argv: Sequence[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    api_factory: Callable[[], KubeApi] = KubernetesApi.from_environment,
) -> int:
    try:
        return dispatch(
            sys.argv[1:] if argv is None else argv,
            environ=os.environ if environ is None else environ,
            api_factory=api_factory,
        )
    except BootstrapError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


def entrypoint() -> NoReturn:
    """Console-script and `python -m` entry: run main() and leave without interpreter teardown.

    The server's locale monitor is a daemon thread that sits in a blocking watch read; tearing the interpreter
    down under it aborted the process (SIGABRT, exit 134) after a supervised program had exited 0, hiding the
    program's status from Kubernetes. Everything worth keeping is flushed first."""
    code = main()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
