"""`server --scale-down-when-done` (the launcher of an mpi job-mode Job): the one-line reason of a failed run from
OpenMPI's own messages, the outcome as Events on the pod and its Job, the termination message, the locale
StatefulSet scaled to 0 (never after a signal), the CLI's refusals, and the scale call through the real client
against the API server double."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from apiserver_double import Answer, ApiServerDouble, serving
from arkouda_bootstrap.cli import main as cli
from arkouda_bootstrap.cli import server as server_cli
from arkouda_bootstrap.cli.options import Values
from arkouda_bootstrap.config import Launcher, ServerSettings
from arkouda_bootstrap.errors import EXIT_TIMEOUT, BootstrapError, UsageError
from arkouda_bootstrap.kube.api import ForbiddenError, KubeApi, PodRef
from arkouda_bootstrap.kube.events import EventRecorder, Reason
from arkouda_bootstrap.server import jobrun, launch, mpioutcome
from arkouda_bootstrap.server.main import Prepared
from arkouda_bootstrap.ssh.client import ClientFiles
from arkouda_bootstrap.ssh.identity import Identity
from fakes import FakeKube, make_pod

# Verbatim from OpenMPI 4.1 (Debian bookworm's openmpi-bin, the mpi image): `mpirun -np 2 <cmd>` as uid 1000.
MISSING_EXECUTABLE = """\
--------------------------------------------------------------------------
mpirun was unable to launch the specified application as it could not access
or execute an executable:

Executable: /opt/nope
Node: 10.244.0.17

while attempting to start process rank 0.
--------------------------------------------------------------------------
2 total processes failed to start
"""
RANK_SIGNALLED = """\
Hello from rank 0
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun noticed that process rank 1 with PID 0 on node 10.244.0.18 exited on signal 11 (Segmentation fault).
--------------------------------------------------------------------------
"""
RANK_EXIT_CODE = """\
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[49986,1],1]
  Exit code:    3
--------------------------------------------------------------------------
"""
# Only the first box: what OpenMPI 4.1 prints when the ranks die together (`mpirun -np 2 sh -c 'kill -SEGV $$'`
# every time, `sh -c 'exit 3'` too), and now and then when one rank of two is killed.
RANK_UNNAMED = """\
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
"""
NOT_ENOUGH_SLOTS = """\
--------------------------------------------------------------------------
There are not enough slots available in the system to satisfy the 4
slots that were requested by the application:

  /bin/true

Either request fewer slots for your application, or make more slots
available for use.
--------------------------------------------------------------------------
"""

LOCALES = "r-arkouda-locale"
POD = "r-arkouda-server-r2-x7k2p"
JOB_LABELS = {"batch.kubernetes.io/job-name": "r-arkouda-server-r2", "batch.kubernetes.io/controller-uid": "job-uid"}


@pytest.mark.parametrize(
    ("output", "code", "reason"),
    [
        (
            MISSING_EXECUTABLE,
            132,
            "mpirun exited with status 132: /opt/nope cannot be executed on node 10.244.0.17: it is not in the image "
            "or not executable",
        ),
        (
            RANK_SIGNALLED,
            139,
            "mpirun exited with status 139: rank 1 on node 10.244.0.18 was killed by signal 11 (Segmentation fault)",
        ),
        (RANK_EXIT_CODE, 3, "mpirun exited with status 3: rank 1 exited with code 3"),
        (
            RANK_UNNAMED,
            139,
            "mpirun exited with status 139: 1 process ended with a non-zero status and OpenMPI did not name the rank; "
            "139 = 128+11: killed by signal 11 (Segmentation fault)",
        ),
        (
            RANK_UNNAMED,
            3,
            "mpirun exited with status 3: 1 process ended with a non-zero status and OpenMPI did not name the rank",
        ),
        (
            RANK_UNNAMED.replace("1 process returned", "2 processes returned"),
            137,
            "mpirun exited with status 137: 2 processes ended with a non-zero status and OpenMPI did not name the "
            "rank; 137 = 128+9: killed by signal 9 (Killed)",
        ),
        (
            NOT_ENOUGH_SLOTS,
            1,
            "mpirun exited with status 1: the hostfile cannot place 4 processes: not enough slots "
            "(server.mpi.slotsPerLocale per locale; check -np and the mapping options in server.mpi.mpirunArgs)",
        ),
        (
            "starting\nvalue out of range: 7\n",
            2,
            "the program exited with status 2; its last output line: value out of range: 7",
        ),
        ("", 1, "the program exited with status 1 without output"),
    ],
)
def test_a_failed_run_is_explained_in_one_line(output: str, code: int, reason: str) -> None:
    said = mpioutcome.failure_reason(output.splitlines(), exit_code=code)
    assert said == reason
    assert "\n" not in said


# -- run_job with a named test double of prepare_server (no ssh): the real supervisor runs a real program ---------


def settings(tmp_path: Path, *, argv: list[str]) -> ServerSettings:
    return ServerSettings(
        namespace="ns",
        num_locales=2,
        selector="app.kubernetes.io/component=locale",
        pod_name=POD,
        pod_ip="10.0.0.9",
        state_dir=tmp_path,
        launcher=Launcher.MPI,
        command=tuple(argv),
    )


def prepared_double(argv: list[str], tmp_path: Path) -> Prepared:
    """What prepare_server returns once the locales are probed (test double: no locale is tracked)."""
    return Prepared(
        hosts=[],
        locales=[],
        plan=launch.LaunchPlan(argv=argv, env={}),
        client=ClientFiles(config=tmp_path / "ssh_config", wrapper=tmp_path / "ssh", control_dir=None),
        identity=Identity(user="arkouda", uid=os.getuid(), gid=os.getgid(), home=str(tmp_path)),
    )


@pytest.fixture
def kube() -> FakeKube:
    api = FakeKube(replicas={LOCALES: 2})
    api.pods[POD] = make_pod(POD, labels=JOB_LABELS, uid="pod-uid")
    return api


def run(
    kube: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str
) -> tuple[int | BootstrapError, list[str]]:
    argv = ["/bin/sh", "-c", script]

    def prepare(api: KubeApi, s: ServerSettings, **_kw: object) -> Prepared:
        return prepared_double(argv, tmp_path)

    monkeypatch.setattr(jobrun, "prepare_server", prepare)
    reported: list[str] = []
    job = jobrun.JobSettings(statefulset=LOCALES, termination_log=tmp_path / "termination-log")
    try:
        result: int | BootstrapError = jobrun.run_job(kube, settings(tmp_path, argv=argv), job, report=reported.append)
    except BootstrapError as exc:
        result = exc
    return result, reported


def events(kube: FakeKube, kind: str) -> list[tuple[str, str, str]]:
    """The Events after the launch (the pod's own `Launched` is run_server's, checked elsewhere)."""
    return [(e.reason, e.type, e.message) for e in kube.created_events if e.pod.kind == kind and e.reason != "Launched"]


def test_a_successful_run_releases_the_locales_and_says_so_on_the_pod_and_the_job(
    kube: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    result, reported = run(kube, tmp_path, monkeypatch, "echo Hello from rank 0")
    assert result == 0
    assert kube.replicas == {LOCALES: 0}
    assert "Hello from rank 0" in capfd.readouterr().out  # the program's output still reaches the log
    released = f"scaled StatefulSet {LOCALES} to 0: no locale pod stays after the run"
    for kind in ("Pod", "Job"):
        assert events(kube, kind) == [
            ("RunSucceeded", "Normal", "the program exited with status 0"),
            ("LocalesReleased", "Normal", released),
        ], kind
    job = next(e.pod for e in kube.created_events if e.pod.kind == "Job")
    assert job == PodRef(namespace="ns", name="r-arkouda-server-r2", uid="job-uid", kind="Job", api_version="batch/v1")
    assert (tmp_path / "termination-log").read_text() == "the program exited with status 0\n"
    assert reported == [released, "the program exited with status 0"]


def test_a_crashing_rank_fails_with_its_status_and_one_line_and_still_releases_the_locales(
    kube: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = f"cat <<'EOF'\n{RANK_SIGNALLED}EOF\nexit 139"
    result, _ = run(kube, tmp_path, monkeypatch, script)
    assert isinstance(result, BootstrapError)
    line = "mpirun exited with status 139: rank 1 on node 10.244.0.18 was killed by signal 11 (Segmentation fault)"
    assert (str(result), result.exit_code) == (line, 139)
    assert kube.replicas == {LOCALES: 0}
    assert [e[:2] for e in events(kube, "Job")] == [("RunFailed", "Warning"), ("LocalesReleased", "Normal")]
    assert events(kube, "Job")[0][2] == line
    assert (tmp_path / "termination-log").read_text() == line + "\n"


def test_a_failure_before_the_launch_fails_the_job_with_that_line_and_releases_the_locales(
    kube: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def timed_out(*_a: object, **_kw: object) -> Prepared:
        raise BootstrapError("1 of 1 locale pods not Ready after 60s: r-arkouda-locale-0 Pending", exit_code=3)

    monkeypatch.setattr(jobrun, "prepare_server", timed_out)
    job = jobrun.JobSettings(statefulset=LOCALES, termination_log=tmp_path / "termination-log")
    with pytest.raises(BootstrapError) as err:
        jobrun.run_job(kube, settings(tmp_path, argv=["true"]), job, report=lambda _l: None)
    assert err.value.exit_code == EXIT_TIMEOUT
    assert kube.replicas == {LOCALES: 0}
    assert "not Ready after 60s" in (tmp_path / "termination-log").read_text()
    assert [e[0] for e in events(kube, "Pod")] == ["RunFailed", "LocalesReleased"]


def test_without_the_scale_permission_the_run_still_reports_and_names_the_missing_rbac(
    kube: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kube.fail_with["set_replicas"] = ForbiddenError(verb="patch", resource="statefulsets/scale", namespace="ns")
    result, _ = run(kube, tmp_path, monkeypatch, "true")
    assert isinstance(result, BootstrapError)  # the locales still hold their nodes: not a silent success
    assert result.exit_code == 1
    assert str(result) == (
        f"the program exited with status 0; could not scale StatefulSet {LOCALES} to 0, its locale pods are still "
        "there: missing RBAC: patch statefulsets/scale in namespace ns"
    )
    assert [e[:2] for e in events(kube, "Pod")] == [("RunSucceeded", "Normal"), ("LocalesKept", "Warning")]
    assert "missing RBAC: patch statefulsets/scale in namespace ns" in (tmp_path / "termination-log").read_text()


def test_stopped_by_sigterm_leaves_the_locales_for_the_next_revision(
    kube: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = tmp_path / "started"
    killer = threading.Thread(target=_sigterm_when, args=(started,), daemon=True)
    killer.start()
    result, _ = run(kube, tmp_path, monkeypatch, f"trap 'exit 143' TERM; : > {started}; sleep 30 & wait")
    killer.join()
    assert isinstance(result, BootstrapError)
    assert result.exit_code == 143
    assert "stopped by a signal" in str(result)
    assert kube.replicas == {LOCALES: 2}
    assert [e[0] for e in events(kube, "Pod")] == ["RunFailed"]


def _sigterm_when(path: Path) -> None:
    deadline = time.monotonic() + 20
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(os.getpid(), signal.SIGTERM)


def test_events_stay_on_the_pod_when_it_has_no_job_labels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kube = FakeKube(replicas={LOCALES: 2})
    kube.pods[POD] = make_pod(POD)
    result, _ = run(kube, tmp_path, monkeypatch, "true")
    assert result == 0
    assert {e.pod.kind for e in kube.created_events} == {"Pod"}


# -- the CLI -------------------------------------------------------------------------------------------------------

BASE_ENV = {
    "ARKOUDA_NUM_LOCALES": "2",
    "ARKOUDA_LOCALE_SELECTOR": "app.kubernetes.io/component=locale",
    "POD_NAME": POD,
    "POD_IP": "10.0.0.9",
    "ARKOUDA_LAUNCHER": "mpi",
}


def job_settings(argv: list[str], env: dict[str, str]) -> jobrun.JobSettings | None:
    own, command = cli.split_command(argv)
    ns = cli.build_parser().parse_args(own)
    opts = cli.SUBCOMMANDS["server"].options
    values = Values(ns, opts, {**BASE_ENV, **env})
    return server_cli.job_settings(values, server_cli.server_settings(values, namespace="ns", command=command))


def test_the_cli_reads_the_statefulset_and_the_termination_log_from_flags_or_env() -> None:
    assert job_settings(["server", "--", "mpirun", "x"], {}) is None
    got = job_settings(["server", "--", "mpirun", "x"], {"ARKOUDA_SCALE_DOWN_WHEN_DONE": LOCALES})
    assert got == jobrun.JobSettings(statefulset=LOCALES, termination_log=Path("/dev/termination-log"))
    got = job_settings(["server", "--scale-down-when-done", "l", "--termination-log", "/tmp/t", "--", "x"], {})
    assert got == jobrun.JobSettings(statefulset="l", termination_log=Path("/tmp/t"))


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["server", "--", "x"], {"ARKOUDA_SCALE_DOWN_WHEN_DONE": "Not_A_Name"}, "--scale-down-when-done"),
        (["server", "--no-supervise", "--", "x"], {"ARKOUDA_SCALE_DOWN_WHEN_DONE": "l"}, "drop --no-supervise"),
        (["server"], {"ARKOUDA_SCALE_DOWN_WHEN_DONE": "l"}, "no command given after `--` to run once"),
    ],
)
def test_the_cli_refuses_what_cannot_run_once(argv: list[str], env: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(")) as err:
        job_settings(argv, env)
    assert "\n" not in str(err.value)


# -- the scale call through the real client ----------------------------------------------------------------------


@pytest.fixture
def apiserver() -> Iterator[ApiServerDouble]:
    with serving() as double:
        yield double


SCALE = "/apis/apps/v1/namespaces/ns/statefulsets/r-arkouda-locale/scale"


def test_releasing_the_locales_patches_the_scale_subresource_and_names_the_missing_rbac(
    apiserver: ApiServerDouble,
) -> None:
    """The same call as the idle gate's (kube.api set_replicas): a JSON patch of spec.replicas, nothing else."""
    apiserver.answer(
        Answer("PATCH", SCALE, body={"kind": "Scale", "spec": {"replicas": 0}}),
        Answer("PATCH", SCALE, status=403, body={"kind": "Status", "reason": "Forbidden"}),
    )
    api = apiserver.api()
    assert jobrun.release_locales(api, namespace="ns", statefulset=LOCALES) is None
    assert apiserver.seen[0].body == [{"op": "replace", "path": "/spec/replicas", "value": 0}]  # type: ignore[comparison-overlap]
    assert jobrun.release_locales(api, namespace="ns", statefulset=LOCALES) == (
        f"could not scale StatefulSet {LOCALES} to 0, its locale pods are still there: missing RBAC: patch "
        "statefulsets/scale in namespace ns"
    )


def test_an_event_on_the_job_names_the_job(apiserver: ApiServerDouble) -> None:
    apiserver.answer(Answer("POST", "/api/v1/namespaces/ns/events", status=201, body={"kind": "Event"}))
    job = PodRef(namespace="ns", name="r-arkouda-server-r2", uid="job-uid", kind="Job", api_version="batch/v1")
    EventRecorder(apiserver.api(), job).emit(
        Reason.RUN_FAILED, "mpirun exited with status 3: rank 1 exited with code 3"
    )
    body = apiserver.seen[0].body
    assert body is not None
    assert body["involvedObject"] == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "r-arkouda-server-r2",
        "namespace": "ns",
        "uid": "job-uid",
    }
    assert (body["reason"], body["type"]) == ("RunFailed", "Warning")
