"""mpi job mode on the real local node (values/mpi-job.yaml): one `helm install` runs the hybrid hello once as a
Kubernetes Job that `kubectl wait --for=condition=complete` sees; the output stays readable in the launcher pod's
log and `helm test` checks it; no locale pod is left. Each `helm upgrade` is a new revision and a new run: a
command that is not in the image and a rank that crashes end Failed with their one-line reason (Job condition,
termination message, Events), the locale pods released again. `helm uninstall` leaves nothing of the release."""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any

import pytest

from kubehelpers import CHART, VALUES, Kube, hello_lines, helm, image_args, run

log = logging.getLogger(__name__)

RELEASE = "mpijob"
LOCALES = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=locale"


@pytest.fixture(scope="module")
def ns(make_namespace: Any) -> str:
    name: str = make_namespace("mpi-job-e2e")
    return name


def job_name(revision: int) -> str:
    return f"{RELEASE}-arkouda-server-r{revision}"


def kubectl(ns: str, *args: str, timeout: float = 150, check: bool = True) -> str:
    return run(["kubectl", "-n", ns, *args], timeout=timeout, check=check).stdout


def wait_job(ns: str, revision: int, condition: str) -> float:
    """`kubectl wait` for the Job's condition (as a user would); returns when it held (monotonic). On expiry the
    failure shows the Job, its pods and the launcher's log."""
    job = f"job/{job_name(revision)}"
    waited = run(["kubectl", "-n", ns, "wait", f"--for=condition={condition}", job, "--timeout=180s"], timeout=200,
                 check=False)
    if waited.returncode != 0:
        state = "\n".join(kubectl(ns, *args, check=False) for args in (
            ("describe", job), ("get", "pods", "-o", "wide"), ("logs", job, "-c", "server", "--tail=40")))
        raise AssertionError(f"{job} not {condition}: {waited.stderr}\n{state}")
    return time.monotonic()


def no_locale_pods_left(kube: Kube, ns: str, since: float) -> float:
    """Seconds after `since` until the release has no locale pod at all (the bootstrap scaled them to 0)."""
    kube.watch_pods_until(ns, LOCALES, lambda pods: not pods, timeout=30, what="no locale pod left")
    return time.monotonic() - since


def job_events(kube: Kube, ns: str, revision: int) -> dict[str, str]:
    return {e.reason: e.message for e in kube.events_for(ns, job_name(revision))}


def launcher_pod(kube: Kube, ns: str, revision: int) -> Any:
    pods = kube.pods(ns, f"batch.kubernetes.io/job-name={job_name(revision)}")
    assert len(pods) == 1, [p.metadata.name for p in pods]
    return pods[0]


def termination_message(pod: Any) -> str:
    server = next(c for c in pod.status.container_statuses if c.name == "server")
    return str(server.state.terminated.message or "").strip()


def failed_condition(kube: Kube, ns: str, revision: int) -> Any:
    job = kube.batch.read_namespaced_job(job_name(revision), ns)
    return next(c for c in job.status.conditions if c.type == "Failed" and c.status == "True")


def test_the_job_completes_with_the_hello_output_readable_and_no_locale_pod_left(kube: Kube, ns: str) -> None:
    t0 = time.monotonic()
    helm("install", RELEASE, str(CHART), "-n", ns, "-f", str(VALUES / "mpi-job.yaml"), *image_args(),
         "--timeout", "4m", timeout=300)
    done = wait_job(ns, 1, "complete")
    released = no_locale_pods_left(kube, ns, done)
    text = kubectl(ns, "logs", f"job/{job_name(1)}", "-c", "server")
    seen, hosts = hello_lines(text)
    print(f"install -> Complete in {done - t0:.1f}s; Complete -> no locale pod in {released:.1f}s")
    assert seen == {(r, t): 1 for r in range(2) for t in range(2)}, f"hello lines:\n{text}"
    assert len(hosts) == 2, f"ranks ran on {sorted(hosts)}: expected the launcher pod and one locale pod"
    assert kube.apps.read_namespaced_stateful_set(f"{RELEASE}-arkouda-locale", ns).spec.replicas == 0
    events = job_events(kube, ns, 1)
    assert events.get("RunSucceeded") == "the program exited with status 0", events
    assert "LocalesReleased" in events, events
    assert termination_message(launcher_pod(kube, ns, 1)) == "the program exited with status 0"


def test_helm_test_checks_the_output_in_the_launcher_log(ns: str) -> None:
    proc = helm("test", RELEASE, "-n", ns, "--logs", "--timeout", "2m", timeout=180)
    assert "PASS: 2 ranks x 2 threads, every line exactly once, on 2 hosts" in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("revision", "settings", "reason"),
    [
        (
            2,
            ["--set", "server.mpi.command=/opt/mpi-demo/bin/not-in-the-image"],
            r"^mpirun exited with status \d+: /opt/mpi-demo/bin/not-in-the-image cannot be executed on node \S+: "
            r"it is not in the image or not executable$",
        ),
        (
            3,
            # rank 1 crashes while rank 0 works on. Kubernetes reads `$$` in container args as an escaped `$`:
            # `$$$$` reaches sh as `$$` (its own pid).
            ["--set", "server.mpi.command=/bin/sh", "--set-json",
             'server.mpi.args=["-c","test $OMPI_COMM_WORLD_RANK -ne 1 || kill -SEGV $$$$; sleep 120"]'],
            # OpenMPI 4.1 names the rank in a second box that it now and then leaves out (mpioutcome)
            r"^mpirun exited with status 139: (rank 1 on node \S+ was killed by signal 11 \(Segmentation fault\)"
            r"|1 process ended with a non-zero status and OpenMPI did not name the rank; 139 = 128\+11: killed by "
            r"signal 11 \(Segmentation fault\))$",
        ),
    ],
    ids=["command-not-in-image", "crashing-rank"],
)
def test_a_failing_run_ends_failed_with_its_one_line_reason(
    kube: Kube, ns: str, revision: int, settings: list[str], reason: str
) -> None:
    helm("upgrade", RELEASE, str(CHART), "-n", ns, "-f", str(VALUES / "mpi-job.yaml"), *image_args(), *settings,
         "--timeout", "4m", timeout=300)
    done = wait_job(ns, revision, "failed")
    released = no_locale_pods_left(kube, ns, done)
    line = termination_message(launcher_pod(kube, ns, revision))
    condition = failed_condition(kube, ns, revision)
    print(f"\nrevision {revision}: {line}\n  Job condition: {condition.reason}: {condition.message}\n"
          f"  Failed -> no locale pod in {released:.1f}s")
    assert re.match(reason, line), line
    assert condition.reason == "PodFailurePolicy", condition
    assert "exit code" in condition.message, condition.message
    assert job_events(kube, ns, revision).get("RunFailed") == line
    assert kube.batch.read_namespaced_job(job_name(revision), ns).status.failed == 1  # no retry loop
    jobs = [j.metadata.name for j in kube.batch.list_namespaced_job(
        ns, label_selector=f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=server").items]
    assert jobs == [job_name(revision)], jobs  # the previous revision's Job went with its revision


def test_uninstall_leaves_nothing_of_the_release(kube: Kube, ns: str) -> None:
    helm("uninstall", RELEASE, "-n", ns, "--wait", "--timeout", "3m", timeout=240)
    left = json.loads(kubectl(ns, "get", "all,roles,rolebindings,serviceaccounts,configmaps,secrets", "-l",
                              f"app.kubernetes.io/instance={RELEASE}", "-o", "json"))["items"]
    kube.watch_pods_until(ns, f"app.kubernetes.io/instance={RELEASE}", lambda pods: not pods, timeout=60,
                          what="no pod of the release")
    assert [f"{o['kind']}/{o['metadata']['name']}" for o in left if o["kind"] != "Pod"] == []
