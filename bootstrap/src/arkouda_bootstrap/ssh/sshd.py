"""The unprivileged sshd of every pod: key copies with the modes StrictModes wants, sshd_config, `sshd -t`.

As a non-root uid, sshd needs no privilege-separation chroot (/run/sshd, SYS_CHROOT), can only log in its own
user, and keeps its pid file and host key wherever the config says: everything lives in the state dir.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from arkouda_bootstrap.config import SshTuning
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.ssh import keys

log = logging.getLogger(__name__)

SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd")
# nss_wrapper variables handed to ssh sessions (sshd sets USER/LOGNAME itself)
SESSION_ENV_KEYS = frozenset({"LD_PRELOAD", "NSS_WRAPPER_PASSWD", "NSS_WRAPPER_GROUP"})


@dataclass(frozen=True)
class KeyPaths:
    """The writable copies (state_dir/ssh, mode 0700; private files 0600)."""

    directory: Path
    client_key: Path
    client_pub: Path
    authorized_keys: Path
    host_key: Path
    host_pub: Path
    known_hosts: Path
    token: Path | None
    retired_host_keys: Path
    release_id: str | None

    @classmethod
    def under(cls, state_dir: Path) -> KeyPaths:
        d = state_dir / "ssh"
        token = d / keys.TOKEN
        try:
            release_id: str | None = (d / keys.RELEASE_ID).read_text(encoding="utf-8").strip() or None
        except FileNotFoundError:
            release_id = None
        return cls(
            directory=d,
            client_key=d / keys.CLIENT_KEY,
            client_pub=d / keys.CLIENT_PUB,
            authorized_keys=d / keys.AUTHORIZED_KEYS,
            host_key=d / keys.HOST_KEY,
            host_pub=d / keys.HOST_PUB,
            known_hosts=d / keys.KNOWN_HOSTS,
            token=token if token.exists() else None,
            retired_host_keys=d / keys.RETIRED_HOST_KEYS,
            release_id=release_id,
        )


# The kubelet writes a Secret volume as a timestamped directory and swaps the `..data` symlink to it atomically;
# the files at the top are symlinks through `..data`.
KUBELET_DATA_LINK = "..data"
SNAPSHOT_ATTEMPTS = 5


def read_secret_dir(secret_dir: Path) -> dict[str, bytes]:
    """Read the mounted Secret's files (missing ones are simply absent; validation names them).

    On a kubelet Secret volume the files are read from one `..data` generation, and again if the kubelet swapped
    it meanwhile, so an update never yields half of the old Secret and half of the new one."""
    if not secret_dir.is_dir():
        raise BootstrapError(f"SSH Secret not mounted: {secret_dir} is not a directory (--secret-dir, ARKOUDA_SSH_DIR)")
    for _ in range(SNAPSHOT_ATTEMPTS):
        generation = _data_generation(secret_dir)
        data = _read_fields(secret_dir / generation if generation else secret_dir)
        if _data_generation(secret_dir) == generation:
            return data
    raise BootstrapError(f"the SSH Secret mounted at {secret_dir} kept changing while it was read")


def _data_generation(secret_dir: Path) -> str | None:
    try:
        return os.readlink(secret_dir / KUBELET_DATA_LINK)
    except (FileNotFoundError, OSError):
        return None


def _read_fields(directory: Path) -> dict[str, bytes]:
    data: dict[str, bytes] = {}
    for name in (*keys.KEY_FIELDS, *keys.OPTIONAL_FIELDS):
        path = directory / name
        try:
            data[name] = path.read_bytes()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise BootstrapError(
                f"cannot read {path}: {exc.strerror} (check the Secret volume's defaultMode)"
            ) from None
    return data


def install_keys(*, secret_dir: Path, state_dir: Path) -> KeyPaths:
    """Validate the mounted Secret and copy it to state_dir/ssh: dir 0700, private files 0600, owned by us."""
    return install_data(read_secret_dir(secret_dir), source=f"SSH Secret mounted at {secret_dir}", state_dir=state_dir)


def install_data(
    data: Mapping[str, bytes], *, source: str, state_dir: Path, required: tuple[str, ...] = keys.KEY_FIELDS
) -> KeyPaths:
    """Validate `data` (a Secret read by read_secret_dir; `required`: the fields this reader needs) and copy it to
    state_dir/ssh; nothing is written when it is invalid, so the copies in use stay. A field the new Secret
    lacks is removed from the copies."""
    keys.validate_secret_data(data, source=source, required=required)
    target = state_dir / "ssh"
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        target.mkdir(mode=0o700, exist_ok=True)
        target.chmod(0o700)
    except OSError as exc:
        raise BootstrapError(
            f"state dir {state_dir} is not writable: {exc.strerror} (mount an emptyDir; --state-dir, ARKOUDA_STATE_DIR)"
        ) from None
    for name, content in data.items():
        path = target / name
        mode = 0o644 if name.endswith(".pub") or name == keys.KNOWN_HOSTS else 0o600
        tmp = path.with_name(f".{name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    for name in (*keys.KEY_FIELDS, *keys.OPTIONAL_FIELDS):
        if name not in data:
            (target / name).unlink(missing_ok=True)
    return KeyPaths.under(state_dir)


def strict_modes_violation(path: Path, *, uid: int) -> str | None:
    """Mirror sshd's StrictModes rule (misc.c safe_path): the file and every directory up to / must be owned by
    root or `uid` and not group/world writable. Returns the offending path, or None when StrictModes would pass.

    Kubernetes creates emptyDir volumes with mode 0777, so a state dir on an emptyDir never passes."""
    current = path.resolve()
    st = current.stat()
    if st.st_uid not in (0, uid) or st.st_mode & 0o022:
        return str(current)
    while current != current.parent:
        current = current.parent
        st = current.stat()
        if st.st_uid not in (0, uid) or st.st_mode & 0o022:
            return f"{current} (mode {stat.filemode(st.st_mode)}, owner uid {st.st_uid})"
    return None


def render_sshd_config(
    *,
    port: int,
    user: str,
    key_paths: KeyPaths,
    pid_file: Path,
    tuning: SshTuning,
    strict_modes: bool,
    listen_address: str | None = None,
    max_startups: str | None = None,
    session_env: Mapping[str, str] | None = None,
) -> str:
    """sshd_config for an unprivileged sshd: public keys only, no PAM/passwords/root/forwarding/tty.

    No AcceptEnv and PermitUserEnvironment no: GASNet (AMUDP) ships the master's environment to the workers
    itself, and mpirun passes variables through its own daemons, so the launchers need nothing from sshd.
    `session_env` (SetEnv) carries the nss_wrapper variables into sessions of a uid without a passwd entry.
    With the Secret's release id, sshd names the release in its SSH version line (VersionAddendum), so the server's
    probe can tell a pod of this release that still serves other keys from a foreign host."""
    lines = [
        "# Generated by arkouda-bootstrap locale; do not edit.",
        f"Port {port}",
        *([f"ListenAddress {listen_address}"] if listen_address else []),
        f"HostKey {key_paths.host_key}",
        *([f"VersionAddendum {keys.release_banner(key_paths.release_id)}"] if key_paths.release_id else []),
        f"PidFile {pid_file}",
        f"AuthorizedKeysFile {key_paths.authorized_keys}",
        f"AllowUsers {user}",
        f"StrictModes {'yes' if strict_modes else 'no'}",
        "PubkeyAuthentication yes",
        "PubkeyAcceptedAlgorithms ssh-ed25519",
        "HostKeyAlgorithms ssh-ed25519",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "HostbasedAuthentication no",
        "GSSAPIAuthentication no",
        "KerberosAuthentication no",
        "PermitEmptyPasswords no",
        "PermitRootLogin no",
        "UsePAM no",
        "PermitUserEnvironment no",
        "AllowTcpForwarding no",
        "AllowAgentForwarding no",
        "AllowStreamLocalForwarding no",
        "X11Forwarding no",
        "PermitTunnel no",
        "GatewayPorts no",
        "PermitTTY no",
        "PrintMotd no",
        "PrintLastLog no",
        "UseDNS no",
        "Compression no",
        f"KexAlgorithms {tuning.kex_algorithms}",
        f"Ciphers {tuning.ciphers}",
        *([f"MaxStartups {max_startups}"] if max_startups else []),
        *_setenv_line(session_env or {}),
        "LogLevel INFO",
    ]
    return "\n".join(lines) + "\n"


def _setenv_line(env: Mapping[str, str]) -> list[str]:
    """One SetEnv line: sshd keeps only the first SetEnv directive."""
    pairs = [f'{k}="{v}"' for k, v in sorted(env.items()) if k in SESSION_ENV_KEYS]
    for pair in pairs:
        if pair.count('"') != 2 or "\n" in pair:
            raise BootstrapError(f"cannot pass {pair} to ssh sessions: quotes or newlines in the value")
    return [f"SetEnv {' '.join(pairs)}"] if pairs else []


def find_sshd(explicit: str = "sshd") -> str:
    """Absolute path (sshd refuses to re-exec itself from a relative one)."""
    if os.path.isabs(explicit):
        if os.access(explicit, os.X_OK):
            return explicit
        raise BootstrapError(f"sshd not found at {explicit}")
    found = shutil.which(explicit)
    if found:
        return os.path.abspath(found)
    for candidate in SSHD_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    raise BootstrapError("sshd not found on PATH or in /usr/sbin (install openssh-server in the image)")


def check_config(*, sshd: str, config: Path, env: Mapping[str, str]) -> None:
    """Run `sshd -t`; on failure raise with sshd's own first error line."""
    result = subprocess.run(
        [sshd, "-t", "-f", str(config)],
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    if result.returncode != 0:
        lines = [ln for ln in (result.stderr + result.stdout).splitlines() if ln.strip()]
        raise BootstrapError(f"sshd -t rejected {config}: {lines[0] if lines else f'exit {result.returncode}'}")


@dataclass(frozen=True)
class PreparedSshd:
    config: Path
    argv: list[str]
    env: dict[str, str]
    strict_modes: bool
    keys: KeyPaths


def prepare(
    *,
    secret_dir: Path,
    state_dir: Path,
    port: int,
    tuning: SshTuning,
    user: str,
    uid: int,
    extra_env: Mapping[str, str],
    sshd: str = "sshd",
    listen_address: str | None = None,
    max_startups: str | None = None,
    data: Mapping[str, bytes] | None = None,
) -> PreparedSshd:
    """Everything `locale` does before starting sshd, or before reloading it with a changed Secret: keys, config,
    `sshd -t`. `data` is the Secret as already read (default: read it now). Returns the argv to run.

    The config in use is replaced only after `sshd -t` accepted the new one."""
    # an sshd needs its side of the keys only: a locale is mounted without the client key in Arkouda mode
    key_paths = install_data(
        read_secret_dir(secret_dir) if data is None else data,
        source=f"SSH Secret mounted at {secret_dir}",
        state_dir=state_dir,
        required=keys.SSHD_FIELDS,
    )
    violation = strict_modes_violation(key_paths.authorized_keys, uid=uid)
    if violation is not None:
        log.warning(
            "StrictModes off: %s is writable by others (emptyDir volumes are 0777); the key copies themselves "
            "are 0600 in a 0700 dir owned by uid %d",
            violation,
            uid,
        )
    config = state_dir / "sshd_config"
    candidate = state_dir / ".sshd_config.new"
    candidate.write_text(
        render_sshd_config(
            port=port,
            user=user,
            key_paths=key_paths,
            pid_file=state_dir / "sshd.pid",
            tuning=tuning,
            strict_modes=violation is None,
            listen_address=listen_address,
            max_startups=max_startups,
            session_env=extra_env,
        ),
        encoding="utf-8",
    )
    candidate.chmod(0o644)
    binary = find_sshd(sshd)
    env = {**os.environ, **extra_env}
    check_config(sshd=binary, config=candidate, env=env)
    os.replace(candidate, config)
    return PreparedSshd(
        config=config,
        argv=[binary, "-D", "-e", "-f", str(config)],
        env=env,
        strict_modes=violation is None,
        keys=key_paths,
    )
