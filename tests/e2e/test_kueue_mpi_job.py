"""mpi job mode admitted through Kueue (server.mpi.runMode job with global.scheduling.queueName) on the local
cluster's Kueue: the Job's launcher pod and the locale pod are one pod group, admitted whole; the run completes,
the launcher scales the locales to 0, Kueue finishes the group (kueue.x-k8s.io/retriable-in-group "false" on the
launcher) and frees the ClusterQueue's quota, and the launcher pod stays with its log for `helm test`. Skips,
saying why, on a cluster without Kueue.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kueuehelpers import GROUP, QUEUE, VERSION, Queue, admitted_workload, condition, kueue_or_skip, workload

from kubehelpers import CHART, VALUES, Kube, helm, image_args, run, wait_for

log = logging.getLogger(__name__)

RELEASE = "kjob"
N = 2  # values/mpi-job.yaml: the launcher pod and one locale pod
JOB = f"{RELEASE}-arkouda-server-r1"
LOCALES = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=locale"


@pytest.fixture(scope="module")
def custom(kube: Kube) -> client.CustomObjectsApi:
    return kueue_or_skip(kube, "test_kueue_mpi_job")


@pytest.fixture(scope="module")
def queue(kube: Kube, make_namespace: Any, custom: client.CustomObjectsApi) -> Iterator[Queue]:
    made = Queue(kube, custom, make_namespace("kq-job-e2e"))
    yield made
    made.delete((RELEASE,))


def usage_left(custom: client.CustomObjectsApi, cq: str) -> tuple[int, list[str]]:
    """The ClusterQueue's admitted Workloads and every non-zero resource it still counts as used."""
    found: Any = custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", cq)
    status = found.get("status") or {}
    used = [f"{r['name']}={r['total']}" for f in status.get("flavorsUsage") or [] for r in f.get("resources") or []
            if r.get("total") not in (None, "0")]  # fmt: skip
    return int(status.get("admittedWorkloads") or 0), used


def test_the_job_runs_admitted_with_its_locales_and_its_quota_is_free_once_it_completed(
        kube: Kube, queue: Queue, custom: client.CustomObjectsApi) -> None:
    ns = queue.ns
    t0 = time.monotonic()
    helm("install", RELEASE, str(CHART), "-n", ns, "-f", str(VALUES / "mpi-job.yaml"), *image_args(),
         "--set", f"global.scheduling.queueName={QUEUE}", "--timeout", "4m", timeout=300)  # fmt: skip
    # one Workload for the launcher and the locale pod (two pod sets: their pods differ), admitted whole
    wl = wait_for("the group's Workload admitted", lambda: admitted_workload(custom, ns, RELEASE), timeout=120,
                  describe=lambda: kube.describe_pods(ns))
    counts = sorted(int(ps["count"]) for ps in wl["spec"]["podSets"])
    assert sum(counts) == N, f"the Workload's pod sets {counts} are not the launcher and the locales"
    waited = run(["kubectl", "-n", ns, "wait", "--for=condition=complete", f"job/{JOB}", "--timeout=180s"],
                 timeout=200, check=False)  # fmt: skip
    assert waited.returncode == 0, waited.stderr + kube.describe_pods(ns)
    done = time.monotonic()

    def finished() -> dict[str, Any] | None:
        cond = condition(workload(custom, ns, RELEASE), "Finished")
        return cond if cond and cond["status"] == "True" else None

    cond = wait_for("Kueue finished the group", finished, timeout=120, describe=lambda: kube.describe_pods(ns))
    wait_for("the ClusterQueue's quota free", lambda: usage_left(custom, queue.cq) == (0, []) or None, timeout=60,
             describe=lambda: str(usage_left(custom, queue.cq)))
    print(f"\ninstall -> Job Complete {done - t0:.1f}s; Complete -> group Finished and quota free "
          f"{time.monotonic() - done:.1f}s: {cond.get('reason')}: {cond.get('message')}")  # fmt: skip
    assert cond.get("reason") == "Succeeded", cond
    kube.watch_pods_until(ns, LOCALES, lambda pods: not pods, timeout=60, what="no locale pod left")
    launcher = kube.pods(ns, f"batch.kubernetes.io/job-name={JOB}")
    assert len(launcher) == 1 and launcher[0].status.phase == "Succeeded", [p.metadata.name for p in launcher]
    assert "kueue.x-k8s.io/managed" not in (launcher[0].metadata.finalizers or [])


def test_helm_test_reads_the_log_the_finished_group_left(queue: Queue) -> None:
    proc = helm("test", RELEASE, "-n", queue.ns, "--logs", "--timeout", "2m", timeout=180)
    assert "PASS: 2 ranks x 2 threads, every line exactly once, on 2 hosts" in proc.stdout + proc.stderr

