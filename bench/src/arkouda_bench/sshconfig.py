"""The three ssh client configurations the fan-out bench compares, all rendered by the bootstrap's own
code (`arkouda_bootstrap.ssh.client.write_client_files`: the config plus the `ssh` wrapper the spawners run):

- `openssh-default`: our rendered config with its `KexAlgorithms` and `Ciphers` lines removed, so OpenSSH's
  own defaults apply and everything else (pinned host key, key auth, batch mode) is identical;
- `ours`: the config exactly as the bootstrap writes it for the launcher;
- `ours+prewarm`: the bootstrap's pre-warm config (ControlPath in a private dir); the masters are opened by
  the bootstrap's `prewarm` before the fan-out and closed by its `close_masters` after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from arkouda_bench.sshd import ClientKeys
from arkouda_bootstrap.config import DEFAULT_CONNECT_TIMEOUT, SshTuning
from arkouda_bootstrap.ssh.client import write_client_files

DEFAULT = "openssh-default"
OURS = "ours"
PREWARM = "ours+prewarm"
VARIANTS = (DEFAULT, OURS, PREWARM)

OUR_TUNING = SshTuning()
TUNING_KEYWORDS = ("KexAlgorithms", "Ciphers")


@dataclass(frozen=True)
class ClientConfig:
    variant: str
    path: Path
    wrapper: Path
    control_dir: Path | None


def strip_tuning(config_text: str) -> str:
    """Drop the kex/cipher lines: what a site restoring OpenSSH's defaults gets."""
    kept = [ln for ln in config_text.splitlines() if ln.strip().split(" ", 1)[0] not in TUNING_KEYWORDS]
    if len(kept) != len(config_text.splitlines()) - len(TUNING_KEYWORDS):
        raise ValueError(f"expected one line each of {TUNING_KEYWORDS} in the bootstrap's client config")
    return "\n".join(kept) + "\n"


def write_client_configs(keys: ClientKeys) -> dict[str, ClientConfig]:
    """Write one state dir per variant (config + wrapper) into the client's private dir."""
    out: dict[str, ClientConfig] = {}
    for variant in VARIANTS:
        state = keys.dir / variant.replace("+", "-")
        state.mkdir(mode=0o700, exist_ok=True)
        files = write_client_files(
            state_dir=state,
            user=keys.user,
            port=keys.port,
            identity_file=keys.identity,
            known_hosts=keys.known_hosts,
            tuning=OUR_TUNING,
            connect_timeout=DEFAULT_CONNECT_TIMEOUT,
            prewarm=variant == PREWARM,
        )
        if variant == DEFAULT:
            files.config.write_text(strip_tuning(files.config.read_text()))
        out[variant] = ClientConfig(
            variant=variant, path=files.config, wrapper=files.wrapper, control_dir=files.control_dir
        )
    return out
