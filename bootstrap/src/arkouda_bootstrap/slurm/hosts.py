"""The host list of a Slurm job: its allocation's nodes, the batch host first, and the task layout per node.

Inside `sbatch`/`salloc` Slurm describes the allocation in the environment: `SLURM_JOB_NODELIST` (a compressed
hostlist such as `node[01-03,07],gpu5`), `SLURM_TASKS_PER_NODE` (`2(x3),1`: two tasks on each of the first three
nodes, one on the fourth, in the nodelist's order) and `SLURMD_NODENAME` (the node this batch script runs on).

Expansion: Slurm's own, `scontrol show hostnames`, which every node of a Slurm cluster has (slurm-client) and can
run inside a job (slurmd gives the job its SLURM_CONF, also in configless mode). It keeps the list's order and its
duplicates; a list it refuses is refused here in one line. There is deliberately no pure-Python fallback: the
maintained Python expander (python-hostlist) is GPL-2.0-or-later, and where scontrol is missing Slurm is too.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import shutil
import socket
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from arkouda_bootstrap.errors import BootstrapError, UsageError

log = logging.getLogger(__name__)

NODELIST_VARS = ("SLURM_JOB_NODELIST", "SLURM_NODELIST")
TASKS_VAR = "SLURM_TASKS_PER_NODE"
NODENAME_VAR = "SLURMD_NODENAME"
SCONTROL_TIMEOUT_SECONDS = 30.0


class NodelistError(UsageError):
    """A nodelist (or task layout) that cannot be expanded; the message names the variable and the text. A bad
    environment value like a bad flag: exit 2."""


@dataclass(frozen=True)
class Allocation:
    """The job's hosts, batch host first, each with its task count (1 where Slurm gave none)."""

    hosts: tuple[str, ...]
    tasks: tuple[int, ...]
    expanded_by: str  # the expander, for the log (Slurm's scontrol)


def expand_nodelist(text: str, *, scontrol: str | None = None) -> list[str]:
    """The hosts of a Slurm hostlist in Slurm's order, expanded by Slurm's `scontrol show hostnames`. `scontrol`
    None: look it up on PATH."""
    if not text.strip():
        raise NodelistError("the nodelist is empty")
    found = shutil.which("scontrol") if scontrol is None else scontrol
    if not found:
        raise BootstrapError(
            "scontrol is not on PATH: the Slurm path expands the nodelist with Slurm's own `scontrol show hostnames` "
            "(install Slurm's client commands, e.g. Debian's slurm-client, or put them on PATH)"
        )
    try:
        result = subprocess.run(
            [found, "show", "hostnames", text],
            capture_output=True,
            text=True,
            check=False,
            timeout=SCONTROL_TIMEOUT_SECONDS,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BootstrapError(f"scontrol show hostnames did not run: {exc}") from None
    # scontrol exits 0 even for a list it refuses, and says so
    said = (result.stderr + result.stdout).strip().splitlines()
    refused = [line for line in said if line.startswith("Invalid hostlist")]
    if refused:
        raise NodelistError(f"{text!r} is not a Slurm hostlist (scontrol: {refused[-1]})")
    if result.returncode != 0:
        why = said[-1] if said else f"exit {result.returncode}"
        raise BootstrapError(
            f"scontrol show hostnames failed ({why}): it needs this cluster's slurm.conf (SLURM_CONF, set by Slurm "
            "inside a job) or a configless controller"
        )
    hosts = result.stdout.split()
    if not hosts:
        raise NodelistError(f"{text!r} names no host")
    # Slurm turns an unclosed bracket into a name with a bracket in it (`n[1-2` gives `n]`): no node is called that
    if any("[" in h or "]" in h for h in hosts):
        raise NodelistError(f"{text!r} is not a Slurm hostlist: unbalanced brackets")
    return hosts


_TASKS_ITEM = re.compile(r"(\d+)(?:\(x(\d+)\))?")


def parse_tasks_per_node(text: str) -> list[int]:
    """`SLURM_TASKS_PER_NODE` (`2(x3),1`: a count, optionally repeated for that many nodes) as one count per node."""
    counts: list[int] = []
    for item in text.strip().split(","):
        m = _TASKS_ITEM.fullmatch(item.strip())
        if m is None or int(m.group(2) or 1) < 1:
            raise NodelistError(f"{TASKS_VAR}={text!r}: {item!r} is not N or N(xM) (expected e.g. 2(x3),1)")
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    if any(n < 1 for n in counts):
        raise NodelistError(f"{TASKS_VAR}={text!r}: every node needs at least one task")
    return counts


def batch_host(hosts: Sequence[str], *, environ: Mapping[str, str], hostname: Callable[[], str]) -> str:
    """This node's name as it appears in the nodelist: SLURMD_NODENAME (Slurm's name for it), else the host name
    (also without its domain, as Slurm's node names usually are)."""
    named = environ.get(NODENAME_VAR, "").strip()
    candidates = [named] if named else []
    own = hostname().strip()
    candidates += [own, own.split(".", 1)[0]]
    for candidate in candidates:
        if candidate and candidate in hosts:
            return candidate
    shown = " ".join(hosts[:8]) + (" …" if len(hosts) > 8 else "")
    source = f"{NODENAME_VAR}={named}" if named else f"host name {own}"
    raise BootstrapError(
        f"this node ({source}) is not in the job's nodelist ({shown}): run the bootstrap in the batch script "
        "of the allocation, on one of its nodes"
    )


def read_allocation(
    environ: Mapping[str, str],
    *,
    scontrol: str | None = None,
    hostname: Callable[[], str] = socket.gethostname,
) -> Allocation:
    """The allocation from a Slurm job's environment, the batch host moved to the front (it runs locale 0)."""
    var = next((v for v in NODELIST_VARS if environ.get(v, "").strip()), None)
    if var is None:
        raise UsageError(
            "--hosts-from slurm: SLURM_JOB_NODELIST is not set: run the bootstrap inside a Slurm job "
            "(an sbatch script or salloc)"
        )
    text = environ[var]
    try:
        nodes = expand_nodelist(text, scontrol=scontrol)
    except NodelistError as exc:
        raise NodelistError(f"{var}: {exc}") from None
    if len(set(nodes)) != len(nodes):
        raise NodelistError(f"{var}={text!r} names a node more than once: one locale runs per node")
    tasks_text = environ.get(TASKS_VAR, "").strip()
    tasks = parse_tasks_per_node(tasks_text) if tasks_text else [1] * len(nodes)
    if len(tasks) != len(nodes):
        raise NodelistError(f"{TASKS_VAR}={tasks_text!r} describes {len(tasks)} nodes, {var} has {len(nodes)}")
    first = batch_host(nodes, environ=environ, hostname=hostname)
    i = nodes.index(first)
    order = [i, *(j for j in range(len(nodes)) if j != i)]
    return Allocation(
        hosts=tuple(nodes[j] for j in order), tasks=tuple(tasks[j] for j in order), expanded_by="scontrol"
    )


def _ipv4(name: str) -> str:
    try:
        infos = socket.getaddrinfo(name, None, family=socket.AF_INET, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise BootstrapError(
            f"cannot resolve {name} to an IPv4 address: {exc}; set --host-ip (ARKOUDA_HOST_IP)"
        ) from None
    return str(infos[0][4][0])


def own_address(batch: str, others: Sequence[str]) -> str:
    """The IPv4 address the other nodes reach the batch host by (GASNET_MASTERIP, the registered EndpointSlice).

    The batch host's name resolved here, unless that is a loopback address (Debian maps the host's own name to
    127.0.1.1): then the source address of the route to another node of the job, which a UDP connect finds
    without sending anything."""
    address = _ipv4(batch)
    if not ipaddress.ip_address(address).is_loopback or not others:
        return address
    peer = _ipv4(others[0])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((peer, 9))  # no datagram is sent: connect only chooses the route
        except OSError:
            return address
        routed = str(probe.getsockname()[0])
    log.info(
        "%s resolves to %s (loopback); using %s, the address of the route to %s", batch, address, routed, others[0]
    )
    return routed


def environment_summary(environ: Mapping[str, str]) -> str:
    """The Slurm variables that decided the host list, for one log line."""
    names = (*NODELIST_VARS, TASKS_VAR, NODENAME_VAR, "SLURM_JOB_ID")
    return " ".join(f"{n}={environ[n]}" for n in names if environ.get(n))
