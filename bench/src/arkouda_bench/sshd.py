"""One real OpenSSH server for the benches: Debian's sshd, unprivileged, answering on every loopback address.

sshd runs as a dedicated non-root user (created idempotently; password field `*` — with `UsePAM no` sshd
refuses users whose password is locked with `!`). It listens on 0.0.0.0:<port> so every 127.x.y.z address
answers, and `AllowUsers <user>@127.0.0.0/8` refuses logins from anywhere but loopback. Keys, key copies and
sshd_config come from the bootstrap's own code; the host key is pinned on the client side with its
`* ssh-ed25519 …` known_hosts line (docs/interfaces.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from arkouda_bench.proc import live_children, pid_cpu
from arkouda_bootstrap.config import SshTuning
from arkouda_bootstrap.ssh import keys
from arkouda_bootstrap.ssh import sshd as bootstrap_sshd

log = logging.getLogger(__name__)

SSHD = "/usr/sbin/sshd"
BENCH_USER = "arkbench"
BENCH_HOME = Path("/var/lib/arkbench")


class BenchSetupError(RuntimeError):
    """A prerequisite of a bench is missing; the message names it."""


def loopback_hosts(count: int) -> list[str]:
    """`count` distinct loopback addresses 127.0.x.y (x ≥ 1, y in 1..254): one per simulated host."""
    if count > 254 * 254:
        raise ValueError(f"at most {254 * 254} loopback hosts, asked for {count}")
    return [f"127.0.{1 + i // 254}.{1 + i % 254}" for i in range(count)]


def processes_mentioning(text: str) -> list[int]:
    """PIDs whose command line contains `text` (a private temp path of this run, so never someone else's)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            pids.append(int(entry.name))
    return pids


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ensure_bench_user(name: str = BENCH_USER, home: Path = BENCH_HOME) -> pwd.struct_passwd:
    """Create the unprivileged login user of the bench sshd if missing (idempotent; needs root)."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        if os.geteuid() != 0:
            raise BenchSetupError(
                f"user {name!r} is missing and only root can create it: run the bench as root"
            ) from None
        subprocess.run(
            ["useradd", "--system", "--home-dir", str(home), "--create-home", "--shell", "/bin/sh", name],
            check=True,
        )
        entry = pwd.getpwnam(name)
    if os.geteuid() == 0:
        # Not locked ('!'): sshd with UsePAM no rejects locked users even for public-key logins.
        subprocess.run(["usermod", "-p", "*", name], check=True)
    return entry


@dataclass(frozen=True)
class ClientKeys:
    """What a client running as root needs to reach the bench sshd as the bench user (pinned host key)."""

    user: str
    port: int
    identity: Path
    known_hosts: Path
    dir: Path


# The bench sshd offers OpenSSH's own default lists ('+' appends ours, already in them), so the *client's*
# configuration decides what is negotiated: that is what the fan-out variants compare.
SERVER_TUNING = SshTuning(kex_algorithms="+curve25519-sha256", ciphers="+aes128-gcm@openssh.com")


def write_secret_dir(path: Path, data: Mapping[str, bytes]) -> None:
    """Lay out Secret data as the kubelet mounts it: one file per key."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name, content in data.items():
        (path / name).write_bytes(content)
        (path / name).chmod(0o600)


def chown_tree(root: Path, uid: int, gid: int) -> None:
    os.chown(root, uid, gid)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            os.chown(os.path.join(dirpath, name), uid, gid)


class SshServer:
    """Context manager: a real sshd for the bench user on 0.0.0.0:<port>, and the client key material.

    The sshd_config and the key copies come from the bootstrap's own `locale` code
    (arkouda_bootstrap.ssh.sshd),
    with two bench-only edits: it listens on 0.0.0.0 with a raised MaxStartups (one sshd stands in for every
    host; in a cluster each locale pod runs its own and sees one connection), and AllowUsers is narrowed to
    loopback clients. `secret` is the SSH Secret's data (default: fresh keys from the bootstrap's keygen
    code).
    """

    def __init__(self, *, max_startups: int = 4096, secret: Mapping[str, bytes] | None = None) -> None:
        self.max_startups = max_startups
        self.secret = (
            dict(secret)
            if secret is not None
            else keys.build_secret_data(release="arkbench", with_token=False)
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self.root: Path | None = None
        self.client: ClientKeys | None = None
        self.user: pwd.struct_passwd | None = None
        self._client_dir: Path | None = None

    @property
    def state_dir(self) -> Path:
        assert self.root is not None
        return self.root / "sshd"

    def __enter__(self) -> SshServer:
        if not Path(SSHD).exists():
            raise BenchSetupError(f"{SSHD} is missing: run 'make deps' (Debian package openssh-server)")
        try:
            return self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def _start(self) -> SshServer:
        user = self.user = ensure_bench_user()
        # StrictModes walks the path of authorized_keys up to the user's home: keep the state under it.
        root = self.root = Path(user.pw_dir) / f"run-{os.getpid()}-{secrets.token_hex(3)}"
        root.mkdir(mode=0o700)
        write_secret_dir(root / "secret", self.secret)
        key_paths = bootstrap_sshd.install_keys(secret_dir=root / "secret", state_dir=self.state_dir)
        port = free_port()
        config_text = bootstrap_sshd.render_sshd_config(
            port=port,
            user=user.pw_name,
            key_paths=key_paths,
            pid_file=self.state_dir / "sshd.pid",
            tuning=SERVER_TUNING,
            strict_modes=True,
            listen_address="0.0.0.0",  # noqa: S104 - every 127.x.y.z must answer; AllowUsers limits to loopback
            max_startups=str(self.max_startups),
        )
        allow = f"AllowUsers {user.pw_name}\n"
        if allow not in config_text:
            raise BenchSetupError(
                "the bootstrap's sshd_config has no 'AllowUsers' line to narrow to loopback"
            )
        config_text = config_text.replace(allow, f"AllowUsers {user.pw_name}@127.0.0.0/8\n")
        config = self.state_dir / "sshd_config"
        config.write_text(config_text)
        chown_tree(root, user.pw_uid, user.pw_gid)
        # `sshd -t` as the user it will run as (as root it would want /run/sshd for privilege separation).
        check = subprocess.run(
            [SSHD, "-t", "-f", str(config)],
            user=user.pw_uid,
            group=user.pw_gid,
            extra_groups=[],
            capture_output=True,
            text=True,
            check=False,
        )
        if check.returncode != 0:
            raise BenchSetupError(f"sshd -t rejected {config}: {(check.stderr or check.stdout).strip()}")

        client_dir = Path(tempfile.mkdtemp(prefix="arkbench-client-"))
        self._client_dir = client_dir
        client_keys = bootstrap_sshd.install_keys(secret_dir=root / "secret", state_dir=client_dir)
        self.client = ClientKeys(
            user=user.pw_name,
            port=port,
            identity=client_keys.client_key,
            known_hosts=client_keys.known_hosts,
            dir=client_dir,
        )

        log_path = self.state_dir / "sshd.log"
        with log_path.open("wb") as log_fh:
            os.chown(log_path, user.pw_uid, user.pw_gid)
            self.proc = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(config)],
                user=user.pw_uid,
                group=user.pw_gid,
                extra_groups=[],
                stdin=subprocess.DEVNULL,
                stdout=log_fh,
                stderr=subprocess.STDOUT,
            )
        self._wait_listening(port)
        log.info("sshd pid %d listening on 0.0.0.0:%d as %s", self.proc.pid, port, user.pw_name)
        return self

    def _wait_listening(self, port: int, timeout: float = 10.0) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchSetupError(f"bench sshd exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise BenchSetupError(
            f"bench sshd did not listen on port {port} within {timeout} s: {self.log_tail()}"
        )

    def log_tail(self, lines: int = 5) -> str:
        if self.root is None:
            return ""
        try:
            text = (self.state_dir / "sshd.log").read_text(errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def server_cpu(self, *, expected_live: int = 0, settle_timeout: float = 5.0) -> float:
        """CPU seconds of sshd, its finished per-connection children and the ones still alive.

        Waits (bounded) until at most `expected_live` connection processes remain (the ControlMaster
        connections of the pre-warm variant stay open), so finished connections are reaped and counted
        exactly.
        """
        assert self.proc is not None
        deadline = time.monotonic() + settle_timeout
        while len(live_children(self.proc.pid)) > expected_live and time.monotonic() < deadline:
            time.sleep(0.02)
        total = pid_cpu(self.proc.pid, with_reaped_children=True)
        stack = live_children(self.proc.pid)
        while stack:
            pid = stack.pop()
            total += pid_cpu(pid, with_reaped_children=True)
            stack += live_children(pid)
        return total

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._client_dir is not None:
            # Background ControlMasters of an interrupted pre-warm still hold connections: end exactly the
            # ssh processes that use this run's private client dir.
            for pid in processes_mentioning(str(self._client_dir)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for d in (self.root, self._client_dir):
            if d is not None:
                shutil.rmtree(d, ignore_errors=True)
