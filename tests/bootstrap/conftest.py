"""Shared fixtures: key material, a mounted-Secret directory, a non-root test user and real unprivileged sshds."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from apiserver_double import ApiServerDouble, serving
from arkouda_bootstrap.cli import main as cli
from arkouda_bootstrap.ssh import keys
from privdrop import spawn_as

TEST_USER = "arkbs-test"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that starts a real sshd gets the `sshd` marker from the fixtures that do it (the test user or the
    sshds it collects), so the marker cannot go stale: `-m "not sshd"` runs what needs neither root nor OpenSSH."""
    for item in items:
        if {"test_user", "sshds"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.sshd)


@pytest.fixture
def apiserver() -> Iterator[ApiServerDouble]:
    """The loopback API server test double, for the real kubernetes client."""
    with serving() as double:
        yield double


@pytest.fixture
def secret_data() -> dict[str, bytes]:
    return keys.build_secret_data(release="t", with_token=False)


def write_secret_dir(path: Path, data: dict[str, bytes]) -> Path:
    """Like a Secret volume: one file per key, read-only for everyone (root-owned as the kubelet makes them)."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o755)
    for name, content in data.items():
        (path / name).write_bytes(content)
        (path / name).chmod(0o444)
    return path


def write_kubelet_secret(path: Path, data: dict[str, bytes]) -> Path:
    """Like a Secret volume as the kubelet writes it, and updates it when the Secret changes: the files live in a
    timestamped directory, `..data` points at it and every field is a symlink through `..data`; an update writes
    a new directory, swaps `..data` in one rename, then removes the old directory and the links of dropped fields."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o755)
    link = path / "..data"
    old = os.readlink(link) if link.is_symlink() else None
    generation = path / f"..{time.time_ns()}"
    generation.mkdir()
    for name, content in data.items():
        (generation / name).write_bytes(content)
        (generation / name).chmod(0o444)
    generation.chmod(0o755)
    tmp = path / "..data_tmp"
    os.symlink(generation.name, tmp)
    os.replace(tmp, link)
    for name in data:
        if not (path / name).is_symlink():
            os.symlink(f"..data/{name}", path / name)
    for entry in path.iterdir():
        if not entry.name.startswith("..") and entry.name not in data:
            entry.unlink()
    if old is not None:
        shutil.rmtree(path / old)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def test_user() -> pwd.struct_passwd:
    """A non-root user for sshd, created idempotently; password field `*` (no password, not locked)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create the non-root test user and drop to it (CI runs as root)")
    try:
        entry = pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/bin/sh", TEST_USER],
            check=True,
        )
        entry = pwd.getpwnam(TEST_USER)
    subprocess.run(["usermod", "-p", "*", TEST_USER], check=True)
    return entry


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory the test user can traverse, on a chain StrictModes accepts (/run is root 0755; pytest's
    tmp_path is 0700 root and /tmp is world-writable)."""
    path = Path(tempfile.mkdtemp(prefix="arkbs-", dir="/run"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def wait_listening(port: int, *, seconds: float = 15.0, log: Path | None = None) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    detail = log.read_text() if log is not None and log.exists() else ""
    raise AssertionError(f"nothing listens on 127.0.0.1:{port} after {seconds}s\n{detail}")


@dataclass
class LocaleSshd:
    """A real sshd started by `arkouda-bootstrap locale` as a non-root uid (the pod's entrypoint path)."""

    pid: int
    port: int
    state_dir: Path
    log: Path
    user: str
    exited: int | None = field(default=None)

    def stop(self) -> None:
        if self.exited is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        _, status = os.waitpid(self.pid, 0)
        self.exited = status


def start_locale(
    *,
    uid: int,
    gid: int,
    secret_dir: Path,
    state_dir: Path,
    port: int,
    extra_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    wait: bool = True,
    user: str = TEST_USER,
) -> LocaleSshd:
    state_dir.mkdir(parents=True, exist_ok=True)
    os.chown(state_dir, uid, gid)
    state_dir.chmod(0o755)
    log = state_dir.parent / f"locale-{port}.log"
    child_env = {"PATH": "/usr/sbin:/usr/bin:/bin", **(env or {"USER": user, "HOME": "/nonexistent"})}
    argv = ["locale", "--secret-dir", str(secret_dir), "--state-dir", str(state_dir), "--port", str(port), *extra_args]
    pid = spawn_as(uid=uid, gid=gid, env=child_env, log_path=log, fn=lambda: cli.main(argv))
    sshd = LocaleSshd(pid=pid, port=port, state_dir=state_dir, log=log, user=user)
    if wait:
        try:
            wait_listening(port, log=log)
        except AssertionError:
            sshd.stop()
            raise
    return sshd


@pytest.fixture
def sshds() -> Iterator[list[LocaleSshd]]:
    """Collects started sshds and stops them after the test."""
    started: list[LocaleSshd] = []
    yield started
    for s in started:
        s.stop()


def start_as(
    user: pwd.struct_passwd,
    sshds: list[LocaleSshd],
    *,
    secret_dir: Path,
    state_dir: Path,
    port: int | None = None,
    extra_args: tuple[str, ...] = (),
    wait: bool = True,
) -> LocaleSshd:
    """start_locale as `user` on `port` (default: a free one), stopped at teardown with the test's other sshds."""
    sshd = start_locale(
        uid=user.pw_uid,
        gid=user.pw_gid,
        secret_dir=secret_dir,
        state_dir=state_dir,
        port=free_port() if port is None else port,
        extra_args=extra_args,
        wait=wait,
    )
    sshds.append(sshd)
    return sshd


@pytest.fixture
def loopback_sshd(
    test_user: pwd.struct_passwd, shared_dir: Path, secret_data: dict[str, bytes], sshds: list[LocaleSshd]
) -> tuple[Path, int]:
    """The test Secret mounted at shared_dir/secret and one real sshd started by `locale` from it as the test
    user: it answers on the returned port for every loopback address, i.e. for all the "pods" or "nodes"."""
    secret_dir = write_secret_dir(shared_dir / "secret", secret_data)
    sshd = start_as(test_user, sshds, secret_dir=secret_dir, state_dir=shared_dir / "locale-state")
    return secret_dir, sshd.port
