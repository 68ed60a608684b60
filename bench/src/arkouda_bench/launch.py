"""The real launcher on the local node: GASNet-EX's `amudprun` from its start to every locale past the GASNet
barrier, at N = 2, 8, 32 locales (one Arkouda-mode release per N, values/local.yaml), and the ssh client CPU
it spends per spawned host.

Each repeat is one launch in a fresh server pod (the first by `helm install --wait`, the next ones by deleting
the server pod; the locale pods stay Ready). Times:
- start: amudprun's process start, from /proc/<pid>/stat `starttime` in the server container (the bootstrap
  forks the Chapel-style launcher `arkouda_server`, which execs amudprun under the same pid), converted to
  wall time with the container's `date` and /proc/uptime read in the same exec (10 ms ticks);
- every locale's `joined the GASNet job` and `passed the GASNet barrier` line and the stand-in server's
  `server listening on` splash, from the server container's log with the container runtime's arrival
  timestamps (`kubectl logs --timestamps`). Node and containers share one clock.
CPU: after the barrier amudprun's ssh clients (one per host, behind /bin/sh wrappers) stay alive for the job's
lifetime; their own run time (/proc/<pid>/schedstat, ns) plus what they reaped before exec'ing ssh (cutime +
cstime of /proc/<pid>/stat, ticks), summed over amudprun's descendants and divided by N.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import re
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arkouda_bench import netcount
from arkouda_bench.cluster import Cluster, _run
from arkouda_bench.results import Row
from arkouda_bench.sshd import BenchSetupError

log = logging.getLogger(__name__)

GROUP = "launch (amudprun)"
RELEASE = "ak"
# USER_HZ: the unit of /proc/<pid>/stat times in Linux's userspace ABI (sysconf(_SC_CLK_TCK) is 100).
TICKS_PER_SECOND = 100
PHASES = ("all joined the GASNet job", "all past the GASNet barrier", "server listening")
NODE0 = "arkouda-node"
# Where the release's pods run: all on node 0 (they share its pod bridge: one neighbour entry per pair), or
# spread over the three nodes by the chart's preferred anti-affinity. On one node 63 locale pods at
# values/local.yaml's 50m would not fit its 2 CPUs, hence 20m there.
LAYOUTS: dict[str, tuple[str, ...]] = {
    "one node": (
        f"locale.nodeSelector.kubernetes\\.io/hostname={NODE0}",
        f"server.nodeSelector.kubernetes\\.io/hostname={NODE0}",
        "locale.resources.requests.cpu=20m",
    ),
    "three nodes": (),
}
# The neighbour table thresholds of a launch: the cluster's (hack/cluster/lib.sh CLUSTER_NEIGH_GC_THRESH) or
# Linux's defaults, the "before" of the fix (hack/cluster/neigh-table.sh sets them host-wide).
CLUSTER_TABLE, KERNEL_TABLE = "cluster", "kernel"
# Runs inside the server container (Debian: sh, date, cat): the wall clock and boot clock now, then every
# process's stat and schedstat. Parsed by parse_snapshot.
SNAPSHOT_SCRIPT = (
    'echo "now $(date +%s.%N)"; echo "uptime $(cat /proc/uptime)"; '
    "for d in /proc/[0-9]*; do s=$(cat $d/stat 2>/dev/null) || continue; "
    'echo "stat $s"; echo "schedstat ${d#/proc/} $(cat $d/schedstat 2>/dev/null)"; done'
)

_JOINED = re.compile(r"arkouda_server_real STAND-IN: locale (\d+) of (\d+) joined the GASNet job")
_BARRIER = re.compile(r"arkouda_server_real STAND-IN: locale (\d+) of (\d+) passed the GASNet barrier")
_LISTENING = re.compile(r"server listening on tcp://")
_WARNING = re.compile(r"\bWARNING\b")


def parse_timestamp(text: str) -> float:
    """RFC 3339 with nanoseconds (`2026-12-01T04:26:27.250775060Z`: kubelet log timestamps) → epoch s."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", text)
    if m is None:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    whole = dt.datetime.fromisoformat(m.group(1) + zone).timestamp()
    return whole + (float("0." + m.group(2)) if m.group(2) else 0.0)


@dataclass(frozen=True)
class LaunchLog:
    """What one launch printed, as arrival times (epoch s) of the lines that matter."""

    joined: dict[int, float]
    barrier: dict[int, float]
    listening: float | None
    warnings: tuple[str, ...]

    def complete(self, n: int) -> bool:
        return len(self.barrier) == n and len(self.joined) == n and self.listening is not None


def parse_launch_log(text: str, *, n: int, since: float) -> LaunchLog:
    """Lines of `kubectl logs --timestamps` at or after `since` (the launch's start: an earlier launch's lines
    are ignored); the first line per locale counts. A line naming another locale count than N is an error."""
    joined: dict[int, float] = {}
    barrier: dict[int, float] = {}
    listening: float | None = None
    warnings: list[str] = []
    for raw in text.splitlines():
        stamp, _, line = raw.partition(" ")
        try:
            t = parse_timestamp(stamp)
        except ValueError:
            continue
        if t < since:
            continue
        for pattern, seen in ((_JOINED, joined), (_BARRIER, barrier)):
            m = pattern.search(line)
            if m:
                if int(m.group(2)) != n:
                    raise BenchSetupError(
                        f"stand-in reports {m.group(2)} locales, expected {n}: {line.strip()}"
                    )
                seen.setdefault(int(m.group(1)), t)
        if listening is None and _LISTENING.search(line):
            listening = t
        if _WARNING.search(line):
            warnings.append(line.strip())
    return LaunchLog(joined=joined, barrier=barrier, listening=listening, warnings=tuple(warnings))


_EXITED = re.compile(r"arkouda_bootstrap\.server\.supervise: pid \d+ exited with status \d+")
_GASNET_ERROR = re.compile(
    r"\*\*\* (FATAL ERROR|Caught a fatal signal)|AMUDP .*(error|failed)|undeliverable", re.I
)


def launch_ended(text: str, *, since: float) -> str:
    """'' while the launch that started at `since` runs; once the server says its program exited, that line
    and the first GASNet error line before it (`kubectl logs --timestamps` text)."""
    first_error = ""
    for raw in text.splitlines():
        stamp, _, line = raw.partition(" ")
        try:
            if parse_timestamp(stamp) < since:
                continue
        except ValueError:
            continue
        if not first_error and _GASNET_ERROR.search(line):
            first_error = line.strip()
        if _EXITED.search(line):
            return "; ".join(x for x in (first_error, line.strip()) if x)[:400]
    return ""


@dataclass(frozen=True)
class Proc:
    pid: int
    comm: str
    ppid: int
    start_ticks: int
    own_ticks: int  # utime + stime
    reaped_ticks: int  # cutime + cstime
    runtime_ns: int | None  # /proc/<pid>/schedstat field 1, when the kernel has it

    @property
    def own_seconds(self) -> float:
        """Own CPU: the scheduler's ns run time when available (ticks lose the ms a short process spends)."""
        return self.runtime_ns / 1e9 if self.runtime_ns is not None else self.own_ticks / TICKS_PER_SECOND

    @property
    def reaped_seconds(self) -> float:
        return self.reaped_ticks / TICKS_PER_SECOND


def parse_stat(line: str) -> Proc:
    """One /proc/<pid>/stat line (comm may hold spaces and parentheses: split after its last ')')."""
    head, _, tail = line.rpartition(")")
    pid_text, _, comm = head.partition(" (")
    f = tail.split()
    # tail starts at field 3 (state): ppid is field 4, utime..cstime 14-17, starttime 22.
    return Proc(
        pid=int(pid_text), comm=comm, ppid=int(f[1]), start_ticks=int(f[19]),
        own_ticks=int(f[11]) + int(f[12]), reaped_ticks=int(f[13]) + int(f[14]), runtime_ns=None,
    )  # fmt: skip


@dataclass(frozen=True)
class Snapshot:
    now: float  # wall clock, epoch s
    uptime: float  # boot clock, s
    procs: dict[int, Proc]

    def wall(self, ticks: int) -> float:
        """A boot-clock time in ticks (a process's starttime) as wall time."""
        return self.now - (self.uptime - ticks / TICKS_PER_SECOND)

    def find(self, comm: str) -> Proc:
        hits = [p for p in self.procs.values() if p.comm == comm]
        if len(hits) != 1:
            raise BenchSetupError(f"expected one {comm} process in the server container, found {len(hits)}")
        return hits[0]

    def descendants(self, pid: int) -> list[Proc]:
        out: list[Proc] = []
        todo = [pid]
        while todo:
            parent = todo.pop()
            kids = [p for p in self.procs.values() if p.ppid == parent]
            out += kids
            todo += [k.pid for k in kids]
        return sorted(out, key=lambda p: p.pid)


def parse_snapshot(text: str) -> Snapshot:
    now: float | None = None
    uptime: float | None = None
    procs: dict[int, Proc] = {}
    runtimes: dict[int, int] = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "now":
            now = float(rest)
        elif kind == "uptime":
            uptime = float(rest.split()[0])
        elif kind == "stat" and rest.strip():
            p = parse_stat(rest)
            procs[p.pid] = p
        elif kind == "schedstat":
            fields = rest.split()
            if len(fields) >= 2:
                runtimes[int(fields[0])] = int(fields[1])
    if now is None or uptime is None:
        raise BenchSetupError(f"process snapshot without 'now'/'uptime' lines: {text.strip()[:200]!r}")
    procs = {pid: dataclasses.replace(p, runtime_ns=runtimes.get(pid)) for pid, p in procs.items()}
    return Snapshot(now=now, uptime=uptime, procs=procs)


@dataclass(frozen=True)
class ClientCpu:
    amudprun: tuple[int, int]  # pid, start ticks: the same process in two snapshots
    amudprun_start: float  # epoch s
    amudprun_own: float  # s
    amudprun_reaped: float  # s: what amudprun waited for (its `ssh -V` check)
    clients: float  # s: every descendant (wrappers + ssh), own + reaped
    clients_reaped: float  # s: the reaped part of `clients` (10 ms ticks)
    ssh_processes: int


def client_cpu(snap: Snapshot) -> ClientCpu:
    amudprun = snap.find("amudprun")
    kids = snap.descendants(amudprun.pid)
    return ClientCpu(
        amudprun=(amudprun.pid, amudprun.start_ticks),
        amudprun_start=snap.wall(amudprun.start_ticks),
        amudprun_own=amudprun.own_seconds,
        amudprun_reaped=amudprun.reaped_seconds,
        clients=sum(p.own_seconds + p.reaped_seconds for p in kids),
        clients_reaped=sum(p.reaped_seconds for p in kids),
        ssh_processes=sum(1 for p in kids if p.comm == "ssh"),
    )


def _server(release: str) -> str:
    return f"{release}-arkouda-server-0"


def _unschedulable(cl: Cluster, ns: str) -> str:
    """One line naming the pods the scheduler could not place (empty when none)."""
    stuck = []
    for pod in cl.core.list_namespaced_pod(ns).items:
        for c in pod.status.conditions or []:
            if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
                stuck.append((pod.metadata.name, c.message or ""))
    if not stuck:
        return ""
    return f"{len(stuck)} pod(s) unschedulable, e.g. {stuck[0][0]}: {stuck[0][1]}"


class NotRun(BenchSetupError):
    """The node cannot hold this N (scheduling, or the release not Ready in its deadline)."""


def install(cl: Cluster, ns: str, *, n: int, sets: Sequence[str]) -> None:
    timeout = 120 + 10 * n
    try:
        cl.helm(
            "install", RELEASE, str(cl.chart), "-n", ns, "-f", str(cl.values("local.yaml")),
            "--set", f"global.numLocales={n}", "--set", "tests.enabled=false", *sets,
            "--wait", "--timeout", f"{timeout}s",
        )  # fmt: skip
    except BenchSetupError as exc:
        why = _unschedulable(cl, ns)
        if why:
            raise NotRun(why) from None
        if "context deadline exceeded" in str(exc) or "timed out" in str(exc):
            tail = cl.server_log_tail(ns, _server(RELEASE))
            raise NotRun(f"release not Ready within {timeout} s; server log ends: {tail}") from None
        raise


def restart_server(cl: Cluster, ns: str, *, deadline: float) -> None:
    """Delete the server pod and return once its replacement runs (the next launch is its own)."""
    name = _server(RELEASE)
    old = cl.core.read_namespaced_pod(name, ns).metadata.uid
    cl.core.delete_namespaced_pod(name, ns)
    while time.monotonic() < deadline:
        try:
            pod = cl.core.read_namespaced_pod(name, ns)
        except Exception:  # a 404 between the deletion and the StatefulSet's new pod
            pod = None
        if pod is not None and pod.metadata.uid != old and pod.status.phase == "Running":
            return
        time.sleep(0.5)
    raise BenchSetupError(f"no new {name} running before the deadline")


def kubectl_exec(kubeconfig: Path, ns: str, pod: str, script: str) -> str:
    return _run(
        [
            "kubectl",
            "--kubeconfig",
            str(kubeconfig),
            "-n",
            ns,
            "exec",
            pod,
            "-c",
            "server",
            "--",
            "sh",
            "-c",
            script,
        ],
        timeout=120,
    )


def release_pods(cl: Cluster, ns: str) -> dict[str, tuple[str, str]]:
    """uid → (name, first container) of the release's running server and locale pods."""
    return {
        p.metadata.uid: (p.metadata.name, p.spec.containers[0].name)
        for p in cl.core.list_namespaced_pod(ns).items
        if p.status.phase == "Running"
        and p.metadata.deletion_timestamp is None
        and (p.metadata.labels or {}).get("app.kubernetes.io/component") in ("server", "locale")
    }


@dataclass(frozen=True)
class Baseline:
    """The counters just before a launch: the host's neighbour table overflows and the pods' drops."""

    table_fulls: int
    pods: dict[str, netcount.Drops]

    @classmethod
    def read(cls, cl: Cluster, kubeconfig: Path, ns: str) -> Baseline:
        pods = netcount.read_pods(kubeconfig, ns, release_pods(cl, ns)) if ns else {}
        return cls(table_fulls=netcount.table_fulls(), pods=pods)


def measure_once(
    cl: Cluster, kubeconfig: Path, ns: str, *, n: int, deadline: float, baseline: Baseline
) -> dict[str, Any]:
    """Wait (bounded) for this launch's N barrier lines and the splash, then read the ssh clients' CPU and
    what was dropped since `baseline`."""
    pod = _server(RELEASE)
    cpu: ClientCpu | None = None
    launch: LaunchLog | None = None
    text = ""
    while time.monotonic() < deadline:
        try:
            if cpu is None:
                cpu = client_cpu(parse_snapshot(kubectl_exec(kubeconfig, ns, pod, SNAPSHOT_SCRIPT)))
            text = str(cl.core.read_namespaced_pod_log(pod, ns, container="server", timestamps=True))
            launch = parse_launch_log(text, n=n, since=cpu.amudprun_start - 0.05)
        except (BenchSetupError, subprocess.TimeoutExpired) as exc:
            if "stand-in reports" in str(exc):
                raise
            log.debug("not launched yet: %s", exc)
            cpu = None
        if launch is not None and launch.complete(n):
            break
        if cpu is not None and (ended := launch_ended(text, since=cpu.amudprun_start)):
            raise BenchSetupError(f"the launch at N={n} ended before its barrier: {ended}")
        time.sleep(0.5)
    if cpu is None or launch is None or not launch.complete(n):
        seen = f"{len(launch.barrier)}/{n} past the barrier" if launch else "no amudprun"
        raise BenchSetupError(f"launch at N={n} not complete before the deadline ({seen})")
    # The CPU is read once the job is past its barrier: the ssh clients have done their launch work.
    after = client_cpu(parse_snapshot(kubectl_exec(kubeconfig, ns, pod, SNAPSHOT_SCRIPT)))
    if after.amudprun != cpu.amudprun:
        raise BenchSetupError(f"amudprun restarted during the measurement at N={n}")
    if after.ssh_processes != n:
        log.warning("N=%d: %d ssh clients alive under amudprun after the barrier", n, after.ssh_processes)
    overflows = netcount.table_fulls() - baseline.table_fulls
    pods = release_pods(cl, ns)
    if len(pods) != n:
        raise BenchSetupError(f"{len(pods)} running release pods after the launch at N={n}")
    drops, dropping = netcount.launch_drops(baseline.pods, netcount.read_pods(kubeconfig, ns, pods))
    start = cpu.amudprun_start
    assert launch.listening is not None
    return {
        "neighbour table overflows": overflows,
        "dropped by the sender": drops.sender,
        "dropped by the receiver": drops.receiver,
        "pods dropping": dropping,
        "all joined the GASNet job": max(launch.joined.values()) - start,
        "all past the GASNet barrier": max(launch.barrier.values()) - start,
        "server listening": launch.listening - start,
        "client CPU/host": after.clients / n,
        "client reaped CPU/host": after.clients_reaped / n,
        "amudprun CPU": after.amudprun_own,
        "amudprun reaped CPU": after.amudprun_reaped,
        "ssh processes": after.ssh_processes,
        "warnings": list(launch.warnings),
    }


def _wait_gone(cl: Cluster, ns: str, *, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(x.metadata.name == ns for x in cl.core.list_namespace().items):
            return
        time.sleep(1)
    log.warning("namespace %s still terminating after %.0f s", ns, timeout)


def case_name(n: int, layout: str, table: str) -> str:
    return f"N={n} locales, {layout}" + (", kernel's neighbour table" if table == KERNEL_TABLE else "")


def _rows(n: int, samples: list[dict[str, Any]], *, case: str, command: str, note: str) -> list[Row]:
    rows = [
        Row.measured(group=GROUP, case=case, metric=f"amudprun start → {p}", unit="s", command=command,
                     values=[s[p] for s in samples], note=note)
        for p in PHASES
    ]  # fmt: skip
    reaped = "/".join(f"{1000 * s['amudprun reaped CPU']:.0f}" for s in samples)
    ssh = "/".join(str(k) for k in sorted({s["ssh processes"] for s in samples}))
    rows += [
        Row.measured(group=GROUP, case=case, metric="ssh client CPU/host", unit="ms", command=command,
                     values=[1000 * s["client CPU/host"] for s in samples],
                     note=f"wrappers + ssh under amudprun after the barrier / N ({ssh} ssh)"),
        Row.measured(group=GROUP, case=case, metric="amudprun CPU (own)", unit="ms", command=command,
                     values=[1000 * s["amudprun CPU"] for s in samples],
                     note=f"+ reaped children (its `ssh -V` check): {reaped} ms in 10 ms ticks"),
        Row.measured(group=GROUP, case=case, metric="datagrams dropped in the pods", unit="count",
                     command=command, values=[s["dropped by the sender"] + s["dropped by the receiver"]
                                              for s in samples],
                     note="sender/receiver per repeat: " + "; ".join(
                         f"{s['dropped by the sender']}/{s['dropped by the receiver']}"
                         f" in {s['pods dropping']} pods" for s in samples)),
        Row.measured(group=GROUP, case=case, metric="neighbour table overflows", unit="count",
                     command=command, values=[s["neighbour table overflows"] for s in samples],
                     note="host's /proc/net/stat/arp_cache table_fulls during the launch (one per kernel)"),
    ]  # fmt: skip
    return rows


def set_neighbour_table(repo_root: Path, table: str) -> None:
    _run(["bash", str(repo_root / "hack" / "cluster" / "neigh-table.sh"), table], timeout=30)


def _repeat(
    cl: Cluster, kubeconfig: Path, ns: str, *, n: int, label: str, rep: int, repeats: int, restart: bool
) -> dict[str, Any]:
    deadline = time.monotonic() + 120 + 5 * n
    baseline = Baseline.read(cl, kubeconfig, ns)
    if restart:
        restart_server(cl, ns, deadline=deadline)
    sample = measure_once(cl, kubeconfig, ns, n=n, deadline=deadline, baseline=baseline)
    log.info(
        "launch %s %d/%d: %s", label, rep + 1, repeats,
        {k: (round(v, 3) if isinstance(v, float) else v) for k, v in sample.items()},
    )  # fmt: skip
    return sample


def run_n(
    cl: Cluster,
    kubeconfig: Path,
    *,
    n: int,
    layout: str,
    tables: Sequence[str],
    repeats: int,
    sets: Sequence[str],
    stamp: str,
) -> dict[str, list[dict[str, Any]] | str]:
    """One release at N in `layout`, installed with the cluster's neighbour table; `repeats` launches per
    setting in `tables`, the install's the first of the cluster's, every other one in a new server pod. A
    setting whose launch fails gets its reason instead of samples, and the next setting goes on. The cluster's
    setting is restored before returning."""
    ns = cl.namespace(f"arkbench-launch-{stamp}-n{n}-{layout.split(maxsplit=1)[0]}")
    out: dict[str, list[dict[str, Any]] | str] = {}
    layout_sets = [x for kv in LAYOUTS[layout] for x in ("--set", kv)]
    try:
        set_neighbour_table(cl.repo_root, CLUSTER_TABLE)
        baseline = Baseline.read(cl, kubeconfig, "")
        install(cl, ns, n=n, sets=[*layout_sets, *sets])
        first = measure_once(
            cl, kubeconfig, ns, n=n, deadline=time.monotonic() + 120 + 5 * n, baseline=baseline
        )
        log.info("launch N=%d %s (install): %s", n, layout, first)
        for table in tables:
            set_neighbour_table(cl.repo_root, table)
            label = f"N={n} {layout} ({table} neighbour table)"
            samples = [first] if table == CLUSTER_TABLE else []
            try:
                for rep in range(len(samples), repeats):
                    samples.append(
                        _repeat(cl, kubeconfig, ns, n=n, label=label, rep=rep, repeats=repeats, restart=True)
                    )
            except BenchSetupError as exc:
                log.warning("launch %s: %s", label, exc)
                out[table] = str(exc)
                continue
            out[table] = samples
    finally:
        set_neighbour_table(cl.repo_root, CLUSTER_TABLE)
        try:
            cl.drop_namespace(ns)
            _wait_gone(cl, ns)
        except (BenchSetupError, subprocess.TimeoutExpired) as exc:
            log.warning("cleanup of %s: %s", ns, exc)
    return out


def run(
    *,
    kubeconfig: Path,
    repo_root: Path,
    locale_counts: Iterable[int],
    repeats: int,
    sets: Sequence[str],
    command: str,
    layouts: Sequence[str] = tuple(LAYOUTS),
    before: Iterable[int] = (),
) -> list[Row]:
    """Rows per layout and N; for N in `before` also the same launches with Linux's neighbour table
    thresholds, right after the cluster's, in the same release."""
    cl = Cluster.connect(kubeconfig=kubeconfig, repo_root=repo_root)
    stamp = time.strftime("%H%M%S")
    before_set = set(before)
    rows: list[Row] = []
    for layout in layouts:
        for n in locale_counts:
            # the cluster's setting first: a launch that fails under Linux's leaves the pods busy for a while
            tables = [CLUSTER_TABLE, KERNEL_TABLE] if n in before_set else [CLUSTER_TABLE]
            note = f"values/local.yaml, {layout}" + (f" + {' '.join(sets)}" if sets else "")
            try:
                by_table = run_n(
                    cl, kubeconfig, n=n, layout=layout, tables=tables, repeats=repeats, sets=sets, stamp=stamp
                )
            except NotRun as exc:
                log.warning("launch N=%d %s not run: %s", n, layout, exc)
                rows.append(not_run_row(n, str(exc), command, case=case_name(n, layout, CLUSTER_TABLE)))
                continue
            except BenchSetupError as exc:
                log.warning("launch N=%d %s failed: %s", n, layout, exc)
                rows.append(
                    Row.failed(group=GROUP, case=case_name(n, layout, CLUSTER_TABLE),
                               metric="amudprun start → barrier", command=command, reason=str(exc))
                )  # fmt: skip
                continue
            for table, samples in by_table.items():
                if isinstance(samples, str):
                    rows.append(
                        Row.failed(group=GROUP, case=case_name(n, layout, table),
                                   metric="amudprun start → barrier", command=command, reason=samples)
                    )  # fmt: skip
                    continue
                warnings = sorted({w for s in samples for w in s["warnings"]})
                for w in warnings:
                    log.warning("N=%d %s: warning line in the server log: %s", n, layout, w)
                rows += _rows(
                    n,
                    samples,
                    case=case_name(n, layout, table),
                    command=command,
                    note=note + (f"; {len(warnings)} WARNING line(s)" if warnings else ""),
                )
    return rows


def not_run_row(n: int, reason: str, command: str, *, case: str = "") -> Row:
    return Row.not_run(
        group=GROUP, case=case or f"N={n} locales", metric="amudprun start → barrier", command=command,
        reason=reason,
    )  # fmt: skip
