"""`server`: get the host list, probe the hosts over ssh, write the launcher's files, launch and supervise.

Two host sources feed the same probe → launch → supervise path: the locale pods of a release (`run_server`
here: discovery through the Kubernetes API, each pod probed as it turns Ready, a LocaleMonitor that relaunches
after a lost locale) and a Slurm job's allocation (`slurm.main.run_slurm_server`).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NoReturn

from arkouda_bootstrap import config, netdrops
from arkouda_bootstrap.config import Launcher, ServerSettings
from arkouda_bootstrap.errors import EXIT_LOCALE_LOST, BootstrapError
from arkouda_bootstrap.kube import netstatus
from arkouda_bootstrap.kube.api import ForbiddenError, KubeApi, PodInfo, PodRef
from arkouda_bootstrap.kube.events import EventRecorder, Reason
from arkouda_bootstrap.kube.outage import OutageNotice
from arkouda_bootstrap.kube.ownership import OwnedBy
from arkouda_bootstrap.kube.retry import ApiRetry
from arkouda_bootstrap.server import discovery, launch, workdir
from arkouda_bootstrap.server.giveback import GiveBack
from arkouda_bootstrap.server.liveness import HeldBack, Liveness, Target
from arkouda_bootstrap.server.netcheck import LaunchCheck
from arkouda_bootstrap.server.supervise import LocaleMonitor, Outcome, run_supervised
from arkouda_bootstrap.ssh import client as ssh
from arkouda_bootstrap.ssh import probe as sshprobe
from arkouda_bootstrap.ssh import secretwatch
from arkouda_bootstrap.ssh.identity import Identity, ensure_identity

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
    # which pods are locales (--locale-statefulset); None: any pod the selector matches
    owned: OwnedBy | None = None
    # launcher arkouda: the launch's network check, its baseline taken by the probe
    check: LaunchCheck | None = None


def prepare_server(
    api: KubeApi,
    settings: ServerSettings,
    *,
    recorder: EventRecorder,
    report: Callable[[str], None] = _stdout,
    probe_policy: ssh.RetryPolicy | None = None,
    held: HeldBack | None = None,
) -> Prepared:
    """Wait for the locales, probe them and write the launcher's files. `held`: locales the last run lost for not
    answering, which count only once they answer again or are replaced."""
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
    owned = _owned(api, settings, recorder=recorder, report=report) if expected > 0 else None
    # A pod of this release that has not reloaded a changed Secret yet (the kubelet takes about a minute) is
    # waited for until the wait deadline; a foreign host key still fails at once.
    policy = replace(
        probe_policy or ssh.RetryPolicy(attempts=settings.probe_attempts), keys_deadline=started + settings.timeout
    )

    def pending(host: ssh.Host, exc: sshprobe.KeysPendingError) -> None:
        recorder.emit(Reason.KEYS_PENDING, f"{exc}; waiting for it until the wait deadline ({settings.timeout:g}s)")

    program = launch.remote_program(settings.launcher, settings.command)
    check = _launch_check(settings, mounted=mounted, user=ident.user, recorder=recorder) if program else None
    probe = functools.partial(
        ssh.probe_host,
        port=settings.port,
        user=ident.user,
        keys=mounted.current,
        timeout=float(settings.connect_timeout),
        policy=policy,
        on_pending=pending,
        end_leftovers=program,
        on_leftovers=lambda host, n: recorder.emit(
            Reason.LEFTOVERS_ENDED,
            f"ended {n} process(es) of a previous launch on {host.pod} ({host.address}) before launching",
        ),
        on_counters=check.baseline if check is not None else None,
    )
    # With a secondary network every host, this one included, is reached at its address there.
    addresses: netstatus.Addresses | None = None
    own_ip = settings.pod_ip
    if settings.network_attachment:
        addresses = netstatus.Addresses(netstatus.Attachment.parse(settings.network_attachment))
        with recorder.on_error(Reason.SECONDARY_NETWORK_MISSING, of=netstatus.NetworkStatusError):
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
                recorder.on_error(Reason.RBAC_MISSING, of=ForbiddenError),
                recorder.on_error(Reason.SECONDARY_NETWORK_MISSING, of=netstatus.NetworkStatusError),
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
                    keep=owned,
                    statefulset=settings.locale_statefulset or None,
                    hold=held.reason if held is not None else None,
                    listener=OutageNotice(
                        doing="the server waits for its locales (the wait deadline, --timeout, is paused)",
                        report=report,
                        emit=recorder.emit,
                    ),
                )
        except discovery.WaitTimeoutError as exc:
            recorder.emit(Reason.WAIT_TIMEOUT, str(exc))
            raise
        hosts = [own, *map(host_of, locales)]
        if check is not None:
            check.launching(hosts)
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
    return Prepared(hosts=hosts, locales=locales, plan=plan, client=client, identity=ident, owned=owned, check=check)


def _launch_check(
    settings: ServerSettings, *, mounted: secretwatch.MountedKeys, user: str, recorder: EventRecorder
) -> LaunchCheck:
    """The check reads the hosts after the launch the way the probe did before it: same user, keys and bound."""

    def read(host: ssh.Host) -> netdrops.Counters:
        return sshprobe.read_counters(
            host.address,
            pod=host.pod,
            port=settings.port,
            user=user,
            keys=mounted.current(),
            timeout=float(settings.connect_timeout),
        )

    return LaunchCheck(
        read=read,
        emit=lambda line: recorder.emit(Reason.DATAGRAMS_DROPPED, line),
        totals=settings.state_dir / config.LAUNCH_NETWORK_FILE,
        timeout=float(settings.connect_timeout),
        max_workers=min(ssh.MAX_PROBE_THREADS, settings.num_locales),
    )


# GASNet's amudprun when a locale's worker cannot connect back to it at start-up ("Got an xSocket while spawning
# worker process: connect() failed ... Connection refused"): the pod network does not admit that locale's traffic
# to this pod yet, e.g. a NetworkPolicy enforcer still syncing its pod sets after an API server outage. The probe
# only tried this pod → locale. A relaunch once the locales are Ready again gets through; exiting would cost a
# container restart and its back-off.
SPAWN_FAILED = "while spawning worker process"


class SpawnWatch:
    """The program's output tap: remembers the first line saying a worker could not connect back to the
    launcher, and passes every line on."""

    def __init__(self, then: Callable[[str], None] | None = None) -> None:
        self.line: str | None = None
        self._then = then

    def output(self, line: str) -> None:
        if self.line is None and SPAWN_FAILED in line:
            self.line = line.strip()
        if self._then is not None:
            self._then(line)


def _spawn_failure(outcome: Outcome, watch: SpawnWatch | None) -> Outcome:
    """A failed launch whose worker could not connect back becomes a loss to relaunch after (bounded by
    --max-relaunches like one)."""
    if watch is None or watch.line is None or not outcome.exit_code or outcome.signalled or outcome.lost_reason:
        return outcome
    return replace(
        outcome,
        lost_reason=f"a locale could not connect back to the launcher ({watch.line}): the pod network did not "
        "admit it to this pod yet",
    )


def _host(pod: PodInfo, *, addresses: netstatus.Addresses | None = None) -> ssh.Host:
    return ssh.Host(address=addresses.address(pod) if addresses else pod.pod_ip or "", pod=pod.name)


def _own_uid(api: KubeApi, settings: ServerSettings) -> str:
    """The server pod's uid ties Events to it for `kubectl describe`; without `get pods` they still get created."""
    try:
        retry = ApiRetry(f"pod {settings.pod_name} in namespace {settings.namespace}")  # an outage is waited out
        own = retry.call(lambda: api.get_pod(namespace=settings.namespace, name=settings.pod_name))
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
    RELAUNCH_RESET_SECONDS) it exits non-zero and leaves the back-off to Kubernetes.

    With a locale StatefulSet and a release back-off, a wait that times out gives the locale pods back and asks
    again after the back-off (server.giveback) instead of exiting with them still holding their nodes."""
    recorder = EventRecorder(
        api, PodRef(namespace=settings.namespace, name=settings.pod_name, uid=_own_uid(api, settings))
    )
    give_back = _give_back(api, settings, recorder=recorder, report=report)
    if give_back is not None:
        with recorder.on_error(Reason.RBAC_MISSING, of=ForbiddenError):
            give_back.restore_if_released()
    losses_in_a_row = 0
    held: HeldBack | None = None
    while True:
        try:
            prepared = prepare_server(
                api, settings, recorder=recorder, report=report, probe_policy=probe_policy, held=held
            )
        except discovery.WaitTimeoutError as exc:
            if give_back is None:
                raise
            with recorder.on_error(Reason.RBAC_MISSING, of=ForbiddenError):
                give_back.release_and_wait(str(exc))
            continue
        if not prepared.plan.argv:
            report(f"launcher none: wrote {settings.state_dir} (ssh_config, hostfile); no command given")
            return 0
        env = {**os.environ, **prepared.plan.env}
        launched = f"launched {' '.join(prepared.plan.argv)} on {len(prepared.hosts)} hosts ({settings.launcher.value})"
        if not settings.supervise:
            _exec(prepared, env, recorder, launched=launched)
        started = clock()
        liveness = _liveness(prepared, settings)
        watch = SpawnWatch(prepared.check.output if prepared.check is not None else None)
        outcome = _launch_supervised(
            api,
            prepared,
            settings,
            recorder,
            env=env,
            launched=launched,
            grace_seconds=grace_seconds,
            liveness=liveness,
            output=watch.output if prepared.check is not None else None,
        )
        if prepared.check is not None:
            # before we return or relaunch: the check's line, Event and file are out (or it was cancelled), and
            # nothing of it comes later; a launch that failed at start-up is the one most worth diagnosing
            prepared.check.finish(
                failed=bool(outcome.exit_code) and not outcome.signalled, lost=outcome.lost_reason is not None
            )
        outcome = _spawn_failure(outcome, watch)
        if outcome.lost_reason is None:
            return outcome.exit_code
        # A locale lost for not answering may still be Ready to the control plane (its node's loss is told only
        # after the node controller's grace): the relaunch waits for it to answer again or to be replaced.
        held = liveness.held_back({p.name: p.uid for p in prepared.locales}) if liveness is not None else None
        if held is not None and held.pods:
            log.info("held back from the relaunch until they answer or are replaced: %s", ", ".join(held.pods))
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


def _give_back(
    api: KubeApi, settings: ServerSettings, *, recorder: EventRecorder, report: Callable[[str], None]
) -> GiveBack | None:
    """The release's locales given back after a wait timeout (--release-backoff > 0 with --locale-statefulset)."""
    if not settings.locale_statefulset or settings.release_backoff <= 0 or settings.num_locales < 2:
        return None
    return GiveBack(
        api=api,
        namespace=settings.namespace,
        statefulset=settings.locale_statefulset,
        replicas=settings.num_locales - 1,
        backoff=settings.release_backoff,
        emit_released=lambda message: recorder.emit(Reason.LOCALES_RELEASED, message),
        emit_requested=lambda message: recorder.emit(Reason.LOCALES_REQUESTED, message),
        report=report,
    )


def _owned(
    api: KubeApi, settings: ServerSettings, *, recorder: EventRecorder, report: Callable[[str], None]
) -> OwnedBy | None:
    """The locale filter of --locale-statefulset: an impostor is named in a progress line and an Event."""
    if not settings.locale_statefulset:
        return None

    def impostor(pod: PodInfo, message: str) -> None:
        report(message)
        recorder.emit(Reason.IMPOSTOR_POD, message)

    with recorder.on_error(Reason.RBAC_MISSING, of=ForbiddenError):
        return OwnedBy(
            api, namespace=settings.namespace, statefulsets=[settings.locale_statefulset], on_impostor=impostor
        )


def _exec(prepared: Prepared, env: dict[str, str], recorder: EventRecorder, *, launched: str) -> NoReturn:
    recorder.emit(Reason.LAUNCHED, launched + " (unsupervised)")
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(prepared.plan.argv[0], prepared.plan.argv, env)
    except OSError as exc:
        raise BootstrapError(f"cannot exec {prepared.plan.argv[0]}: {exc.strerror or exc}") from None


def _liveness(prepared: Prepared, settings: ServerSettings) -> Liveness | None:
    """Row 9 of the supervisor's decision table: the locales' sshd, at the addresses the launcher uses."""
    if not prepared.locales:
        return None
    return Liveness({h.pod: Target(pod=h.pod, address=h.address, port=settings.port) for h in prepared.hosts[1:]})


def _launch_supervised(
    api: KubeApi,
    prepared: Prepared,
    settings: ServerSettings,
    recorder: EventRecorder,
    *,
    env: dict[str, str],
    launched: str,
    grace_seconds: float,
    liveness: Liveness | None,
    output: Callable[[str], None] | None = None,
) -> Outcome:
    monitor = (
        LocaleMonitor(
            api,
            namespace=settings.namespace,
            selector=settings.selector,
            locales=prepared.locales,
            owned=prepared.owned,
            listener=OutageNotice(
                doing="the program runs on and the supervisor resumes following the locales", emit=recorder.emit
            ),
            liveness=liveness,
            on_note=lambda message: recorder.emit(Reason.LOCALE_NOT_READY, message),
        )
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
