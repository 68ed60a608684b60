"""Validated settings for each subcommand (built by cli from flags and env vars).

Each validator raises UsageError with one line naming the flag and its environment variable.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from arkouda_bootstrap.errors import UsageError

log = logging.getLogger(__name__)

DEFAULT_SECRET_DIR = Path("/etc/arkouda/ssh")
DEFAULT_STATE_DIR = Path("/run/arkouda")
DEFAULT_SSH_PORT = 2222
DEFAULT_WAIT_TIMEOUT = 600.0
# curve25519 costs ~10x less client CPU per connection than OpenSSH 9's default sntrup761x25519 kex (bench/README.md);
# both names of the same algorithm (older peers know only the @libssh.org one). Chart values can restore the default.
DEFAULT_KEX = "curve25519-sha256,curve25519-sha256@libssh.org"
DEFAULT_CIPHERS = "aes128-gcm@openssh.com,chacha20-poly1305@openssh.com"
DEFAULT_CONNECT_TIMEOUT = 10
DEFAULT_SLOTS = 1
DEFAULT_CONTROL_PERSIST = 300
DEFAULT_PROBE_ATTEMPTS = 8
# `locale` checks the mounted Secret this often for changed keys; the kubelet's own delay (about a minute) dominates.
DEFAULT_SECRET_POLL_SECONDS = 2
# Relaunches in place after a lost locale, in a row, before the server exits for Kubernetes to restart it
# (with the kubelet's back-off); a program that ran RELAUNCH_RESET_SECONDS starts a fresh count.
DEFAULT_MAX_RELAUNCHES = 5
# After a wait timeout the server gives its locale pods back for this long (randomized up to twice) before it asks
# again (server.giveback): two releases that each got part of a cluster do not hold each other's nodes forever.
DEFAULT_RELEASE_BACKOFF = 60
RELAUNCH_RESET_SECONDS = 600.0
# The exporter: Arkouda's metrics socket (its default METRICS_SERVER_PORT) and the HTTP port of /metrics.
DEFAULT_METRICS_PORT = 5556
DEFAULT_EXPORTER_PORT = 9556
DEFAULT_EXPORTER_TIMEOUT = 5.0
DEFAULT_EXPORTER_HOST = "0.0.0.0"  # noqa: S104 - Prometheus scrapes the pod IP
DEFAULT_METRICS_HOST = "127.0.0.1"  # Arkouda's metrics socket is in the same pod
# The last launch's network check (netdrops), under the server's state dir; the metrics sidecar reads it there.
LAUNCH_NETWORK_FILE = Path("launch") / "network.json"
DEFAULT_LAUNCH_NETWORK_FILE = DEFAULT_STATE_DIR / LAUNCH_NETWORK_FILE
# Arkouda's own default client port (its --ServerPort): the gate's ports and a registered Service's port.
DEFAULT_SERVER_PORT = 5555
# `server --scale-down-when-done`: the container's terminationMessagePath unless the pod spec sets another.
DEFAULT_TERMINATION_LOG = Path("/dev/termination-log")

_ALGO_LIST = re.compile(r"^[+\-^]?[A-Za-z0-9@.\-]+(,[A-Za-z0-9@.\-]+)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class Launcher(StrEnum):
    ARKOUDA = "arkouda"
    MPI = "mpi"
    NONE = "none"


DEFAULT_LAUNCHER = Launcher.ARKOUDA


class HostsFrom(StrEnum):
    """Where `server` takes its host list from: the locale pods (Kubernetes API) or a Slurm job's allocation."""

    KUBERNETES = "kubernetes"
    SLURM = "slurm"


DEFAULT_HOSTS_FROM = HostsFrom.KUBERNETES

# --hosts-from slurm: the nodes' own sshd, and the user's own keys
SLURM_SSH_PORT = 22
DEFAULT_USER_SSH_DIR = "~/.ssh"


def slurm_state_dir(environ: Mapping[str, str]) -> Path:
    """The Slurm path's default state dir: private to this user and job, on the batch host's local temp dir
    (only the batch host runs the launcher, so the wrapper and config need not exist on the other nodes)."""
    base = environ.get("TMPDIR", "").strip() or "/tmp"  # noqa: S108 - a per-user, per-job 0700 dir below it
    return Path(base) / f"arkouda-bootstrap-{os.getuid()}-{environ.get('SLURM_JOB_ID', '').strip() or 'nojob'}"


@dataclass(frozen=True)
class SshTuning:
    """Key exchange and cipher lists used by both the sshd and the client config (OpenSSH list syntax)."""

    kex_algorithms: str = DEFAULT_KEX
    ciphers: str = DEFAULT_CIPHERS


@dataclass(frozen=True)
class KeygenSettings:
    namespace: str
    secret_name: str
    release: str
    with_token: bool = False
    rotation_id: str | None = None
    delete: bool = False
    # with delete: the helm test Pod and ConfigMap of this name, which Helm leaves behind at uninstall
    test_objects: str | None = None
    # with delete: the release's keygen Job, left behind when the helm client that ran it was interrupted
    keygen_job: str | None = None
    # with delete: the release's Kueue Workload (its pod group), which holds the group's pods and quota until deleted
    kueue_workload: str | None = None


@dataclass(frozen=True)
class LocaleSettings:
    secret_dir: Path = DEFAULT_SECRET_DIR
    state_dir: Path = DEFAULT_STATE_DIR
    port: int = DEFAULT_SSH_PORT
    tuning: SshTuning = field(default_factory=SshTuning)
    sshd: str = "sshd"
    secret_poll_seconds: int = DEFAULT_SECRET_POLL_SECONDS


@dataclass(frozen=True)
class Registration:
    """--register-service: publish the server as a Service of a Kubernetes cluster (Slurm path)."""

    name: str
    namespace: str
    kubeconfig: Path
    port: int | None = None  # None: the command's --ServerPort, else Arkouda's default


@dataclass(frozen=True)
class SlurmSource:
    """--hosts-from slurm: where the keys are, the address to advertise, and the optional registration."""

    ssh_dir: Path
    known_hosts: Path | None = None  # None: <ssh_dir>/known_hosts
    host_ip: str | None = None  # None: the batch host's name resolved
    slots_given: bool = False  # --slots was set: it wins over SLURM_TASKS_PER_NODE
    register: Registration | None = None


@dataclass(frozen=True)
class ServerSettings:
    """With `slurm` set, the host list is the job's allocation: `num_locales` is then 0 (the allocation's node
    count) or the count the user expects, and `namespace`, `selector`, `pod_name`, `pod_ip` are unused."""

    namespace: str
    num_locales: int
    selector: str
    pod_name: str
    pod_ip: str
    port: int = DEFAULT_SSH_PORT
    secret_dir: Path = DEFAULT_SECRET_DIR
    state_dir: Path = DEFAULT_STATE_DIR
    timeout: float = DEFAULT_WAIT_TIMEOUT
    launcher: Launcher = DEFAULT_LAUNCHER
    slots: int = DEFAULT_SLOTS
    omp_threads: int | None = None
    work_dir: Path | None = None
    tuning: SshTuning = field(default_factory=SshTuning)
    prewarm: bool = False
    supervise: bool = True
    command: tuple[str, ...] = ()
    connect_timeout: int = DEFAULT_CONNECT_TIMEOUT
    probe_attempts: int = DEFAULT_PROBE_ATTEMPTS
    max_relaunches: int = DEFAULT_MAX_RELAUNCHES
    # after a wait timeout: locales released, asked for again after this many seconds (x1-2); 0 exits instead
    release_backoff: float = float(DEFAULT_RELEASE_BACKOFF)
    slurm: SlurmSource | None = None
    # a secondary network's NetworkAttachmentDefinition (<name> or <ns>/<name>): the hosts' addresses come from it
    network_attachment: str = ""
    # the locale StatefulSet: only its pods are locales (kube.ownership); "" trusts the selector alone
    locale_statefulset: str = ""


@dataclass(frozen=True)
class ExporterSettings:
    metrics_host: str = DEFAULT_METRICS_HOST
    metrics_port: int = DEFAULT_METRICS_PORT
    listen_host: str = DEFAULT_EXPORTER_HOST
    listen_port: int = DEFAULT_EXPORTER_PORT
    timeout: float = DEFAULT_EXPORTER_TIMEOUT
    launch_network_file: Path = DEFAULT_LAUNCH_NETWORK_FILE


# The gate: the client port it listens on, its idle timeout, and how long a wake may take before the
# client gets an error (long enough for a cluster autoscaler to add nodes) and how long it then waits.
DEFAULT_GATE_HOST = "0.0.0.0"  # noqa: S104 - the client Service reaches the gate pod's IP
DEFAULT_IDLE_TIMEOUT = 900.0
DEFAULT_WAKE_TIMEOUT = 900.0
DEFAULT_WAKE_BACKOFF = 60.0
# the gate's HTTP /metrics, also its readiness probe (a probe on the client port would wake the release)
DEFAULT_GATE_METRICS_PORT = 9557
# The request checks: the JSON envelope is parsed only below this size; any one frame above the message limit
# ends the client's connection unread (the gate stores each message once: its memory limit must hold it).
DEFAULT_GATE_MAX_ENVELOPE_BYTES = 1 << 20
DEFAULT_GATE_MAX_MESSAGE_BYTES = 1 << 30
# Requests held while the server is not Ready (a wake, a relaunch): in total, and per client session (a REQ
# client has one request at a time).
DEFAULT_GATE_MAX_HELD = 256
DEFAULT_GATE_MAX_HELD_PER_SESSION = 1
# The health check of the server's request loop: a probe after this many quiet seconds, dead after no answer
# for this long (a relaunch of an Arkouda server with its locales takes longer than that anyway).
DEFAULT_GATE_HEALTH_INTERVAL = 10.0
DEFAULT_GATE_HEALTH_TIMEOUT = 30.0
# seconds the gate's save before a sleep (or load after a wake) may take: Arkouda writes every array
DEFAULT_CHECKPOINT_TIMEOUT = 1800.0
# what the gate does when its checkpoint would not bring everything back (gate/checkpoint.py OnUnsaved)
DEFAULT_CHECKPOINT_ON_UNSAVED = "stayAwake"
CHECKPOINT_ON_UNSAVED_CHOICES = ("stayAwake", "sleep")


@dataclass(frozen=True)
class GateSettings:
    namespace: str
    pod_name: str
    release_selector: str  # the release's pods: the server, the locales and the gate itself
    server_statefulset: str
    locale_statefulset: str
    num_locales: int
    server_port: int
    listen_port: int
    listen_host: str = DEFAULT_GATE_HOST
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    connection_is_activity: bool = False
    wake_timeout: float = DEFAULT_WAKE_TIMEOUT
    wake_backoff: float = DEFAULT_WAKE_BACKOFF
    # HTTP port of the gate's /metrics and /readyz (its readiness probe: a probe on the client port would be a
    # client); 0: none
    metrics_port: int = 0
    # scale the release to 0 when idle (global.idle.enabled); False: never scale
    sleep_when_idle: bool = False
    # the release's token file (server.authenticate): requests must carry it; None: no token check
    token_file: Path | None = None
    allow_shutdown: bool = False
    max_envelope_bytes: int = DEFAULT_GATE_MAX_ENVELOPE_BYTES
    max_message_bytes: int = DEFAULT_GATE_MAX_MESSAGE_BYTES
    max_held: int = DEFAULT_GATE_MAX_HELD
    max_held_per_session: int = DEFAULT_GATE_MAX_HELD_PER_SESSION
    # seconds; health_interval 0: no health check
    health_interval: float = DEFAULT_GATE_HEALTH_INTERVAL
    health_timeout: float = DEFAULT_GATE_HEALTH_TIMEOUT
    # admission through Kueue (global.scheduling.queueName): the release's Workload (its pod-group name) and
    # LocalQueue; None: no Kueue
    kueue_workload: str | None = None
    kueue_queue: str | None = None
    # with sleep_when_idle: save a checkpoint under this directory of the shared volume (the same path in the
    # server and the gate) before the sleep and load it after the wake; "": no checkpoint
    checkpoint_path: str = ""
    checkpoint_on_unsaved: str = DEFAULT_CHECKPOINT_ON_UNSAVED
    checkpoint_timeout: float = DEFAULT_CHECKPOINT_TIMEOUT


# ----------------------------------------------------------------------------------------------------------
# validators


def source(flag: str, env: str | None) -> str:
    return f"{flag} ({env})" if env else flag


def parse_int(value: str, *, flag: str, env: str | None, minimum: int | None = None, maximum: int | None = None) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise UsageError(f"{source(flag, env)}: {value!r} is not an integer") from None
    if minimum is not None and number < minimum:
        raise UsageError(f"{source(flag, env)}: {number} is less than {minimum}")
    if maximum is not None and number > maximum:
        raise UsageError(f"{source(flag, env)}: {number} is greater than {maximum}")
    return number


def parse_choice(value: str, *, flag: str, env: str | None, choices: tuple[str, ...]) -> str:
    choice = value.strip()
    if choice not in choices:
        raise UsageError(f"{source(flag, env)}: {value!r} is not one of {', '.join(choices)}")
    return choice


def parse_absolute_path(value: str, *, flag: str, env: str | None) -> str:
    path = value.strip()
    if not path.startswith("/"):
        raise UsageError(f"{source(flag, env)}: {value!r} is not an absolute path")
    return path


def parse_float(value: str, *, flag: str, env: str | None, minimum: float = 0.0) -> float:
    try:
        number = float(value.strip())
    except ValueError:
        raise UsageError(f"{source(flag, env)}: {value!r} is not a number") from None
    if not number > minimum:
        raise UsageError(f"{source(flag, env)}: {value!r} must be greater than {minimum:g}")
    return number


def parse_bool(value: str, *, flag: str, env: str | None) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("", "0", "false", "no", "off"):
        return False
    raise UsageError(f"{source(flag, env)}: {value!r} is not a boolean (true/false)")


def parse_port(value: str, *, flag: str, env: str | None) -> int:
    return parse_int(value, flag=flag, env=env, minimum=1, maximum=65535)


def parse_ipv4(value: str, *, flag: str, env: str | None) -> str:
    """Pod IPs must be IPv4: GASNet splits SSH_SERVERS on ' ,/;:' so IPv6 literals break the host list."""
    try:
        address = ipaddress.ip_address(value.strip())
    except ValueError:
        raise UsageError(f"{source(flag, env)}: {value!r} is not an IP address") from None
    if address.version != 4:
        raise UsageError(f"{source(flag, env)}: {value!r} is IPv6; GASNet's SSH_SERVERS needs IPv4 pod IPs")
    return str(address)


def parse_algorithms(value: str, *, flag: str, env: str | None) -> str:
    cleaned = value.strip().replace(" ", "")
    if not _ALGO_LIST.match(cleaned):
        raise UsageError(f"{source(flag, env)}: {value!r} is not a comma-separated OpenSSH algorithm list")
    return cleaned


def parse_selector(value: str, *, flag: str, env: str | None) -> str:
    cleaned = value.strip()
    if not cleaned or ("=" not in cleaned and "!" not in cleaned and " in " not in cleaned):
        raise UsageError(
            f"{source(flag, env)}: {value!r} is not a label selector such as "
            "app.kubernetes.io/instance=REL,app.kubernetes.io/component=locale"
        )
    return cleaned


_ROTATION_ID = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


def parse_rotation_id(value: str, *, flag: str, env: str | None) -> str:
    cleaned = value.strip()
    if not _ROTATION_ID.fullmatch(cleaned):
        raise UsageError(
            f"{source(flag, env)}: {value!r} is not a rotation id (1-63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit)"
        )
    return cleaned


def parse_name(value: str, *, flag: str, env: str | None) -> str:
    cleaned = value.strip()
    if len(cleaned) > 253 or not all(_DNS_LABEL.match(part) for part in cleaned.split(".")):
        raise UsageError(f"{source(flag, env)}: {value!r} is not a valid Kubernetes object name")
    return cleaned
