"""The chart's `helm test` scripts (charts/arkouda/files/helm-test-*.py), run on this machine: the arkouda-mode
script against the stand-in server (the replay client path an image without the Arkouda client takes), the
mpi-mode checker against good and bad hybrid-hello output."""

from __future__ import annotations

import importlib.util
import re
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
