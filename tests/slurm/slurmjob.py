"""A real Slurm for the tests: brought up by hack/slurm/up.sh (and the job runtime by hack/slurm/runtime.sh),
taken down again by hack/slurm/down.sh when the session started it; and one Arkouda job on it: the documented
batch script docs/slurm/arkouda.sbatch submitted as an unprivileged user, whose ssh logins go to a real sshd on a
loopback port (the bootstrap tests' `arkouda-bootstrap locale` helper, run as that user) pinned by host key.

Used by tests/slurm and tests/e2e/test_slurm_registration.py. The bootstrap tests' helpers are loaded from
tests/bootstrap/conftest.py under another module name (both suites have a conftest of their own)."""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import logging
import os
import pwd
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
HACK = REPO / "hack" / "slurm"
BATCH_SCRIPT = REPO / "docs" / "slurm" / "arkouda.sbatch"
BOOTSTRAP_TESTS = REPO / "tests" / "bootstrap"
PUBLIC_DIR = Path(os.environ.get("SLURM_PUBLIC_DIR", "/run/arkouda-k8s-slurm"))
RUNTIME = PUBLIC_DIR / "runtime"
LOCK = Path("/run/lock/arkouda-k8s-slurm.lock")

log = logging.getLogger(__name__)


def _load_bootstrap_helpers() -> ModuleType:
    sys.path.insert(0, str(BOOTSTRAP_TESTS))  # privdrop and friends, imported by that conftest
    spec = importlib.util.spec_from_file_location("bootstrap_test_helpers", BOOTSTRAP_TESTS / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


helpers = _load_bootstrap_helpers()
# fixtures of the bootstrap tests, re-exported for the Slurm test modules (a module that imports them has them)
test_user = helpers.test_user
shared_dir = helpers.shared_dir


def run(
    argv: list[str], *, timeout: float = 120, user: pwd.struct_passwd | None = None, env: dict[str, str] | None = None
) -> str:
    """Run a command (as `user` when given); its stdout. A failure raises with the command's own words."""
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
        user=None if user is None else user.pw_uid,
        group=None if user is None else user.pw_gid,
        extra_groups=None if user is None else [],
    )
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {done.returncode}: {(done.stderr or done.stdout).strip()}")
    return done.stdout


@dataclass
class SlurmSite:
    """The running Slurm: its slurm.conf and its nodes (slurmd on this host, named by their loopback addresses)."""

    conf: Path
    nodes: list[str]

    def env(self, **extra: str) -> dict[str, str]:
        return {"PATH": "/usr/sbin:/usr/bin:/bin", "SLURM_CONF": str(self.conf), **extra}

    def job_state(self, job_id: str) -> str:
        """The job's state as the controller reports it (squeue first, scontrol once it left the queue)."""
        out = run(["scontrol", "-o", "show", "job", job_id], env=self.env())
        m = re.search(r"\bJobState=(\S+)", out)
        return m.group(1) if m else "UNKNOWN"


@contextlib.contextmanager
def slurm_site() -> Iterator[SlurmSite]:
    """Slurm up (exclusively for this session: one test session at a time uses the machine's one Slurm), the job
    runtime extracted, and afterwards down again — unless it was already running, which it is left as found."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        was_up = (PUBLIC_DIR / "slurm.conf").exists()
        t0 = time.monotonic()
        try:
            for script in ("up.sh", "runtime.sh"):
                done = subprocess.run([str(HACK / script)], capture_output=True, text=True, timeout=600, check=False)
                log.info("%s:\n%s%s", script, done.stdout, done.stderr)
                if done.returncode != 0:
                    raise AssertionError(f"hack/slurm/{script} failed: {done.stderr.strip().splitlines()[-1:]}")
            log.info("slurm and its job runtime ready in %.1fs", time.monotonic() - t0)
            conf = PUBLIC_DIR / "slurm.conf"
            nodes = run(["sinfo", "-h", "-N", "-o", "%N"], env={"PATH": "/usr/bin:/bin", "SLURM_CONF": str(conf)})
            yield SlurmSite(conf=conf, nodes=sorted(set(nodes.split())))
        finally:
            if not was_up:
                done = subprocess.run([str(HACK / "down.sh")], capture_output=True, text=True, timeout=300, check=False)
                log.info("down.sh:\n%s%s", done.stdout, done.stderr)


@dataclass
class ArkoudaJob:
    """One run of docs/slurm/arkouda.sbatch as `user`, and what it needs: the user's ssh directory (the client key
    the sshd accepts, a known_hosts pinning the node at the sshd's port), a working directory, the job's output."""

    site: SlurmSite
    user: pwd.struct_passwd
    base: Path
    ssh_port: int
    server_port: int
    env_extra: dict[str, str] = field(default_factory=dict)
    job_id: str = ""

    @property
    def output(self) -> Path:
        return self.base / "job" / "arkouda.out"

    def text(self) -> str:
        return self.output.read_text() if self.output.exists() else ""

    def submit(self, *, nodes: int, tasks: int) -> str:
        env = self.site.env(
            PATH=f"{RUNTIME}/bin:/usr/bin:/bin",
            HOME="/nonexistent",
            TMPDIR=str(self.base / "job"),
            ARKOUDA_HOME=str(RUNTIME / "arkouda" / "bin"),
            ARKOUDA_PORT=str(self.server_port),
            ARKOUDA_WORK_DIR=str(self.base / "work"),
            ARKOUDA_USER_SSH_DIR=str(self.base / "ssh"),
            ARKOUDA_SSH_KNOWN_HOSTS=str(self.base / "ssh" / "known_hosts"),
            ARKOUDA_SSH_PORT=str(self.ssh_port),
            ARKOUDA_STANDIN_SERVER=str(RUNTIME / "arkouda" / "bin" / "arkouda_standin_server"),
            **self.env_extra,
        )
        # the documented script asks for 4 nodes with one task each
        argv = [
            "sbatch",
            "--parsable",
            f"--nodes={nodes}",
            f"--ntasks-per-node={tasks}",
            "--time=10",
            f"--output={self.output}",
            f"--chdir={self.base / 'job'}",
            str(BATCH_SCRIPT),
        ]
        self.job_id = run(argv, user=self.user, env=env).strip().split(";")[0]
        log.info("submitted job %s as %s: %s", self.job_id, self.user.pw_name, " ".join(argv))
        return self.job_id

    def wait_output(self, pattern: str, *, timeout: float = 90) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.text(), re.MULTILINE)
            if m:
                return m
            state = self.site.job_state(self.job_id)
            if state not in ("PENDING", "RUNNING", "CONFIGURING"):
                raise AssertionError(f"job {self.job_id} is {state} without /{pattern}/ in its output:\n{self.text()}")
            time.sleep(0.5)
        raise AssertionError(f"no /{pattern}/ in job {self.job_id}'s output after {timeout}s:\n{self.text()}")

    def wait_finished(self, *, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.site.job_state(self.job_id)
            if state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
                return state
            time.sleep(0.5)
        raise AssertionError(f"job {self.job_id} still {state} after {timeout}s:\n{self.text()}")

    def scancel(self) -> None:
        run(["scancel", self.job_id], user=self.user, env=self.site.env())

    def client(self, *, host: str = "127.0.0.1", expect_locales: int) -> str:
        """The stand-in's replay of ak.connect() (pyzmq: connect, getconfig, getRegistrationConfig), run with the
        runtime's Python; its output ends with numLocales=<N>."""
        argv = [
            str(RUNTIME / "venv" / "bin" / "python3"),
            "-m",
            "arkouda_standin.client",
            "--host",
            host,
            "--port",
            str(self.server_port),
            "--expect-locales",
            str(expect_locales),
            "--timeout",
            "20",
        ]
        return run(argv, env={"PYTHONPATH": str(RUNTIME / "arkouda" / "lib"), "PATH": "/usr/bin:/bin"})


def user_processes(uid: int, *, keep: Callable[[str], bool]) -> list[str]:
    """Command lines of the processes uid runs, except those `keep` accepts."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if proc.stat().st_uid != uid:
                continue
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            if cmd and not keep(cmd):
                found.append(f"{proc.name}: {cmd}")
    return found


@contextlib.contextmanager
def arkouda_job(
    site: SlurmSite, *, user: pwd.struct_passwd, base: Path, env_extra: dict[str, str] | None = None
) -> Iterator[ArkoudaJob]:
    """The user's ssh directory and a real sshd for the node (as `user`, on a free loopback port), work and job
    directories; the job is cancelled if the test leaves it running, and the sshd stopped. One sshd listening on
    all addresses answers for every node (they are all loopback addresses of this host)."""
    from arkouda_bootstrap.ssh import keys

    secret = keys.build_secret_data(release="slurm", with_token=False)
    secret_dir = helpers.write_secret_dir(base / "secret", secret)
    ssh_port: int = helpers.free_port()
    sshd = helpers.start_locale(
        uid=user.pw_uid, gid=user.pw_gid, secret_dir=secret_dir, state_dir=base / "sshd-state", port=ssh_port
    )
    try:
        ssh_dir = base / "ssh"
        ssh_dir.mkdir(mode=0o700)
        (ssh_dir / "id_ed25519").write_bytes(secret[keys.CLIENT_KEY])
        host_key = " ".join(secret[keys.HOST_PUB].decode().split()[:2])
        # the site's known_hosts: every node by its Slurm name at the sshd's port, nothing trusted on first use
        names = ",".join(f"[{node}]:{ssh_port}" for node in site.nodes)
        (ssh_dir / "known_hosts").write_text(f"{names} {host_key}\n")
        for d in ("work", "job"):
            (base / d).mkdir()
        for p in (ssh_dir, *ssh_dir.iterdir(), base / "work", base / "job"):
            os.chown(p, user.pw_uid, user.pw_gid)
        (ssh_dir / "id_ed25519").chmod(0o600)
        job = ArkoudaJob(
            site=site,
            user=user,
            base=base,
            ssh_port=ssh_port,
            server_port=helpers.free_port(),
            env_extra=env_extra or {},
        )
        try:
            yield job
        finally:
            if job.job_id and job.site.job_state(job.job_id) in ("PENDING", "RUNNING", "CONFIGURING"):
                run(["scancel", job.job_id], env=site.env())
                job.wait_finished()
            log.info("job %s output:\n%s", job.job_id, job.text())
            if job.job_id:
                # the script's node-local copy of the binaries (a site with job_container/tmpfs drops it with the
                # job); job ids start again at 1 on a new Slurm, so another run's copy would be in the way
                shutil.rmtree(f"/tmp/arkouda-{job.job_id}", ignore_errors=True)
    finally:
        sshd.stop()
