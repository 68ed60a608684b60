"""sshd_config/client config rendering, StrictModes chain check, key copies and the nss_wrapper identity."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest
from arkouda_bootstrap.config import SshTuning
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.ssh import client as ssh
from arkouda_bootstrap.ssh import identity, keys, sshd
from conftest import write_secret_dir


def test_sshd_config_is_unprivileged_and_minimal(tmp_path: Path) -> None:
    text = sshd.render_sshd_config(
        port=2222,
        user="arkouda",
        key_paths=sshd.KeyPaths.under(tmp_path),
        pid_file=tmp_path / "sshd.pid",
        tuning=SshTuning(kex_algorithms="sntrup761x25519-sha512@openssh.com", ciphers="aes256-ctr"),
        strict_modes=False,
    )
    lines = set(text.splitlines())
    for expected in (
        "Port 2222",
        f"HostKey {tmp_path}/ssh/ssh_host_ed25519_key",
        f"AuthorizedKeysFile {tmp_path}/ssh/authorized_keys",
        f"PidFile {tmp_path}/sshd.pid",
        "AllowUsers arkouda",
        "UsePAM no",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin no",
        "AllowTcpForwarding no",
        "X11Forwarding no",
        "PermitUserEnvironment no",
        "StrictModes no",
        "KexAlgorithms sntrup761x25519-sha512@openssh.com",
        "Ciphers aes256-ctr",
    ):
        assert expected in lines
    assert not any(line.startswith("AcceptEnv") for line in lines)


def test_client_config_pins_and_tunes(tmp_path: Path) -> None:
    text = ssh.render_client_config(
        user="arkouda",
        port=2222,
        identity_file=tmp_path / "id",
        known_hosts=tmp_path / "kh",
        tuning=SshTuning(),
        connect_timeout=7,
    )
    for expected in (
        "  StrictHostKeyChecking yes",
        "  BatchMode yes",
        f"  UserKnownHostsFile {tmp_path}/kh",
        "  GlobalKnownHostsFile /dev/null",
        f"  IdentityFile {tmp_path}/id",
        "  Port 2222",
        "  ConnectTimeout 7",
        "  KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org",
        "  Ciphers aes128-gcm@openssh.com,chacha20-poly1305@openssh.com",
    ):
        assert expected in text.splitlines()
    assert "ControlPath" not in text
    warm = ssh.render_client_config(
        user="a",
        port=1,
        identity_file=tmp_path,
        known_hosts=tmp_path,
        tuning=SshTuning(),
        connect_timeout=1,
        control_dir=tmp_path / "cm",
        control_persist=120,
    )
    assert f"  ControlPath {tmp_path}/cm/%C" in warm.splitlines()
    assert "  ControlPersist 120" in warm.splitlines()
    assert "  ControlMaster no" in warm.splitlines()


def test_wrapper_puts_our_options_first() -> None:
    text = ssh.render_wrapper(ssh="/usr/bin/ssh", config=Path("/run/a b/ssh_config"), env={"LD_PRELOAD": "x.so"})
    assert text.startswith("#!/bin/sh\n")
    assert "export LD_PRELOAD=x.so\n" in text
    assert text.rstrip().endswith(
        """exec /usr/bin/ssh -F '/run/a b/ssh_config' -o StrictHostKeyChecking=yes -o BatchMode=yes "$@\""""
    )


def test_strict_modes_violation(tmp_path: Path) -> None:
    base = tmp_path / "base"
    (base / "ssh").mkdir(parents=True)
    f = base / "ssh" / "authorized_keys"
    f.write_text("x")
    f.chmod(0o600)
    uid = os.getuid()
    # pytest's tmp_path lives under /tmp (1777), which StrictModes rejects
    assert sshd.strict_modes_violation(f, uid=uid) is not None
    base.chmod(0o777)
    assert str(base) in (sshd.strict_modes_violation(f, uid=uid) or "")
    f.chmod(0o666)
    assert sshd.strict_modes_violation(f, uid=uid) == str(f)
    assert sshd.strict_modes_violation(Path("/etc/passwd"), uid=uid) is None


def test_install_keys_copies_with_strict_modes(tmp_path: Path, secret_data: dict[str, bytes]) -> None:
    secret = write_secret_dir(tmp_path / "secret", secret_data)
    paths = sshd.install_keys(secret_dir=secret, state_dir=tmp_path / "state")
    assert paths.directory.stat().st_mode & 0o777 == 0o700
    for p in (paths.client_key, paths.host_key, paths.authorized_keys):
        assert p.stat().st_mode & 0o777 == 0o600
    assert paths.known_hosts.stat().st_mode & 0o777 == 0o644
    assert paths.host_key.read_bytes() == secret_data[keys.HOST_KEY]
    # a second run (container restart) overwrites in place
    sshd.install_keys(secret_dir=secret, state_dir=tmp_path / "state")


def test_install_keys_errors_name_the_problem(tmp_path: Path, secret_data: dict[str, bytes]) -> None:
    with pytest.raises(BootstrapError, match=r"SSH Secret not mounted: .* \(--secret-dir, ARKOUDA_SSH_DIR\)"):
        sshd.install_keys(secret_dir=tmp_path / "nope", state_dir=tmp_path / "state")
    broken = dict(secret_data)
    del broken[keys.KNOWN_HOSTS]
    secret = write_secret_dir(tmp_path / "secret", broken)
    with pytest.raises(BootstrapError, match=f"SSH Secret mounted at {secret}: field known_hosts: missing"):
        sshd.install_keys(secret_dir=secret, state_dir=tmp_path / "state")


def test_find_sshd_is_absolute() -> None:
    assert os.path.isabs(sshd.find_sshd())
    with pytest.raises(BootstrapError, match="sshd not found at /nonexistent/sshd"):
        sshd.find_sshd("/nonexistent/sshd")


def test_passwd_line_has_no_password_and_rejects_colons() -> None:
    assert identity.passwd_line(user="arkouda", uid=1000690000, gid=0, home="/home/arkouda") == (
        "arkouda:*:1000690000:0:arkouda-bootstrap generated:/home/arkouda:/bin/sh\n"
    )
    with pytest.raises(BootstrapError):
        identity.passwd_line(user="a:b", uid=1, gid=1, home="/")


def test_identity_known_uid_needs_nothing(tmp_path: Path) -> None:
    ident = identity.ensure_identity(state_dir=tmp_path)
    assert ident.user == pwd.getpwuid(os.getuid()).pw_name
    assert ident.env == {}
    assert not (tmp_path / "nss").exists()


def test_identity_unknown_uid_writes_nss_wrapper_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/arkouda")
    monkeypatch.delenv("USER", raising=False)
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    ident = identity.ensure_identity(state_dir=tmp_path, uid=1000690000, gid=0, lookup=False, nss_wrapper="/lib/x.so")
    assert ident.user == "arkouda"
    assert (tmp_path / "nss" / "passwd").read_text().startswith("arkouda:*:1000690000:0:")
    assert ident.env["LD_PRELOAD"] == "/lib/x.so"
    assert ident.env["NSS_WRAPPER_PASSWD"] == str(tmp_path / "nss" / "passwd")
    assert ident.env["NSS_WRAPPER_GROUP"] == str(tmp_path / "nss" / "group")


def test_identity_unknown_uid_without_nss_wrapper_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(identity, "find_nss_wrapper", lambda: None)
    with pytest.raises(BootstrapError, match="uid 4242 has no passwd entry and libnss_wrapper is not installed"):
        identity.ensure_identity(state_dir=tmp_path, uid=4242, gid=4242, lookup=False)
