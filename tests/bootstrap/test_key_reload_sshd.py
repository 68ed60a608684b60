"""Real OpenSSH: `locale` keeps its sshd on the keys of a Secret volume that the kubelet updates (a rotation, a
regenerated Secret), refuses an unusable update, and the server's probe waits for a pod of this release that has
not reloaded yet; then the whole `server` path heals without a restart."""

from __future__ import annotations

import logging
import os
import pwd
import threading
import time
from pathlib import Path

import paramiko
import pytest
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.ssh import client as ssh
from arkouda_bootstrap.ssh import keys
from arkouda_bootstrap.ssh import probe as sshprobe
from conftest import LocaleSshd, start_as, write_kubelet_secret
from test_key_lifecycle import RELEASE_ID, release_secret
from test_server_flow import run_server_as

FAST = ssh.RetryPolicy(attempts=3, initial_delay=0.1, max_delay=0.2)


def client_key(data: dict[str, bytes], path: Path) -> paramiko.PKey:
    path.write_bytes(data[keys.CLIENT_KEY])
    path.chmod(0o600)
    return sshprobe.load_release_client_key(path)


def probe(
    sshd: LocaleSshd, data: dict[str, bytes], tmp_path: Path, *, key_from: dict[str, bytes] | None = None
) -> None:
    """One probe pinning `data`'s host key, authenticating with `key_from`'s client key (default: `data`'s)."""
    ssh.probe_all(
        [ssh.Host("127.0.0.1", "r-locale-0")],
        port=sshd.port,
        user=sshd.user,
        client_key=client_key(key_from or data, tmp_path / f"id-{time.monotonic_ns()}"),
        pinned=keys.release_pinned_host_key(data[keys.KNOWN_HOSTS].decode()),
        retired=keys.retired_host_keys(data.get(keys.RETIRED_HOST_KEYS, b"").decode()),
        release_id=RELEASE_ID,
        timeout=5,
        policy=FAST,
    )


def wait_for(path: Path, text: str, *, seconds: float = 20) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        content = path.read_text() if path.exists() else ""
        if text in content:
            return content
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in {path} after {seconds}s:\n{path.read_text() if path.exists() else ''}")


@pytest.fixture
def reloading_locale(
    test_user: pwd.struct_passwd, shared_dir: Path, sshds: list[LocaleSshd]
) -> tuple[LocaleSshd, Path, dict[str, bytes]]:
    """A locale on a kubelet-style Secret volume, checking it every second."""
    data = release_secret()
    volume = write_kubelet_secret(shared_dir / "secret", data)
    sshd = start_as(
        test_user, sshds, secret_dir=volume, state_dir=shared_dir / "state", extra_args=("--secret-poll-seconds", "1")
    )
    return sshd, volume, data


def test_locale_reloads_a_rotated_secret_and_the_old_keys_are_refused(
    reloading_locale: tuple[LocaleSshd, Path, dict[str, bytes]], tmp_path: Path
) -> None:
    sshd, volume, old = reloading_locale
    probe(sshd, old, tmp_path)
    sshd_pid = Path(f"/proc/{sshd.pid}/task/{sshd.pid}/children").read_text().split()
    new = release_secret(rotated_from=old)
    write_kubelet_secret(volume, new)
    wait_for(sshd.log, "installed its keys and reloaded sshd")
    deadline = time.monotonic() + 10
    while True:  # sshd re-executes itself on SIGHUP: a moment without a listener
        try:
            probe(sshd, new, tmp_path)
            break
        except BootstrapError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    # the same sshd process (re-executed in place), not a new one
    assert Path(f"/proc/{sshd.pid}/task/{sshd.pid}/children").read_text().split() == sshd_pid
    # the old client key is refused, and the old host key is not served any more
    with pytest.raises(BootstrapError, match="rejected public-key authentication"):
        probe(sshd, new, tmp_path, key_from=old)
    with pytest.raises(BootstrapError, match="serves a host key of another Secret of this release"):
        probe(sshd, old, tmp_path)


def test_locale_keeps_its_keys_when_the_new_secret_is_unusable(
    reloading_locale: tuple[LocaleSshd, Path, dict[str, bytes]], tmp_path: Path
) -> None:
    sshd, volume, old = reloading_locale
    bad = release_secret()
    del bad[keys.AUTHORIZED_KEYS]
    write_kubelet_secret(volume, bad)
    log = wait_for(sshd.log, "the changed Secret is unusable")
    time.sleep(2.5)  # two more checks: still reported once
    log = sshd.log.read_text()
    assert log.count("the changed Secret is unusable") == 1
    assert f"SSH Secret mounted at {volume}: field authorized_keys: missing or empty" in log
    probe(sshd, old, tmp_path)
    # the next, usable update is installed
    fixed = release_secret()
    write_kubelet_secret(volume, fixed)
    wait_for(sshd.log, "installed its keys and reloaded sshd")
    deadline = time.monotonic() + 10
    while True:
        try:
            probe(sshd, fixed, tmp_path)
            break
        except BootstrapError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_locale_passes_sigterm_to_sshd_and_exits_with_its_status(
    reloading_locale: tuple[LocaleSshd, Path, dict[str, bytes]],
) -> None:
    sshd, _, _ = reloading_locale
    child = Path(f"/proc/{sshd.pid}/task/{sshd.pid}/children").read_text().split()[0]
    sshd.stop()
    assert sshd.exited is not None
    assert os.WIFEXITED(sshd.exited), sshd.log.read_text()
    assert os.WEXITSTATUS(sshd.exited) == 0, sshd.log.read_text()
    assert not Path(f"/proc/{child}").exists()


def test_probe_waits_for_a_locale_serving_a_lost_secret_until_it_reloads(
    reloading_locale: tuple[LocaleSshd, Path, dict[str, bytes]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The Secret was deleted and regenerated: the server mounts the new one, the locale still serves the lost
    one's key, which the new Secret never recorded; the locale names this release, so the probe waits."""
    caplog.set_level(logging.INFO, logger="arkouda_bootstrap.ssh.client")
    sshd, volume, _lost = reloading_locale
    regenerated = release_secret()
    pending: list[str] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            ssh.probe_host(
                ssh.Host("127.0.0.1", "r-locale-0"),
                port=sshd.port,
                user=sshd.user,
                keys=lambda: sshprobe.ProbeKeys(
                    client_key=client_key(regenerated, tmp_path / "id-regenerated"),
                    pinned=keys.release_pinned_host_key(regenerated[keys.KNOWN_HOSTS].decode()),
                    release_id=RELEASE_ID,
                ),
                timeout=5,
                policy=ssh.RetryPolicy(
                    attempts=2, initial_delay=0.1, max_delay=0.3, keys_deadline=time.monotonic() + 30
                ),
                on_pending=lambda host, exc: pending.append(str(exc)),
            )
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 20
    while not pending and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pending == [
        "pod r-locale-0 (127.0.0.1) serves a host key of another Secret of this release: the Secret was deleted "
        "and regenerated (or changed) and that pod or this one has not reloaded it yet"
    ]
    time.sleep(1)  # more attempts than `attempts` allows for other errors
    write_kubelet_secret(volume, regenerated)
    thread.join(timeout=40)
    assert not thread.is_alive()
    assert errors == [], sshd.log.read_text()
    assert "waiting for the pod to reload the keys" in caplog.text


# ------------------------------------------------------------------------------------------------------------
# the whole server path: the release heals with nothing restarted


def swap_when_logged(log: Path, text: str, volume: Path, data: dict[str, bytes]) -> threading.Thread:
    def body() -> None:
        wait_for(log, text, seconds=60)
        write_kubelet_secret(volume, data)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(
    ("case", "waiting_for"),
    [
        ("rotated", "serves an older host key of this release"),
        ("regenerated", "serves a host key of another Secret of this release"),
    ],
)
def test_server_waits_for_the_locales_to_reload_and_launches(
    test_user: pwd.struct_passwd,
    shared_dir: Path,
    reloading_locale: tuple[LocaleSshd, Path, dict[str, bytes]],
    case: str,
    waiting_for: str,
) -> None:
    sshd, volume, old = reloading_locale
    new = release_secret(rotated_from=old) if case == "rotated" else release_secret()
    server_volume = write_kubelet_secret(shared_dir / "server-secret", new)
    swapper = swap_when_logged(shared_dir / "server.log", waiting_for, volume, new)
    code, log, events = run_server_as(
        uid=test_user.pw_uid,
        gid=test_user.pw_gid,
        base=shared_dir,
        secret_dir=server_volume,
        port=sshd.port,
        extra_argv=["--timeout", "60"],
        env={"ARKBS_EXIT": "0"},
    )
    swapper.join(timeout=5)
    assert code == 0, log + sshd.log.read_text()
    reasons = [e["reason"] for e in events]
    # one sshd answers for the three hosts: each is waited for once, in whatever order the pods turned Ready
    assert sorted(reasons) == ["KeysPending", "KeysPending", "KeysPending", "Launched", "LocalesReady"], reasons
    assert reasons[-1] == "Launched"
    pending = next(e for e in events if e["reason"] == "KeysPending")
    assert waiting_for in pending["message"]
    assert "waiting for it until the wait deadline (60s)" in pending["message"]
    ran = (shared_dir / "out" / "ran").read_text().splitlines()
    assert len(ran) == 3, log
