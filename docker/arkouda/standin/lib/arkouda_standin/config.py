"""Command line and environment of the stand-in launcher, parsed the way Chapel's launcher and AMUDP do.

Chapel's launcher takes ``-nl N`` / ``--numLocales=N`` / ``--numLocales N``; everything else is passed on
to the program (Arkouda reads ``--ServerPort`` and friends as Chapel config constants, ``--name=value`` or
``--name value``). AMUDP's SSH spawner reads its settings with ``AMUDP_getenv_prefixed_withdefault``: the
name with the ``GASNET_`` prefix, then ``AMUDP_``, then bare (see /work/shared/reference/launch-facts.md and
GASNet's other/amudp/amudp_spawn.cpp).
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass, field

# AMUDP's SSH_SERVERS_DELIM_CHARS: any of these separates hosts (so IPv6 literals cannot be listed).
SERVER_DELIMITERS = " ,/;:"
ENV_PREFIXES = ("GASNET_", "AMUDP_", "")
DEFAULT_SERVER_PORT = 5555


class UsageError(Exception):
    """A command-line or environment mistake; the message names what to fix."""


@dataclass(frozen=True)
class LaunchArgs:
    num_locales: int
    server_port: int
    program_args: list[str]
    authenticate: bool = False


@dataclass(frozen=True)
class SpawnEnv:
    spawnfn: str
    servers: list[str]
    ssh_cmd: str
    ssh_options: str
    remote_path: str
    master_ip: str
    master_ip_source: str
    selected: dict[str, str] = field(default_factory=dict)


def parse_args(argv: list[str]) -> LaunchArgs:
    """Parse the launcher's arguments (argv without the program name)."""
    num_locales: int | None = None
    server_port = DEFAULT_SERVER_PORT
    authenticate = False
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        value: str | None = None
        if arg in ("-nl", "--numLocales"):
            if i + 1 >= len(argv):
                raise UsageError(f"{arg} needs a value: -nl <number of locales>")
            value = argv[i + 1]
            i += 2
        elif arg.startswith("--numLocales="):
            value = arg.split("=", 1)[1]
            i += 1
        else:
            if arg == "--ServerPort" and i + 1 < len(argv):
                server_port = _port(argv[i + 1])
            elif arg.startswith("--ServerPort="):
                server_port = _port(arg.split("=", 1)[1])
            elif arg in {"--authenticate", "--authenticate=true"}:
                authenticate = True
            rest.append(arg)
            i += 1
            continue
        if not re.fullmatch(r"[0-9]+", value) or int(value) < 1:
            raise UsageError(f"number of locales must be a positive integer, got {value!r} (-nl N)")
        num_locales = int(value)
    if num_locales is None:
        raise UsageError("Specify number of locales via -nl <#> or --numLocales=<#> on the command line")
    return LaunchArgs(num_locales=num_locales, server_port=server_port, program_args=rest, authenticate=authenticate)


def _port(value: str) -> int:
    if not re.fullmatch(r"[0-9]+", value) or not 0 < int(value) < 65536:
        raise UsageError(f"--ServerPort must be a TCP port number, got {value!r}")
    return int(value)


def getenv_prefixed(env: dict[str, str], name: str, default: str) -> str:
    """AMUDP_getenv_prefixed_withdefault: GASNET_<name>, AMUDP_<name>, <name>, else the default."""
    for prefix in ENV_PREFIXES:
        value = env.get(prefix + name)
        if value is not None:
            return value
    return default


def split_servers(value: str) -> list[str]:
    return [s for s in re.split(f"[{re.escape(SERVER_DELIMITERS)}]+", value) if s]


SELECTED_PREFIXES = ("CHPL_", "GASNET_", "AMUDP_", "SSH_", "ARKOUDA_", "OMP_")
SELECTED_NAMES = ("HOME", "USER", "LOGNAME", "PATH", "SHELL", "PWD", "HOSTNAME", "LD_PRELOAD", "NSS_WRAPPER_PASSWD")
SECRET_HINTS = ("TOKEN", "SECRET", "PASSWORD", "PRIVATE")


def select_env(env: dict[str, str]) -> dict[str, str]:
    """The variables a launch report shows; values of secret-looking names are redacted."""
    out: dict[str, str] = {}
    for key in sorted(env):
        if key.startswith(SELECTED_PREFIXES) or key in SELECTED_NAMES:
            out[key] = "<redacted>" if any(h in key.upper() for h in SECRET_HINTS) else env[key]
    return out


def parse_env(env: dict[str, str], *, num_locales: int, cwd: str) -> SpawnEnv:
    """The SSH spawner's settings; raises UsageError naming the variable to fix."""
    spawnfn = env.get("GASNET_SPAWNFN", "S").upper() or "S"
    if spawnfn != "S":
        raise UsageError(f"GASNET_SPAWNFN={spawnfn!r}: the stand-in implements only the ssh spawner 'S'")
    raw_servers = getenv_prefixed(env, "SSH_SERVERS", "")
    servers = split_servers(raw_servers)
    if not servers:
        raise UsageError("Environment variable SSH_SERVERS is missing (set GASNET_SSH_SERVERS to the locale hosts)")
    if len(servers) < num_locales:
        raise UsageError(
            f"Not enough machines in environment variable SSH_SERVERS to satisfy request for ({num_locales}). "
            f"Only ({len(servers)}) machines available: {raw_servers}"
        )
    master_ip_source = "GASNET_MASTERIP"
    master_ip = env.get("GASNET_MASTERIP", "")
    if not master_ip and env.get("CHPL_RT_MASTERIP"):
        master_ip, master_ip_source = env["CHPL_RT_MASTERIP"], "CHPL_RT_MASTERIP"
    if not master_ip:
        # GASNet's default: the master's hostname, resolved on the workers (unreliable in pods).
        master_ip, master_ip_source = socket.gethostname(), "hostname (GASNET_MASTERIP unset)"
    return SpawnEnv(
        spawnfn=spawnfn,
        servers=servers,
        ssh_cmd=getenv_prefixed(env, "SSH_CMD", "ssh"),
        ssh_options=getenv_prefixed(env, "SSH_OPTIONS", ""),
        remote_path=getenv_prefixed(env, "SSH_REMOTE_PATH", cwd),
        master_ip=master_ip,
        master_ip_source=master_ip_source,
        selected=select_env(env),
    )
