"""Key lifecycle without real sshds: reading a Secret volume the kubelet is updating, noticing a changed Secret,
reloading sshd (a test double of the process), the probe's explanation of a host key mismatch, and its retry
policy (a pod still on other keys of this release is waited for until the deadline, a foreign key fails at once)."""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from arkouda_bootstrap import keygen, locale
from arkouda_bootstrap.config import KeygenSettings, SshTuning
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.ssh import client as ssh
from arkouda_bootstrap.ssh import keys, secretwatch, sshd
from arkouda_bootstrap.ssh import probe as sshprobe
from conftest import write_kubelet_secret
from fakes import FakeKube

RELEASE_ID = keys.release_id(namespace="ns", release="r")


def release_secret(*, rotated_from: dict[str, bytes] | None = None) -> dict[str, bytes]:
    """A Secret as keygen writes it for release r in namespace ns (after a rotation of `rotated_from`)."""
    data = keys.build_secret_data(release="r", with_token=False)
    data[keys.RELEASE_ID] = RELEASE_ID.encode()
    if rotated_from is not None:
        data[keys.RETIRED_HOST_KEYS] = keys.retire_host_key(rotated_from)
    return data


def host_blob(data: dict[str, bytes]) -> bytes:
    return keys.parse_public_key(data[keys.HOST_PUB].decode(), what="host").blob


# ------------------------------------------------------------------------------------------------------------
# keygen: every Secret of a release carries the same release id


def test_keygen_records_the_same_release_id_in_a_regenerated_and_a_rotated_secret() -> None:
    api = FakeKube()
    settings = KeygenSettings(namespace="ns", secret_name="r-arkouda-ssh", release="r")
    keygen.run_keygen(api, settings)
    first = dict(api.secrets[("ns", "r-arkouda-ssh")][0])
    assert first[keys.RELEASE_ID] == RELEASE_ID.encode()
    del api.secrets[("ns", "r-arkouda-ssh")]  # lost: a cleanup job, a mistaken kubectl delete
    keygen.run_keygen(api, settings)
    regenerated = dict(api.secrets[("ns", "r-arkouda-ssh")][0])
    assert regenerated[keys.HOST_KEY] != first[keys.HOST_KEY]
    assert regenerated[keys.RELEASE_ID] == RELEASE_ID.encode()
    keygen.run_keygen(api, KeygenSettings(namespace="ns", secret_name="r-arkouda-ssh", release="r", rotation_id="a"))
    assert api.secrets[("ns", "r-arkouda-ssh")][0][keys.RELEASE_ID] == RELEASE_ID.encode()
    assert keys.release_id(namespace="ns", release="other") != RELEASE_ID
    assert keys.release_id(namespace="other", release="r") != RELEASE_ID


def test_a_malformed_release_id_is_refused_naming_the_field() -> None:
    data = release_secret()
    data[keys.RELEASE_ID] = b"x\nVersionAddendum evil"
    with pytest.raises(BootstrapError, match="field release-id: is not 16 lowercase hex digits"):
        keys.validate_secret_data(data, source="s")


def test_banner_release_id_reads_only_our_word() -> None:
    assert keys.banner_release_id(f"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3 arkouda-release-{RELEASE_ID}") == RELEASE_ID
    assert keys.banner_release_id("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3") is None
    assert keys.banner_release_id("SSH-2.0-OpenSSH_9.2p1 arkouda-release-nothex") is None
    assert keys.banner_release_id(f"SSH-2.0-arkouda-release-{RELEASE_ID}") is None  # the software field is not it


def test_sshd_config_names_the_release_in_the_version_line(tmp_path: Path) -> None:
    paths = sshd.install_data(release_secret(), source="s", state_dir=tmp_path)
    config = sshd.render_sshd_config(
        port=2222, user="u", key_paths=paths, pid_file=tmp_path / "pid", tuning=SshTuning(), strict_modes=False
    )
    assert f"VersionAddendum arkouda-release-{RELEASE_ID}\n" in config
    # a Secret from before release ids: no addendum
    legacy = keys.build_secret_data(release="r", with_token=False)
    paths = sshd.install_data(legacy, source="s", state_dir=tmp_path)
    assert paths.release_id is None  # the stale copy of the field was removed
    config = sshd.render_sshd_config(
        port=2222, user="u", key_paths=paths, pid_file=tmp_path / "pid", tuning=SshTuning(), strict_modes=False
    )
    assert "VersionAddendum" not in config


# ------------------------------------------------------------------------------------------------------------
# reading a Secret volume the kubelet updates


def test_read_secret_dir_follows_the_kubelet_swap(tmp_path: Path) -> None:
    old, new = release_secret(), release_secret()
    volume = write_kubelet_secret(tmp_path / "ssh", old)
    assert sshd.read_secret_dir(volume)[keys.HOST_KEY] == old[keys.HOST_KEY]
    write_kubelet_secret(volume, new)
    assert sshd.read_secret_dir(volume) == new


def test_read_secret_dir_never_mixes_two_generations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kubelet swaps `..data` while we read: the half-read old generation is dropped and the new one read."""
    old, new = release_secret(), release_secret()
    volume = write_kubelet_secret(tmp_path / "ssh", old)
    real = sshd._read_fields
    calls: list[Path] = []

    def swapping(directory: Path) -> dict[str, bytes]:
        calls.append(directory)
        data = real(directory)
        if len(calls) == 1:
            write_kubelet_secret(volume, new)
        return data

    monkeypatch.setattr(sshd, "_read_fields", swapping)
    assert sshd.read_secret_dir(volume) == new
    assert len(calls) == 2


def test_a_new_secret_without_a_field_drops_its_old_copy(tmp_path: Path) -> None:
    rotated = release_secret(rotated_from=release_secret())
    sshd.install_data(rotated, source="s", state_dir=tmp_path)
    assert (tmp_path / "ssh" / keys.RETIRED_HOST_KEYS).exists()
    sshd.install_data(release_secret(), source="s", state_dir=tmp_path)  # regenerated: no retired keys
    assert not (tmp_path / "ssh" / keys.RETIRED_HOST_KEYS).exists()


# ------------------------------------------------------------------------------------------------------------
# noticing a change, reloading sshd


class FakeSshd:
    """Test double of the sshd child: records signals; `wait` times out until `exit_status` is set."""

    def __init__(self) -> None:
        self.pid = 4242
        self.signals: list[int] = []
        self.exit_status: int | None = None
        self.on_wait: list[object] = []

    def wait(self, timeout: float | None = None) -> int:
        if self.on_wait:
            action = self.on_wait.pop(0)
            if callable(action):
                action()
        if self.exit_status is None:
            raise subprocess.TimeoutExpired("sshd", timeout or 0)
        return self.exit_status

    def send_signal(self, sig: int) -> None:
        self.signals.append(sig)
        if sig in (signal.SIGTERM, signal.SIGINT):
            self.exit_status = 0


def test_a_changed_valid_secret_is_installed_and_sshd_reloaded_once(tmp_path: Path) -> None:
    old, new = release_secret(), release_secret()
    volume = write_kubelet_secret(tmp_path / "ssh", old)
    watch = secretwatch.SecretWatch(volume, installed=old)
    child = FakeSshd()
    installed: list[dict[str, bytes]] = []
    assert not locale.reload_if_changed(child, watch=watch, reload=installed.append)
    write_kubelet_secret(volume, new)
    assert locale.reload_if_changed(child, watch=watch, reload=installed.append)
    assert installed == [new]
    assert child.signals == [signal.SIGHUP]
    assert not locale.reload_if_changed(child, watch=watch, reload=installed.append)  # nothing new since
    assert child.signals == [signal.SIGHUP]


def test_an_unusable_new_secret_keeps_the_keys_in_use_and_is_reported_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = release_secret()
    state = tmp_path / "state"
    sshd.install_data(good, source="s", state_dir=state)
    volume = write_kubelet_secret(tmp_path / "ssh", good)
    watch = secretwatch.SecretWatch(volume, installed=good)
    bad = dict(release_secret())
    bad[keys.KNOWN_HOSTS] = good[keys.KNOWN_HOSTS]  # pins another host key than the Secret's own
    write_kubelet_secret(volume, bad)
    child = FakeSshd()

    def reload(data: dict[str, bytes]) -> None:
        sshd.install_data(data, source=f"SSH Secret mounted at {volume}", state_dir=state)

    caplog.set_level(logging.INFO)
    for _ in range(3):
        assert not locale.reload_if_changed(child, watch=watch, reload=reload)
    assert child.signals == []
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [
        f"kept the SSH keys in use; the changed Secret is unusable: SSH Secret mounted at {volume}: field "
        "known_hosts: does not pin the key in ssh_host_ed25519_key"
    ]
    assert (state / "ssh" / keys.HOST_KEY).read_bytes() == good[keys.HOST_KEY]
    # fixed by the next update: installed
    fixed = release_secret()
    write_kubelet_secret(volume, fixed)
    assert locale.reload_if_changed(child, watch=watch, reload=reload)
    assert (state / "ssh" / keys.HOST_KEY).read_bytes() == fixed[keys.HOST_KEY]


def test_supervise_sshd_forwards_sigterm_and_returns_sshds_status(tmp_path: Path) -> None:
    data = release_secret()
    volume = write_kubelet_secret(tmp_path / "ssh", data)
    child = FakeSshd()
    child.on_wait = [None, lambda: os.kill(os.getpid(), signal.SIGTERM)]
    status = locale.supervise_sshd(
        child, watch=secretwatch.SecretWatch(volume, installed=data), reload=lambda _d: None, interval=0.01
    )
    assert child.signals == [signal.SIGTERM]
    assert status == 0
    # and a child killed by a signal: 128+N, as a shell reports it
    killed = FakeSshd()
    killed.exit_status = -signal.SIGKILL
    assert locale.supervise_sshd(
        killed, watch=secretwatch.SecretWatch(volume, installed=data), reload=lambda _d: None, interval=0.01
    ) == (128 + signal.SIGKILL)


def test_mounted_keys_follow_the_volume_and_keep_usable_keys(tmp_path: Path) -> None:
    old = release_secret()
    volume = write_kubelet_secret(tmp_path / "ssh", old)
    now = [0.0]
    mounted = secretwatch.MountedKeys(secret_dir=volume, state_dir=tmp_path / "state", clock=lambda: now[0])
    assert mounted.current().pinned.blob == host_blob(old)
    assert mounted.current().release_id == RELEASE_ID
    new = release_secret(rotated_from=old)
    write_kubelet_secret(volume, new)
    assert mounted.current().pinned.blob == host_blob(old)  # read at most once a second
    now[0] = 1.5
    current = mounted.current()
    assert current.pinned.blob == host_blob(new)
    assert [k.blob for k in current.retired] == [host_blob(old)]
    # the launcher's ssh config points at the copies, which now hold the new client key
    assert mounted.paths.client_key.read_bytes() == new[keys.CLIENT_KEY]
    broken = dict(new)
    del broken[keys.AUTHORIZED_KEYS]
    write_kubelet_secret(volume, broken)
    now[0] = 3.0
    assert mounted.current().pinned.blob == host_blob(new)


# ------------------------------------------------------------------------------------------------------------
# what a host key mismatch means


def explain(blob: bytes, *, pinned_from: dict[str, bytes], banner: str, release_id: str | None = RELEASE_ID) -> None:
    sshprobe.explain_host_key(
        blob,
        where="pod r-locale-1 (10.0.0.5)",
        pinned=keys.release_pinned_host_key(pinned_from[keys.KNOWN_HOSTS].decode()),
        retired=keys.retired_host_keys(pinned_from.get(keys.RETIRED_HOST_KEYS, b"").decode()),
        release_id=release_id,
        banner=banner,
    )


OURS = f"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3 arkouda-release-{RELEASE_ID}"
PLAIN = "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3"


def test_mismatch_explanations() -> None:
    before = release_secret()
    rotated = release_secret(rotated_from=before)
    explain(host_blob(rotated), pinned_from=rotated, banner=OURS)  # the pinned key: fine
    with pytest.raises(sshprobe.RetiredHostKeyError) as older:
        explain(host_blob(before), pinned_from=rotated, banner=PLAIN)
    assert str(older.value) == (
        "pod r-locale-1 (10.0.0.5) serves an older host key of this release: the keys were rotated and this pod "
        "has not reloaded them yet"
    )
    lost = release_secret()  # a Secret of this release that was deleted; the new one never recorded its key
    with pytest.raises(sshprobe.OtherSecretHostKeyError) as other:
        explain(host_blob(lost), pinned_from=rotated, banner=OURS)
    assert str(other.value) == (
        "pod r-locale-1 (10.0.0.5) serves a host key of another Secret of this release: the Secret was deleted "
        "and regenerated (or changed) and that pod or this one has not reloaded it yet"
    )
    never = "pod r-locale-1 (10.0.0.5) presented a host key this release never had"
    for banner, release_id in (
        (PLAIN, RELEASE_ID),  # not an sshd of ours
        (OURS.replace(RELEASE_ID, keys.release_id(namespace="ns", release="other")), RELEASE_ID),  # another release
        (OURS, None),  # our Secret predates release ids: nothing to compare with
    ):
        with pytest.raises(sshprobe.HostKeyMismatchError, match=re.escape(never)):
            explain(host_blob(lost), pinned_from=rotated, banner=banner, release_id=release_id)
    assert issubclass(sshprobe.RetiredHostKeyError, sshprobe.KeysPendingError)
    assert issubclass(sshprobe.OtherSecretHostKeyError, sshprobe.KeysPendingError)
    assert not issubclass(sshprobe.HostKeyMismatchError, sshprobe.TransientProbeError)


# ------------------------------------------------------------------------------------------------------------
# the retry policy


class ScriptedProbe:
    """Test double of sshprobe.probe: raises the scripted errors in turn, then succeeds; records the keys used."""

    def __init__(self, errors: list[Exception]) -> None:
        self.errors = errors
        self.pinned: list[keys.PublicKey] = []

    def __call__(self, address: str, **kwargs: object) -> sshprobe.Probed:
        pinned = kwargs["pinned"]
        assert isinstance(pinned, keys.PublicKey)
        self.pinned.append(pinned)
        if self.errors:
            raise self.errors.pop(0)
        return sshprobe.Probed()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run_probe(
    monkeypatch: pytest.MonkeyPatch,
    scripted: ScriptedProbe,
    *,
    deadline: float | None,
    clock: Clock,
    pending: list[str] | None = None,
) -> None:
    monkeypatch.setattr(sshprobe, "probe", scripted)
    data = release_secret()
    fixed = sshprobe.ProbeKeys(
        client_key=object(),  # type: ignore[arg-type]  # never used by the test double
        pinned=keys.release_pinned_host_key(data[keys.KNOWN_HOSTS].decode()),
        release_id=RELEASE_ID,
    )

    def keys_now() -> sshprobe.ProbeKeys:
        clock.now += 5.0  # every attempt takes the test's clock 5 s further
        return fixed

    ssh.probe_host(
        ssh.Host("10.0.0.5", "r-locale-1"),
        port=2222,
        user="u",
        keys=keys_now,
        timeout=1,
        policy=ssh.RetryPolicy(attempts=3, initial_delay=0.0, max_delay=0.0, keys_deadline=deadline),
        on_pending=None if pending is None else (lambda host, exc: pending.append(f"{host.pod}: {exc}")),
        clock=clock,
    )


def pending_error() -> sshprobe.KeysPendingError:
    return sshprobe.OtherSecretHostKeyError("pod r-locale-1 (10.0.0.5) serves a host key of another Secret")


def test_a_pod_on_other_keys_of_the_release_is_waited_for_beyond_the_attempts(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="arkouda_bootstrap.ssh.client")
    pending: list[str] = []
    scripted = ScriptedProbe([pending_error() for _ in range(6)])
    run_probe(monkeypatch, scripted, deadline=100.0, clock=Clock(), pending=pending)
    assert len(scripted.pinned) == 7  # six pending attempts (more than the 3 attempts), then success
    assert pending == ["r-locale-1: pod r-locale-1 (10.0.0.5) serves a host key of another Secret"]
    assert "waiting for the pod to reload the keys" in caplog.text


def test_pending_keys_give_up_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    scripted = ScriptedProbe([pending_error() for _ in range(100)])
    with pytest.raises(sshprobe.OtherSecretHostKeyError):
        run_probe(monkeypatch, scripted, deadline=30.0, clock=clock)
    assert clock.now == 30.0  # the attempt at 30 s was the last one
    assert len(scripted.pinned) == 6


def test_pending_keys_without_a_deadline_count_as_attempts(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted = ScriptedProbe([pending_error() for _ in range(100)])
    with pytest.raises(sshprobe.OtherSecretHostKeyError):
        run_probe(monkeypatch, scripted, deadline=None, clock=Clock())
    assert len(scripted.pinned) == 3


def test_a_foreign_host_key_fails_at_the_first_attempt_even_with_a_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    foreign = sshprobe.HostKeyMismatchError("pod r-locale-1 (10.0.0.5) presented a host key this release never had")
    scripted = ScriptedProbe([foreign])
    with pytest.raises(sshprobe.HostKeyMismatchError):
        run_probe(monkeypatch, scripted, deadline=1000.0, clock=Clock())
    assert len(scripted.pinned) == 1


def test_other_transient_errors_keep_their_bounded_attempts_after_pending_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refused = sshprobe.TransientProbeError("pod r-locale-1 (10.0.0.5): cannot connect to port 2222")
    scripted = ScriptedProbe([pending_error(), pending_error(), refused, refused, refused, refused])
    with pytest.raises(sshprobe.TransientProbeError, match="cannot connect"):
        run_probe(monkeypatch, scripted, deadline=1000.0, clock=Clock())
    assert len(scripted.pinned) == 5  # 2 pending + 3 counted attempts
