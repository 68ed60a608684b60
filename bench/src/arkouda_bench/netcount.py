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
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from arkouda_bench.cluster import _run
from arkouda_bench.sshd import BenchSetupError

ARP_CACHE_STAT = Path("/proc/net/stat/arp_cache")
EXEC_THREADS = 8


@dataclass(frozen=True)
class Drops:
    """One pod's counters of datagrams its kernel dropped (cumulative since the pod's network began)."""

    sndbuf_errors: int = 0  # Udp: SndbufErrors
    out_discards: int = 0  # Ip: OutDiscards
    rcvbuf_errors: int = 0  # Udp: RcvbufErrors
    in_errors: int = 0  # Udp: InErrors

    @property
    def sender(self) -> int:
        """Datagrams dropped before they left the pod. A UDP send that fails with ENOBUFS counts in both
        SndbufErrors and OutDiscards, so the larger of the two, not their sum."""
        return max(self.sndbuf_errors, self.out_discards)

    @property
    def receiver(self) -> int:
        # InErrors includes RcvbufErrors (udp_queue_rcv_skb counts a full buffer in both)
        return max(self.in_errors, self.rcvbuf_errors)

    def __sub__(self, other: Drops) -> Drops:
        return Drops(
            sndbuf_errors=self.sndbuf_errors - other.sndbuf_errors,
            out_discards=self.out_discards - other.out_discards,
            rcvbuf_errors=self.rcvbuf_errors - other.rcvbuf_errors,
            in_errors=self.in_errors - other.in_errors,
        )


def _table(text: str, prefix: str) -> dict[str, int]:
    """The `Prefix: names` / `Prefix: values` pair of /proc/net/snmp as a dict."""
    rows = [line.split()[1:] for line in text.splitlines() if line.startswith(prefix + ":")]
    if len(rows) < 2:
        raise BenchSetupError(f"no {prefix} table in /proc/net/snmp: {text.strip()[:120]!r}")
    return {name: int(value) for name, value in zip(rows[0], rows[1], strict=False)}


def parse_snmp(text: str) -> Drops:
    udp = _table(text, "Udp")
    ip = _table(text, "Ip")
    return Drops(
        sndbuf_errors=udp.get("SndbufErrors", 0),
        out_discards=ip.get("OutDiscards", 0),
        rcvbuf_errors=udp.get("RcvbufErrors", 0),
        in_errors=udp.get("InErrors", 0),
    )


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
        delta = now - before.get(uid, Drops())
        total = Drops(
            sndbuf_errors=total.sndbuf_errors + delta.sndbuf_errors,
            out_discards=total.out_discards + delta.out_discards,
            rcvbuf_errors=total.rcvbuf_errors + delta.rcvbuf_errors,
            in_errors=total.in_errors + delta.in_errors,
        )
        pods += delta.sender + delta.receiver > 0
    return total, pods


def describe(drops: Iterable[tuple[Drops, int]]) -> str:
    """Per repeat `sender/receiver in k pods`, for a row's note."""
    return "; ".join(f"{d.sender}/{d.receiver} in {k} pods" for d, k in drops)
