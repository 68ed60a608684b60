"""The mpi helm test script in job mode (charts/arkouda/files/helm-test-mpi.py, JOB_NAME): it waits for the Job's
launcher pod to end, then reads its `server` log; a failed Job or one that never ends is one FAIL line. The API
is a named test double (a function answering paths), no cluster."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from test_helm_test_scripts import load

POD = "r-arkouda-server-r2-abcde"
LIST = "/api/v1/namespaces/ns/pods?labelSelector=batch.kubernetes.io/job-name%3Dr-arkouda-server-r2"
LOG = f"/api/v1/namespaces/ns/pods/{POD}/log?container=server"


def api_double(phases: list[str], *, log: str = "", message: str = "") -> tuple[Callable[[str], bytes], list[str]]:
    """Test double of the API: the pod list answers the next phase each time (the last one repeats)."""
    asked: list[str] = []

    def get(path: str) -> bytes:
        asked.append(path)
        if path == LOG:
            return log.encode()
        assert path == LIST, path
        phase = phases.pop(0) if len(phases) > 1 else phases[0]
        terminated = {"exitCode": 139, "message": message} if phase == "Failed" else None
        status = {"phase": phase, "containerStatuses": [{"name": "server", "state": {"terminated": terminated}}]}
        return json.dumps({"items": [{"metadata": {"name": POD}, "status": status}]}).encode()

    return get, asked


def test_job_mode_reads_the_launcher_log_once_the_job_succeeded(monkeypatch: pytest.MonkeyPatch) -> None:
    mpi = load("helm-test-mpi")
    monkeypatch.setattr(mpi.time, "sleep", lambda _s: None)
    get, asked = api_double(["Pending", "Running", "Succeeded"], log="Hello from thread 0 out of 1\n")
    text = mpi.job_output("r-arkouda-server-r2", namespace="ns", get=get, timeout=60)
    assert text == "Hello from thread 0 out of 1\n"
    assert asked == [LIST, LIST, LIST, LOG]


def test_job_mode_fails_with_the_jobs_one_line_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    mpi = load("helm-test-mpi")
    line = "mpirun exited with status 139: rank 1 on node 10.0.0.7 was killed by signal 11 (Segmentation fault)"
    get, _ = api_double(["Failed"], message=line + "\n")
    with pytest.raises(SystemExit) as exc:
        mpi.job_output("r-arkouda-server-r2", namespace="ns", get=get, timeout=60)
    assert str(exc.value) == (
        f"FAIL: the MPI Job r-arkouda-server-r2 failed: {line} (kubectl describe job r-arkouda-server-r2)"
    )


def test_job_mode_gives_up_at_its_deadline_naming_the_pod_state(monkeypatch: pytest.MonkeyPatch) -> None:
    mpi = load("helm-test-mpi")
    clock = iter(range(0, 1000, 30))
    monkeypatch.setattr(mpi.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(mpi.time, "sleep", lambda _s: None)
    get, _ = api_double(["Running"])
    with pytest.raises(SystemExit) as exc:
        mpi.job_output("r-arkouda-server-r2", namespace="ns", get=get, timeout=60)
    assert str(exc.value) == (
        f"FAIL: the MPI Job r-arkouda-server-r2 did not finish within 60s (pod {POD} is Running; tests.timeoutSeconds)"
    )
