"""`server --hosts-from slurm`: a Slurm job's allocation as the host list, probed with the user's own keys and
the site's pinned host keys, launched and supervised without a monitor (a failed launch ends the job and Slurm
itself handles lost nodes); no Kubernetes API unless --register-service publishes the server.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

from arkouda_bootstrap.config import Launcher, Registration, ServerSettings
from arkouda_bootstrap.errors import BootstrapError, UsageError
from arkouda_bootstrap.kube.api import ServiceApi
from arkouda_bootstrap.server import launch
from arkouda_bootstrap.server.main import _stdout
from arkouda_bootstrap.server.supervise import run_supervised
from arkouda_bootstrap.slurm import hosts as slurm
from arkouda_bootstrap.slurm import userkeys
from arkouda_bootstrap.slurm.registration import ReadyWhenListening, ServiceRegistration, server_port
from arkouda_bootstrap.ssh import client as ssh
from arkouda_bootstrap.ssh import probe as sshprobe
from arkouda_bootstrap.ssh.identity import ensure_identity

if TYPE_CHECKING:
    import paramiko

log = logging.getLogger(__name__)


# OpenMPI inside a Slurm job would start its daemons with srun and take the hosts from Slurm; these make it use
# the hostfile and the pinned ssh wrapper instead, from the batch host only (the other nodes have no wrapper).
SLURM_MPI_ENV = {
    "OMPI_MCA_plm": "rsh",
    "OMPI_MCA_plm_rsh_no_tree_spawn": "1",
    "PRTE_MCA_plm": "ssh",
    "PRTE_MCA_plm_ssh_no_tree_spawn": "1",
}


@dataclass(frozen=True)
class SlurmPrepared:
    """Everything decided before launch on the Slurm path."""

    hosts: list[ssh.Host]
    allocation: slurm.Allocation
    own_ip: str
    plan: launch.LaunchPlan
    client: ssh.ClientFiles


def _slurm_probe(
    host: ssh.Host,
    *,
    port: int,
    user: str,
    client_key: paramiko.PKey,
    keys: userkeys.UserKeys,
    timeout: float,
    policy: ssh.RetryPolicy,
) -> None:
    """One node: its pinned key from the site's known_hosts, then the probe; errors worded for a node, not a pod."""
    name = userkeys.known_hosts_name(host.address, port)
    try:
        pinned = userkeys.pinned_host_keys(host.address, port=port, known_hosts=keys.known_hosts)
    except BootstrapError as exc:
        raise sshprobe.ProbeError(str(exc)) from None
    try:
        for i, key in enumerate(pinned):  # ssh accepts any key pinned for the host; so does the probe
            current = functools.partial(sshprobe.ProbeKeys, client_key=client_key, pinned=key)
            try:
                ssh.probe_host(host, port=port, user=user, keys=current, timeout=timeout, policy=policy)
                break
            except sshprobe.HostKeyMismatchError:
                if i == len(pinned) - 1:
                    raise
    except sshprobe.HostKeyMismatchError:
        raise sshprobe.HostKeyMismatchError(
            f"host {host.address} presented a host key that {keys.known_hosts} does not pin for {name}: the node was "
            "reinstalled (get its new key from your site) or something else answers on that address"
        ) from None
    except sshprobe.AuthenticationFailedError:
        raise sshprobe.AuthenticationFailedError(
            f"host {host.address} refused public-key authentication as {user} with {keys.client_key_path}: its public "
            "key must be in ~/.ssh/authorized_keys there"
        ) from None
    except sshprobe.ProbeError as exc:
        raise type(exc)(str(exc).replace(f"pod {host.pod} ({host.address})", f"host {host.address}")) from None


def prepare_slurm(
    settings: ServerSettings,
    *,
    environ: Mapping[str, str],
    report: Callable[[str], None] = _stdout,
    probe_policy: ssh.RetryPolicy | None = None,
) -> SlurmPrepared:
    source = settings.slurm
    if source is None:
        raise ValueError("prepare_slurm needs settings.slurm")
    allocation = slurm.read_allocation(environ)
    nodes = list(allocation.hosts)
    if settings.num_locales and settings.num_locales != len(nodes):
        raise UsageError(
            f"--num-locales (ARKOUDA_NUM_LOCALES) is {settings.num_locales} but the job has {len(nodes)} nodes: "
            "Arkouda runs one locale per node (sbatch --nodes)"
        )
    own_ip = source.host_ip or slurm.own_address(nodes[0], nodes[1:])
    report(
        f"slurm: {len(nodes)} nodes ({slurm.environment_summary(environ)}; expanded by {allocation.expanded_by}); "
        f"batch host {nodes[0]} ({own_ip}) first: {' '.join(nodes)}"
    )
    settings.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    ident = ensure_identity(state_dir=settings.state_dir)
    keys = userkeys.find_user_keys(ssh_dir=source.ssh_dir, known_hosts=source.known_hosts)
    client_key = userkeys.load_user_client_key(keys.client_key_path)
    hosts = [ssh.Host(address=n, pod=n) for n in nodes]
    probe = functools.partial(
        _slurm_probe,
        port=settings.port,
        user=ident.user,
        client_key=client_key,
        keys=keys,
        timeout=float(settings.connect_timeout),
        policy=probe_policy or ssh.RetryPolicy(attempts=settings.probe_attempts),
    )
    client = ssh.write_client_files(
        state_dir=settings.state_dir,
        user=ident.user,
        port=settings.port,
        identity_file=keys.client_key_path,
        known_hosts=keys.known_hosts,
        tuning=settings.tuning,
        connect_timeout=settings.connect_timeout,
        prewarm=settings.prewarm,
        wrapper_env=ident.env,
    )
    with ssh.IncrementalProbe(probe, max_workers=min(ssh.MAX_PROBE_THREADS, len(hosts))) as prober:
        prober.finish(hosts)
    if settings.prewarm:
        ssh.prewarm(hosts, wrapper=client.wrapper)
    slots = [settings.slots] * len(nodes) if source.slots_given else list(allocation.tasks)
    if settings.launcher is Launcher.ARKOUDA and any(n > 1 for n in allocation.tasks):
        log.warning("the job has more than one task on some nodes; Arkouda runs one locale per node")
    plan = launch.build_plan(
        launcher=settings.launcher,
        command=settings.command,
        hosts=nodes,
        own_ip=own_ip,
        num_locales=len(nodes),
        state_dir=settings.state_dir,
        ssh_config=client.config,
        ssh_wrapper=client.wrapper,
        slots=slots,
        omp_threads=settings.omp_threads,
        remote_path=str(settings.work_dir) if settings.work_dir else None,
        extra_env={**ident.env, **(SLURM_MPI_ENV if settings.launcher is Launcher.MPI else {})},
    )
    launch.write_files(plan)
    if settings.work_dir is not None and settings.launcher is Launcher.ARKOUDA:
        _check_work_dir(settings.work_dir)
    return SlurmPrepared(hosts=hosts, allocation=allocation, own_ip=own_ip, plan=plan, client=client)


def _check_work_dir(work_dir: Path) -> None:
    """Writable, as Arkouda needs; its tokens.txt is the user's own here (no Secret holds a token), so never touched."""
    if not work_dir.is_dir() or not os.access(work_dir, os.W_OK | os.X_OK):
        raise BootstrapError(
            f"working directory {work_dir} (--work-dir, ARKOUDA_WORK_DIR) is not a directory this user can write: "
            "every locale runs there (on a filesystem all nodes share) and Arkouda creates .arkouda/ in it"
        )


class _StoppedError(BootstrapError):
    """SIGTERM/SIGINT before the program ran (scancel during the probe): leave through the clean-up."""


def _raise_stopped(signum: int, _frame: FrameType | None) -> None:
    raise _StoppedError(f"stopped by {signal.Signals(signum).name} before the program ran", exit_code=128 + signum)


def _registration(
    source: Registration,
    *,
    prepared: SlurmPrepared,
    settings: ServerSettings,
    environ: Mapping[str, str],
    factory: Callable[[Path], ServiceApi] | None,
) -> ServiceRegistration:
    if ipaddress.ip_address(prepared.own_ip).is_loopback:
        raise BootstrapError(
            f"the batch host {prepared.hosts[0].address} resolves to {prepared.own_ip}, a loopback address that "
            "Kubernetes refuses in an EndpointSlice: set --host-ip (ARKOUDA_HOST_IP) to the address the cluster "
            "reaches it by"
        )
    if factory is None:
        from arkouda_bootstrap.kube.api import KubernetesApi

        if not source.kubeconfig.is_file():
            raise BootstrapError(f"kubeconfig {source.kubeconfig} (--kubeconfig, KUBECONFIG) does not exist")
        factory = KubernetesApi.from_kubeconfig
    annotations = {
        "arkouda-bootstrap/host": prepared.hosts[0].address,
        **({"arkouda-bootstrap/slurm-job-id": environ["SLURM_JOB_ID"]} if environ.get("SLURM_JOB_ID") else {}),
    }
    try:
        api = factory(source.kubeconfig)
    except BootstrapError:
        raise
    except Exception as exc:  # noqa: BLE001 - the client's config loader raises several types for one cause
        raise BootstrapError(f"cannot use kubeconfig {source.kubeconfig} (--kubeconfig, KUBECONFIG): {exc}") from None
    return ServiceRegistration(
        api=api,
        name=source.name,
        namespace=source.namespace,
        address=prepared.own_ip,
        port=source.port or server_port(settings.command),
        annotations=annotations,
    )


def run_slurm_server(
    settings: ServerSettings,
    *,
    environ: Mapping[str, str],
    report: Callable[[str], None] = _stdout,
    probe_policy: ssh.RetryPolicy | None = None,
    grace_seconds: float = 10.0,
    service_api: Callable[[Path], ServiceApi] | None = None,
) -> int:
    """The Slurm path: returns the program's exit status. With --register-service the Service and EndpointSlice
    exist from just before launch until the program has exited (also after SIGTERM: scancel)."""
    source = settings.slurm
    if source is None:
        raise ValueError("run_slurm_server needs settings.slurm")
    if source.register is not None and not settings.supervise:
        raise UsageError(
            "--register-service needs the bootstrap to stay (it deletes the Service at the end): drop --no-supervise"
        )
    previous = {sig: signal.signal(sig, _raise_stopped) for sig in (signal.SIGTERM, signal.SIGINT)}
    registration: ServiceRegistration | None = None
    ready: ReadyWhenListening | None = None
    prepared: SlurmPrepared | None = None
    failure: list[BootstrapError] = []
    try:
        prepared = prepare_slurm(settings, environ=environ, report=report, probe_policy=probe_policy)
        if not prepared.plan.argv:
            report(f"launcher none: wrote {settings.state_dir} (ssh_config, hostfile); no command given")
            return 0
        env = {**os.environ, **prepared.plan.env}
        launched = f"launched {' '.join(prepared.plan.argv)} on {len(prepared.hosts)} hosts ({settings.launcher.value})"
        if not settings.supervise:
            report(launched + " (unsupervised)")
            _exec_argv(prepared.plan.argv, env)
        if source.register is not None:
            registration = _registration(
                source.register, prepared=prepared, settings=settings, environ=environ, factory=service_api
            )
            registration.publish()
        child: list[int] = []

        def registration_failed(exc: BootstrapError) -> None:
            failure.append(exc)
            log.error("%s: stopping the program, notebooks could not reach it", exc)
            if child:
                os.kill(child[0], signal.SIGTERM)

        if registration is not None:
            ready = ReadyWhenListening(registration, on_error=registration_failed)

        def started(pid: int) -> None:
            child.append(pid)
            report(f"{launched}; pid {pid}")
            if ready is not None:
                ready.start()

        outcome = run_supervised(prepared.plan.argv, env=env, grace_seconds=grace_seconds, on_started=started)
    finally:
        # the clean-up runs to its end even if scancel's SIGTERM comes again
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)
        if ready is not None:
            ready.stop()
        if registration is not None:
            registration.withdraw()
        if prepared is not None and settings.prewarm:
            ssh.close_masters(prepared.hosts, wrapper=prepared.client.wrapper)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if failure:
        raise failure[0]
    return outcome.exit_code


def _exec_argv(argv: list[str], env: dict[str, str]) -> NoReturn:
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        raise BootstrapError(f"cannot exec {argv[0]}: {exc.strerror or exc}") from None
