"""Key generation, OpenSSH formats, the pinned known_hosts line and Secret validation naming the bad field."""

from __future__ import annotations

import pytest
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.ssh import keys
from cryptography.hazmat.primitives import serialization


def test_generated_secret_has_the_contract_fields_and_is_valid() -> None:
    data = keys.build_secret_data(release="rel", with_token=True)
    assert set(data) == {*keys.KEY_FIELDS, keys.TOKEN}
    assert data[keys.CLIENT_KEY].startswith(b"-----BEGIN OPENSSH PRIVATE KEY-----")
    assert data[keys.HOST_PUB].startswith(b"ssh-ed25519 AAAA")
    assert data[keys.AUTHORIZED_KEYS] == data[keys.CLIENT_PUB]
    line = data[keys.KNOWN_HOSTS].decode()
    assert line.startswith("* ssh-ed25519 AAAA") and line.endswith("\n") and line.count("\n") == 1
    assert len(data[keys.TOKEN].strip()) == 64
    keys.validate_secret_data(data, source="s", require_token=True)
    # OpenSSH format loads with cryptography (what ssh and paramiko read)
    serialization.load_ssh_private_key(data[keys.HOST_KEY], password=None)


def test_two_generations_differ() -> None:
    a = keys.build_secret_data(release="r", with_token=False)
    b = keys.build_secret_data(release="r", with_token=False)
    assert a[keys.CLIENT_KEY] != b[keys.CLIENT_KEY]
    assert a[keys.HOST_KEY] != b[keys.HOST_KEY]


def test_release_pinned_host_key_matches_host_pub() -> None:
    data = keys.build_secret_data(release="r", with_token=False)
    pinned = keys.release_pinned_host_key(data[keys.KNOWN_HOSTS].decode())
    host = keys.parse_public_key(data[keys.HOST_PUB].decode(), what="x")
    assert pinned.blob == host.blob


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        (keys.CLIENT_KEY, None, "field id_ed25519: missing or empty"),
        (keys.CLIENT_KEY, b"garbage", "field id_ed25519: is not an unencrypted OpenSSH private key"),
        (keys.HOST_KEY, b"   ", "field ssh_host_ed25519_key: missing or empty"),
        (keys.KNOWN_HOSTS, b"host1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG\n", "field known_hosts: "),
        (keys.AUTHORIZED_KEYS, b"# nobody\n", "field authorized_keys: does not authorize"),
        (keys.CLIENT_PUB, b"ssh-rsa AAAAB3Nza x\n", "field id_ed25519.pub: "),
        (keys.HOST_PUB, b"ssh-ed25519 !!!notbase64\n", "field ssh_host_ed25519_key.pub: "),
    ],
)
def test_validation_names_the_bad_field(field: str, value: bytes | None, expected: str) -> None:
    data = keys.build_secret_data(release="r", with_token=False)
    if value is None:
        del data[field]
    else:
        data[field] = value
    with pytest.raises(BootstrapError) as err:
        keys.validate_secret_data(data, source="Secret rel-arkouda-ssh in namespace ns")
    assert str(err.value).startswith("Secret rel-arkouda-ssh in namespace ns: ")
    assert expected in str(err.value)


def test_validation_detects_keys_from_two_generations() -> None:
    a = keys.build_secret_data(release="r", with_token=False)
    b = keys.build_secret_data(release="r", with_token=False)
    mixed = dict(a, **{keys.KNOWN_HOSTS: b[keys.KNOWN_HOSTS]})
    with pytest.raises(BootstrapError, match="field known_hosts: does not pin the key in ssh_host_ed25519_key"):
        keys.validate_secret_data(mixed, source="s")
    mixed = dict(a, **{keys.CLIENT_PUB: b[keys.CLIENT_PUB]})
    with pytest.raises(BootstrapError, match="field id_ed25519.pub: does not match id_ed25519"):
        keys.validate_secret_data(mixed, source="s")


def test_token_required_only_when_asked() -> None:
    data = keys.build_secret_data(release="r", with_token=False)
    keys.validate_secret_data(data, source="s")
    with pytest.raises(BootstrapError, match="field token: missing or empty"):
        keys.validate_secret_data(data, source="s", require_token=True)


def test_retired_host_keys_newest_first_and_bounded() -> None:
    existing: dict[str, bytes] = {}
    hosts = []
    for i in range(keys.MAX_RETIRED_HOST_KEYS + 2):
        data = keys.build_secret_data(release=f"r{i}", with_token=False)
        hosts.append(keys.parse_public_key(data[keys.HOST_PUB].decode(), what="h"))
        if existing:
            data[keys.RETIRED_HOST_KEYS] = keys.retire_host_key(existing)
        existing = data
    retired = keys.retired_host_keys(existing[keys.RETIRED_HOST_KEYS].decode())
    assert retired == list(reversed(hosts[:-1]))[: keys.MAX_RETIRED_HOST_KEYS]
    assert hosts[-1] not in retired  # the current key is never "retired"
    assert keys.retired_host_keys("garbage\nssh-rsa AAAA\n") == []


def test_an_sshd_or_a_client_mounted_with_its_fields_only_is_valid_and_checked_as_far_as_it_goes() -> None:
    data = keys.build_secret_data(release="r", with_token=True)
    sshd_only = {k: data[k] for k in keys.SSHD_FIELDS}
    client_only = {k: data[k] for k in keys.CLIENT_FIELDS}
    keys.validate_secret_data(sshd_only, source="s", required=keys.SSHD_FIELDS)
    keys.validate_secret_data(client_only, source="s", required=keys.CLIENT_FIELDS)
    # the whole Secret (keygen) is still required to be whole
    with pytest.raises(BootstrapError, match=r"^s: field id_ed25519: missing or empty$"):
        keys.validate_secret_data(sshd_only, source="s")
    with pytest.raises(BootstrapError, match=r"^s: field authorized_keys: missing or empty$"):
        keys.validate_secret_data(client_only, source="s", required=keys.SSHD_FIELDS)
    # the pairs that are there are still checked against each other
    other = keys.build_secret_data(release="r", with_token=False)
    with pytest.raises(BootstrapError, match=r"field ssh_host_ed25519_key.pub: does not match ssh_host_ed25519_key"):
        keys.validate_secret_data(
            {**sshd_only, keys.HOST_PUB: other[keys.HOST_PUB]}, source="s", required=keys.SSHD_FIELDS
        )
    with pytest.raises(BootstrapError, match=r"field authorized_keys: authorizes no ssh-ed25519 key"):
        keys.validate_secret_data(
            {**sshd_only, keys.AUTHORIZED_KEYS: b"# nobody\n"}, source="s", required=keys.SSHD_FIELDS
        )
    with pytest.raises(BootstrapError, match=r"field known_hosts: does not pin the key in ssh_host_ed25519_key"):
        keys.validate_secret_data(
            {**sshd_only, keys.KNOWN_HOSTS: other[keys.KNOWN_HOSTS]}, source="s", required=keys.SSHD_FIELDS
        )


def test_a_client_with_the_host_public_key_sees_it_disagree_with_the_pinned_one() -> None:
    data = keys.build_secret_data(release="r", with_token=False)
    launcher = {k: data[k] for k in (*keys.CLIENT_FIELDS, keys.HOST_PUB)}
    keys.validate_secret_data(launcher, source="s", required=keys.CLIENT_FIELDS)
    bad = {**launcher, keys.HOST_PUB: data[keys.CLIENT_PUB]}  # a valid key, but not the host key
    with pytest.raises(
        BootstrapError,
        match=r"^s: field ssh_host_ed25519_key.pub: does not match the ssh_host_ed25519_key that known_hosts pins$",
    ):
        keys.validate_secret_data(bad, source="s", required=keys.CLIENT_FIELDS)
