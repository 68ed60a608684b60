"""Real OpenSSH: the sshd that `locale` prepares, run as a non-root user on a loopback port; the `server`'s
probe (paramiko) against it, and the real ssh client with the config the server writes."""

from __future__ import annotations

import logging
import os
import pwd
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import paramiko
import pytest
from arkouda_bootstrap.config import SshTuning
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.ssh import client as ssh
from arkouda_bootstrap.ssh import keys
from arkouda_bootstrap.ssh import probe as sshprobe
from arkouda_bootstrap.ssh.sshd import KeyPaths
from conftest import LocaleSshd, free_port, start_as, write_secret_dir

FAST = ssh.RetryPolicy(attempts=3, initial_delay=0.1, max_delay=0.2)


def client_key(data: dict[str, bytes], tmp_path: Path) -> paramiko.PKey:
    path = tmp_path / "id"
    path.write_bytes(data[keys.CLIENT_KEY])
    path.chmod(0o600)
    return sshprobe.load_release_client_key(path)


def probe_pods(
    sshd: LocaleSshd,
    secret_data: dict[str, bytes],
    tmp_path: Path,
    *,
    pods: Sequence[str] = ("arkouda-locale-0",),
    client: dict[str, bytes] | None = None,
    pinned: keys.PublicKey | None = None,
    retired: Sequence[keys.PublicKey] = (),
) -> None:
    """The server's probe (paramiko, bounded retries) of `pods`, all answered by `sshd` on 127.0.0.1, pinning
    `pinned` (default: secret_data's host key) and logging in with `client`'s client key (default: secret_data's)."""
    ssh.probe_all(
        [ssh.Host("127.0.0.1", pod) for pod in pods],
        port=sshd.port,
        user=sshd.user,
        client_key=client_key(client or secret_data, tmp_path),
        pinned=pinned or keys.release_pinned_host_key(secret_data[keys.KNOWN_HOSTS].decode()),
        retired=retired,
        timeout=5,
        policy=FAST,
    )


TunedLocale = Callable[..., LocaleSshd]


@pytest.fixture
def tuned_locale(
    test_user: pwd.struct_passwd, shared_dir: Path, secret_data: dict[str, bytes], sshds: list[LocaleSshd]
) -> TunedLocale:
    """Starts a real unprivileged sshd by `locale` from the test Secret, with extra flags such as kex/cipher
    limits (`tuned_locale("--ciphers", ...)`); stopped at teardown."""

    def start(*extra_args: str) -> LocaleSshd:
        secret_dir = write_secret_dir(shared_dir / "secret", secret_data)
        state_dir = shared_dir / "state"
        return start_as(test_user, sshds, secret_dir=secret_dir, state_dir=state_dir, extra_args=extra_args)

    return start


class BackgroundProbe:
    """ssh.probe_all of one host on a thread with a long retry budget, while the test changes the sshd under it."""

    def __init__(self, caplog: pytest.LogCaptureFixture, **probe_all: object) -> None:
        self.caplog = caplog
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, kwargs=probe_all)
        self.thread.start()

    def _run(self, **probe_all: Any) -> None:
        try:
            ssh.probe_all(timeout=5, policy=ssh.RetryPolicy(attempts=30, initial_delay=0.1, max_delay=0.3), **probe_all)
        except BaseException as exc:
            self.errors.append(exc)

    def wait_for_log(self, text: str, *, seconds: float = 20) -> None:
        deadline = time.monotonic() + seconds
        while text not in self.caplog.text and time.monotonic() < deadline:
            time.sleep(0.05)
        assert text in self.caplog.text, self.caplog.text

    def join(self) -> list[BaseException]:
        self.thread.join(timeout=60)
        assert not self.thread.is_alive()
        return self.errors


@pytest.fixture
def locale_sshd(tuned_locale: TunedLocale) -> LocaleSshd:
    return tuned_locale()


def test_locale_writes_strict_sshd_config_accepted_by_sshd_t(locale_sshd: LocaleSshd) -> None:
    config = (locale_sshd.state_dir / "sshd_config").read_text()
    assert f"Port {locale_sshd.port}" in config
    assert "UsePAM no" in config
    assert "PasswordAuthentication no" in config
    assert "PermitRootLogin no" in config
    assert "AllowTcpForwarding no" in config
    assert "KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org" in config
    # the state dir sits on a root-owned 0755 chain here, so StrictModes stays on
    assert "StrictModes yes" in config
    log = locale_sshd.log.read_text()
    assert "accepted by sshd -t" in log
    # key copies: dir 0700, private keys 0600, owned by the sshd's uid
    paths = KeyPaths.under(locale_sshd.state_dir)
    assert paths.directory.stat().st_mode & 0o777 == 0o700
    assert paths.host_key.stat().st_mode & 0o777 == 0o600
    assert paths.authorized_keys.stat().st_mode & 0o777 == 0o600
    assert paths.host_key.stat().st_uid == pwd.getpwnam(locale_sshd.user).pw_uid
    # sshd runs as the bootstrap's child (which watches the Secret for changed keys), as the test user
    children = Path(f"/proc/{locale_sshd.pid}/task/{locale_sshd.pid}/children").read_text().split()
    assert len(children) == 1
    assert Path(f"/proc/{children[0]}/comm").read_text().strip() == "sshd"
    assert Path(f"/proc/{children[0]}/status").read_text().count(f"\t{pwd.getpwnam(locale_sshd.user).pw_uid}\t") >= 1


def test_a_locale_mounted_with_only_its_sshd_fields_starts_and_lets_the_launcher_in(
    test_user: pwd.struct_passwd,
    shared_dir: Path,
    secret_data: dict[str, bytes],
    sshds: list[LocaleSshd],
    tmp_path: Path,
) -> None:
    # What the chart mounts in a locale pod in Arkouda mode: no client key, no known_hosts, no token.
    sshd_only = {k: v for k, v in secret_data.items() if k in (*keys.SSHD_FIELDS, keys.RELEASE_ID)}
    secret_dir = write_secret_dir(shared_dir / "secret-sshd-only", sshd_only)
    locale = start_as(test_user, sshds, secret_dir=secret_dir, state_dir=shared_dir / "state")
    copies = {p.name for p in (locale.state_dir / "ssh").iterdir()}
    assert copies == set(sshd_only)
    probe_pods(locale, secret_data, tmp_path)


def test_a_locale_refuses_a_mount_without_its_sshd_fields_naming_the_first(
    test_user: pwd.struct_passwd,
    shared_dir: Path,
    secret_data: dict[str, bytes],
    sshds: list[LocaleSshd],
) -> None:
    client_only = {k: v for k, v in secret_data.items() if k in keys.CLIENT_FIELDS}
    secret_dir = write_secret_dir(shared_dir / "secret-client-only", client_only)
    locale = start_as(test_user, sshds, secret_dir=secret_dir, state_dir=shared_dir / "state", wait=False)
    refusal = f"SSH Secret mounted at {secret_dir}: field authorized_keys: missing or empty"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (locale.log.exists() and refusal in locale.log.read_text()):
        time.sleep(0.05)
    assert locale.log.exists() and refusal in locale.log.read_text()


def test_locale_writes_the_launcher_ssh_wrapper_at_the_servers_path(locale_sshd: LocaleSshd) -> None:
    """mpirun hands its plm_rsh_agent path (the server's <state>/bin/ssh) to every orted it starts; orted exits
    when that path does not exist on its host, and a daemonized orted dies silently: mpirun then hangs. So
    every locale has the wrapper and client config at the same paths, pinned like the server's."""
    wrapper = locale_sshd.state_dir / "bin" / "ssh"
    config = locale_sshd.state_dir / "ssh_config"
    assert wrapper.exists() and os.access(wrapper, os.X_OK)
    assert str(config) in wrapper.read_text()
    text = config.read_text()
    assert "StrictHostKeyChecking yes" in text
    assert f"UserKnownHostsFile {KeyPaths.under(locale_sshd.state_dir).known_hosts}" in text
    effective = subprocess.run(
        ["ssh", "-G", "-F", str(config), "127.0.0.1"], capture_output=True, text=True, check=True
    ).stdout
    assert f"port {locale_sshd.port}" in effective


def test_probe_succeeds_with_pinned_key(
    locale_sshd: LocaleSshd, secret_data: dict[str, bytes], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="arkouda_bootstrap.ssh.client")
    probe_pods(locale_sshd, secret_data, tmp_path, pods=("arkouda-locale-0", "arkouda-locale-1"))
    assert "attempt 1/3" in caplog.text
    assert "all 2 hosts answered" in caplog.text


def rotated(data: dict[str, bytes]) -> tuple[keys.PublicKey, list[keys.PublicKey]]:
    """What the server pins after keygen rotated the keys of a release whose Secret was `data`: the new host key,
    and the retired_host_keys field keygen writes (the key `data` had)."""
    new = keys.build_secret_data(release="t", with_token=False)
    retired = keys.retired_host_keys(keys.retire_host_key(data).decode())
    assert [k.blob for k in retired] == [keys.parse_public_key(data[keys.HOST_PUB].decode(), what="old").blob]
    return keys.release_pinned_host_key(new[keys.KNOWN_HOSTS].decode()), retired


def test_probe_of_a_pod_serving_a_foreign_host_key_is_fatal_and_not_retried(
    locale_sshd: LocaleSshd, secret_data: dict[str, bytes], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The sshd serves a key that is neither pinned nor one of the release's retired keys."""
    caplog.set_level(logging.INFO, logger="arkouda_bootstrap.ssh.client")
    pinned, _ = rotated(secret_data)
    older = keys.parse_public_key(keys.generate_ed25519(comment="older").public_openssh, what="older")
    with pytest.raises(BootstrapError) as err:
        probe_pods(locale_sshd, secret_data, tmp_path, pods=("arkouda-locale-3",), pinned=pinned, retired=[older])
    assert str(err.value) == (
        "ssh probe failed: pod arkouda-locale-3 (127.0.0.1) presented a host key this release never had: "
        "a different Secret is mounted there, or something else answers on that address"
    )
    assert "attempt 1/3" in caplog.text
    assert "attempt 2/3" not in caplog.text


def test_probe_of_a_pod_serving_a_retired_host_key_says_it_has_not_reloaded_and_retries(
    locale_sshd: LocaleSshd, secret_data: dict[str, bytes], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The sshd still serves the key the release had before a rotation: without a keys deadline, retried within
    the bounded policy, then reported as a pod that has not reloaded the new keys."""
    caplog.set_level(logging.INFO, logger="arkouda_bootstrap.ssh.client")
    pinned, retired = rotated(secret_data)
    with pytest.raises(BootstrapError) as err:
        probe_pods(locale_sshd, secret_data, tmp_path, pods=("arkouda-locale-2",), pinned=pinned, retired=retired)
    assert str(err.value) == (
        "ssh probe failed: pod arkouda-locale-2 (127.0.0.1) serves an older host key of this release: "
        "the keys were rotated and this pod has not reloaded them yet"
    )
    assert "attempt 3/3" in caplog.text
    assert "wrong Secret" not in caplog.text


def test_probe_waits_for_a_pod_to_roll_onto_the_rotated_host_key(
    test_user: pwd.struct_passwd,
    shared_dir: Path,
    secret_data: dict[str, bytes],
    sshds: list[LocaleSshd],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A second host key on the same address: the old sshd is replaced by one with the rotated Secret while the
    probe retries, and the probe then succeeds."""
    caplog.set_level(logging.INFO, logger="arkouda_bootstrap.ssh.client")
    new = keys.build_secret_data(release="t", with_token=False)
    # the rotation changed the host key only, so the client key stays authorized
    new.update({f: secret_data[f] for f in (keys.CLIENT_KEY, keys.CLIENT_PUB, keys.AUTHORIZED_KEYS)})
    port = free_port()
    old_secret = write_secret_dir(shared_dir / "secret-old", secret_data)
    old_sshd = start_as(test_user, sshds, secret_dir=old_secret, state_dir=shared_dir / "state-old", port=port)
    probe = BackgroundProbe(
        caplog,
        hosts=[ssh.Host("127.0.0.1", "arkouda-locale-1")],
        port=port,
        user=test_user.pw_name,
        client_key=client_key(secret_data, tmp_path),
        pinned=keys.release_pinned_host_key(new[keys.KNOWN_HOSTS].decode()),
        retired=keys.retired_host_keys(keys.retire_host_key(secret_data).decode()),
    )
    probe.wait_for_log("serves an older host key of this release")
    old_sshd.stop()
    new_secret = write_secret_dir(shared_dir / "secret-new", new)
    start_as(test_user, sshds, secret_dir=new_secret, state_dir=shared_dir / "state-new", port=port, wait=False)
    assert probe.join() == [], (shared_dir / f"locale-{port}.log").read_text()
    assert "all 1 hosts answered" in caplog.text


def test_probe_wrong_client_key_is_fatal(
    locale_sshd: LocaleSshd, secret_data: dict[str, bytes], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="arkouda_bootstrap.ssh.client")
    wrong = keys.build_secret_data(release="other", with_token=False)
    with pytest.raises(BootstrapError) as err:
        probe_pods(locale_sshd, secret_data, tmp_path, client=wrong)
    assert "authentication" in str(err.value)
    assert "arkouda-locale-0" in str(err.value)
    assert "attempt 2/3" not in caplog.text


def test_probe_retries_until_sshd_listens(
    test_user: pwd.struct_passwd,
    shared_dir: Path,
    secret_data: dict[str, bytes],
    sshds: list[LocaleSshd],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="arkouda_bootstrap.ssh.client")
    port = free_port()
    secret_dir = write_secret_dir(shared_dir / "secret", secret_data)
    probe = BackgroundProbe(
        caplog,
        hosts=[ssh.Host("127.0.0.1", "arkouda-locale-0")],
        port=port,
        user=test_user.pw_name,
        client_key=client_key(secret_data, tmp_path),
        pinned=keys.release_pinned_host_key(secret_data[keys.KNOWN_HOSTS].decode()),
    )
    # start sshd only after the probe has failed at least once (connection refused)
    probe.wait_for_log("attempt 2/30")
    start_as(test_user, sshds, secret_dir=secret_dir, state_dir=shared_dir / "state", port=port, wait=False)
    assert probe.join() == []
    assert "Connection refused" in caplog.text or "connect to" in caplog.text
    assert "all 1 hosts answered" in caplog.text


def write_client(locale_sshd: LocaleSshd, data: dict[str, bytes], dest: Path, *, known_hosts: bytes) -> ssh.ClientFiles:
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "id").write_bytes(data[keys.CLIENT_KEY])
    (dest / "id").chmod(0o600)
    (dest / "known_hosts").write_bytes(known_hosts)
    return ssh.write_client_files(
        state_dir=dest,
        user=locale_sshd.user,
        port=locale_sshd.port,
        identity_file=dest / "id",
        known_hosts=dest / "known_hosts",
        tuning=SshTuning(),
        connect_timeout=5,
        prewarm=False,
    )


def test_ssh_G_accepts_client_config(locale_sshd: LocaleSshd, secret_data: dict[str, bytes], tmp_path: Path) -> None:
    files = write_client(locale_sshd, secret_data, tmp_path, known_hosts=secret_data[keys.KNOWN_HOSTS])
    out = subprocess.run(
        ["ssh", "-G", "-F", str(files.config), "10.1.2.3"], capture_output=True, text=True, check=True
    ).stdout
    assert "kexalgorithms curve25519-sha256,curve25519-sha256@libssh.org" in out
    assert "stricthostkeychecking true" in out
    assert "batchmode yes" in out
    assert f"port {locale_sshd.port}" in out


def test_real_ssh_negotiates_curve25519_and_runs(
    locale_sshd: LocaleSshd, secret_data: dict[str, bytes], tmp_path: Path
) -> None:
    files = write_client(locale_sshd, secret_data, tmp_path, known_hosts=secret_data[keys.KNOWN_HOSTS])
    result = subprocess.run(
        ["ssh", "-v", "-F", str(files.config), "127.0.0.1", "echo", "hello-from-locale"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "hello-from-locale"
    assert "kex: algorithm: curve25519-sha256" in result.stderr
    assert "aes128-gcm@openssh.com" in result.stderr


def test_real_ssh_rejects_wrong_host_key_even_when_spawner_says_no(
    locale_sshd: LocaleSshd, secret_data: dict[str, bytes], tmp_path: Path
) -> None:
    other = keys.generate_ed25519(comment="other")
    files = write_client(
        locale_sshd, secret_data, tmp_path, known_hosts=keys.known_hosts_line(other.public_openssh).encode()
    )
    # GASNet's spawner appends -o 'StrictHostKeyChecking no'; our wrapper's options come first and win
    result = subprocess.run(
        [str(files.wrapper), "-o", "StrictHostKeyChecking no", "-o", "FallBackToRsh no", "127.0.0.1", "true"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 255
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in result.stderr or "Host key verification failed" in result.stderr
    # and with the pinned key the same wrapper gets in
    good = write_client(locale_sshd, secret_data, tmp_path / "good", known_hosts=secret_data[keys.KNOWN_HOSTS])
    ok = subprocess.run(
        [str(good.wrapper), "-o", "StrictHostKeyChecking no", "-o", "FallBackToRsh no", "127.0.0.1", "true"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr


def test_overridden_kex_is_used_by_ssh_and_probe_still_works(
    secret_data: dict[str, bytes],
    tuned_locale: TunedLocale,
    tmp_path: Path,
) -> None:
    """A site restoring the post-quantum exchange gets it on the real ssh; the probe keeps working through
    curve25519-sha256@libssh.org."""
    pq = "sntrup761x25519-sha512@openssh.com,curve25519-sha256@libssh.org"
    sshd = tuned_locale(
        "--kex-algorithms",
        pq,
        "--ciphers",
        "chacha20-poly1305@openssh.com,aes256-gcm@openssh.com",
    )
    assert f"KexAlgorithms {pq}" in (sshd.state_dir / "sshd_config").read_text()
    (tmp_path / "id").write_bytes(secret_data[keys.CLIENT_KEY])
    (tmp_path / "id").chmod(0o600)
    (tmp_path / "known_hosts").write_bytes(secret_data[keys.KNOWN_HOSTS])
    files = ssh.write_client_files(
        state_dir=tmp_path,
        user=sshd.user,
        port=sshd.port,
        identity_file=tmp_path / "id",
        known_hosts=tmp_path / "known_hosts",
        tuning=SshTuning(kex_algorithms=pq, ciphers="chacha20-poly1305@openssh.com"),
        connect_timeout=5,
        prewarm=False,
    )
    result = subprocess.run(
        ["ssh", "-v", "-F", str(files.config), "127.0.0.1", "true"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "kex: algorithm: sntrup761x25519-sha512@openssh.com" in result.stderr
    probe_pods(sshd, secret_data, tmp_path)


def test_probe_without_common_kex_is_fatal_with_advice(
    secret_data: dict[str, bytes],
    tuned_locale: TunedLocale,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="arkouda_bootstrap.ssh.client")
    sshd = tuned_locale("--kex-algorithms", "sntrup761x25519-sha512@openssh.com")
    with pytest.raises(BootstrapError, match="global.sshKexAlgorithms"):
        probe_pods(sshd, secret_data, tmp_path)
    assert "attempt 2/3" not in caplog.text


@pytest.mark.parametrize("cipher", ["aes128-gcm@openssh.com", "aes256-gcm@openssh.com"])
def test_probe_succeeds_with_each_cipher_the_sshd_is_limited_to(
    cipher: str,
    secret_data: dict[str, bytes],
    tuned_locale: TunedLocale,
    tmp_path: Path,
) -> None:
    sshd = tuned_locale("--ciphers", cipher)
    assert f"Ciphers {cipher}\n" in (sshd.state_dir / "sshd_config").read_text()
    probe_pods(sshd, secret_data, tmp_path)


def test_probe_of_an_sshd_limited_to_chacha20_names_the_values_keys(
    secret_data: dict[str, bytes],
    tuned_locale: TunedLocale,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """paramiko has no chacha20-poly1305; the launcher's OpenSSH would, but the probe must say what to keep."""
    caplog.set_level(logging.INFO, logger="arkouda_bootstrap.ssh.client")
    sshd = tuned_locale("--ciphers", "chacha20-poly1305@openssh.com")
    with pytest.raises(BootstrapError) as err:
        probe_pods(sshd, secret_data, tmp_path)
    message = str(err.value)
    assert message.startswith("ssh probe failed: pod arkouda-locale-0 (127.0.0.1): ")
    assert "cipher" in message
    assert "global.sshCiphers one of aes128-gcm@openssh.com" in message
    assert "\n" not in message
    assert "attempt 2/3" not in caplog.text


def test_probe_with_nothing_listening_is_transient() -> None:
    port = free_port()  # bound and released: nothing listens there now
    with pytest.raises(sshprobe.TransientProbeError, match=f"pod r-0 \\(127.0.0.1\\): cannot connect to port {port}"):
        sshprobe.probe(
            "127.0.0.1",
            pod="r-0",
            port=port,
            user="nobody",
            client_key=paramiko.Ed25519Key(data=b"\0\0\0\x0bssh-ed25519\0\0\0\x20" + bytes(32)),
            pinned=keys.PublicKey("ssh-ed25519", "AAAA"),
            timeout=2,
        )


def test_load_release_client_key_reads_the_keys_module_format_and_names_bad_files(tmp_path: Path) -> None:
    pair = keys.generate_ed25519(comment="c")
    good = tmp_path / "id"
    good.write_bytes(pair.private_openssh)
    key = sshprobe.load_release_client_key(good)
    assert pair.public_openssh.startswith(f"{key.get_name()} {key.get_base64()}")
    bad = tmp_path / "bad"
    bad.write_bytes(b"-----BEGIN OPENSSH PRIVATE KEY-----\nnot base64\n-----END OPENSSH PRIVATE KEY-----\n")
    with pytest.raises(BootstrapError, match=f"cannot load the client key {bad}"):
        sshprobe.load_release_client_key(bad)
    with pytest.raises(BootstrapError, match=f"cannot load the client key {tmp_path / 'missing'}"):
        sshprobe.load_release_client_key(tmp_path / "missing")


def test_retired_host_keys_are_read_from_the_secret_when_a_rotation_wrote_them(
    secret_data: dict[str, bytes], tmp_path: Path
) -> None:
    assert sshprobe.read_retired_host_keys(tmp_path) == []  # no rotation yet: the Secret has no such field
    (tmp_path / keys.RETIRED_HOST_KEYS).write_bytes(keys.retire_host_key(secret_data))
    [retired] = sshprobe.read_retired_host_keys(tmp_path)
    assert retired == keys.parse_public_key(secret_data[keys.HOST_PUB].decode(), what="host")
