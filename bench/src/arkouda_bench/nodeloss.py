"""Node loss rows on the local 3-node cluster (make cluster-up NODES=3; images: make e2e-prepare).

One release (values/local.yaml: the server pod and 2 locale pods), its server pod held on node 0 (which the
cluster's scripts never stop) and its locale pods on distinct nodes (`locale.antiAffinity: required`), so one
of them is always on an extra node. Each repeat kills the node of such a locale as a power loss would
(`hack/cluster/node-kill.sh`: kubelet, runtime, containers and the node's link at once), times the steps from
the kill by watch events on the namespace's Events and Pods, then brings the node back (`node-restore.sh`)
before the next repeat:

- `LocaleLost`: the server's supervisor stopped the program (the lost locale missed its probes for 20 s);
- `NodeLost`: nodewatch force-deleted the lost pod (the node controller's mark and the data plane's evidence);
- program relaunched: the server's next `Launched` Event;
- release Ready: every pod of the release Ready, none on the dead node.

Kubernetes' controller settings and the chart's defaults throughout (the node controller's 50 s grace period
is most of the time).
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import uuid
from pathlib import Path

from arkouda_bench.cluster import Cluster, release_ready, time_relaunch
from arkouda_bench.results import Row
from arkouda_bench.sshd import BenchSetupError

log = logging.getLogger(__name__)

GROUP = "node loss on 3 nodes (3 locales)"
CASE = "node of a locale killed"
RELEASE = "nl"
LOCALES = 3  # values/local.yaml's numLocales: the server pod and 2 locale pods
NODE0 = "arkouda-node"  # runs the control plane; the scripts never stop it
KILLABLE = re.compile(r"arkouda-node-[1-9][0-9]*")
MARKS = ("LocaleLost", "NodeLost", "program relaunched", "release Ready")
RECOVERY_TIMEOUT = 300.0


def _script(repo_root: Path, name: str, *args: str, timeout: float) -> None:
    path = repo_root / "hack" / "cluster" / name
    proc = subprocess.run([str(path), *args], capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise BenchSetupError(f"{path.name} {' '.join(args)} failed: {(proc.stderr or proc.stdout)[-500:]}")


def killable_nodes(cl: Cluster) -> list[str]:
    return [n for n in cl.schedulable_nodes() if KILLABLE.fullmatch(n)]


def why_not(nodes: list[str], killable: list[str]) -> str:
    """Why this cluster cannot run the rows (empty when it can)."""
    if NODE0 not in nodes or len(killable) < 2:
        return (
            f"needs node {NODE0} and 2 extra nodes of hack/cluster (arkouda-node-<i>), Ready and "
            f"untainted: this cluster has {nodes} (make cluster-up NODES=3)"
        )
    return ""


def install_args(*, chart: Path, values: Path, namespace: str) -> list[str]:
    """`helm install` arguments (after `helm`): the server pod on node 0, locale pods on distinct nodes."""
    on_node0 = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE0]}]}]}  # fmt: skip
    return [
        "install", RELEASE, str(chart), "-n", namespace, "-f", str(values),
        "--set", "tests.enabled=false", "--set", "locale.antiAffinity=required",
        "--set-json", "server.affinity=" + json.dumps({"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": on_node0}}),
        "--wait", "--timeout", "8m",
    ]  # fmt: skip


def lose_once(cl: Cluster, ns: str, repo_root: Path) -> tuple[str, dict[str, float]]:
    """Kill the node of a locale on an extra node; (node, seconds from the kill to each mark)."""
    server = f"{RELEASE}-arkouda-server-0"
    locales = cl.core.list_namespaced_pod(
        ns, label_selector=f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=locale"
    ).items
    victims = [p for p in locales if KILLABLE.fullmatch(p.spec.node_name or "")]
    if not victims:
        where = {p.metadata.name: p.spec.node_name for p in locales}
        raise BenchSetupError(f"no locale pod on an extra node to lose: {where}")
    dead = str(victims[0].spec.node_name)
    marks = time_relaunch(
        cl, ns, server,
        loss=lambda: _script(repo_root, "node-kill.sh", dead, timeout=120),
        ready=lambda pods: release_ready(pods, locales=LOCALES, off_node=dead),
        reasons=("LocaleLost", "NodeLost"), timeout=RECOVERY_TIMEOUT,
    )  # fmt: skip
    if marks is None:
        raise BenchSetupError(f"node {dead} lost: release not Ready within {RECOVERY_TIMEOUT:.0f} s")
    return dead, marks


def run(*, kubeconfig: Path, repo_root: Path, repeats: int, command: str) -> list[Row]:
    cl = Cluster.connect(kubeconfig=kubeconfig, repo_root=repo_root)
    nodes = cl.schedulable_nodes()
    reason = why_not(nodes, killable_nodes(cl))
    if reason:
        return not_run_rows(reason, command)
    ns = cl.namespace(f"bench-nodeloss-{uuid.uuid4().hex[:6]}")
    samples: list[dict[str, float]] = []
    down: list[str] = []
    try:
        cl.helm(*install_args(chart=cl.chart, values=cl.values("local.yaml"), namespace=ns))
        for i in range(repeats):
            dead, sample = lose_once(cl, ns, repo_root)
            down.append(dead)
            samples.append(sample)
            log.info(
                "node loss %d/%d (%s): %s", i + 1, repeats, dead, {k: round(v, 1) for k, v in sample.items()}
            )
            _script(repo_root, "node-restore.sh", dead, timeout=300)
            down.remove(dead)
    except BenchSetupError as exc:
        log.warning("node loss rows failed: %s", exc)
        return [
            Row.failed(
                group=GROUP, case=CASE, metric="kill → release Ready", command=command, reason=str(exc)
            )
        ]
    finally:
        for node in down:  # a node left down would take the next part's pods with it
            try:
                _script(repo_root, "node-restore.sh", node, timeout=300)
            except BenchSetupError as exc:
                log.warning("%s (make cluster-down removes it)", exc)
        cl.drop_namespace(ns)
    note = (
        "values/local.yaml, chart defaults; server pod on node 0, locales on distinct nodes; "
        "Kubernetes' default node-monitor grace 50 s"
    )
    return [
        Row.measured(group=GROUP, case=CASE, metric=f"kill → {mark}", unit="s", command=command,
                     values=[s[mark] for s in samples if mark in s], note=note)
        for mark in MARKS
        if any(mark in s for s in samples)
    ]  # fmt: skip


def not_run_rows(reason: str, command: str) -> list[Row]:
    return [
        Row.not_run(group=GROUP, case=CASE, metric="kill → release Ready", command=command, reason=reason)
    ]
