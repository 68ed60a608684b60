"""The chart's `helm test` scripts (charts/arkouda/files/helm-test-*.py), run on this machine: the arkouda-mode
script against the stand-in server (the replay client path an image without the Arkouda client takes), the
mpi-mode checker against good and bad hybrid-hello output."""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from conftest import REPO, STANDIN_LIB
from test_standin_server import Server, servers, start

__all__ = ["servers"]  # the fixture, imported for the tests below

FILES = REPO / "charts" / "arkouda" / "files"
HELLO = re.compile(
    r"Hello from thread (?P<thread>\d+) out of (?P<threads>\d+) from process (?P<rank>\d+) out of (?P<size>\d+) "
    r"on (?P<host>\S+)"
)


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"), FILES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def hello(ranks: int, threads: int, hosts: list[str]) -> str:
    return "".join(
        f"Hello from thread {t} out of {threads} from process {r} out of {ranks} on {hosts[r % len(hosts)]}\n"
        for r in range(ranks)
        for t in range(threads)
    )


def test_mpi_checker_accepts_every_line_once_on_every_host() -> None:
    mpi = load("helm-test-mpi")
    text = "mpirun noise\n" + hello(2, 2, ["pod-a", "pod-b"])
    assert mpi.check(text, pattern=HELLO, ranks=2, threads=2, hosts_expected=2) == []


def test_mpi_checker_names_duplicates_missing_lines_and_one_host() -> None:
    mpi = load("helm-test-mpi")
    text = hello(2, 2, ["pod-a"]) + "Hello from thread 0 out of 2 from process 0 out of 2 on pod-a\n"
    errors = mpi.check(
        text.replace("thread 1 out of 2 from process 1", "thread 9 out of 2 from process 1"),
        pattern=HELLO,
        ranks=2,
        threads=2,
        hosts_expected=2,
    )
    assert "rank 0 thread 0 appears 2 times, expected once" in errors
    assert "rank 1 thread 1 appears 0 times, expected once" in errors
    assert "ranks ran on 1 hosts ['pod-a'], expected 2 (global.numLocales)" in errors


def arkouda_script(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, token: str | None) -> ModuleType:
    script = load("helm-test-arkouda")
    monkeypatch.setattr(script, "REPLAY_LIB", STANDIN_LIB)
    monkeypatch.setattr(script, "ARKOUDA_PYTHON", tmp_path / "no-arkouda-client")
    token_file = tmp_path / "token"
    if token is not None:
        token_file.write_text(token)
    monkeypatch.setattr(script, "TOKEN_FILE", token_file)
    return script


def env(server: Server, expected: int) -> dict[str, str]:
    return {
        "ARKOUDA_HOST": "127.0.0.1",
        "ARKOUDA_PORT": str(server.port),
        "EXPECTED_LOCALES": str(expected),
        "TIMEOUT_SECONDS": "20",
    }


def test_arkouda_script_passes_through_the_replay_client_and_says_so(
    servers: list[Server], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = start(servers, tmp_path / "work")
    script = arkouda_script(monkeypatch, tmp_path, token=None)
    assert script.main(env(server, 3)) == 0
    out = capsys.readouterr().out
    assert "with the replay of the pinned client's ak.connect() requests" in out
    assert "PASS: numLocales == 3" in out


def test_arkouda_script_fails_on_a_wrong_locale_count(
    servers: list[Server], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = start(servers, tmp_path / "work")
    assert arkouda_script(monkeypatch, tmp_path, token=None).main(env(server, 2)) == 1
    assert "FAIL: numLocales is 3, expected 2 (global.numLocales)" in capsys.readouterr().out


def test_arkouda_script_sends_the_release_token(
    servers: list[Server], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    (work / ".arkouda").mkdir(parents=True)
    (work / ".arkouda" / "tokens.txt").write_text("release-token\n")  # as the bootstrap writes it
    server = start(servers, work, "--authenticate")
    assert arkouda_script(monkeypatch, tmp_path, token="release-token").main(env(server, 3)) == 0
    assert "and the release token" in capsys.readouterr().out


def test_arkouda_script_gives_up_at_its_deadline_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = arkouda_script(monkeypatch, tmp_path, token=None)
    monkeypatch.setattr(script, "RETRY_SECONDS", 0.1)
    nobody = {"ARKOUDA_HOST": "127.0.0.1", "ARKOUDA_PORT": "9", "EXPECTED_LOCALES": "1", "TIMEOUT_SECONDS": "1"}
    assert script.main(nobody) == 1
    assert "FAIL: no answer from 127.0.0.1:9 within 1s" in capsys.readouterr().out


# -- a release queued in Kueue (global.scheduling.queueName; files/helm_test_kube.py) ----------------------------

QUEUED_ENV = {"KUEUE_WORKLOAD": "r-arkouda-group", "KUEUE_QUEUE": "team-a"}
NO_QUOTA = "couldn't assign flavors to pod set 5f7b: insufficient quota for cpu in flavor default"
WORKLOAD = "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/r-arkouda-group"


def pod(name: str, *, reason: str = "SchedulingGated", status: str = "False") -> dict[str, object]:
    return {
        "metadata": {"name": name},
        "status": {"conditions": [{"type": "PodScheduled", "status": status, "reason": reason}]},
    }


def api_double(answers: dict[str, object]) -> Callable[[str], bytes]:
    """Test double of the API: a path answers its JSON, or raises the OSError it is given."""

    def get(path: str) -> bytes:
        answer = answers[path]
        if isinstance(answer, OSError):
            raise answer
        return json.dumps(answer).encode()

    return get


def test_a_gated_pod_is_queued_in_kueues_words() -> None:
    kube = load("helm_test_kube")
    workload = {"status": {"conditions": [{"type": "QuotaReserved", "status": "False", "message": NO_QUOTA}]}}
    get = api_double({WORKLOAD: workload})
    line = kube.queue_reason(get, ns="ns", pod=pod("r-arkouda-server-0"), environ=QUEUED_ENV)
    assert line == (
        "the release is queued in LocalQueue team-a (Kueue Workload r-arkouda-group; pod r-arkouda-server-0 gated): "
        f"{NO_QUOTA}; it starts once Kueue admits it (kubectl describe workload r-arkouda-group)"
    )


def test_not_queued_without_a_queue_or_a_gate_or_before_kueue_judged() -> None:
    kube = load("helm_test_kube")
    assert kube.queue_reason(api_double({}), ns="ns", pod=pod("p"), environ={}) is None
    scheduled = pod("p", reason="", status="True")
    assert kube.queue_reason(api_double({}), ns="ns", pod=scheduled, environ=QUEUED_ENV) is None
    # no Workload yet (Kueue makes it once every pod of the group exists): wait, as for any start
    not_yet = api_double({WORKLOAD: OSError("HTTP Error 404: Not Found")})
    assert kube.queue_reason(not_yet, ns="ns", pod=pod("p"), environ=QUEUED_ENV) is None
    # admitted, the gates not removed yet: about to start, not queued
    admitted = {"status": {"conditions": [{"type": "QuotaReserved", "status": "True"},
                                          {"type": "Admitted", "status": "True"}]}}  # fmt: skip
    assert kube.queue_reason(api_double({WORKLOAD: admitted}), ns="ns", pod=pod("p"), environ=QUEUED_ENV) is None
    # made, not tried yet
    untried = api_double({WORKLOAD: {"status": {}}})
    assert kube.queue_reason(untried, ns="ns", pod=pod("p"), environ=QUEUED_ENV) is None
    # a server pod that does not exist (a sleeping release) is not a queued one
    missing = api_double({"/api/v1/namespaces/ns/pods/r-arkouda-server-0": OSError("HTTP Error 404: Not Found")})
    assert kube.server_pod_queue_reason(missing, ns="ns", pod_name="r-arkouda-server-0", environ=QUEUED_ENV) is None


def test_arkouda_script_fails_at_once_for_a_queued_release_and_when_a_wake_queues(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = arkouda_script(monkeypatch, tmp_path, token=None)
    nobody = {"ARKOUDA_HOST": "127.0.0.1", "ARKOUDA_PORT": "9", "EXPECTED_LOCALES": "1", "TIMEOUT_SECONDS": "600"}
    assert script.main(nobody, queued=lambda: "the release is queued in LocalQueue team-a") == 1
    out = capsys.readouterr().out
    assert out.strip() == "FAIL: the release is queued in LocalQueue team-a"  # before any connection
    # asleep at first (no server pod), queued once the request woke it: told at the first unanswered try
    answers = iter([None, "the release is queued in LocalQueue team-a"])
    monkeypatch.setattr(script, "RETRY_SECONDS", 0.1)
    assert script.main(nobody, queued=lambda: next(answers)) == 1
    assert "FAIL: the release is queued in LocalQueue team-a" in capsys.readouterr().out


def test_mpi_job_script_fails_at_once_when_the_launcher_is_queued() -> None:
    mpi = load("helm-test-mpi")
    workload = {"status": {"conditions": [{"type": "QuotaReserved", "status": "False", "message": NO_QUOTA}]}}
    launcher = pod("r-arkouda-server-r1-abcde")
    launcher["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                              "reason": "SchedulingGated"}]}  # fmt: skip
    listing = "/api/v1/namespaces/ns/pods?labelSelector=batch.kubernetes.io/job-name%3Dr-arkouda-server-r1"
    get = api_double({listing: {"items": [launcher]}, WORKLOAD: workload})
    with pytest.raises(SystemExit) as exc:
        mpi.job_output("r-arkouda-server-r1", namespace="ns", get=get, timeout=600, environ=QUEUED_ENV)
    assert str(exc.value).startswith("FAIL: the MPI Job r-arkouda-server-r1: the release is queued in LocalQueue")
    assert NO_QUOTA in str(exc.value)
