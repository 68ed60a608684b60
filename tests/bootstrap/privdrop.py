"""Run a Python callable in a forked child as another (non-root) uid, the way the bootstrap runs in a pod.

The tests run as root (CI does), but sshd must run unprivileged like in the pods. The venv lives under /root
(mode 0700), so a fresh interpreter as the test user could not even start; a forked child keeps the already
imported modules instead. Everything the child needs is imported up front by `preimport()`.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path

PREIMPORT = (
    "arkouda_bootstrap.cli.main",
    "arkouda_bootstrap.config",
    "arkouda_bootstrap.server.discovery",
    "arkouda_bootstrap.kube.events",
    "arkouda_bootstrap.ssh.identity",
    "arkouda_bootstrap.keygen",
    "arkouda_bootstrap.ssh.keys",
    "arkouda_bootstrap.kube.api",
    "arkouda_bootstrap.server.launch",
    "arkouda_bootstrap.locale",
    "arkouda_bootstrap.kube.podwatch",
    "arkouda_bootstrap.ssh.secretwatch",
    "arkouda_bootstrap.server.main",
    "arkouda_bootstrap.ssh.client",
    "arkouda_bootstrap.ssh.sshd",
    "arkouda_bootstrap.server.supervise",
    "concurrent.futures.thread",
    "encodings.idna",
    "encodings.ascii",
    "stringprep",
    "unicodedata",
    "arkouda_bootstrap.ssh.probe",
    "paramiko",
    "tenacity",
    "cryptography.hazmat.primitives.serialization",
)


def preimport() -> None:
    for name in PREIMPORT:
        importlib.import_module(name)


def spawn_as(*, uid: int, gid: int, env: Mapping[str, str], log_path: Path, fn: Callable[[], int]) -> int:
    """Fork; in the child drop to uid/gid (no supplementary groups), replace the environment, send stdout and
    stderr to `log_path`, run `fn` and exit with its result (or exec, if fn execs). Returns the child's pid."""
    preimport()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid != 0:
        return pid
    code = 99
    try:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        os.environ.clear()
        os.environ.update(env)
        os.chdir("/")
        code = fn()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # the child must never return into pytest
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def wait_exit(pid: int) -> int:
    """Wait for a spawn_as child; its exit status (128+N when killed by signal N)."""
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
