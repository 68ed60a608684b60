"""`server`: get the host list, probe the hosts over ssh, write the launcher's files, launch and supervise.

Two host sources feed the same probe → launch → supervise path: the locale pods of a release (`run_server`:
discovery through the Kubernetes API, each pod probed as it turns Ready, a LocaleMonitor that relaunches after a
lost locale) and a Slurm job's allocation (`run_slurm_server`: a static list, the user's own keys, no monitor —
a failed launch ends the job and Slurm itself handles lost nodes; no Kubernetes API unless --register-service).
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

from arkouda_bootstrap import (
    config,
    discovery,
    launch,
    netstatus,
    secretwatch,
    slurm,
    ssh,
    sshprobe,
    userkeys,
    workdir,
)
from arkouda_bootstrap.config import Launcher, Registration, ServerSettings
from arkouda_bootstrap.errors import EXIT_LOCALE_LOST, BootstrapError, UsageError
from arkouda_bootstrap.events import EventRecorder, Reason
from arkouda_bootstrap.identity import Identity, ensure_identity
from arkouda_bootstrap.kube import KubeApi, PodInfo, PodRef, ServiceApi
from arkouda_bootstrap.registration import ReadyWhenListening, ServiceRegistration, server_port
from arkouda_bootstrap.supervise import LocaleMonitor, Outcome, run_supervised

if TYPE_CHECKING:
    import paramiko

log = logging.getLogger(__name__)


def _stdout(line: str) -> None:
    print(line, flush=True)


@dataclass(frozen=True)
class Prepared:
    """Everything decided before launch (returned for tests and --launcher none)."""

    hosts: list[ssh.Host]
    locales: list[PodInfo]
    plan: launch.LaunchPlan
    client: ssh.ClientFiles
    identity: Identity


def prepare_server(
    api: KubeApi,
    settings: ServerSettings,
    *,
    recorder: EventRecorder,
    report: Callable[[str], None] = _stdout,
    probe_policy: ssh.RetryPolicy | None = None,
) -> Prepared:
    ident = ensure_identity(state_dir=settings.state_dir)
    work_dir = settings.work_dir if settings.launcher is Launcher.ARKOUDA else None
    started = time.monotonic()
    # a missing or malformed Secret fails now, not after waiting up to --timeout for the locales
    with recorder.on_error(Reason.SECRET_INVALID):
        mounted = secretwatch.MountedKeys(secret_dir=settings.secret_dir, state_dir=settings.state_dir)
        token = (
            workdir.read_token(settings.secret_dir)
            if work_dir is not None and workdir.wants_authentication(settings.command)
            else None
        )
    expected = settings.num_locales - 1
    # A pod of this release that has not reloaded a changed Secret yet (the kubelet takes about a minute) is
    # waited for until the wait deadline; a foreign host key still fails at once.
    policy = replace(
        probe_policy or ssh.RetryPolicy(attempts=settings.probe_attempts), keys_deadline=started + settings.timeout
    )

    def pending(host: ssh.Host, exc: ssh.KeysPendingError) -> None:
        recorder.emit(Reason.KEYS_PENDING, f"{exc}; waiting for it until the wait deadline ({settings.timeout:g}s)")

    probe = functools.partial(
        ssh.probe_host,
        port=settings.port,
        user=ident.user,
        keys=mounted.current,
        timeout=float(settings.connect_timeout),
        policy=policy,
        on_pending=pending,
        end_leftovers=launch.remote_program(settings.launcher, settings.command),
        on_leftovers=lambda host, n: recorder.emit(
            Reason.LEFTOVERS_ENDED,
            f"ended {n} process(es) of a previous launch on {host.pod} ({host.address}) before launching",
        ),
    )
    # With a secondary network every host, this one included, is reached at its address there.
    addresses: netstatus.Addresses | None = None
    own_ip = settings.pod_ip
    if settings.network_attachment:
        addresses = netstatus.Addresses(netstatus.Attachment.parse(settings.network_attachment))
        with recorder.on_error(Reason.SECONDARY_NETWORK_MISSING, when=_network_error):
            own_ip = netstatus.own_address(
                api, namespace=settings.namespace, pod_name=settings.pod_name, attachment=addresses.attachment
            )
    host_of = functools.partial(_host, addresses=addresses)
    own = ssh.Host(address=own_ip, pod=settings.pod_name)
    with ssh.IncrementalProbe(probe, max_workers=min(ssh.MAX_PROBE_THREADS, settings.num_locales)) as prober:
        # Each locale is probed as soon as it is seen Ready, so when the last one turns Ready only its own
        # probe stands between it and the launch.
        prober.submit(own)
        try:
            with (
                recorder.on_error(Reason.RBAC_MISSING, when=lambda exc: "missing RBAC" in str(exc)),
                recorder.on_error(Reason.SECONDARY_NETWORK_MISSING, when=_network_error),
            ):
                locales = discovery.wait_for_locales(
                    api,
                    namespace=settings.namespace,
                    selector=settings.selector,
                    expected=expected,
                    timeout=settings.timeout,
                    report=report,
                    on_ready=lambda pod: prober.submit(host_of(pod)),
                    addresses=addresses,
                )
        except discovery.WaitTimeoutError as exc:
            recorder.emit(Reason.WAIT_TIMEOUT, str(exc))
            raise
        hosts = [own, *map(host_of, locales)]
        recorder.emit(
            Reason.LOCALES_READY,
            f"{expected} locales ready; hosts: " + " ".join(f"{h.pod}={h.address}" for h in hosts),
        )
        client = ssh.write_client_files(
            state_dir=settings.state_dir,
            user=ident.user,
            port=settings.port,
            identity_file=mounted.paths.client_key,
            known_hosts=mounted.paths.known_hosts,
            tuning=settings.tuning,
            connect_timeout=settings.connect_timeout,
            prewarm=settings.prewarm,
            wrapper_env=ident.env,
        )
        try:
            prober.finish(hosts)
            if settings.prewarm:
                ssh.prewarm(hosts, wrapper=client.wrapper)
        except BootstrapError as exc:
            recorder.emit(Reason.PROBE_FAILED, str(exc))
            raise
    plan = launch.build_plan(
        launcher=settings.launcher,
        command=settings.command,
        hosts=[h.address for h in hosts],
        own_ip=own_ip,
        num_locales=settings.num_locales,
        state_dir=settings.state_dir,
        ssh_config=client.config,
        ssh_wrapper=client.wrapper,
        slots=settings.slots,
        omp_threads=settings.omp_threads,
        remote_path=str(settings.work_dir) if settings.work_dir else None,
        extra_env=ident.env,
    )
    launch.write_files(plan)
    if work_dir is not None:
        with recorder.on_error(Reason.WORK_DIR_UNUSABLE):
            workdir.prepare(work_dir, token=token)
    return Prepared(hosts=hosts, locales=locales, plan=plan, client=client, identity=ident)


def _host(pod: PodInfo, *, addresses: netstatus.Addresses | None = None) -> ssh.Host:
    return ssh.Host(address=addresses.address(pod) if addresses else pod.pod_ip or "", pod=pod.name)


def _network_error(exc: BootstrapError) -> bool:
    return isinstance(exc, netstatus.NetworkStatusError)


def _own_uid(api: KubeApi, settings: ServerSettings) -> str:
    """The server pod's uid ties Events to it for `kubectl describe`; without `get pods` they still get created."""
    try:
        own = api.get_pod(namespace=settings.namespace, name=settings.pod_name)
    except BootstrapError as exc:
        log.warning("Events will not carry the pod uid: %s", exc)
        return ""
    if own is None:
        log.warning("pod %s not found in namespace %s (--pod-name, POD_NAME)", settings.pod_name, settings.namespace)
        return ""
    return own.uid


def run_server(
    api: KubeApi,
    settings: ServerSettings,
    *,
    report: Callable[[str], None] = _stdout,
    probe_policy: ssh.RetryPolicy | None = None,
    grace_seconds: float = 10.0,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Returns the exit status (the child's, or EXIT_LOCALE_LOST).

    A lost locale stops the program; the server then waits for the locales again and relaunches in place, so
    recovery does not pay a container restart and the kubelet's growing restart back-off (10 s, 20 s, 40 s, …
    for every further loss). After `max_relaunches` losses in a row (each run shorter than
    RELAUNCH_RESET_SECONDS) it exits non-zero and leaves the back-off to Kubernetes."""
    recorder = EventRecorder(
        api, PodRef(namespace=settings.namespace, name=settings.pod_name, uid=_own_uid(api, settings))
    )
    losses_in_a_row = 0
    while True:
        prepared = prepare_server(api, settings, recorder=recorder, report=report, probe_policy=probe_policy)
        if not prepared.plan.argv:
            report(f"launcher none: wrote {settings.state_dir} (ssh_config, hostfile); no command given")
            return 0
        env = {**os.environ, **prepared.plan.env}
        launched = f"launched {' '.join(prepared.plan.argv)} on {len(prepared.hosts)} hosts ({settings.launcher.value})"
        if not settings.supervise:
            _exec(prepared, env, recorder, launched=launched)
        started = clock()
        outcome = _launch_supervised(
            api, prepared, settings, recorder, env=env, launched=launched, grace_seconds=grace_seconds
        )
        if outcome.lost_reason is None:
            return outcome.exit_code
        stopped = f"{outcome.lost_reason}; stopped the program (status {outcome.exit_code})"
        if outcome.signalled:
            raise BootstrapError(f"{stopped}; not relaunching: we are being stopped", exit_code=EXIT_LOCALE_LOST)
        losses_in_a_row = 1 if clock() - started >= config.RELAUNCH_RESET_SECONDS else losses_in_a_row + 1
        if losses_in_a_row > settings.max_relaunches:
            raise BootstrapError(
                f"{stopped}; {losses_in_a_row - 1} relaunches in a row already (--max-relaunches, "
                "server.maxRelaunches): exiting so Kubernetes restarts the server",
                exit_code=EXIT_LOCALE_LOST,
            )
        message = (
            f"{stopped}; relaunching when all locales are Ready again "
            f"(relaunch {losses_in_a_row}/{settings.max_relaunches} in a row)"
        )
        report(message)
        recorder.emit(Reason.RELAUNCHING, message)


def _exec(prepared: Prepared, env: dict[str, str], recorder: EventRecorder, *, launched: str) -> NoReturn:
    recorder.emit(Reason.LAUNCHED, launched + " (unsupervised)")
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(prepared.plan.argv[0], prepared.plan.argv, env)
    except OSError as exc:
        raise BootstrapError(f"cannot exec {prepared.plan.argv[0]}: {exc.strerror or exc}") from None


def _launch_supervised(
    api: KubeApi,
    prepared: Prepared,
    settings: ServerSettings,
    recorder: EventRecorder,
    *,
    env: dict[str, str],
    launched: str,
    grace_seconds: float,
    output: Callable[[str], None] | None = None,
) -> Outcome:
    monitor = (
        LocaleMonitor(api, namespace=settings.namespace, selector=settings.selector, locales=prepared.locales)
        if prepared.locales
        else None
    )
    try:
        return run_supervised(
            prepared.plan.argv,
            env=env,
            monitor=monitor,
            grace_seconds=grace_seconds,
            on_started=lambda pid: recorder.emit(Reason.LAUNCHED, f"{launched}; pid {pid}"),
            on_lost=lambda reason: recorder.emit(Reason.LOCALE_LOST, reason),
            output=output,
        )
    finally:
        if settings.prewarm:
            ssh.close_masters(prepared.hosts, wrapper=prepared.client.wrapper)


# ----------------------------------------------------------------------------------------------------------
# --hosts-from slurm

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
    client_key = userkeys.load_client_key(keys.client_key_path)
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
        from arkouda_bootstrap.kube import KubernetesApi

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
