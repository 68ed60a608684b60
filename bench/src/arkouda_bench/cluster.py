"""Install, recovery and compute rows on the project's local node (make cluster-up; images: make e2e-prepare).

- install to ready: `helm install --wait` of the chart with values/local.yaml and 4 locales; while helm runs,
  watches on the namespace's Jobs and Pods timestamp the phases: keygen hook Job succeeded, every release pod
  scheduled, every locale pod Ready, the server pod Ready, helm returned (all measured from helm's start).
- recovery: on each freshly installed release, delete a locale pod (grace 0) and time until the server has
  relaunched the program in place (its next `Launched` Event) and every pod of the release is Ready again; two
  more losses on the last release show that repeated losses cost the same (no container restart back-off).
- compute: the Himeno benchmark with 2 ranks x 1 OpenMP thread, run directly on the host (mpirun of the
  host build from `make mpi-demo-host`) and inside the pods (the chart's mpi mode, one rank in the server pod
  and one in a locale pod, output served by the server pod and read through `kubectl port-forward`), one run
  of each placement after the host's within each repeat: both pods on one node (a required pod affinity of
  the server pod to the locale pod) and, when the cluster has two schedulable nodes or more (make cluster-up
  NODES=3), on two nodes (a required anti-affinity); MFLOPS each way and the pod/host ratio per repeat.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch

from arkouda_bench.results import Row
from arkouda_bench.sshd import BenchSetupError

log = logging.getLogger(__name__)

INSTALL = "install to ready"
RECOVERY = "recovery"
COMPUTE = "compute pod vs host"
INSTALL_LOCALES = 4
HELM_TIMEOUT = "10m"
# The server pod turns Ready once mpirun has finished (himeno S runs seconds): 4 minutes is ample.
HIMENO_TIMEOUT = "4m"
# Size S with 500 iterations: about 5 s at ~1.8 GFLOPS on this machine. Himeno's default 50 took under 0.5 s,
# so one wake-up of the node's own daemons (kubelet, containerd, etcd) cost a pod run up to a third of its
# MFLOPS and the pod/host ratio swung 0.69-1.66 between repeats.
HIMENO_SIZE = "S"
HIMENO_ITERATIONS = 500
HIMENO_CASE = f"himeno {HIMENO_SIZE} x{HIMENO_ITERATIONS} iterations, 2 ranks x 1 thread"
# server.mpi.resultsPort (the chart's default): the server pod serves the program's output there.
RESULTS_PORT = 8080
HOSTNAME_KEY = "kubernetes.io/hostname"


def _run(argv: Sequence[str], *, timeout: float = 900, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        raise BenchSetupError(f"{' '.join(argv[:3])}: exit {proc.returncode}: {lines[-1] if lines else ''}")
    return proc.stdout


def _ready(pod: Any) -> bool:
    return bool(
        pod.metadata.deletion_timestamp is None
        and pod.status.pod_ip
        and any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))
    )


def release_ready(pods: Iterable[Any], *, locales: int, off_node: str = "") -> bool:
    """The server pod and its locale pods all Ready (and none on `off_node`, a node that was lost); the
    release's other pods (the gate, nodewatch) do not count toward the `locales` the server launches on."""
    launch_pods = [p for p in pods if _component(p) in ("server", "locale")]
    return len(launch_pods) == locales and all(
        _ready(p) and not (off_node and p.spec.node_name == off_node) for p in launch_pods
    )


def workload(pods: dict[str, Any]) -> list[Any]:
    """The server and locale pods of a watch's objects (not the gate, nodewatch or a test pod)."""
    return [p for p in pods.values() if _component(p) in ("server", "locale")]


def _scheduled(pod: Any) -> bool:
    return any(c.type == "PodScheduled" and c.status == "True" for c in (pod.status.conditions or []))


def _component(pod: Any) -> str:
    return str((pod.metadata.labels or {}).get("app.kubernetes.io/component", ""))


@dataclass
class Milestones:
    """First time (time.time()) each named condition held, from watch events timestamped on arrival."""

    first: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def mark(self, name: str, t: float) -> None:
        with self.lock:
            self.first.setdefault(name, t)


class Watcher:
    """A watch on one namespace's pods or jobs in a thread; calls on_event(objects_by_name, t) per event."""

    def __init__(
        self, list_fn: Callable[..., Any], namespace: str, on_event: Callable[[dict[str, Any], float], None]
    ) -> None:
        self._list_fn = list_fn
        self._ns = namespace
        self._on_event = on_event
        self._stop = threading.Event()
        self._objects: dict[str, Any] = {}
        self._watch: Any = None
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._watch = watch.Watch()  # type: ignore[no-untyped-call]
            try:
                # List, then watch from the list's version: a watch without one starts with one ADDED event
                # per existing object, so a condition such as "no server pod" held on the first of them (the
                # gate's pod) before the rest arrived. Each round lists afresh: no deleted object lingers.
                listed = self._list_fn(self._ns)
                t = time.time()
                self._objects = {obj.metadata.name: obj for obj in listed.items}
                self._on_event(dict(self._objects), t)
                version = listed.metadata.resource_version
                for ev in self._watch.stream(
                    self._list_fn, self._ns, resource_version=version, timeout_seconds=30
                ):
                    t = time.time()
                    obj = ev["object"]
                    if ev["type"] == "DELETED":
                        self._objects.pop(obj.metadata.name, None)
                    else:
                        self._objects[obj.metadata.name] = obj
                    self._on_event(dict(self._objects), t)
                    if self._stop.is_set():
                        break
            except Exception:  # a broken watch is retried; the phase deadline is helm's
                log.debug("watch on %s ended", self._ns, exc_info=True)
                time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.stop()
        self._thread.join(timeout=35)


@dataclass
class Cluster:
    core: Any
    batch: Any
    repo_root: Path
    image_tag: str
    kubeconfig: Path

    @classmethod
    def connect(cls, *, kubeconfig: Path, repo_root: Path) -> Cluster:
        config.load_kube_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
        api = client.ApiClient()
        cluster = cls(
            core=client.CoreV1Api(api), batch=client.BatchV1Api(api), repo_root=repo_root,
            image_tag=os.environ.get("IMAGE_TAG", ""), kubeconfig=kubeconfig,
        )  # fmt: skip
        cluster.core.list_namespace(limit=1)
        return cluster

    @property
    def chart(self) -> Path:
        return self.repo_root / "charts" / "arkouda"

    def values(self, name: str) -> Path:
        return self.repo_root / "values" / name

    def helm(self, *args: str) -> str:
        tag = (
            ["--set", f"global.image.tag={self.image_tag}"]
            if self.image_tag and args[0] in ("install", "upgrade")
            else []
        )
        return _run(["helm", *args, *tag])

    @contextlib.contextmanager
    def port_forward(self, ns: str, target: str, port: int) -> Iterator[int]:
        """`kubectl port-forward <target> :<port>` (target `svc/<name>` or `pod/<name>`) on a free local
        port; yields that port. It goes through the API server and the pod's kubelet, so it reaches a pod on
        any node whatever its NetworkPolicy; a fetch of the pod IP from the host only reaches pods on node 0
        (see hack/cluster/README.md, "The host is node 0")."""
        proc = subprocess.Popen(
            ["kubectl", "--kubeconfig", str(self.kubeconfig), "-n", ns, "port-forward", target, f":{port}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            m = re.search(r"127\.0\.0\.1:(\d+)", line)
            if not m:
                raise BenchSetupError(f"kubectl port-forward {target} said: {line.strip()!r}")
            yield int(m.group(1))
        finally:
            proc.terminate()
            proc.wait(timeout=10)

    def schedulable_nodes(self) -> list[str]:
        """Names of the Ready nodes a release pod can be scheduled on (no NoSchedule/NoExecute taint)."""
        names = []
        for node in self.core.list_node().items:
            ready = any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))
            tainted = any(t.effect in ("NoSchedule", "NoExecute") for t in (node.spec.taints or []))
            if ready and not tainted and not node.spec.unschedulable:
                names.append(str(node.metadata.name))
        return sorted(names)

    def server_log_tail(self, ns: str, pod: str) -> str:
        """The last line of the server container's log (for a failure message), or why there is none."""
        try:
            text = str(self.core.read_namespaced_pod_log(pod, ns, container="server", tail_lines=1))
        except Exception as exc:
            return f"(no log: {type(exc).__name__})"
        return text.strip() or "(empty)"

    def namespace(self, name: str) -> str:
        labels = {f"pod-security.kubernetes.io/{m}": "restricted" for m in ("enforce", "audit", "warn")}
        self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels)))
        return name

    def drop_namespace(self, name: str) -> None:
        for rel in _run(["helm", "list", "-q", "-n", name]).split():
            _run(["helm", "uninstall", rel, "-n", name, "--wait", "--timeout", "3m"])
        self.core.delete_namespace(name)

    def wait_pods(
        self, ns: str, done: Callable[[dict[str, Any]], bool], *, timeout: float, what: str
    ) -> float:
        """time.time() when done(pods) first holds (watch-driven)."""
        hit = threading.Event()
        when: list[float] = []

        def on_event(pods: dict[str, Any], t: float) -> None:
            if not hit.is_set() and done(pods):
                when.append(t)
                hit.set()

        w = Watcher(self.core.list_namespaced_pod, ns, on_event)
        try:
            if not hit.wait(timeout):
                raise BenchSetupError(f"timed out after {timeout:.0f} s waiting for {what} in namespace {ns}")
        finally:
            w.stop()
        return when[0]


def install_once(cl: Cluster, ns: str, release: str) -> dict[str, float]:
    """One `helm install --wait` with phase milestones, as seconds from helm's start."""
    marks = Milestones()
    expected_locales = INSTALL_LOCALES - 1

    def on_jobs(jobs: dict[str, Any], t: float) -> None:
        if any((j.status.succeeded or 0) >= 1 for j in jobs.values()):
            marks.mark("hook Job succeeded", t)

    def on_pods(pods: dict[str, Any], t: float) -> None:
        rel = workload(pods)
        locales = [p for p in rel if _component(p) == "locale"]
        server = [p for p in rel if _component(p) == "server"]
        if len(locales) == expected_locales and server and all(_scheduled(p) for p in rel):
            marks.mark("all pods scheduled", t)
        if len(locales) == expected_locales and all(_ready(p) for p in locales):
            marks.mark("locales Ready", t)
        if server and _ready(server[0]):
            marks.mark("server Ready", t)

    watchers = [
        Watcher(cl.batch.list_namespaced_job, ns, on_jobs),
        Watcher(cl.core.list_namespaced_pod, ns, on_pods),
    ]
    time.sleep(0.5)  # both watches established before helm starts
    t0 = time.time()
    try:
        cl.helm(
            "install", release, str(cl.chart), "-n", ns, "-f", str(cl.values("local.yaml")),
            "--set", f"global.numLocales={INSTALL_LOCALES}", "--wait", "--timeout", HELM_TIMEOUT,
        )  # fmt: skip
        marks.mark("helm returned", time.time())
    finally:
        for w in watchers:
            w.stop()
    missing = [
        m
        for m in ("hook Job succeeded", "all pods scheduled", "locales Ready", "server Ready")
        if m not in marks.first
    ]
    if missing:
        raise BenchSetupError(f"helm install returned but no watch event showed: {', '.join(missing)}")
    return {k: v - t0 for k, v in marks.first.items()}


def server_restarts(pod: Any) -> int:
    return sum(c.restart_count for c in (pod.status.container_statuses or []) if c.name == "server")


RECOVERY_MARKS = ("program relaunched", "release Ready")


def launched_events(events: Any, server_name: str) -> int:
    return sum(1 for e in events if e.reason == "Launched" and e.involved_object.name == server_name)


def time_relaunch(
    cl: Cluster,
    ns: str,
    server_name: str,
    *,
    loss: Callable[[], None],
    ready: Callable[[Iterable[Any]], bool],
    reasons: Sequence[str] = (),
    timeout: float = 600,
) -> dict[str, float] | None:
    """Seconds from `loss()` to each milestone, from watch events on the namespace's Events and Pods (both
    established before it): each Event reason of `reasons` recorded after it, the server's next `Launched`
    ("program relaunched"), then `ready(pods)` with it ("release Ready"). None when not Ready within
    `timeout`."""
    launched_before = launched_events(cl.core.list_namespaced_event(ns).items, server_name)
    marks = Milestones()
    latest: dict[str, dict[str, Any]] = {"pods": {}}
    lock = threading.Lock()
    since = time.time()

    def check_ready(t: float) -> None:
        if "program relaunched" in marks.first and ready(latest["pods"].values()):
            marks.mark("release Ready", t)

    def on_events(events: dict[str, Any], t: float) -> None:
        with lock:
            for e in events.values():
                when = e.last_timestamp or e.event_time or e.first_timestamp
                # this loss's, not an earlier one's (Event times have whole seconds)
                if e.reason in reasons and when is not None and when.timestamp() >= since - 1:
                    marks.mark(e.reason, t)
            if launched_events(events.values(), server_name) > launched_before:
                marks.mark("program relaunched", t)
                check_ready(t)

    def on_pods(pods: dict[str, Any], t: float) -> None:
        with lock:
            latest["pods"] = pods
            check_ready(t)

    watchers = [
        Watcher(cl.core.list_namespaced_event, ns, on_events),
        Watcher(cl.core.list_namespaced_pod, ns, on_pods),
    ]
    time.sleep(0.5)
    t0 = time.time()
    try:
        loss()
        deadline = time.monotonic() + timeout
        while "release Ready" not in marks.first and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        for w in watchers:
            w.stop()
    if "release Ready" not in marks.first:
        return None
    return {k: v - t0 for k, v in marks.first.items()}


def recover_once(cl: Cluster, ns: str, release: str) -> dict[str, float]:
    """Delete locale-1 (grace 0); milestones: the server's next `Launched` Event arrives (the program was
    relaunched in place), then every pod of the release is Ready with it."""
    server_name = f"{release}-arkouda-server-0"
    restarts_before = server_restarts(cl.core.read_namespaced_pod(server_name, ns))
    marks = time_relaunch(
        cl, ns, server_name,
        loss=lambda: cl.core.delete_namespaced_pod(f"{release}-arkouda-locale-1", ns, grace_period_seconds=0),
        ready=lambda pods: release_ready(pods, locales=INSTALL_LOCALES),
    )  # fmt: skip
    if marks is None:
        raise BenchSetupError(f"release {release} not Ready again within 600 s after deleting a locale pod")
    if server_restarts(cl.core.read_namespaced_pod(server_name, ns)) != restarts_before:
        raise BenchSetupError("the server container restarted instead of relaunching in place")
    return marks


_MFLOPS = re.compile(r"himeno: .*ranks=(\d+) threads=(\d+) iterations=(\d+).* MFLOPS=([0-9.]+)")


def parse_himeno(text: str, *, iterations: int = HIMENO_ITERATIONS) -> float:
    m = _MFLOPS.search(text)
    if m is None:
        raise BenchSetupError(f"no 'himeno: ... MFLOPS=' line in: {text.strip()[-300:]}")
    if (int(m.group(1)), int(m.group(2))) != (2, 1):
        raise BenchSetupError(f"himeno ran with ranks={m.group(1)} threads={m.group(2)}, expected 2 x 1")
    if int(m.group(3)) != iterations:
        raise BenchSetupError(f"himeno ran {m.group(3)} iterations, expected {iterations}")
    return float(m.group(4))


def himeno_host(binary: Path) -> float:
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise BenchSetupError("mpirun not found: run 'make deps' (openmpi-bin)")
    env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMP_NUM_THREADS": "1"}
    return parse_himeno(
        _run(
            [mpirun, "-np", "2", "-x", "OMP_NUM_THREADS", str(binary), HIMENO_SIZE, str(HIMENO_ITERATIONS)],
            env=env,
            timeout=600,
        )
    )


def placement_args(release: str, *, same_node: bool) -> list[str]:
    """helm flags that put the server pod (rank 0) on the node of the release's locale pod (rank 1), or keep
    it off that node: a required pod affinity or anti-affinity to the locale pod by hostname (as
    values/bare-metal.yaml keeps the server off the locales' nodes)."""
    term = {
        "topologyKey": HOSTNAME_KEY,
        "labelSelector": {
            "matchLabels": {"app.kubernetes.io/instance": release, "app.kubernetes.io/component": "locale"}
        },
    }
    kind = "podAffinity" if same_node else "podAntiAffinity"
    affinity = {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return ["--set-json", f"server.affinity={json.dumps(affinity, separators=(',', ':'))}"]


def check_placement(nodes: dict[str, str], *, same_node: bool) -> None:
    """The pods' nodes (pod name → node name) are the placement asked for, or BenchSetupError says where."""
    where = ", ".join(f"{pod} on {node or '(none)'}" for pod, node in sorted(nodes.items()))
    if len(nodes) != 2 or not all(nodes.values()) or len(set(nodes.values())) != (1 if same_node else 2):
        wanted = "one node" if same_node else "two nodes"
        raise BenchSetupError(f"the two ranks were to run on {wanted}: {where}")


@dataclass(frozen=True)
class PodRun:
    mflops: float
    nodes: dict[str, str]  # server and locale pod name → node name


def himeno_pods(cl: Cluster, ns: str, release: str, *, first: bool, same_node: bool) -> PodRun:
    """Run himeno once in the pods: install the mpi release (first) or delete the server pod; fetch output."""
    server_name = f"{release}-arkouda-server-0"
    old_uid = None
    if first:
        try:
            cl.helm(
                "install", release, str(cl.chart), "-n", ns, "-f", str(cl.values("mpi-hybrid.yaml")),
                "--set", "server.mpi.command=/opt/mpi-demo/bin/himeno",
                "--set-string", f"server.mpi.args={{{HIMENO_SIZE},{HIMENO_ITERATIONS}}}",
                "--set", "server.mpi.ompThreads=1", "--set", "tests.enabled=false",
                *placement_args(release, same_node=same_node),
                "--wait", "--timeout", HIMENO_TIMEOUT,
            )  # fmt: skip
        except BenchSetupError as exc:
            raise BenchSetupError(f"{exc}; server log ends: {cl.server_log_tail(ns, server_name)}") from None
    else:
        old_uid = cl.core.read_namespaced_pod(server_name, ns).metadata.uid
        cl.core.delete_namespaced_pod(server_name, ns)
    cl.wait_pods(
        ns,
        lambda pods: (
            server_name in pods and pods[server_name].metadata.uid != old_uid and _ready(pods[server_name])
        ),
        timeout=600,
        what="the himeno server pod Ready",
    )
    selector = f"app.kubernetes.io/instance={release},app.kubernetes.io/component in (server,locale)"
    nodes = {
        str(p.metadata.name): str(p.spec.node_name or "")
        for p in cl.core.list_namespaced_pod(ns, label_selector=selector).items
        if p.metadata.deletion_timestamp is None
    }
    check_placement(nodes, same_node=same_node)
    deadline = time.monotonic() + 600
    last = "nothing fetched yet"
    while time.monotonic() < deadline:
        # One port-forward per attempt: kubectl ends it when a connection to the pod fails.
        try:
            with (
                cl.port_forward(ns, f"pod/{server_name}", RESULTS_PORT) as port,
                urllib.request.urlopen(f"http://127.0.0.1:{port}/output.txt", timeout=5) as resp,
            ):
                text = resp.read().decode()
            if "MFLOPS=" in text:
                return PodRun(mflops=parse_himeno(text), nodes=nodes)
            last = f"output without MFLOPS= yet: {text.strip()[-200:]!r}"
        except (OSError, BenchSetupError) as exc:
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(1)
    raise BenchSetupError(
        f"no himeno output from pod {server_name} (port {RESULTS_PORT}) within 600 s: {last}"
    )


def _summary_rows(
    group: str,
    case: str,
    samples: list[dict[str, float]],
    order: Sequence[str],
    *,
    command: str,
    note: str = "",
) -> list[Row]:
    return [
        Row.measured(group=group, case=case, metric=f"{name} (from start)", unit="s", command=command,
                     values=[s[name] for s in samples], note=note)
        for name in order
    ]  # fmt: skip


def run(
    *,
    kubeconfig: Path,
    repo_root: Path,
    repeats: int,
    himeno_host_binary: Path,
    command: str,
    groups: Sequence[str] = ("install", "compute"),
) -> list[Row]:
    """Rows 2-4 (groups: install = rows 2-3, compute = row 4); a row group whose run fails is reported as
    `failed: <reason>`; the next group still runs."""
    cl = Cluster.connect(kubeconfig=kubeconfig, repo_root=repo_root)
    stamp = time.strftime("%H%M%S")
    rows: list[Row] = []
    try:
        if "install" in groups:
            rows += _install_and_recovery(cl, repeats=repeats, command=command, stamp=stamp)
    except BenchSetupError as exc:
        log.warning("install/recovery rows failed: %s", exc)
        rows += [
            Row.failed(group=INSTALL, case=f"{INSTALL_LOCALES} locales", metric="helm install --wait phases",
                       command=command, reason=str(exc)),
            Row.failed(group=RECOVERY, case=f"{INSTALL_LOCALES} locales", metric="delete locale → Ready",
                       command=command, reason=str(exc)),
        ]  # fmt: skip
    try:
        if "compute" in groups:
            rows += _compute(cl, repeats=repeats, binary=himeno_host_binary, command=command, stamp=stamp)
    except BenchSetupError as exc:
        log.warning("compute rows failed: %s", exc)
        rows.append(
            Row.failed(group=COMPUTE, case=HIMENO_CASE, metric="pod / host MFLOPS",
                       command=command, reason=str(exc))
        )  # fmt: skip
    return rows


def _install_and_recovery(cl: Cluster, *, repeats: int, command: str, stamp: str) -> list[Row]:
    """Row 2 (each install in a fresh namespace) and row 3 (first locale loss of each fresh release); then two
    more losses on the last release. The server relaunches in place, so they should cost what the first did
    (when the container restarted instead, each further loss waited out the kubelet back-off: 10 s, 20 s)."""
    rows: list[Row] = []
    installs: list[dict[str, float]] = []
    recoveries: list[dict[str, float]] = []
    again: list[dict[str, float]] = []
    for rep in range(repeats):
        ns = cl.namespace(f"arkbench-install-{stamp}-{rep}")
        try:
            installs.append(install_once(cl, ns, "ak"))
            log.info("install %d/%d: %s", rep + 1, repeats, {k: round(v, 2) for k, v in installs[-1].items()})
            recoveries.append(recover_once(cl, ns, "ak"))
            log.info(
                "recovery %d/%d: %s", rep + 1, repeats, {k: round(v, 2) for k, v in recoveries[-1].items()}
            )
            if rep == repeats - 1:
                for k in (2, 3):
                    again.append(recover_once(cl, ns, "ak"))
                    log.info(
                        "loss %d on the same release: %s", k, {n: round(v, 2) for n, v in again[-1].items()}
                    )
        finally:
            cl.drop_namespace(ns)
    order = ("hook Job succeeded", "all pods scheduled", "locales Ready", "server Ready", "helm returned")
    rows += _summary_rows(
        INSTALL, f"{INSTALL_LOCALES} locales", installs, order, command=command,
        note="helm install --wait, values/local.yaml",
    )  # fmt: skip
    rows += _summary_rows(
        RECOVERY, f"{INSTALL_LOCALES} locales, first loss", recoveries, RECOVERY_MARKS,
        command=command, note="delete locale-1 (grace 0) on a fresh release",
    )  # fmt: skip
    for k, sample in zip((2, 3), again, strict=False):
        rows += _summary_rows(
            RECOVERY, f"{INSTALL_LOCALES} locales, loss {k} on one release", [sample],
            RECOVERY_MARKS, command=command, note="relaunched in place: no restart back-off",
        )  # fmt: skip
    return rows


ONE_NODE = "one node"
TWO_NODES = "two nodes"


def _pod_rows(placement: str, runs: list[PodRun], host: list[float], *, command: str, link: str) -> list[Row]:
    """MFLOPS of the pod runs of one placement and their ratio to the host run of the same repeat."""
    where = "; ".join(sorted({", ".join(f"{p} on {n}" for p, n in sorted(r.nodes.items())) for r in runs}))
    return [
        Row.measured(group=COMPUTE, case=HIMENO_CASE, metric=f"pods on {placement} (server + locale pod)",
                     unit="MFLOPS", command=command, values=[r.mflops for r in runs],
                     note=f"{link}; {where}"),
        Row.measured(group=COMPUTE, case=HIMENO_CASE, metric=f"pod / host ratio, {placement}", unit="x",
                     command=command, values=[r.mflops / h for r, h in zip(runs, host, strict=True)],
                     note="per repeat, same run"),
    ]  # fmt: skip


def why_not_two_nodes(nodes: Sequence[str]) -> str:
    """Why the two-node rows cannot run on these schedulable nodes (empty when they can)."""
    if len(nodes) >= 2:
        return ""
    return (
        f"{len(nodes)} schedulable node ({', '.join(nodes) or 'none'}): ranks on two nodes need 2 or more "
        "(make cluster-up NODES=3, or make bench-cluster E2E_NODES=3)"
    )


def _compute(cl: Cluster, *, repeats: int, binary: Path, command: str, stamp: str) -> list[Row]:
    """Row 4: Himeno on the host, then in the pods on one node, then (two schedulable nodes or more) in the
    pods on two nodes, within each repeat. A failure of the two-node runs keeps the host and one-node rows."""
    if not binary.is_file():
        raise BenchSetupError(f"host himeno {binary} missing (make mpi-demo-host)")
    two_nodes_reason = why_not_two_nodes(cl.schedulable_nodes())
    two_nodes_failed = ""
    ns = cl.namespace(f"arkbench-himeno-{stamp}")
    host: list[float] = []
    one: list[PodRun] = []
    two: list[PodRun] = []
    try:
        for rep in range(repeats):
            host.append(himeno_host(binary))
            one.append(himeno_pods(cl, ns, "hm", first=rep == 0, same_node=True))
            if not two_nodes_reason and not two_nodes_failed:
                try:
                    two.append(himeno_pods(cl, ns, "hx", first=rep == 0, same_node=False))
                except BenchSetupError as exc:
                    log.warning("himeno on two nodes failed: %s", exc)
                    two_nodes_failed = str(exc)
            log.info(
                "himeno %d/%d: host %.1f, one node %.1f, two nodes %s MFLOPS", rep + 1, repeats, host[-1],
                one[-1].mflops, f"{two[-1].mflops:.1f}" if len(two) == len(host) else "-",
            )  # fmt: skip
    finally:
        cl.drop_namespace(ns)
    rows = [
        Row.measured(group=COMPUTE, case=HIMENO_CASE, metric="host (mpirun on the node)", unit="MFLOPS",
                     command=command, values=host, note="ranks share memory on one host"),
        *_pod_rows(ONE_NODE, one, host, command=command, link="ranks talk TCP through the node's pod bridge"),
    ]  # fmt: skip
    if two_nodes_reason or two_nodes_failed:
        for metric in (f"pods on {TWO_NODES} (server + locale pod)", f"pod / host ratio, {TWO_NODES}"):
            make = Row.not_run if two_nodes_reason else Row.failed
            rows.append(make(group=COMPUTE, case=HIMENO_CASE, metric=metric, command=command,
                             reason=two_nodes_reason or two_nodes_failed))  # fmt: skip
    else:
        rows += _pod_rows(
            TWO_NODES, two, host, command=command, link="ranks talk TCP between the nodes' pod networks"
        )
    return rows


def not_run_rows(reason: str, command: str) -> list[Row]:
    return [
        Row.not_run(group=INSTALL, case=f"{INSTALL_LOCALES} locales", metric="helm install --wait phases",
                    command=command, reason=reason),
        Row.not_run(group=RECOVERY, case=f"{INSTALL_LOCALES} locales", metric="delete locale → Ready",
                    command=command, reason=reason),
        Row.not_run(group=COMPUTE, case=HIMENO_CASE, metric="pod / host MFLOPS",
                    command=command, reason=reason),
    ]  # fmt: skip
