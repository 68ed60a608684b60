"""The SSH spawn command line, built as GASNet's AMUDP_SPMDSshSpawn builds it, and the processes it starts.

For worker i on host H, AMUDP runs (through ``/bin/sh -c``)::

    <SSH_CMD> -o 'StrictHostKeyChecking no' -o 'FallBackToRsh no' <SSH_OPTIONS> H \
        "cd <SSH_REMOTE_PATH> ; env 'VAR=value'… '<argv0>' '<arg>'… " < /dev/null || kill <pid>

The two ``-o`` options are added only when ``<SSH_CMD> -V`` says OpenSSH. ssh keeps the FIRST value it sees
for an option, so ``StrictHostKeyChecking no`` from the spawner beats the same option in SSH_OPTIONS or in a
``-F`` config file: host-key pinning needs an SSH_CMD wrapper that puts its own options first. The stand-in
reproduces this faithfully so the e2e suite sees what the real launcher would do.

Differences from AMUDP, on purpose: the locale id and the launcher's address travel in the ``env`` part
(AMUDP hands out ranks over its bootstrap connection), the ``echo connected to …`` prefix is left out, and
instead of ``|| kill <pid>`` the launcher watches each ssh process itself.
"""

from __future__ import annotations

import logging
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

_LOCAL_SPECIALS = '$`\\"'


def quote_for_remote(arg: str) -> str:
    """Single-quote for the remote shell (AMUDP quote_for_remote)."""
    return "'" + arg.replace("'", "'\\''") + "'"


def quote_for_local(arg: str) -> str:
    """quote_for_remote, then protect $ ` \\ " for the local shell's double quotes (AMUDP quote_for_local)."""
    tmp = quote_for_remote(arg)
    out: list[str] = []
    for i, ch in enumerate(tmp):
        if ch in _LOCAL_SPECIALS:
            out.append("\\")
            nxt = tmp[i + 1] if i + 1 < len(tmp) else ""
            if ch != "\\" or nxt in _LOCAL_SPECIALS:
                out.append(ch)
        else:
            out.append(ch)
    return "".join(out)


def is_openssh(ssh_cmd: str) -> bool:
    """AMUDP's test: does ``<ssh_cmd> -V`` print OpenSSH?"""
    proc = subprocess.run(
        ["/bin/sh", "-c", f"{ssh_cmd} -V 2>&1 | grep OpenSSH"],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    return bool(proc.stdout.strip())


def build_command(
    *,
    ssh_cmd: str,
    openssh: bool,
    ssh_options: str,
    host: str,
    remote_path: str,
    extra_env: dict[str, str],
    argv: list[str],
) -> str:
    """The ``/bin/sh -c`` command line for one worker."""
    cmd1 = ""
    if extra_env:
        cmd1 += "env " + "".join(f"'{k}={v}' " for k, v in extra_env.items())
    cmd1 += "".join(quote_for_local(a) + " " for a in argv)
    spawner_opts = "-o 'StrictHostKeyChecking no' -o 'FallBackToRsh no' " if openssh else ""
    return f'{ssh_cmd} {spawner_opts}{ssh_options} {host} "cd {quote_for_local(remote_path)} ; {cmd1}"  < /dev/null'


@dataclass
class Worker:
    locale: int
    host: str
    command: str
    proc: subprocess.Popen[str]
    output: list[str]


def start(locale: int, host: str, command: str, *, emit: Callable[[str], None]) -> Worker:
    """Run one spawn command; its output is relayed line by line with a ``[locale i host]`` prefix."""
    proc = subprocess.Popen(
        ["/bin/sh", "-c", command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    worker = Worker(locale=locale, host=host, command=command, proc=proc, output=[])

    def relay() -> None:
        assert proc.stdout is not None  # noqa: S101 - set by PIPE above
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            worker.output.append(line)
            emit(f"[locale {locale} {host}] {line}")

    threading.Thread(target=relay, name=f"relay-{locale}", daemon=True).start()
    return worker
