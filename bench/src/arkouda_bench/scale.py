"""The bootstrap's `server` at scale against a real kube-apiserver + etcd (no kubelet).

For each N, a fresh namespace gets one server pod and N locale pods (bound to a node name no kubelet
serves); this harness drives their status to Ready with pod IPs on distinct loopback addresses, all answered
by one real sshd (arkouda_bench.sshd). The bootstrap runs as the unprivileged bench user with its own token
and the least-privilege Role below, `--launcher none -- /bin/sh -c 'date +%s.%N > FILE'`, so "child
started" is a timestamp the child itself writes. Stage times come from the bootstrap's own output lines,
timestamped here on arrival: `N/N locales ready` (discovery done) and `ssh probe: all K hosts answered`
(probe done).

Two runs per repeat:
- `cold`: every locale is Ready before the bootstrap starts (a restarted server pod). discovery = process
  start → all N seen Ready (interpreter start and imports included, as in a pod); total = start → child
  started.
- `rolling`: every locale is Pending when the bootstrap starts; once it has printed its first progress line
  the harness turns them Ready in ordinal order (as a StatefulSet's OrderedReady rollout does) with 8 parallel
  PATCHes. launch latency = last pod Ready (its PATCH answered) → child started; watch lag = last pod Ready →
  bootstrap prints N/N.
API requests: the audit log's entries for the bootstrap's user during the run (distinct audit IDs).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import queue
import re
import shutil
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arkouda_bench.apiserver import BOOTSTRAP_USER, ControlPlane, RestClient, merge_patch
from arkouda_bench.proc import children_cpu
from arkouda_bench.results import Row
from arkouda_bench.runtime import ensure_runtime
from arkouda_bench.sshd import BenchSetupError, SshServer, chown_tree, loopback_hosts, write_secret_dir

log = logging.getLogger(__name__)

GROUP = "bootstrap at scale"
NODE = "arkbench-node"
SERVER_IP = "127.0.0.2"
IMAGE = "localhost/arkouda-k8s/arkouda:bench"
DRIVER_THREADS = 8
RUN_TIMEOUT = 600.0
# The bootstrap CLI as `python -c` (its argv follows), for the profiler: main() returns instead of os._exit.
PROFILED_MAIN = "import sys; from arkouda_bootstrap.cli.main import main; sys.exit(main(sys.argv[1:]))"

# What the bootstrap's server may do: exactly the chart's server Role (charts/arkouda/charts/arkouda-server/
# templates/role.yaml), so a request the chart would refuse fails here too.
ROLE_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "list"]},
]

_ALL_READY = re.compile(r"^(\d+)/(\d+) locales ready$")
_FIRST_PROGRESS = re.compile(r"^\d+/\d+ locales ready")
_PROBED = re.compile(r"ssh probe: all (\d+) hosts answered")


def labels(release: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/instance": release,
        "app.kubernetes.io/part-of": "arkouda",
        "app.kubernetes.io/component": component,
    }


def selector(release: str) -> str:
    return f"app.kubernetes.io/instance={release},app.kubernetes.io/component=locale"


def pod_manifest(name: str, pod_labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": pod_labels},
        "spec": {
            "nodeName": NODE,
            "automountServiceAccountToken": False,
            "containers": [{"name": "arkouda", "image": IMAGE}],
        },
    }


def ready_status(ip: str) -> dict[str, Any]:
    """The status a kubelet would write for a running, Ready pod with IP `ip`."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = [
        {"type": t, "status": "True", "lastTransitionTime": now}
        for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
    ]
    return {
        "status": {
            "phase": "Running",
            "hostIP": "127.0.0.1",
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": now,
            "conditions": conditions,
            "containerStatuses": [
                {
                    "name": "arkouda",
                    "image": IMAGE,
                    "imageID": "",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
            ],
        }
    }


def setup_namespace(admin: RestClient, ns: str) -> None:
    admin.must("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    admin.must("POST", f"/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": "default"}})
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}"
    admin.must("POST", f"{rbac}/roles", {"metadata": {"name": "arkbench-server"}, "rules": ROLE_RULES})
    admin.must(
        "POST",
        f"{rbac}/rolebindings",
        {
            "metadata": {"name": "arkbench-server"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "arkbench-server"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": BOOTSTRAP_USER}],
        },
    )


def _parallel(fn: Callable[[int], float], count: int) -> list[float]:
    with ThreadPoolExecutor(max_workers=DRIVER_THREADS, thread_name_prefix="driver") as pool:
        return list(pool.map(fn, range(count)))


def create_pods(admin: RestClient, ns: str, release: str, n: int) -> list[str]:
    names = [f"{release}-arkouda-locale-{i}" for i in range(n)]

    def create(i: int) -> float:
        admin.must("POST", f"/api/v1/namespaces/{ns}/pods", pod_manifest(names[i], labels(release, "locale")))
        return time.time()

    _parallel(create, n)
    return names


def make_ready(admin: RestClient, ns: str, names: Sequence[str], ips: Sequence[str]) -> float:
    """PATCH every pod's status to Ready (ordinal order, DRIVER_THREADS at a time); the last answer's time."""

    def patch(i: int) -> float:
        merge_patch(admin, f"/api/v1/namespaces/{ns}/pods/{names[i]}/status", ready_status(ips[i]))
        return time.time()

    return max(_parallel(patch, len(names)))


@dataclass
class Run:
    """One bootstrap run: timestamps (time.time()) of its milestones and its API requests."""

    mode: str
    n: int
    t_start: float = 0.0
    t_all_ready: float | None = None
    t_probed: float | None = None
    t_child: float | None = None
    t_last_ready: float | None = None
    exit_code: int | None = None
    cpu_bootstrap: float = 0.0
    cpu_sshd: float = 0.0
    requests: Counter[str] = field(default_factory=Counter)
    tail: list[str] = field(default_factory=list)


class BootstrapProcess:
    """`arkouda-bootstrap server` as the bench user; each output line is timestamped as it arrives."""

    def __init__(self, argv: list[str], *, env: dict[str, str], uid: int, gid: int, cwd: Path) -> None:
        self.lines: queue.Queue[tuple[float, str | None]] = queue.Queue()
        self.t_start = time.time()
        self.proc = subprocess.Popen(
            argv,
            env=env,
            user=uid,
            group=gid,
            extra_groups=[],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put((time.time(), line.rstrip("\n")))
        self.lines.put((time.time(), None))  # end of output

    def next_line(self, deadline: float) -> tuple[float, str] | None:
        """The next (time, line); None at EOF. Raises BenchSetupError past the deadline."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            self.proc.kill()
            raise BenchSetupError("the bootstrap did not finish in time")
        try:
            t, line = self.lines.get(timeout=remaining)
        except queue.Empty:
            self.proc.kill()
            raise BenchSetupError("the bootstrap did not finish in time") from None
        if line is None:
            return None
        return t, line


@dataclass
class Harness:
    cp: ControlPlane
    sshd: SshServer
    python: Path
    repo_root: Path
    work: Path
    uid: int
    gid: int
    _seq: int = 0

    def run_once(self, *, n: int, mode: str, profile: Path | None = None) -> Run:
        """Fresh namespace, N locale pods, one bootstrap run in `mode` ('cold' or 'rolling')."""
        setup = self._prepare(n=n, mode=mode, profile=profile is not None)
        assert self.cp.admin is not None
        audit_mark = self.cp.audit_counts()[1]
        run = Run(mode=mode, n=n)
        cpu0, sshd0 = children_cpu(), self.sshd.server_cpu()
        proc = BootstrapProcess(setup.argv, env=setup.env, uid=self.uid, gid=self.gid, cwd=setup.run_dir)
        run.t_start = proc.t_start
        deadline = time.monotonic() + RUN_TIMEOUT
        released = mode == "cold"
        while (item := proc.next_line(deadline)) is not None:
            t, line = item
            run.tail = [*run.tail[-19:], line]
            if not released and _FIRST_PROGRESS.match(line):
                released = True
                run.t_last_ready = make_ready(self.cp.admin, setup.ns, setup.names, setup.ips)
            m = _ALL_READY.match(line)
            if m and int(m.group(1)) == int(m.group(2)) == n and run.t_all_ready is None:
                run.t_all_ready = t
            if _PROBED.search(line) and run.t_probed is None:
                run.t_probed = t
        run.exit_code = proc.proc.wait()
        run.cpu_bootstrap = children_cpu() - cpu0  # the bootstrap and its child (our only child process)
        run.cpu_sshd = self.sshd.server_cpu() - sshd0
        # The timings end when the child starts; a bootstrap that then exits non-zero is reported in the rows'
        # notes (it happened: SIGABRT at interpreter exit with the locale monitor's watch still open).
        if not setup.child_file.exists():
            raise BenchSetupError(
                f"bootstrap server (N={n}, {mode}) exited {run.exit_code}: " + " | ".join(run.tail[-8:])
            )
        run.t_child = float(setup.child_file.read_text().strip())
        time.sleep(0.3)  # the audit backend writes a watch's ResponseComplete when the connection closes
        run.requests = self.cp.audit_counts(since_line=audit_mark)[0]
        if profile is not None:
            shutil.copyfile(setup.run_dir / "profile.txt", profile)
        shutil.rmtree(setup.run_dir, ignore_errors=True)
        return run

    def _prepare(self, *, n: int, mode: str, profile: bool) -> RunSetup:
        """Namespace, RBAC, pods (Ready already in cold mode), Secret files, kubeconfig and the argv."""
        assert self.cp.admin is not None
        assert self.sshd.client is not None
        admin = self.cp.admin
        self._seq += 1
        ns = f"arkbench-{self._seq}"
        release = "bench"
        setup_namespace(admin, ns)
        server_pod = f"{release}-arkouda-server-0"
        admin.must(
            "POST", f"/api/v1/namespaces/{ns}/pods", pod_manifest(server_pod, labels(release, "server"))
        )
        merge_patch(admin, f"/api/v1/namespaces/{ns}/pods/{server_pod}/status", ready_status(SERVER_IP))
        names = create_pods(admin, ns, release, n)
        ips = loopback_hosts(n)
        if mode == "cold":
            make_ready(admin, ns, names, ips)

        run_dir = self.work / f"run-{self._seq}"
        state = run_dir / "state"
        state.mkdir(parents=True)
        write_secret_dir(run_dir / "secret", self.sshd.secret)
        kubeconfig = self.cp.kubeconfig(
            run_dir / "kubeconfig", token=self.cp.bootstrap_token, user=BOOTSTRAP_USER, namespace=ns
        )
        child_file = run_dir / "child-started"
        chown_tree(run_dir, self.uid, self.gid)
        argv = [str(self.python)]
        if profile:
            # `-m arkouda_bootstrap` leaves through os._exit (cli.entrypoint), before pyinstrument could write
            # its report: the profiled run calls main() and returns through the profiler instead.
            report = str(run_dir / "profile.txt")
            argv += ["-m", "pyinstrument", "-r", "text", "-o", report, "-c", PROFILED_MAIN]
        else:
            argv += ["-m", "arkouda_bootstrap"]
        argv += [
            "server",
            "--namespace", ns,
            "--num-locales", str(n + 1),
            "--selector", selector(release),
            "--pod-name", server_pod,
            "--pod-ip", SERVER_IP,
            "--port", str(self.sshd.client.port),
            "--secret-dir", str(run_dir / "secret"),
            "--state-dir", str(state),
            "--timeout", str(int(RUN_TIMEOUT)),
            "--launcher", "none",
            "--",
            "/bin/sh", "-c", 'date +%s.%N > "$0"', str(child_file),
        ]  # fmt: skip
        env = {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": str(run_dir),
            "LANG": "C.UTF-8",
            "KUBECONFIG": str(kubeconfig),
            "PYTHONPATH": str(self.repo_root / "bootstrap" / "src"),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        return RunSetup(
            ns=ns, names=names, ips=ips, run_dir=run_dir, argv=argv, env=env, child_file=child_file
        )


@dataclass(frozen=True)
class RunSetup:
    ns: str
    names: list[str]
    ips: list[str]
    run_dir: Path
    argv: list[str]
    env: dict[str, str]
    child_file: Path


def _need(value: float | None, what: str, run: Run) -> float:
    if value is None:
        raise BenchSetupError(
            f"bootstrap output had no '{what}' line (N={run.n}, {run.mode}): " + " | ".join(run.tail[-3:])
        )
    return value


def rows_for(n: int, cold: list[Run], rolling: list[Run], *, command: str) -> list[Row]:
    case = f"N={n} locales"
    rows: list[Row] = []

    def add(metric: str, unit: str, values: list[float], note: str = "") -> None:
        if not values:  # that mode was not run
            return
        rows.append(
            Row.measured(
                group=GROUP, case=case, metric=metric, unit=unit, command=command, values=values, note=note
            )
        )

    add(
        "cold: discovery (start → all Ready seen)",
        "s",
        [_need(r.t_all_ready, "N/N locales ready", r) - r.t_start for r in cold],
        "incl. interpreter start + imports",
    )
    add(
        "cold: ssh probe of all hosts",
        "s",
        [_need(r.t_probed, "ssh probe", r) - _need(r.t_all_ready, "N/N", r) for r in cold],
        f"{n + 1} hosts (server + locales)",
    )
    bad = [r.exit_code for r in [*cold, *rolling] if r.exit_code is not None and r.exit_code != 0]
    exits = (
        f"bootstrap exit status {sorted(set(bad))} in {len(bad)}/{len(cold) + len(rolling)} runs"
        if bad
        else ""
    )
    add(
        "cold: total (start → child started)",
        "s",
        [_need(r.t_child, "child", r) - r.t_start for r in cold],
        exits,
    )
    add("cold: bootstrap CPU (whole run)", "s", [r.cpu_bootstrap for r in cold], "user+system, incl. imports")
    add("cold: sshd CPU (all probes)", "s", [r.cpu_sshd for r in cold], "one sshd serves every host here")
    add(
        "rolling: launch latency (last Ready → child)",
        "s",
        [_need(r.t_child, "child", r) - _need(r.t_last_ready, "ready", r) for r in rolling],
        "includes the probe of all hosts",
    )
    add(
        "rolling: watch lag (last Ready → N/N seen)",
        "s",
        [_need(r.t_all_ready, "N/N", r) - _need(r.t_last_ready, "ready", r) for r in rolling],
    )
    add(
        "rolling: ssh probe of all hosts",
        "s",
        [_need(r.t_probed, "ssh probe", r) - _need(r.t_all_ready, "N/N", r) for r in rolling],
    )
    for mode, runs in (("cold", cold), ("rolling", rolling)):
        if not runs:
            continue
        last = runs[-1].requests
        breakdown = ", ".join(f"{k} {v}" for k, v in sorted(last.items()))
        add(
            f"{mode}: API requests by the bootstrap",
            "req",
            [float(sum(r.requests.values())) for r in runs],
            breakdown,
        )
    return rows


def run(
    *,
    locale_counts: Sequence[int],
    repeats: int,
    command: str,
    repo_root: Path,
    profile_n: int | None,
    profile_dir: Path | None,
    modes: Sequence[str] = ("cold", "rolling"),
) -> list[Row]:
    rows: list[Row] = []
    with SshServer(max_startups=max(locale_counts) * 2 + 16) as sshd, ControlPlane() as cp:
        assert sshd.user is not None
        python = ensure_runtime(requirements=repo_root / "requirements-dev.txt", home=Path(sshd.user.pw_dir))
        work = Path(sshd.user.pw_dir) / f"scale-{os.getpid()}"
        work.mkdir(mode=0o700, exist_ok=True)
        os.chown(work, sshd.user.pw_uid, sshd.user.pw_gid)
        h = Harness(
            cp=cp, sshd=sshd, python=python, repo_root=repo_root, work=work, uid=sshd.user.pw_uid,
            gid=sshd.user.pw_gid,
        )  # fmt: skip
        try:
            h.run_once(n=2, mode="cold")  # warm-up: page cache, venv bytecode, apiserver caches
            for n in locale_counts:
                cold: list[Run] = []
                rolling: list[Run] = []
                for rep in range(repeats):
                    for mode, bucket in (("cold", cold), ("rolling", rolling)):
                        if mode not in modes:
                            continue
                        r = h.run_once(n=n, mode=mode)
                        bucket.append(r)
                        log.info(
                            "N=%d rep %d/%d %-7s total %.2f s, discovery/lag %.2f s, probe %.2f s, %d reqs",
                            n, rep + 1, repeats, mode, (r.t_child or 0) - r.t_start,
                            (r.t_all_ready or 0) - (r.t_last_ready or r.t_start),
                            (r.t_probed or 0) - (r.t_all_ready or 0), sum(r.requests.values()),
                        )  # fmt: skip
                rows += rows_for(n, cold, rolling, command=command)
            if profile_n is not None and profile_dir is not None:
                profile_dir.mkdir(parents=True, exist_ok=True)
                for mode in ("cold", "rolling"):
                    out = profile_dir / f"profile-bootstrap-N{profile_n}-{mode}.txt"
                    r = h.run_once(n=profile_n, mode=mode, profile=out)
                    log.info("profile of a %s N=%d run: %s", mode, profile_n, out)
                    start = r.t_start if mode == "cold" else (r.t_last_ready or r.t_start)
                    what = "total" if mode == "cold" else "launch latency"
                    rows.append(
                        Row.measured(
                            group=GROUP, case=f"N={profile_n} locales",
                            metric=f"{mode}: {what} under pyinstrument",
                            unit="s", command=command, values=[(r.t_child or 0) - start], note=str(out),
                        )
                    )  # fmt: skip
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return rows
