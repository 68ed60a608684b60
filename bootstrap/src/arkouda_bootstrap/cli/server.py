"""`server`: its options and the settings built from them: ServerSettings, with the Slurm host source
(`--hosts-from slurm`) and the run-once Job settings (`--scale-down-when-done`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from arkouda_bootstrap import config
from arkouda_bootstrap.cli.options import SSH, Opt, Subcommand, Values, ssh_tuning
from arkouda_bootstrap.config import HostsFrom, Launcher, Registration, ServerSettings, SlurmSource
from arkouda_bootstrap.errors import EXIT_LOCALE_LOST, UsageError
from arkouda_bootstrap.kube import netstatus
from arkouda_bootstrap.kube.api import KubeApi, resolve_namespace

if TYPE_CHECKING:
    from arkouda_bootstrap.server.jobrun import JobSettings

E = TypeVar("E", bound=StrEnum)

SERVER = [
    # with --hosts-from slurm optional: it must then equal the allocation's node count
    Opt(
        "num_locales",
        "--num-locales",
        "ARKOUDA_NUM_LOCALES",
        "number of locales incl. this server (>= 1)",
        unset="(required)",
        doc="locales including this server, ≥ 1",
    ),
    Opt(
        "selector",
        "--selector",
        "ARKOUDA_LOCALE_SELECTOR",
        "label selector of the locale pods",
        unset="(required)",
        doc="e.g. `app.kubernetes.io/instance=R,app.kubernetes.io/component=locale`",
    ),
    Opt(
        "locale_statefulset",
        "--locale-statefulset",
        "ARKOUDA_LOCALE_STATEFULSET",
        "the StatefulSet of the locale pods: only its pods (controller UID) count, other pods with the labels are "
        "named and ignored; its FailedCreate Events explain a wait",
        unset="(any pod the selector matches)",
        doc="the locale StatefulSet: only its pods count (owner UID, not labels)",
    ),
    Opt(
        "pod_name",
        "--pod-name",
        "POD_NAME",
        "this pod's name (downward API)",
        unset="(required)",
        doc="this pod (Events are attached to it)",
    ),
    Opt(
        "pod_ip",
        "--pod-ip",
        "POD_IP",
        "this pod's IPv4 address (downward API)",
        unset="(required)",
        doc="this pod's IPv4 (GASNet splits host lists on `:`, so no IPv6)",
    ),
    Opt(
        "network_attachment",
        "--network-attachment",
        "ARKOUDA_NETWORK_ATTACHMENT",
        "NetworkAttachmentDefinition (<name> or <namespace>/<name>) whose addresses (network-status annotation) "
        "the hosts are reached at, instead of the pod IPs",
        unset="(unset: pod IPs)",
        doc="a NetworkAttachmentDefinition (`<name>` or `<namespace>/<name>`; chart value "
        "`global.network.attachment`): every host, this one included, is reached at its IPv4 on that secondary "
        "network (see below)",
    ),
    *SSH,
    Opt(
        "timeout",
        "--timeout",
        "ARKOUDA_WAIT_TIMEOUT",
        "seconds to wait for the locales (time the Kubernetes API is unreachable does not count)",
        config.DEFAULT_WAIT_TIMEOUT,
    ),
    Opt(
        "launcher",
        "--launcher",
        "ARKOUDA_LAUNCHER",
        "arkouda, mpi or none",
        config.DEFAULT_LAUNCHER,
        doc="`arkouda`, `mpi` or `none`",
    ),
    Opt(
        "slots",
        "--slots",
        "ARKOUDA_MPI_SLOTS",
        "MPI slots per host in the hostfile",
        config.DEFAULT_SLOTS,
        doc="slots per host in the MPI hostfile",
    ),
    Opt(
        "omp_threads",
        "--omp-threads",
        "OMP_NUM_THREADS",
        "OMP_NUM_THREADS for the launched program",
        unset="(unset)",
        doc="sets `OMP_NUM_THREADS` for the program",
    ),
    Opt(
        "work_dir",
        "--work-dir",
        "ARKOUDA_WORK_DIR",
        "arkouda: every locale's working directory (GASNET_SSH_REMOTE_PATH), writable at the same path in every "
        "pod; .arkouda/ and the token file go there (default: the launcher's own)",
        unset="(unset: amudprun's own cwd)",
        doc="arkouda: every locale's working directory (`GASNET_SSH_REMOTE_PATH`), checked writable before each "
        "launch; `.arkouda/tokens.txt` is written there from the Secret's `token` before each launch when the "
        "command has `--authenticate` (else a stale one is removed)",
    ),
    Opt(
        "prewarm",
        "--prewarm",
        "ARKOUDA_SSH_PREWARM",
        "open an ssh ControlMaster per host first",
        boolean=True,
        doc="open one ssh ControlMaster per host before launch",
    ),
    Opt(
        "no_supervise",
        "--no-supervise",
        "ARKOUDA_NO_SUPERVISE",
        "exec the command instead",
        boolean=True,
        doc="exec the command instead of supervising it",
    ),
    Opt(
        "connect_timeout",
        "--connect-timeout",
        "ARKOUDA_SSH_CONNECT_TIMEOUT",
        "ssh ConnectTimeout (s)",
        config.DEFAULT_CONNECT_TIMEOUT,
        doc="ssh `ConnectTimeout` and probe timeout (s)",
    ),
    Opt(
        "probe_attempts",
        "--probe-attempts",
        "ARKOUDA_PROBE_ATTEMPTS",
        "ssh probe attempts per host",
        config.DEFAULT_PROBE_ATTEMPTS,
        doc="probe attempts per host",
    ),
    Opt(
        "max_relaunches",
        "--max-relaunches",
        "ARKOUDA_MAX_RELAUNCHES",
        "relaunches in place after lost locales, in a row, before exiting",
        config.DEFAULT_MAX_RELAUNCHES,
        doc=f"relaunches in place after lost locales, in a row, before exiting {EXIT_LOCALE_LOST}",
    ),
    Opt(
        "release_backoff",
        "--release-backoff",
        "ARKOUDA_RELEASE_BACKOFF",
        "with --locale-statefulset: after a wait timeout scale it to 0, wait this long (s, randomized up to twice) "
        "and ask for the locales again; 0 exits instead",
        config.DEFAULT_RELEASE_BACKOFF,
        doc="with `--locale-statefulset`: after a wait timeout, scale it to 0 (its pods free their nodes), wait "
        "this long (s, randomized up to twice) and ask for the locales again; 0 exits at the timeout instead",
    ),
]
# --scale-down-when-done: the launcher of a Kubernetes Job
JOB = [
    Opt(
        "scale_down_when_done",
        "--scale-down-when-done",
        "ARKOUDA_SCALE_DOWN_WHEN_DONE",
        "run the program once (the launcher of a Kubernetes Job), then scale this StatefulSet (the locale pods) to 0 "
        "and record the outcome in one line: Events on this pod and its Job, the termination message, the exit code",
        unset="(unset)",
        doc="run the command once as the launcher of a Kubernetes Job (chart `server.mpi.runMode: job`): no "
        "relaunch (a lost locale ends the run), then scale this StatefulSet (the locale pods) to 0 and report the "
        "outcome in one line (below)",
    ),
    Opt(
        "termination_log",
        "--termination-log",
        "ARKOUDA_TERMINATION_LOG",
        "with --scale-down-when-done: where the one-line outcome is written (the container's terminationMessagePath)",
        config.DEFAULT_TERMINATION_LOG,
        doc="with `--scale-down-when-done`: where that line is written (the container's termination message)",
    ),
]
# --hosts-from slurm: the host list from the job's allocation, the user's own keys, the optional registration
SLURM = [
    Opt(
        "hosts_from",
        "--hosts-from",
        "ARKOUDA_HOSTS_FROM",
        "kubernetes (the locale pods) or slurm (the job's allocation, batch host first)",
        config.DEFAULT_HOSTS_FROM,
        doc="`kubernetes` (locale pods) or `slurm` (the job's allocation)",
    ),
    Opt(
        "ssh_dir",
        "--ssh-dir",
        "ARKOUDA_USER_SSH_DIR",
        "slurm: the user's ssh directory (client key id_ed25519 or id_rsa)",
        config.DEFAULT_USER_SSH_DIR,
        doc="slurm: client key `id_ed25519` or `id_rsa`",
    ),
    Opt(
        "known_hosts",
        "--known-hosts",
        "ARKOUDA_SSH_KNOWN_HOSTS",
        "slurm: known_hosts file that pins every node's ssh-ed25519 host key (default: <ssh-dir>/known_hosts)",
        unset="(unset: `<ssh-dir>/known_hosts`)",
        doc="slurm: pins every node's ssh-ed25519 host key",
    ),
    Opt(
        "host_ip",
        "--host-ip",
        "ARKOUDA_HOST_IP",
        "slurm: this node's IPv4 for the other nodes and the registered Service (default: its name resolved)",
        unset="the batch host's name resolved",
        doc="slurm: IPv4 the nodes and the Service reach the batch host by",
    ),
    Opt(
        "register_service",
        "--register-service",
        "ARKOUDA_REGISTER_SERVICE",
        "slurm: publish the server as this Service (+ EndpointSlice) in a Kubernetes cluster while it runs",
        unset="(none)",
        doc="slurm: Service + EndpointSlice name",
    ),
    Opt(
        "kube_namespace",
        "--kube-namespace",
        "ARKOUDA_KUBE_NAMESPACE",
        "slurm: namespace of --register-service",
        unset="(required with it)",
        doc="slurm: their namespace",
    ),
    Opt(
        "kubeconfig",
        "--kubeconfig",
        "KUBECONFIG",
        "slurm: kubeconfig file of the identity --register-service uses",
        unset="(required with it)",
        doc="slurm: the registering identity's kubeconfig",
    ),
    Opt(
        "service_port",
        "--service-port",
        "ARKOUDA_SERVICE_PORT",
        f"slurm: port of --register-service (default: the command's --ServerPort, else {config.DEFAULT_SERVER_PORT})",
        unset=f"the command's `--ServerPort`, else {config.DEFAULT_SERVER_PORT}",
        doc="slurm: the Service's port",
    ),
]


def _choice(v: Values, dest: str, kind: type[E]) -> E:
    raw = v.required(dest).lower()
    try:
        return kind(raw)
    except ValueError:
        raise UsageError(f"{v.source(dest)}: {raw!r} is not one of {', '.join(kind)}") from None


def server_settings(v: Values, *, namespace: str, command: Sequence[str]) -> ServerSettings:
    launcher = _choice(v, "launcher", Launcher)
    omp_threads = v.optional("omp_threads", functools.partial(config.parse_int, minimum=1))
    hosts_from = _choice(v, "hosts_from", HostsFrom)
    hosts_flag = v.opt("hosts_from").flag
    slurm = slurm_source(v) if hosts_from is HostsFrom.SLURM else None
    network_attachment = (v.raw("network_attachment") or "").strip()
    if network_attachment:
        if slurm is not None:
            raise UsageError(f"{v.source('network_attachment')} needs {hosts_flag} {HostsFrom.KUBERNETES}")
        netstatus.Attachment.parse(network_attachment)  # refuse a malformed name now, not after the wait
    if slurm is None and v.given("register_service"):
        raise UsageError(
            f"{v.source('register_service')} needs {hosts_flag} {HostsFrom.SLURM}: in Kubernetes the chart's own "
            "Service reaches the server"
        )
    if slurm is not None:
        # the pod fields mean nothing here; the host list and our address come from the allocation at run time
        num_locales = v.integer("num_locales", minimum=1) if v.given("num_locales") else 0
        selector, pod_name, pod_ip, locale_statefulset = "", "", "", ""
        if v.given("locale_statefulset"):
            raise UsageError(f"{v.source('locale_statefulset')} needs {hosts_flag} {HostsFrom.KUBERNETES}")
        port = v.port() if v.given("port") else config.SLURM_SSH_PORT
        state_dir = v.path("state_dir") if v.given("state_dir") else config.slurm_state_dir(v.environ)
    else:
        num_locales = v.integer("num_locales", minimum=1)
        selector = v.parsed("selector", config.parse_selector)
        locale_statefulset = v.parsed("locale_statefulset", config.parse_name) if v.raw("locale_statefulset") else ""
        pod_name = v.required("pod_name")
        pod_ip = v.parsed("pod_ip", config.parse_ipv4)
        port = v.port()
        state_dir = v.path("state_dir")
    return ServerSettings(
        namespace=namespace,
        num_locales=num_locales,
        selector=selector,
        locale_statefulset=locale_statefulset,
        pod_name=pod_name,
        pod_ip=pod_ip,
        port=port,
        secret_dir=v.path("secret_dir"),
        state_dir=state_dir,
        timeout=v.number("timeout"),
        launcher=launcher,
        slots=v.integer("slots", minimum=1),
        omp_threads=omp_threads,
        work_dir=Path(v.required("work_dir")) if v.raw("work_dir") else None,
        tuning=ssh_tuning(v),
        prewarm=v.boolean("prewarm"),
        supervise=not v.boolean("no_supervise"),
        command=tuple(command),
        connect_timeout=v.integer("connect_timeout", minimum=1, maximum=600),
        probe_attempts=v.integer("probe_attempts", minimum=1, maximum=100),
        max_relaunches=v.integer("max_relaunches", minimum=0, maximum=1000),
        release_backoff=float(v.integer("release_backoff", minimum=0, maximum=86400)),
        slurm=slurm,
        network_attachment=network_attachment,
    )


def slurm_source(v: Values) -> SlurmSource:
    """The --hosts-from slurm options; --register-service needs its namespace and kubeconfig."""
    known_hosts = v.raw("known_hosts")
    register: Registration | None = None
    service_flag = v.opt("register_service").flag
    if v.given("register_service"):
        name = v.parsed("register_service", config.parse_name)
        if "." in name:  # a Service name is a DNS label
            raise UsageError(f"{v.source('register_service')}: {name!r} is not a Service name (no dots)")
        if not v.given("kube_namespace"):
            raise UsageError(f"{service_flag} needs {v.source('kube_namespace')}: the Service's namespace")
        if not v.given("kubeconfig"):
            raise UsageError(
                f"{service_flag} needs {v.source('kubeconfig')}: the credentials of the identity allowed to create "
                "the Service (docs/slurm/rbac.yaml)"
            )
        register = Registration(
            name=name,
            namespace=v.parsed("kube_namespace", config.parse_name),
            kubeconfig=Path(v.required("kubeconfig")).expanduser(),
            port=v.port("service_port") if v.given("service_port") else None,
        )
    elif v.given("kube_namespace") or v.given("service_port"):
        raise UsageError(
            f"{v.opt('kube_namespace').flag} and {v.opt('service_port').flag} only go with "
            f"{v.source('register_service')}"
        )
    return SlurmSource(
        ssh_dir=Path(v.required("ssh_dir")).expanduser(),
        known_hosts=Path(known_hosts).expanduser() if known_hosts and known_hosts.strip() else None,
        host_ip=v.optional("host_ip", config.parse_ipv4),
        slots_given=v.given("slots"),
        register=register,
    )


def job_settings(v: Values, server: ServerSettings) -> JobSettings | None:
    """--scale-down-when-done (a Kubernetes Job's launcher); None without it."""
    if not v.given("scale_down_when_done"):
        return None
    from arkouda_bootstrap.server.jobrun import JobSettings  # imports the server's modules: only when it runs

    job = v.source("scale_down_when_done")
    if server.slurm is not None:
        raise UsageError(f"{job} needs {v.opt('hosts_from').flag} {HostsFrom.KUBERNETES} (it scales the locale pods)")
    if not server.supervise:
        raise UsageError(f"{job} needs the bootstrap to stay: drop {v.opt('no_supervise').flag}")
    if not server.command:
        raise UsageError(f"{job}: no command given after `--` to run once")
    return JobSettings(
        statefulset=v.parsed("scale_down_when_done", config.parse_name),
        termination_log=v.path("termination_log"),
    )


def run(v: Values, command: Sequence[str], api_factory: Callable[[], KubeApi]) -> int:
    from arkouda_bootstrap.server.main import run_server

    server = server_settings(v, namespace="", command=command)
    if server.slurm is not None:
        # no Kubernetes API on this path (only --register-service talks to one, with its own kubeconfig)
        from arkouda_bootstrap.slurm.main import run_slurm_server

        return run_slurm_server(server, environ=v.environ)
    job = job_settings(v, server)
    server = replace(server, namespace=resolve_namespace(v.raw("namespace")))
    if job is not None:
        from arkouda_bootstrap.server.jobrun import run_job

        return run_job(api_factory(), server, job)
    return run_server(api_factory(), server)


COMMAND = Subcommand(
    name="server",
    help="wait for locales, probe them over ssh, launch and supervise the command after --",
    epilog="Everything after `--` is the command to launch (arkouda: -nl N is appended), e.g. arkouda-bootstrap "
    f"server -- /opt/arkouda/bin/arkouda_server --ServerPort={config.DEFAULT_SERVER_PORT}; in a Slurm batch script: "
    f"arkouda-bootstrap server --hosts-from slurm -- /path/arkouda_server --ServerPort={config.DEFAULT_SERVER_PORT}",
    tables={"server": [*SERVER, *JOB], "server-slurm": SLURM},
    run=run,
    takes_command=True,
)
