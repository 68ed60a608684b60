"""Where a launch's datagrams die: the counters the launch rows read before and after each launch.

- In every pod of the release, its network namespace's `/proc/net/snmp` (UDP and IP counters are per
  network namespace): `Udp: SndbufErrors` and `Ip: OutDiscards` count datagrams the sending pod's kernel
  dropped before they left it (a send that failed with ENOBUFS, which GASNet's udp conduit takes as a loss and
  resends only after its timeout); `Udp: RcvbufErrors` and `InErrors` count datagrams the receiving pod
  dropped.
- On the host, the neighbour (ARP) table's `table_fulls` (`/proc/net/stat/arp_cache`, last column, one row per
  CPU, hex): how often a new neighbour entry was refused because the table was at gc_thresh3. The table is one
  per kernel; every node of the local cluster shares this host's, so this is the cluster's count.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from arkouda_bench.cluster import _run
from arkouda_bench.sshd import BenchSetupError
from arkouda_bootstrap import netdrops

ARP_CACHE_STAT = Path("/proc/net/stat/arp_cache")
EXEC_THREADS = 8


# One pod's counters of dropped datagrams: the product's own reading (the server's launch network check), so
# the bench counts exactly what the server reports.
Drops = netdrops.Counters


def parse_snmp(text: str) -> Drops:
    try:
        return netdrops.parse_snmp(text)
    except netdrops.CountersError as exc:
        raise BenchSetupError(str(exc)) from None


def parse_table_fulls(text: str) -> int:
    """Sum of the last column (table_fulls, hex) over the per-CPU rows of /proc/net/stat/arp_cache."""
    lines = text.split("\n")
    header = lines[0].split()
    if not header or header[-1] != "table_fulls":
        raise BenchSetupError(f"unexpected /proc/net/stat/arp_cache header: {lines[0]!r}")
    return sum(int(line.split()[-1], 16) for line in lines[1:] if line.strip())


def table_fulls(path: Path = ARP_CACHE_STAT) -> int:
    return parse_table_fulls(path.read_text(encoding="ascii"))


def read_pods(kubeconfig: Path, ns: str, pods: Mapping[str, tuple[str, str]]) -> dict[str, Drops]:
    """Each pod's counters, read in its first container (`kubectl exec`, in parallel). `pods`: uid → (name,
    container); the result is keyed by uid, so a replaced pod is never compared with its predecessor."""

    def one(item: tuple[str, tuple[str, str]]) -> tuple[str, Drops]:
        uid, (name, container) = item
        out = _run(
            ["kubectl", "--kubeconfig", str(kubeconfig), "-n", ns, "exec", name, "-c", container, "--",
             "cat", "/proc/net/snmp"],
            timeout=60,
        )  # fmt: skip
        return uid, parse_snmp(out)

    with ThreadPoolExecutor(max_workers=EXEC_THREADS) as pool:
        try:
            return dict(pool.map(one, pods.items()))
        except subprocess.TimeoutExpired as exc:
            raise BenchSetupError(f"reading a pod's /proc/net/snmp timed out: {exc}") from None


def launch_drops(before: Mapping[str, Drops], after: Mapping[str, Drops]) -> tuple[Drops, int]:
    """What the pods dropped between two readings (a pod new since `before` counts from zero), and in how many
    pods anything was dropped."""
    total = Drops()
    pods = 0
    for uid, now in after.items():
        delta = now.minus(before.get(uid, Drops()))
        total = Drops(**{f: getattr(total, f) + getattr(delta, f) for f in netdrops.FIELDS})
        pods += delta.dropped > 0
    return total, pods
