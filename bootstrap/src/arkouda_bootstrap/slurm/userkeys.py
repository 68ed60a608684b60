"""Key material outside Kubernetes (`server --hosts-from slurm`): the user's own client key and the host keys a
site pins in a known_hosts file.

The client key is `<ssh-dir>/id_ed25519`, else `<ssh-dir>/id_rsa` (unencrypted: a batch job cannot type a
passphrase). Every host must be pinned with an ssh-ed25519 key in the known_hosts file; the lookup is OpenSSH's
own (`ssh-keygen -F`, so hashed names, patterns and `[host]:port` for a port other than 22 behave exactly as for
the launcher's ssh, which reads the same file with StrictHostKeyChecking yes). Nothing is trusted on first use.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.ssh.keys import KEY_TYPE, PublicKey, parse_public_key

if TYPE_CHECKING:
    import paramiko

log = logging.getLogger(__name__)

CLIENT_KEY_NAMES = ("id_ed25519", "id_rsa")
KEYGEN_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class UserKeys:
    client_key_path: Path
    known_hosts: Path


def find_user_keys(*, ssh_dir: Path, known_hosts: Path | None) -> UserKeys:
    """The client key and the known_hosts file, or one line naming what is missing."""
    if not ssh_dir.is_dir():
        raise BootstrapError(f"ssh directory {ssh_dir} (--ssh-dir, ARKOUDA_USER_SSH_DIR) does not exist")
    client = next((ssh_dir / n for n in CLIENT_KEY_NAMES if (ssh_dir / n).is_file()), None)
    if client is None:
        raise BootstrapError(
            f"no client key in {ssh_dir}: expected {' or '.join(CLIENT_KEY_NAMES)} (--ssh-dir, ARKOUDA_USER_SSH_DIR), "
            "whose public key is in ~/.ssh/authorized_keys on every node"
        )
    pinned = known_hosts or ssh_dir / "known_hosts"
    if not pinned.is_file():
        raise BootstrapError(
            f"known_hosts file {pinned} does not exist (--known-hosts, ARKOUDA_SSH_KNOWN_HOSTS): the nodes' host keys "
            "must be pinned there (your site's ssh_known_hosts, or lines you checked yourself)"
        )
    return UserKeys(client_key_path=client, known_hosts=pinned)


def load_user_client_key(path: Path) -> paramiko.PKey:
    """The user's own client key (--ssh-dir) for the probe: unencrypted, ed25519 or RSA."""
    import paramiko

    try:
        return paramiko.PKey.from_path(path)
    except (paramiko.PasswordRequiredException, TypeError):  # newer paramiko lets cryptography's TypeError through
        raise BootstrapError(
            f"client key {path} is protected by a passphrase, which a batch job cannot enter: use a key without "
            "one for the cluster's nodes (--ssh-dir)"
        ) from None
    except OSError as exc:
        raise BootstrapError(f"cannot read the client key {path}: {exc.strerror or exc}") from None
    except (paramiko.SSHException, ValueError) as exc:
        raise BootstrapError(f"cannot load the client key {path}: {exc}") from None


def known_hosts_name(host: str, port: int) -> str:
    """How OpenSSH names a host in known_hosts: bare on port 22, `[host]:port` otherwise."""
    return host if port == 22 else f"[{host}]:{port}"


def pinned_host_keys(host: str, *, port: int, known_hosts: Path, ssh_keygen: str | None = None) -> list[PublicKey]:
    """The ssh-ed25519 keys `known_hosts` pins for `host` (OpenSSH's lookup: any of them is accepted, as ssh does),
    or one line saying why there is none."""
    name = known_hosts_name(host, port)
    tool = ssh_keygen or shutil.which("ssh-keygen")
    if tool is None:
        raise BootstrapError("ssh-keygen not found on PATH (install openssh-client): it looks up the pinned host keys")
    try:
        result = subprocess.run(
            [tool, "-F", name, "-f", str(known_hosts)],
            capture_output=True,
            text=True,
            check=False,
            timeout=KEYGEN_TIMEOUT_SECONDS,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BootstrapError(f"cannot look up {name} in {known_hosts}: {exc}") from None
    keys: list[PublicKey] = []
    revoked: set[str] = set()
    other_types: set[str] = set()
    for line in result.stdout.splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        marker = fields.pop(0) if fields[0].startswith("@") else ""
        if len(fields) < 3:
            continue
        key_type, blob = fields[1], fields[2]
        if marker == "@revoked":
            revoked.add(blob)
        elif marker:
            other_types.add(f"{marker} {key_type}")
        elif key_type == KEY_TYPE:
            try:
                keys.append(parse_public_key(f"{key_type} {blob}", what=f"the {known_hosts} entry for {name}"))
            except ValueError as exc:
                raise BootstrapError(str(exc)) from None
        else:
            other_types.add(key_type)
    unique = {k.blob_b64: k for k in keys if k.blob_b64 not in revoked}
    if unique:
        return list(unique.values())
    if other_types:
        raise BootstrapError(
            f"{known_hosts} pins no ssh-ed25519 host key for {name} (only {', '.join(sorted(other_types))}): the probe "
            "and the launcher's ssh accept ed25519 host keys only; add the node's ed25519 key (from your site)"
        )
    if result.returncode not in (0, 1):
        raise BootstrapError(f"cannot look up {name} in {known_hosts}: {result.stderr.strip() or result.returncode}")
    raise BootstrapError(
        f"host {name} is not pinned in {known_hosts} (--known-hosts, ARKOUDA_SSH_KNOWN_HOSTS): add its ssh-ed25519 "
        "host key (your site's ssh_known_hosts has it); nothing is trusted on first use"
    )
