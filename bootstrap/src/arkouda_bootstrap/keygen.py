"""`keygen`: create the release's SSH Secret once (Helm pre-install/pre-upgrade hook), or validate it.

Keys are generated in the pod, never rendered by Helm, so they never appear in Helm's release records.
"""

from __future__ import annotations

import logging

from arkouda_bootstrap.config import KeygenSettings
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.kube.api import ConflictError, KubeApi
from arkouda_bootstrap.ssh import keys

log = logging.getLogger(__name__)

MANAGED_BY = "arkouda-bootstrap"
# How long the uninstall clean-up waits for a left keygen Job's pod to end: its grace period (30 s) and some.
JOB_GONE_TIMEOUT_SECONDS = 60
# How long the hook before an mpi job mode run waits for the last run's deleted Workload to go (Kueue drops its
# finalizer within a reconcile).
WORKLOAD_GONE_TIMEOUT_SECONDS = 60


def secret_labels(release: str) -> dict[str, str]:
    return {"app.kubernetes.io/instance": release, "app.kubernetes.io/managed-by": MANAGED_BY}


def run_keygen(api: KubeApi, settings: KeygenSettings) -> str:
    """Create, validate, rotate or delete the Secret; returns a one-line summary of what happened.

    A rotation happens once per id: the id is stored in the Secret, so the same request replayed by
    `helm upgrade --reuse-values` finds it done and changes nothing."""
    ns, name = settings.namespace, settings.secret_name
    where = f"Secret {name} in namespace {ns}"
    if settings.delete:
        deleted = []
        lingering = None
        if settings.keygen_job:
            # A helm client killed during the pre-install hook never applies the hook-failed policy: nothing else
            # removes that Job. Its pod may be running keygen right now (it could start only once the cause of the
            # hang was fixed), so the Secret is deleted only when the pod is gone: before, it could be re-created.
            job = settings.keygen_job
            uid = api.delete_job(namespace=ns, name=job)
            if uid is None:
                deleted.append(f"keygen Job {job} already absent")
            elif api.wait_job_gone(namespace=ns, name=job, uid=uid, timeout_seconds=JOB_GONE_TIMEOUT_SECONDS):
                deleted.append(f"keygen Job {job} deleted")
            else:
                lingering = job
                deleted.append(f"keygen Job {job} still has a pod after {JOB_GONE_TIMEOUT_SECONDS} s")
        if settings.kueue_workload:
            # Kueue's finalizer keeps the group's pods (Terminating) and its quota reserved after Helm deleted the
            # StatefulSets; deleting the Workload makes Kueue release both, so a queued release can be admitted.
            wl = settings.kueue_workload
            gone = api.delete_kueue_workload(namespace=ns, name=wl)
            deleted.append(f"Kueue Workload {wl} {'deleted' if gone else 'already absent'}")
        deleted.append(f"deleted {where}" if api.delete_secret(namespace=ns, name=name) else f"{where} already absent")
        if settings.test_objects:
            # Helm never deletes test hooks at uninstall; the last test Pod is kept for `helm test --logs`.
            test = settings.test_objects
            pod = api.delete_pod(namespace=ns, name=test)
            config_map = api.delete_config_map(namespace=ns, name=test)
            deleted.append(f"test Pod {test} {'deleted' if pod else 'already absent'}")
            deleted.append(f"test ConfigMap {test} {'deleted' if config_map else 'already absent'}")
        if lingering is not None:
            # everything else is done; the one thing left to the user is said in one line, and the hook fails
            raise BootstrapError(
                f"{'; '.join(deleted)}: its pod may re-create the Secret (is its node down?); once "
                f"`kubectl -n {ns} get pods -l batch.kubernetes.io/job-name={lingering}` lists nothing, "
                f"run `kubectl -n {ns} delete secret {name} --ignore-not-found`"
            )
        return "; ".join(deleted)
    finished = _delete_finished_workload(api, namespace=ns, name=settings.kueue_workload)
    summary = _keys(api, settings)
    return f"{summary}; {finished}" if finished else summary


def _delete_finished_workload(api: KubeApi, *, namespace: str, name: str | None) -> str | None:
    """mpi job mode through Kueue, before a run: the last run's group is Finished and its Workload stays while the
    last launcher pod (its owner) does; Kueue would take the next run's pods into that finished group and never
    ungate them. A finished Workload is deleted (Kueue then only drops its finalizers), any other one is left."""
    if name is None:
        return None
    workload = api.get_kueue_workload(namespace=namespace, name=name)
    finished = workload.condition("Finished") if workload is not None else None
    if workload is None or workload.deleting or finished is None or finished.status != "True":
        return None
    api.delete_kueue_workload(namespace=namespace, name=name, uid=workload.uid)
    # gone before the run's pods come: Kueue would otherwise find the one being deleted under the group's name
    if not api.wait_kueue_workload_gone(
        namespace=namespace, name=name, uid=workload.uid, timeout_seconds=WORKLOAD_GONE_TIMEOUT_SECONDS
    ):
        raise BootstrapError(
            f"Kueue Workload {name} of the last run is still there {WORKLOAD_GONE_TIMEOUT_SECONDS} s after its "
            f"delete (is Kueue's controller running? it removes the Workload's finalizer): this run's pods would "
            f"join that finished group and stay gated; once `kubectl -n {namespace} get workload {name}` finds "
            "nothing, run helm upgrade again"
        )
    return f"Kueue Workload {name} of the last run ({finished.reason or 'Finished'}) deleted"


def _keys(api: KubeApi, settings: KeygenSettings) -> str:
    ns, name = settings.namespace, settings.secret_name
    where = f"Secret {name} in namespace {ns}"
    existing = api.get_secret(namespace=ns, name=name)
    labels = secret_labels(settings.release)
    rotation = settings.rotation_id
    if existing is not None and (rotation is None or existing.get(keys.ROTATION_ID, b"").decode() == rotation):
        keys.validate_secret_data(existing, source=where, require_token=settings.with_token)
        done = f" (rotation {rotation} was already done)" if rotation else ""
        return f"{where} exists and is valid; unchanged{done}"
    data = keys.build_secret_data(release=settings.release, with_token=settings.with_token)
    data[keys.RELEASE_ID] = keys.release_id(namespace=ns, release=settings.release).encode()
    if rotation is not None:
        data[keys.ROTATION_ID] = rotation.encode()
    if existing is None:
        try:
            api.create_secret(namespace=ns, name=name, data=data, labels=labels)
        except ConflictError:
            # another keygen won the race: its Secret must be valid, ours is dropped
            raced = api.get_secret(namespace=ns, name=name)
            if raced is None:
                raise
            keys.validate_secret_data(raced, source=where, require_token=settings.with_token)
            return f"{where} was created concurrently and is valid; unchanged"
        return f"created {where}"
    if not settings.with_token and keys.TOKEN in existing:
        data[keys.TOKEN] = existing[keys.TOKEN]  # rotation replaces keys; a token is only added, never dropped
    data[keys.RETIRED_HOST_KEYS] = keys.retire_host_key(existing)
    api.replace_secret(namespace=ns, name=name, data=data, labels=labels)
    return (
        f"rotated {where} (rotation {rotation}: new client and host keys{', new token' if settings.with_token else ''})"
    )
