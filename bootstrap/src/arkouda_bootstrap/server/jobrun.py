"""`server --scale-down-when-done <statefulset>`: run the program once, as the launcher of a Kubernetes Job.

Waits for and probes the locales like `run_server`, runs the program once (a lost locale ends the run: a Job
never relaunches), then gives the locale pods back and says how it went:
- the locale StatefulSet is scaled to 0 through its scale subresource (unless we were stopped by a signal: then
  the Job or its pod is being deleted — `helm upgrade` starts the next revision's Job on the same locales,
  `helm uninstall` deletes them);
- one line — "mpirun exited with status 139: rank 1 on node 10.0.0.7 was killed by signal 11 (Segmentation
  fault)" — goes to the container's termination message, to Events on this pod and on its Job (RunSucceeded,
  RunFailed, LocalesReleased), and, on failure, to stderr through the CLI's error line, with the program's
  status as ours, so the Job's podFailurePolicy fails the Job with that exit code.
"""

from __future__ import annotations

import collections
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from arkouda_bootstrap.config import DEFAULT_TERMINATION_LOG, ServerSettings
from arkouda_bootstrap.errors import EXIT_FAILURE, EXIT_LOCALE_LOST, BootstrapError
from arkouda_bootstrap.kube.api import KubeApi, PodInfo, PodRef
from arkouda_bootstrap.kube.events import EventRecorder, Reason
from arkouda_bootstrap.server import mpioutcome
from arkouda_bootstrap.server.main import _launch_supervised, _liveness, _stdout, prepare_server
from arkouda_bootstrap.ssh import client as ssh

log = logging.getLogger(__name__)

# Output lines kept to explain a failure (OpenMPI's longest message box is about 30 lines).
OUTPUT_TAIL_LINES = 200
# Labels the Job controller puts on its pods (the older unprefixed names before Kubernetes 1.27).
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
JOB_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")


@dataclass(frozen=True)
class JobSettings:
    statefulset: str  # the locale StatefulSet, scaled to 0 when the run is over
    termination_log: Path = DEFAULT_TERMINATION_LOG


@dataclass(frozen=True)
class RunResult:
    exit_code: int
    message: str  # the one line
    release_locales: bool  # False when we were stopped by a signal


def _label(pod: PodInfo | None, names: tuple[str, ...]) -> str:
    if pod is None:
        return ""
    return next((pod.labels[n] for n in names if pod.labels.get(n)), "")


def job_ref(pod: PodInfo | None, *, namespace: str) -> PodRef | None:
    """The Job that owns `pod` (from the labels the Job controller sets), for Events `kubectl describe job` shows."""
    name, uid = _label(pod, JOB_NAME_LABELS), _label(pod, JOB_UID_LABELS)
    if not name:
        return None
    return PodRef(namespace=namespace, name=name, uid=uid, kind="Job", api_version="batch/v1")


def run_once(
    api: KubeApi,
    settings: ServerSettings,
    *,
    recorder: EventRecorder,
    report: Callable[[str], None],
    probe_policy: ssh.RetryPolicy | None,
    grace_seconds: float,
) -> RunResult:
    """Prepare, run the program once and say how it ended; never raises a BootstrapError (it is the result)."""
    tail: collections.deque[str] = collections.deque(maxlen=OUTPUT_TAIL_LINES)
    try:
        prepared = prepare_server(api, settings, recorder=recorder, report=report, probe_policy=probe_policy)
        launched = f"launched {' '.join(prepared.plan.argv)} on {len(prepared.hosts)} hosts (once)"
        outcome = _launch_supervised(
            api,
            prepared,
            settings,
            recorder,
            env={**os.environ, **prepared.plan.env},
            launched=launched,
            grace_seconds=grace_seconds,
            liveness=_liveness(prepared, settings),
            output=tail.append,
        )
    except BootstrapError as exc:
        return RunResult(exit_code=exc.exit_code, message=str(exc), release_locales=True)
    if outcome.signalled:
        return RunResult(
            exit_code=outcome.exit_code or 143,
            message=f"stopped by a signal while the program ran (status {outcome.exit_code}): the Job or its pod is "
            "being deleted; the locale pods are left to the next revision's Job or to `helm uninstall`",
            release_locales=False,
        )
    if outcome.lost_reason is not None:
        return RunResult(
            exit_code=outcome.exit_code or EXIT_LOCALE_LOST,
            message=f"{outcome.lost_reason}; the program was stopped (status {outcome.exit_code}) and a Job does not "
            "relaunch it",
            release_locales=True,
        )
    if outcome.exit_code == 0:
        return RunResult(exit_code=0, message="the program exited with status 0", release_locales=True)
    return RunResult(
        exit_code=outcome.exit_code,
        message=mpioutcome.failure_reason(list(tail), exit_code=outcome.exit_code),
        release_locales=True,
    )


def release_locales(api: KubeApi, *, namespace: str, statefulset: str) -> str | None:
    """Scale the locale StatefulSet to 0; the error's one line when that fails (the run's outcome still stands)."""
    try:
        api.set_replicas(namespace=namespace, statefulset=statefulset, replicas=0)
    except BootstrapError as exc:
        return f"could not scale StatefulSet {statefulset} to 0, its locale pods are still there: {exc}"
    return None


def write_termination_message(path: Path, message: str) -> None:
    """The container's termination message (Kubernetes keeps at most 4096 bytes of it)."""
    try:
        path.write_text(message[:4000] + "\n", encoding="utf-8")
    except OSError as exc:
        log.warning("could not write the termination message to %s: %s", path, exc)


def run_job(
    api: KubeApi,
    settings: ServerSettings,
    job: JobSettings,
    *,
    report: Callable[[str], None] = _stdout,
    probe_policy: ssh.RetryPolicy | None = None,
    grace_seconds: float = 10.0,
) -> int:
    """Returns 0 after a successful run whose locales were released; raises BootstrapError otherwise (the one line;
    the program's status, or EXIT_FAILURE when only the scale-down failed)."""
    try:
        own = api.get_pod(namespace=settings.namespace, name=settings.pod_name)
    except BootstrapError as exc:
        log.warning("Events will not name this pod's uid nor its Job: %s", exc)
        own = None
    pod = PodRef(namespace=settings.namespace, name=settings.pod_name, uid=own.uid if own else "")
    owner = job_ref(own, namespace=settings.namespace)
    recorders = [EventRecorder(api, pod)] + ([EventRecorder(api, owner)] if owner else [])
    result = run_once(
        api, settings, recorder=recorders[0], report=report, probe_policy=probe_policy, grace_seconds=grace_seconds
    )
    message, exit_code = result.message, result.exit_code
    for recorder in recorders:
        recorder.emit(Reason.RUN_SUCCEEDED if result.exit_code == 0 else Reason.RUN_FAILED, message)
    if result.release_locales:
        problem = release_locales(api, namespace=settings.namespace, statefulset=job.statefulset)
        released = problem or f"scaled StatefulSet {job.statefulset} to 0: no locale pod stays after the run"
        report(released)
        for recorder in recorders:
            recorder.emit(Reason.LOCALES_KEPT if problem else Reason.LOCALES_RELEASED, released)
        if problem:
            # a run that leaves its locale pods holding their nodes is not a clean success
            message, exit_code = f"{message}; {problem}", exit_code or EXIT_FAILURE
    write_termination_message(job.termination_log, message)
    if exit_code != 0:
        raise BootstrapError(message, exit_code=exit_code)
    report(message)
    return 0
