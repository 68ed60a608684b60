"""helm test (mpi mode): fetch the hybrid hello output the server pod serves after mpirun succeeded (or, in job
mode, the log of the Job's launcher pod once the Job completed) and check that every (rank, thread) line appears
exactly once, with the expected sizes, over numLocales hosts.

Environment (set by templates/tests/test-pod.yaml): RESULTS_URL or JOB_NAME (job mode; the pod's service account
may list pods and read their logs, templates/tests/test-rbac.yaml), EXPECTED_RANKS, EXPECTED_THREADS,
EXPECTED_HOSTS, LINE_PATTERN (tests.mpiLinePattern), TIMEOUT_SECONDS; with global.scheduling.queueName also
KUEUE_WORKLOAD, KUEUE_QUEUE and SERVER_POD (helm_test_kube.py: a queued release fails at once, saying so).
Standard library only (the image's python3).
"""

from __future__ import annotations

import collections
import json
import os
import re
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # helm_test_kube.py, beside this script
from helm_test_kube import api_getter, namespace, queue_reason, server_pod_queue_reason


def fetch(url: str, *, timeout: float, queued: Callable[[], str | None] = lambda: None) -> str:
    """The served output, retried until `timeout`; exits with one line naming the URL when it never comes, or at
    once with the release's place in its Kueue queue (`queued`) while it waits there."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - the release's own Service
                return str(resp.read().decode("utf-8", "replace"))
        except OSError as exc:
            if (why := queued()) is not None:
                sys.exit(f"FAIL: {why}")
            if time.monotonic() > deadline:
                sys.exit(
                    f"FAIL: no MPI output at {url} ({exc}); see `kubectl logs` of the server pod, container server"
                )
            time.sleep(2)


def job_output(
    job: str, *, namespace: str, get: Callable[[str], bytes], timeout: float, environ: Mapping[str, str] | None = None
) -> str:
    """The log of the Job's launcher pod (container `server`) once it succeeded; exits with one line when the Job
    failed (its termination message: why), waits in its Kueue queue (KUEUE_WORKLOAD in `environ`: Kueue's
    reason) or did not finish within `timeout`."""
    pods = f"/api/v1/namespaces/{namespace}/pods"
    selector = urllib.parse.quote(f"batch.kubernetes.io/job-name={job}")
    deadline = time.monotonic() + timeout
    seen = "no pod yet"
    while True:
        try:
            items = json.loads(get(f"{pods}?labelSelector={selector}")).get("items") or []
        except OSError as exc:
            items, seen = [], f"cannot list its pods: {exc}"
        for pod in items:
            name, phase = pod["metadata"]["name"], pod.get("status", {}).get("phase", "")
            if phase == "Succeeded":
                return get(f"{pods}/{name}/log?container=server").decode("utf-8", "replace")
            if phase == "Failed":
                sys.exit(f"FAIL: the MPI Job {job} failed: {termination_message(pod)} (kubectl describe job {job})")
            if (why := queue_reason(get, ns=namespace, pod=pod, environ=environ or {})) is not None:
                sys.exit(f"FAIL: the MPI Job {job}: {why}")
            seen = f"pod {name} is {phase}"
        if time.monotonic() > deadline:
            sys.exit(f"FAIL: the MPI Job {job} did not finish within {timeout:g}s ({seen}; tests.timeoutSeconds)")
        time.sleep(2)


def termination_message(pod: Mapping[str, object]) -> str:
    """The `server` container's termination message (the bootstrap's one line), else its exit code."""
    status = pod.get("status")
    statuses = status.get("containerStatuses", []) if isinstance(status, dict) else []
    for cs in statuses:
        terminated = cs.get("state", {}).get("terminated") if cs.get("name") == "server" else None
        if terminated:
            return str(terminated.get("message") or f"exit code {terminated.get('exitCode')}").strip()
    return "no termination message"


def check(text: str, *, pattern: re.Pattern[str], ranks: int, threads: int, hosts_expected: int) -> list[str]:
    """Every problem with the output (empty when it is right); matching lines are printed."""
    seen: collections.Counter[tuple[int, int]] = collections.Counter()
    hosts: set[str] = set()
    errors: list[str] = []
    for line in text.splitlines():
        m = pattern.search(line)
        if not m:
            continue
        print(line)
        g = m.groupdict()
        seen[(int(g["rank"]), int(g["thread"]))] += 1
        if int(g["size"]) != ranks:
            errors.append(f"line reports {g['size']} processes, expected {ranks}: {line}")
        if int(g["threads"]) != threads:
            errors.append(f"line reports {g['threads']} threads, expected {threads} (server.mpi.ompThreads): {line}")
        if g.get("host"):
            hosts.add(g["host"])
    for rank in range(ranks):
        for thread in range(threads):
            n = seen[(rank, thread)]
            if n != 1:
                errors.append(f"rank {rank} thread {thread} appears {n} times, expected once")
    if "host" in pattern.groupindex and len(hosts) != hosts_expected:
        errors.append(f"ranks ran on {len(hosts)} hosts {sorted(hosts)}, expected {hosts_expected} (global.numLocales)")
    return errors


def main(environ: Mapping[str, str]) -> int:
    ranks, threads = int(environ["EXPECTED_RANKS"]), int(environ["EXPECTED_THREADS"])
    hosts = int(environ["EXPECTED_HOSTS"])
    pattern = re.compile(environ["LINE_PATTERN"])
    timeout = float(environ["TIMEOUT_SECONDS"])
    if environ.get("JOB_NAME"):
        text = job_output(environ["JOB_NAME"], namespace=namespace(), get=api_getter(), timeout=timeout,
                          environ=environ)  # fmt: skip
    elif environ.get("KUEUE_WORKLOAD"):
        get, ns = api_getter(), namespace()
        server = environ["SERVER_POD"]
        text = fetch(environ["RESULTS_URL"], timeout=timeout,
                     queued=lambda: server_pod_queue_reason(get, ns=ns, pod_name=server, environ=environ))  # fmt: skip
    else:
        text = fetch(environ["RESULTS_URL"], timeout=timeout)
    errors = check(text, pattern=pattern, ranks=ranks, threads=threads, hosts_expected=hosts)
    for e in errors:
        print("FAIL:", e)
    if errors:
        print(f"FAIL: {len(errors)} problems in the MPI output (pattern tests.mpiLinePattern)")
        return 1
    print(f"PASS: {ranks} ranks x {threads} threads, every line exactly once, on {hosts} hosts")
    return 0


if __name__ == "__main__":
    sys.exit(main(os.environ))
