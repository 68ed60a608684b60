"""One real OpenSSH server for the benches: Debian's sshd, unprivileged, answering on every loopback address.

sshd runs as a dedicated non-root user (created idempotently; password field `*` — with `UsePAM no` sshd
refuses users whose password is locked with `!`). It listens on 0.0.0.0:<port> so every 127.x.y.z address
answers, and `AllowUsers <user>@127.0.0.0/8` refuses logins from anywhere but loopback. The host key is pinned
on the client side with a `* ssh-ed25519 …` known_hosts line, as the bootstrap does (docs/interfaces.md).
"""

from __future__ import annotations

import logging
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from arkouda_bench.proc import live_children, pid_cpu

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


def ssh_keygen(path: Path, comment: str) -> str:
    """Generate an ed25519 key pair at `path`; return the public key line."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return path.with_suffix(".pub").read_text().strip()


@dataclass(frozen=True)
class ClientKeys:
    """What an ssh client needs to reach the bench sshd with a pinned host key."""

    user: str
    port: int
    identity: Path
    known_hosts: Path
    dir: Path


def render_sshd_config(
    *, port: int, state_dir: Path, host_key: Path, authorized_keys: Path, user: str, max_startups: int
) -> str:
    """sshd_config of the bench server: pubkey only, unprivileged, pinned to loopback clients.

    MaxStartups/MaxSessions are raised because one sshd stands in for every host of the fan-out (in a real
    cluster each locale pod runs its own sshd and sees one connection).
    """
    return "\n".join(
        [
            f"Port {port}",
            "ListenAddress 0.0.0.0",
            f"HostKey {host_key}",
            f"PidFile {state_dir / 'sshd.pid'}",
            f"AuthorizedKeysFile {authorized_keys}",
            f"AllowUsers {user}@127.0.0.0/8",
            "UsePAM no",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PubkeyAuthentication yes",
            "PermitRootLogin no",
            "StrictModes yes",
            "AllowTcpForwarding no",
            "X11Forwarding no",
            "PrintMotd no",
            f"MaxStartups {max_startups}",
            f"MaxSessions {max_startups}",
            "LogLevel ERROR",
            "",
        ]
    )


class SshServer:
    """Context manager: a real sshd for the bench user on 0.0.0.0:<port>, and the client key material."""

    def __init__(self, *, max_startups: int = 4096) -> None:
        self.max_startups = max_startups
        self.proc: subprocess.Popen[bytes] | None = None
        self.state_dir: Path | None = None
        self.client: ClientKeys | None = None
        self._client_dir: Path | None = None

    def __enter__(self) -> SshServer:
        if not Path(SSHD).exists():
            raise BenchSetupError(f"{SSHD} is missing: run 'make deps' (Debian package openssh-server)")
        user = ensure_bench_user()
        # StrictModes walks the path of authorized_keys up to the user's home: keep the state under it.
        state = Path(user.pw_dir) / f"run-{os.getpid()}-{secrets.token_hex(3)}"
        state.mkdir(mode=0o700)
        self.state_dir = state
        client_dir = (
            Path(os.environ.get("TMPDIR", "/tmp")) / f"arkbench-client-{os.getpid()}-{secrets.token_hex(3)}"
        )
        client_dir.mkdir(mode=0o700)
        self._client_dir = client_dir
        host_pub = ssh_keygen(state / "ssh_host_ed25519_key", "arkbench-host")
        client_pub = ssh_keygen(client_dir / "id_ed25519", "arkbench-client")
        (state / "authorized_keys").write_text(client_pub + "\n")
        (client_dir / "known_hosts").write_text(f"* {host_pub}\n")
        port = free_port()
        config = state / "sshd_config"
        config.write_text(
            render_sshd_config(
                port=port,
                state_dir=state,
                host_key=state / "ssh_host_ed25519_key",
                authorized_keys=state / "authorized_keys",
                user=user.pw_name,
                max_startups=self.max_startups,
            )
        )
        for p in [state, *state.iterdir()]:
            os.chown(p, user.pw_uid, user.pw_gid)
        for p in state.iterdir():
            p.chmod(0o600)
        log_path = state / "sshd.log"
        log_fh = log_path.open("wb")
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
        log_fh.close()
        self.client = ClientKeys(
            user=user.pw_name,
            port=port,
            identity=client_dir / "id_ed25519",
            known_hosts=client_dir / "known_hosts",
            dir=client_dir,
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
        if self.state_dir is None:
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
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for d in (self.state_dir, self._client_dir):
            if d is not None:
                shutil.rmtree(d, ignore_errors=True)
