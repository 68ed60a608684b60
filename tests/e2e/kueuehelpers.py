"""Kueue on the local cluster (hack/cluster/kueue.sh) for the e2e modules that queue releases: one ClusterQueue
and LocalQueue per test namespace, the release's Workload and its conditions, and the quota measured from an
admitted release rather than guessed."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from kubernetes import client

from kubehelpers import Kube, helm

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
OPT_IN = "arkouda-k8s.test/kueue"  # the namespace label Kueue's webhooks act on here (hack/cluster/kueue.sh)
QUEUE = "arkouda"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
RESOURCES = ("cpu", "memory")


def quantity(text: str) -> Decimal:
    """A Kubernetes quantity as a number (the suffixes Kueue writes: m, Ki, Mi, Gi, or none)."""
    for suffix, factor in (("m", Decimal("0.001")), ("Ki", 2**10), ("Mi", 2**20), ("Gi", 2**30)):
        if text.endswith(suffix):
            return Decimal(text[: -len(suffix)]) * factor
    return Decimal(text)


def kueue_or_skip(kube: Kube, module: str) -> client.CustomObjectsApi:
    """The custom-objects API when Kueue runs on this cluster; skips the module, saying why, when it does not."""
    try:
        kube.apps.read_namespaced_deployment("kueue-controller-manager", "kueue-system")
    except client.ApiException as exc:
        if exc.status != 404:
            raise
        reason = "no Kueue on this cluster (make e2e installs it: E2E_KUEUE=1, hack/cluster/kueue.sh up)"
        print(f"SKIP {module}: {reason}")
        pytest.skip(reason)
    return client.CustomObjectsApi(kube.api)


class Queue:
    """A ResourceFlavor, a ClusterQueue for namespace `ns` only (quota large until `fit` sets it) and the
    LocalQueue QUEUE in `ns`, which is labelled so that Kueue's webhooks act on it."""

    def __init__(self, kube: Kube, custom: client.CustomObjectsApi, ns: str) -> None:
        self.custom, self.ns = custom, ns
        self.flavor, self.cq = f"{ns}-flavor", f"{ns}-cq"
        kube.core.patch_namespace(ns, {"metadata": {"labels": {OPT_IN: "enabled"}}})
        custom.create_cluster_custom_object(GROUP, VERSION, "resourceflavors", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor", "metadata": {"name": self.flavor}})
        custom.create_cluster_custom_object(GROUP, VERSION, "clusterqueues", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue", "metadata": {"name": self.cq},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                "resourceGroups": [{"coveredResources": list(RESOURCES), "flavors": [{"name": self.flavor,
                    "resources": [{"name": "cpu", "nominalQuota": "100"},
                                  {"name": "memory", "nominalQuota": "1000Gi"}]}]}],
            }})  # fmt: skip
        custom.create_namespaced_custom_object(GROUP, VERSION, ns, "localqueues", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue", "metadata": {"name": QUEUE, "namespace": ns},
            "spec": {"clusterQueue": self.cq}})  # fmt: skip

    def fit(self, used: dict[str, Decimal], factor: Decimal) -> dict[str, str]:
        """Set the ClusterQueue's quota to `factor` times one release's usage; returns the new quota."""
        quota = {name: str((value * factor).quantize(Decimal("0.001"))) for name, value in used.items()}
        live: Any = self.custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", self.cq)
        spec = live["spec"]
        spec["resourceGroups"][0]["flavors"][0]["resources"] = [
            {"name": "cpu", "nominalQuota": quota["cpu"]}, {"name": "memory", "nominalQuota": quota["memory"]}]
        self.custom.patch_cluster_custom_object(GROUP, VERSION, "clusterqueues", self.cq, {"spec": spec})
        return quota

    def delete(self, releases: tuple[str, ...]) -> None:
        """Uninstall `releases` (their post-delete hooks free the quota), then the cluster-scoped queue objects."""
        for release in releases:
            helm("uninstall", release, "-n", self.ns, "--wait", "--timeout", "2m", check=False)
        for plural, obj in (("clusterqueues", self.cq), ("resourceflavors", self.flavor)):
            try:
                self.custom.delete_cluster_custom_object(GROUP, VERSION, plural, obj)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise


def workload(custom: client.CustomObjectsApi, ns: str, release: str) -> dict[str, Any] | None:
    """The release's Workload: Kueue names a pod group's Workload after the group (the chart's podGroupName)."""
    try:
        found: Any = custom.get_namespaced_custom_object(GROUP, VERSION, ns, "workloads", f"{release}-arkouda-group")
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return dict(found)


def condition(wl: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    return next((c for c in ((wl or {}).get("status") or {}).get("conditions", []) if c["type"] == kind), None)


def admitted(wl: dict[str, Any] | None) -> bool:
    return (condition(wl, "Admitted") or {}).get("status") == "True"


def admitted_workload(custom: client.CustomObjectsApi, ns: str, release: str) -> dict[str, Any] | None:
    """The release's Workload once Kueue admitted it, else None."""
    wl = workload(custom, ns, release)
    return wl if admitted(wl) else None


def queued_reason(wl: dict[str, Any] | None) -> dict[str, Any] | None:
    """The QuotaReserved=False condition with Kueue's message, or None."""
    reserved = condition(wl, "QuotaReserved")
    return reserved if reserved and reserved["status"] == "False" and reserved.get("message") else None


def usage(wl: dict[str, Any]) -> dict[str, Decimal]:
    """What an admitted Workload holds of each covered resource, summed over its pod sets."""
    total = dict.fromkeys(RESOURCES, Decimal(0))
    for podset in wl["status"]["admission"]["podSetAssignments"]:
        for name, value in (podset.get("resourceUsage") or {}).items():
            if name in total:
                total[name] += quantity(value)
    return total
