"""The three ssh client configurations the fan-out bench compares.

- `openssh-default`: OpenSSH's own key exchange and cipher choice, everything else as ours (pinned host key,
  key auth, batch mode), so only kex/cipher differ;
- `ours`: the client config the bootstrap renders for the launcher (fast, still-strong kex and cipher);
- `ours+prewarm`: ours plus an OpenSSH ControlMaster per host, opened before the fan-out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from arkouda_bench.sshd import ClientKeys

DEFAULT = "openssh-default"
OURS = "ours"
PREWARM = "ours+prewarm"
VARIANTS = (DEFAULT, OURS, PREWARM)

# Until the bootstrap's renderer is importable these are the values issue 7 asks for.
OUR_KEX = "curve25519-sha256"
OUR_CIPHERS = "aes128-gcm@openssh.com"


@dataclass(frozen=True)
class ClientConfig:
    variant: str
    path: Path
    control_dir: Path | None


def render_client_config(
    *, keys: ClientKeys, kex: str | None, ciphers: str | None, control_dir: Path | None
) -> str:
    lines = [
        "Host *",
        f"  User {keys.user}",
        f"  Port {keys.port}",
        f"  IdentityFile {keys.identity}",
        "  IdentitiesOnly yes",
        f"  UserKnownHostsFile {keys.known_hosts}",
        "  GlobalKnownHostsFile /dev/null",
        "  StrictHostKeyChecking yes",
        "  CheckHostIP no",
        "  UpdateHostKeys no",
        "  BatchMode yes",
        "  ConnectTimeout 30",
        "  LogLevel ERROR",
    ]
    if kex:
        lines.append(f"  KexAlgorithms {kex}")
    if ciphers:
        lines.append(f"  Ciphers {ciphers}")
    if control_dir is not None:
        lines += [f"  ControlPath {control_dir}/%C", "  ControlMaster auto"]
    return "\n".join(lines) + "\n"


def write_client_configs(keys: ClientKeys) -> dict[str, ClientConfig]:
    """Write one config file per variant into the client's private dir."""
    out: dict[str, ClientConfig] = {}
    control_dir = keys.dir / "cm"
    control_dir.mkdir(mode=0o700, exist_ok=True)
    for variant in VARIANTS:
        ctl = control_dir if variant == PREWARM else None
        kex, ciphers = (None, None) if variant == DEFAULT else (OUR_KEX, OUR_CIPHERS)
        path = keys.dir / f"ssh_config.{variant}"
        path.write_text(render_client_config(keys=keys, kex=kex, ciphers=ciphers, control_dir=ctl))
        out[variant] = ClientConfig(variant=variant, path=path, control_dir=ctl)
    return out
