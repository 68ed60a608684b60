"""Queueing through Kueue on the local cluster (Kueue from hack/cluster/kueue.sh; make e2e-prepare
installs it).

The same release (values/local.yaml: the server pod and 2 locale pods, `global.scheduling.queueName`) timed
two ways in each repeat, in one namespace with its own ClusterQueue:

- empty queue: `helm install` → every server and locale pod Ready, nothing else in the ClusterQueue (Kueue
  admits at once; the install's keygen hook is part of it);
- queued: a first release holds the ClusterQueue's quota (room for one release and a half, measured from the
  first admitted Workload), the release is installed and waits in the queue; from the moment `helm uninstall`
  of the first returns (its post-delete hook has deleted its Workload: the quota is free) → every pod of the
  queued release Ready. Its keygen hook ran while it was queued, so this is admission, scheduling, start and
  launch.
"""

from __future__ import annotations

import logging
import time
import uuid
from decimal import Decimal
from typing import Any

from kubernetes import client

from arkouda_bench.cluster import Cluster, release_ready
from arkouda_bench.results import Row
from arkouda_bench.sshd import BenchSetupError

log = logging.getLogger(__name__)

GROUP = "queueing through Kueue (3 locales)"
CASE = "values/local.yaml, one ClusterQueue"
LOCALES = 3
QUEUE = "arkouda"
KUEUE = ("kueue.x-k8s.io", "v1beta2")
# the namespace label the local Kueue's webhooks act on (hack/cluster/kueue.sh)
OPT_IN = "arkouda-k8s.test/kueue"
METRICS = ("helm install → Ready, empty queue", "quota freed → queued release Ready")
TIMEOUT = 300.0


def quantity(text: str) -> Decimal:
    """A Kubernetes quantity as Kueue writes a Workload's resourceUsage (m, Ki, Mi, Gi or none)."""
    for suffix, factor in (
        ("m", Decimal("0.001")),
        ("Ki", Decimal(2**10)),
        ("Mi", Decimal(2**20)),
        ("Gi", Decimal(2**30)),
    ):
        if text.endswith(suffix):
            return Decimal(text[: -len(suffix)]) * factor
    return Decimal(text)


def usage(workload: dict[str, Any]) -> dict[str, Decimal]:
    """cpu and memory an admitted Workload holds, summed over its pod sets."""
    total = {"cpu": Decimal(0), "memory": Decimal(0)}
    for podset in workload["status"]["admission"]["podSetAssignments"]:
        for name, value in (podset.get("resourceUsage") or {}).items():
            if name in total:
                total[name] += quantity(value)
    return total


def quota_for(used: dict[str, Decimal], *, releases: Decimal) -> list[dict[str, str]]:
    """The flavor's resources with room for `releases` releases of this usage."""
    return [
        {"name": name, "nominalQuota": str((value * releases).quantize(Decimal("0.001")))}
        for name, value in sorted(used.items())
    ]


class Queue:
    """The namespace's ResourceFlavor, ClusterQueue and LocalQueue (cluster-scoped ones named after it)."""

    def __init__(self, cl: Cluster, ns: str) -> None:
        self.custom = client.CustomObjectsApi(cl.core.api_client)
        self.ns, self.flavor, self.cq = ns, f"{ns}-flavor", f"{ns}-cq"

    def create(self) -> None:
        group, version = KUEUE
        api = f"{group}/{version}"
        self.custom.create_cluster_custom_object(
            group,
            version,
            "resourceflavors",
            {"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": self.flavor}},
        )
        self.custom.create_cluster_custom_object(
            group,
            version,
            "clusterqueues",
            {
                "apiVersion": api,
                "kind": "ClusterQueue",
                "metadata": {"name": self.cq},
                "spec": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.ns}},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory"],
                            "flavors": [
                                {
                                    "name": self.flavor,
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": "100"},
                                        {"name": "memory", "nominalQuota": "1000Gi"},
                                    ],
                                }
                            ],
                        }
                    ],
                },
            },
        )
        self.custom.create_namespaced_custom_object(
            group,
            version,
            self.ns,
            "localqueues",
            {
                "apiVersion": api,
                "kind": "LocalQueue",
                "metadata": {"name": QUEUE, "namespace": self.ns},
                "spec": {"clusterQueue": self.cq},
            },
        )

    def set_quota(self, resources: list[dict[str, str]]) -> None:
        group, version = KUEUE
        live: Any = self.custom.get_cluster_custom_object(group, version, "clusterqueues", self.cq)
        spec = live["spec"]
        spec["resourceGroups"][0]["flavors"][0]["resources"] = resources
        self.custom.patch_cluster_custom_object(group, version, "clusterqueues", self.cq, {"spec": spec})

    def workload(self, release: str) -> dict[str, Any] | None:
        group, version = KUEUE
        try:
            found: Any = self.custom.get_namespaced_custom_object(
                group, version, self.ns, "workloads", f"{release}-arkouda-group"
            )
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return dict(found)

    def condition(self, release: str, kind: str) -> dict[str, Any] | None:
        wl = self.workload(release) or {}
        return next((c for c in (wl.get("status") or {}).get("conditions", []) if c["type"] == kind), None)

    def wait_condition(self, release: str, kind: str, status: str, *, timeout: float) -> dict[str, Any]:
        """Kueue's Workload is read until the condition holds (a Workload appears only once all its pods
        exist, so there is nothing to watch from the start)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            cond = self.condition(release, kind)
            if cond is not None and cond.get("status") == status:
                return cond
            time.sleep(0.5)
        raise BenchSetupError(f"Workload of {release}: no {kind}={status} within {timeout:.0f} s")

    def delete(self) -> None:
        group, version = KUEUE
        for plural, name in (("clusterqueues", self.cq), ("resourceflavors", self.flavor)):
            try:
                self.custom.delete_cluster_custom_object(group, version, plural, name)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise


def kueue_missing(cl: Cluster) -> str:
    """Why the rows cannot run here (empty when Kueue serves)."""
    try:
        client.AppsV1Api(cl.core.api_client).read_namespaced_deployment(
            "kueue-controller-manager", "kueue-system"
        )
    except client.ApiException as exc:
        if exc.status == 404:
            return "no Kueue on this cluster (make e2e-prepare installs it: E2E_KUEUE=1, kueue.sh up)"
        raise
    return ""


def install(cl: Cluster, ns: str, release: str) -> float:
    """`helm install` (no --wait) of the release in the queue; time.time() before it."""
    t0 = time.time()
    cl.helm(
        "install",
        release,
        str(cl.chart),
        "-n",
        ns,
        "-f",
        str(cl.values("local.yaml")),
        "--set",
        "tests.enabled=false",
        "--set",
        f"global.scheduling.queueName={QUEUE}",
    )
    return t0


def ready_at(cl: Cluster, ns: str, release: str) -> float:
    def done(pods: dict[str, Any]) -> bool:
        mine = [
            p for p in pods.values() if (p.metadata.labels or {}).get("app.kubernetes.io/instance") == release
        ]
        return release_ready(mine, locales=LOCALES)

    return cl.wait_pods(ns, done, timeout=TIMEOUT, what=f"{release} Ready")


def uninstall(cl: Cluster, ns: str, release: str) -> float:
    """`helm uninstall --wait`; time.time() when it returned."""
    cl.helm("uninstall", release, "-n", ns, "--wait", "--timeout", "3m")
    return time.time()


def run(*, kubeconfig: Any, repo_root: Any, repeats: int, command: str) -> list[Row]:
    cl = Cluster.connect(kubeconfig=kubeconfig, repo_root=repo_root)
    reason = kueue_missing(cl)
    if reason:
        return not_run_rows(reason, command)
    ns = cl.namespace(f"bench-queue-{uuid.uuid4().hex[:6]}")
    cl.core.patch_namespace(ns, {"metadata": {"labels": {OPT_IN: "enabled"}}})
    queue = Queue(cl, ns)
    empty: list[float] = []
    queued: list[float] = []
    try:
        queue.create()
        for i in range(repeats):
            t0 = install(cl, ns, "solo")
            empty.append(ready_at(cl, ns, "solo") - t0)
            if i == 0:  # the quota: room for one release and a half of what Kueue admitted
                admitted = queue.workload("solo")
                assert admitted is not None
                queue.set_quota(quota_for(usage(admitted), releases=Decimal("1.5")))
            uninstall(cl, ns, "solo")
            install(cl, ns, "first")
            ready_at(cl, ns, "first")
            install(cl, ns, "queued")
            pending = queue.wait_condition("queued", "QuotaReserved", "False", timeout=120)
            freed = uninstall(cl, ns, "first")
            queued.append(ready_at(cl, ns, "queued") - freed)
            uninstall(cl, ns, "queued")
            log.info(
                "queue %d/%d: empty %.1f s, queued %.1f s (it waited: %s)",
                i + 1,
                repeats,
                empty[-1],
                queued[-1],
                pending.get("message", ""),
            )
    except BenchSetupError as exc:
        log.warning("queue rows failed: %s", exc)
        return [
            Row.failed(group=GROUP, case=CASE, metric=m, command=command, reason=str(exc)) for m in METRICS
        ]
    finally:
        cl.drop_namespace(ns)
        queue.delete()
    note = "Kueue v0.19.2 of hack/cluster; the queued release's keygen hook ran while it waited"
    return [
        Row.measured(
            group=GROUP, case=CASE, metric=METRICS[0], unit="s", command=command, values=empty, note=note
        ),
        Row.measured(
            group=GROUP, case=CASE, metric=METRICS[1], unit="s", command=command, values=queued, note=note
        ),
    ]


def not_run_rows(reason: str, command: str) -> list[Row]:
    return [Row.not_run(group=GROUP, case=CASE, metric=m, command=command, reason=reason) for m in METRICS]
