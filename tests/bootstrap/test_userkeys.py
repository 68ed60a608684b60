"""The Slurm path's key material: the user's client key and the host keys a known_hosts file pins, looked up the
way OpenSSH does (ssh-keygen -F: hashed names, patterns, [host]:port)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.slurm import userkeys
from arkouda_bootstrap.ssh import keys
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa


def ed25519_pub() -> str:
    return keys.generate_ed25519(comment="t").public_openssh.rsplit(" ", 1)[0]


def rsa_pub() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


def lookup(tmp_path: Path, text: str, host: str, port: int = 22) -> str:
    known = tmp_path / "known_hosts"
    known.write_text(text)
    return userkeys.pinned_host_keys(host, port=port, known_hosts=known)[0].line()


def test_plain_pattern_and_port_entries(tmp_path: Path) -> None:
    a, b, c = ed25519_pub(), ed25519_pub(), ed25519_pub()
    text = f"node01,node02 {a}\nnode0* {b}\n[node01]:2222 {c}\n"
    known = tmp_path / "known_hosts"
    known.write_text(text)
    # every key that matches, as OpenSSH accepts any of them
    assert [k.line() for k in userkeys.pinned_host_keys("node02", port=22, known_hosts=known)] == [a, b]
    assert lookup(tmp_path, text, "node07") == b  # OpenSSH's pattern matching
    assert lookup(tmp_path, text, "node01", 2222) == c  # another port is another entry
    assert userkeys.known_hosts_name("node01", 2222) == "[node01]:2222"


def test_hashed_entries(tmp_path: Path) -> None:
    a = ed25519_pub()
    known = tmp_path / "known_hosts"
    known.write_text(f"gpu5 {a}\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(known)], check=True, capture_output=True)
    assert known.read_text().startswith("|1|")
    assert userkeys.pinned_host_keys("gpu5", port=22, known_hosts=known)[0].line() == a


def test_a_revoked_key_is_not_pinned(tmp_path: Path) -> None:
    a = ed25519_pub()
    with pytest.raises(BootstrapError, match="is not pinned in"):
        lookup(tmp_path, f"n1 {a}\n@revoked * {a}\n", "n1")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("other " + "{ed}", "host n1 is not pinned in {known} (--known-hosts, ARKOUDA_SSH_KNOWN_HOSTS)"),
        ("n1 {rsa}", "pins no ssh-ed25519 host key for n1 (only ssh-rsa): the probe and the launcher's ssh accept"),
        ("@cert-authority n1 {ed}", "pins no ssh-ed25519 host key for n1 (only @cert-authority ssh-ed25519)"),
    ],
)
def test_what_is_not_a_pin_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    known = tmp_path / "known_hosts"
    known.write_text(text.format(ed=ed25519_pub(), rsa=rsa_pub()) + "\n")
    with pytest.raises(BootstrapError) as err:
        userkeys.pinned_host_keys("n1", port=22, known_hosts=known)
    assert message.format(known=known) in str(err.value)
    assert "\n" not in str(err.value)


def write_key(path: Path, *, password: bytes | None = None) -> None:
    encryption = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    path.write_bytes(
        ed25519.Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, encryption
        )
    )
    path.chmod(0o600)


def test_find_user_keys_prefers_ed25519_and_needs_known_hosts(tmp_path: Path) -> None:
    with pytest.raises(BootstrapError, match=r"no client key in .*: expected id_ed25519 or id_rsa"):
        userkeys.find_user_keys(ssh_dir=tmp_path, known_hosts=None)
    write_key(tmp_path / "id_rsa")  # the name decides the preference, not the type
    write_key(tmp_path / "id_ed25519")
    with pytest.raises(BootstrapError, match=r"known_hosts file .*known_hosts does not exist \(--known-hosts"):
        userkeys.find_user_keys(ssh_dir=tmp_path, known_hosts=None)
    (tmp_path / "known_hosts").write_text("")
    found = userkeys.find_user_keys(ssh_dir=tmp_path, known_hosts=None)
    assert found == userkeys.UserKeys(client_key_path=tmp_path / "id_ed25519", known_hosts=tmp_path / "known_hosts")
    with pytest.raises(BootstrapError, match=r"ssh directory .*nowhere \(--ssh-dir"):
        userkeys.find_user_keys(ssh_dir=tmp_path / "nowhere", known_hosts=None)


def test_client_keys_load_unless_protected(tmp_path: Path) -> None:
    write_key(tmp_path / "plain")
    assert userkeys.load_user_client_key(tmp_path / "plain").get_name() == "ssh-ed25519"
    write_key(tmp_path / "locked", password=b"secret")
    with pytest.raises(BootstrapError, match="is protected by a passphrase, which a batch job cannot enter"):
        userkeys.load_user_client_key(tmp_path / "locked")
