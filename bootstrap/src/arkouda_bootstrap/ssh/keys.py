"""SSH key material: ed25519 generation (via `cryptography`), OpenSSH formats, the pinned known_hosts line,
and validation of an existing Secret that names the bad field.

Secret keys (docs/interfaces.md): id_ed25519, id_ed25519.pub, authorized_keys, ssh_host_ed25519_key,
ssh_host_ed25519_key.pub, known_hosts (`* ssh-ed25519 AAAA…`), token (with --with-token).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from arkouda_bootstrap.errors import BootstrapError

log = logging.getLogger(__name__)

CLIENT_KEY = "id_ed25519"
CLIENT_PUB = "id_ed25519.pub"
AUTHORIZED_KEYS = "authorized_keys"
HOST_KEY = "ssh_host_ed25519_key"
HOST_PUB = "ssh_host_ed25519_key.pub"
KNOWN_HOSTS = "known_hosts"
TOKEN = "token"
# Not key material: the id of the rotation that made these keys (keygen --rotation-id), so a replayed request
# is recognised as done.
ROTATION_ID = "rotation-id"
# Public host keys this release had before its rotations, newest first: a locale pod that still serves one of them
# has not rolled onto the new keys yet, which the probe tells apart from a key the release never had.
RETIRED_HOST_KEYS = "retired_host_keys"
MAX_RETIRED_HOST_KEYS = 4
# The same for every Secret this release ever has (a hash of namespace/release): a locale's sshd announces it, so a
# pod serving a host key of a deleted and regenerated Secret is told apart from a foreign host.
RELEASE_ID = "release-id"
KEY_FIELDS = (CLIENT_KEY, CLIENT_PUB, AUTHORIZED_KEYS, HOST_KEY, HOST_PUB, KNOWN_HOSTS)
# What each reader of the mounted Secret needs: the chart mounts a container only the fields it uses
# (docs/interfaces.md), so an sshd that never ssh-es out (a locale in Arkouda mode) holds no client key.
SSHD_FIELDS = (AUTHORIZED_KEYS, HOST_KEY, HOST_PUB)  # who may log in, and who this sshd is
CLIENT_FIELDS = (CLIENT_KEY, CLIENT_PUB, KNOWN_HOSTS)  # who this client is, and the host key it trusts
OPTIONAL_FIELDS = (TOKEN, ROTATION_ID, RETIRED_HOST_KEYS, RELEASE_ID)
RELEASE_ID_PATTERN = re.compile(r"[0-9a-f]{16}")
# How an sshd names its release in its SSH version line (sshd_config VersionAddendum), read by the probe.
RELEASE_BANNER_PREFIX = "arkouda-release-"
KEY_TYPE = "ssh-ed25519"


@dataclass(frozen=True)
class KeyPair:
    private_openssh: bytes  # "-----BEGIN OPENSSH PRIVATE KEY-----..."
    public_openssh: str  # "ssh-ed25519 AAAA... comment"


@dataclass(frozen=True)
class PublicKey:
    key_type: str
    blob_b64: str

    def line(self) -> str:
        return f"{self.key_type} {self.blob_b64}"

    @property
    def blob(self) -> bytes:
        return base64.b64decode(self.blob_b64)


def generate_ed25519(*, comment: str) -> KeyPair:
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PrivateFormat.OpenSSH,
        encryption_algorithm=serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        encoding=serialization.Encoding.OpenSSH, format=serialization.PublicFormat.OpenSSH
    )
    return KeyPair(private_openssh=private, public_openssh=f"{public.decode('ascii')} {comment}")


def known_hosts_line(host_public: str) -> str:
    """`* ssh-ed25519 AAAA…`: the one shared host key, pinned for every host and port."""
    return f"* {parse_public_key(host_public, what='host public key').line()}\n"


def generate_token() -> str:
    return secrets.token_hex(32)


def build_secret_data(*, release: str, with_token: bool) -> dict[str, bytes]:
    client = generate_ed25519(comment=f"arkouda@{release}")
    host = generate_ed25519(comment=f"host@{release}")
    data = {
        CLIENT_KEY: client.private_openssh,
        CLIENT_PUB: (client.public_openssh + "\n").encode(),
        AUTHORIZED_KEYS: (client.public_openssh + "\n").encode(),
        HOST_KEY: host.private_openssh,
        HOST_PUB: (host.public_openssh + "\n").encode(),
        KNOWN_HOSTS: known_hosts_line(host.public_openssh).encode(),
    }
    if with_token:
        # no line end: clients and the server take the token verbatim
        data[TOKEN] = generate_token().encode()
    return data


def release_id(*, namespace: str, release: str) -> str:
    """16 hex digits naming the release, not its Secret: every Secret keygen ever writes for it carries the same."""
    return hashlib.sha256(f"{namespace}/{release}".encode()).hexdigest()[:16]


def release_banner(release: str) -> str:
    return f"{RELEASE_BANNER_PREFIX}{release}"


def banner_release_id(remote_version: str) -> str | None:
    """The release id in a peer's SSH version line (`SSH-2.0-OpenSSH_9.2p1 Debian-2 arkouda-release-<id>`).

    Unauthenticated: it may only ever make the probe wait longer, never trust a key."""
    for word in remote_version.split()[1:]:
        if word.startswith(RELEASE_BANNER_PREFIX):
            candidate = word.removeprefix(RELEASE_BANNER_PREFIX)
            return candidate if RELEASE_ID_PATTERN.fullmatch(candidate) else None
    return None


def fingerprint(data: Mapping[str, bytes]) -> str:
    """A digest of a whole Secret (every field), to notice any change of the mounted copy."""
    digest = hashlib.sha256()
    for name in sorted(data):
        digest.update(f"{len(name)}:{name}:{len(data[name])}:".encode())
        digest.update(data[name])
    return digest.hexdigest()


def retire_host_key(existing: Mapping[str, bytes]) -> bytes:
    """The retired_host_keys field after a rotation: the current host key first, then the older ones (bounded)."""
    lines: list[str] = []
    for field in (HOST_PUB, RETIRED_HOST_KEYS):
        for raw in existing.get(field, b"").decode("utf-8", errors="replace").splitlines():
            try:
                line = parse_public_key(raw, what=field).line()
            except ValueError:
                continue
            if line not in lines:
                lines.append(line)
    return "".join(f"{line}\n" for line in lines[:MAX_RETIRED_HOST_KEYS]).encode()


def retired_host_keys(text: str) -> list[PublicKey]:
    """Parse a retired_host_keys field (one `ssh-ed25519 AAAA…` per line; unparsable lines are skipped)."""
    keys: list[PublicKey] = []
    for raw in text.splitlines():
        try:
            keys.append(parse_public_key(raw, what=RETIRED_HOST_KEYS))
        except ValueError:
            continue
    return keys


def parse_public_key(text: str, *, what: str) -> PublicKey:
    """Parse `ssh-ed25519 AAAA… [comment]` (first non-comment line)."""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) < 2 or fields[0] != KEY_TYPE:
            raise ValueError(f"{what} is not an {KEY_TYPE} public key")
        try:
            blob = base64.b64decode(fields[1], validate=True)
        except binascii.Error:
            raise ValueError(f"{what} has invalid base64") from None
        if _blob_key_type(blob) != KEY_TYPE:
            raise ValueError(f"{what} blob is not {KEY_TYPE}")
        return PublicKey(key_type=fields[0], blob_b64=fields[1])
    raise ValueError(f"{what} is empty")


def _blob_key_type(blob: bytes) -> str:
    if len(blob) < 4:
        return ""
    n = int.from_bytes(blob[:4], "big")
    return blob[4 : 4 + n].decode("ascii", errors="replace")


def release_pinned_host_key(known_hosts: str) -> PublicKey:
    """The key of the `* ssh-ed25519 …` line of the release's known_hosts (one host key pinned for every host)."""
    for raw in known_hosts.splitlines():
        fields = raw.split()
        if not fields or fields[0].startswith("#"):
            continue
        if fields[0] == "*" and len(fields) >= 3:
            return parse_public_key(" ".join(fields[1:]), what="known_hosts entry")
    raise ValueError("known_hosts has no '* ssh-ed25519 …' line")


def public_of_private(private_openssh: bytes, *, what: str) -> PublicKey:
    try:
        key = serialization.load_ssh_private_key(private_openssh, password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{what} is not an unencrypted OpenSSH private key ({exc})") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise ValueError(f"{what} is not an ed25519 key")
    public = key.public_key().public_bytes(
        encoding=serialization.Encoding.OpenSSH, format=serialization.PublicFormat.OpenSSH
    )
    return parse_public_key(public.decode("ascii"), what=what)


def validate_secret_data(
    data: Mapping[str, bytes],
    *,
    source: str,
    require_token: bool = False,
    required: tuple[str, ...] = KEY_FIELDS,
) -> None:
    """Raise BootstrapError naming the first missing or invalid field of the key material in `source`.

    `required` are the fields the reader needs (KEY_FIELDS: the whole Secret; SSHD_FIELDS or CLIENT_FIELDS: a
    container mounted with only those); every pair present is checked against each other."""

    def fail(field: str, why: str) -> BootstrapError:
        return BootstrapError(f"{source}: field {field}: {why.removeprefix(field + ' ')}")

    for field in (*required, *((TOKEN,) if require_token else ())):
        if field not in data or not data[field].strip():
            raise fail(field, "missing or empty")

    def text(field: str) -> str:
        try:
            return data[field].decode("utf-8")
        except UnicodeDecodeError:
            raise fail(field, "not UTF-8 text") from None

    def private(field: str) -> PublicKey | None:
        if field not in data:
            return None
        try:
            return public_of_private(data[field], what=field)
        except ValueError as exc:
            raise fail(field, str(exc)) from None

    def public(field: str, *, of: PublicKey | None, private_field: str) -> PublicKey | None:
        if field not in data:
            return None
        try:
            key = parse_public_key(text(field), what=field)
        except ValueError as exc:
            raise fail(field, str(exc)) from None
        if of is not None and key.blob != of.blob:
            raise fail(field, f"does not match {private_field}")
        return key

    client = private(CLIENT_KEY)
    host = private(HOST_KEY)
    public(CLIENT_PUB, of=client, private_field=CLIENT_KEY)
    host_pub = public(HOST_PUB, of=host, private_field=HOST_KEY)
    if AUTHORIZED_KEYS in data:
        authorized = set()
        for line in text(AUTHORIZED_KEYS).splitlines():
            try:
                authorized.add(parse_public_key(line, what=AUTHORIZED_KEYS).blob)
            except ValueError:
                continue
        if client is not None and client.blob not in authorized:
            raise fail(AUTHORIZED_KEYS, f"does not authorize the key in {CLIENT_KEY}")
        if not authorized:
            raise fail(AUTHORIZED_KEYS, f"authorizes no {KEY_TYPE} key")
    if KNOWN_HOSTS in data:
        try:
            pinned = release_pinned_host_key(text(KNOWN_HOSTS))
        except ValueError as exc:
            raise fail(KNOWN_HOSTS, str(exc)) from None
        if host is not None and pinned.blob != host.blob:
            raise fail(KNOWN_HOSTS, f"does not pin the key in {HOST_KEY}")
        if host is None and host_pub is not None and pinned.blob != host_pub.blob:
            # a reader without the host private key (the launcher) still sees a Secret whose halves disagree
            raise fail(HOST_PUB, f"does not match the {HOST_KEY} that {KNOWN_HOSTS} pins")
    if require_token and len(text(TOKEN).strip()) < 16:
        raise fail(TOKEN, "shorter than 16 characters")
    if RELEASE_ID in data and not RELEASE_ID_PATTERN.fullmatch(text(RELEASE_ID).strip()):
        raise fail(RELEASE_ID, "is not 16 lowercase hex digits")
