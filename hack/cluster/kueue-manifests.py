"""Kueue's own config/default (rendered by `kubectl kustomize`, on stdin) changed only where the local cluster needs
it; the result on stdout for `kubectl apply`. Used by hack/cluster/kueue.sh.

- the controller image: the local one (never pulled), small requests (two-core nodes);
- its Configuration: integrations batch/job and pod (pod groups: a release's server and locale pods are one
  workload), waitForPodsReady, no leader election (one replica), metrics and health as upstream;
- no visibility API server: its APIServices would make API discovery fail for every client while it is not
  serving, and the suite does not use it;
- every webhook that acts on namespaced objects also requires the namespace label arkouda-k8s.test/kueue=enabled:
  Kueue's webhooks fail closed, and the suite's other modules (and its node-loss tests, which may stop Kueue's
  node) must never depend on it.
"""

from __future__ import annotations

import argparse
import copy
import sys
from typing import Any

import yaml

OPT_IN = {"key": "arkouda-k8s.test/kueue", "operator": "In", "values": ["enabled"]}

CONFIGURATION = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "health": {"healthProbeBindAddress": ":8081"},
    "metrics": {"bindAddress": ":8443"},
    "webhook": {"port": 9443},
    "leaderElection": {"leaderElect": False},
    "manageJobsWithoutQueueName": False,
    # an admitted workload whose pods are not all Ready in time is evicted and queued again
    "waitForPodsReady": {
        "timeout": "3m",
        "blockAdmission": False,
        "requeuingStrategy": {
            "timestamp": "Eviction",
            "backoffBaseSeconds": 10,
            "backoffMaxSeconds": 60,
        },
    },
    "integrations": {"frameworks": ["batch/job", "pod"]},
}


def change(doc: dict[str, Any], image: str) -> dict[str, Any] | None:
    kind = doc["kind"]
    name = doc["metadata"]["name"]
    if kind == "APIService" or (kind == "Service" and "visibility" in name):
        return None
    if kind == "ConfigMap" and name == "kueue-manager-config":
        doc["data"] = {
            "controller_manager_config.yaml": yaml.safe_dump(
                CONFIGURATION, sort_keys=False
            )
        }
    if kind == "Deployment":
        pod = doc["spec"]["template"]["spec"]
        for c in pod["containers"]:
            c["image"] = image
            c["imagePullPolicy"] = "Never"
            c["resources"] = {
                "requests": {"cpu": "50m", "memory": "128Mi"},
                "limits": {"memory": "512Mi"},
            }
            c["args"] = [
                a for a in c.get("args", []) if not a.startswith("--feature-gates")
            ]
            c["args"].append("--feature-gates=VisibilityOnDemand=false")
    if kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in doc["webhooks"]:
            selector = hook.get("namespaceSelector")
            if (
                selector is None
            ):  # Kueue's own kinds: cluster-scoped or in opted-in namespaces only
                continue
            selector.setdefault("matchExpressions", []).append(copy.deepcopy(OPT_IN))
    return doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--image", required=True, help="the controller image, already on every node"
    )
    ns = ap.parse_args()
    docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
    kept = [d for d in (change(d, ns.image) for d in docs) if d is not None]
    if not any(d["kind"] == "Deployment" for d in kept):
        print(
            "kueue-manifests: no Deployment in the rendered config/default",
            file=sys.stderr,
        )
        return 1
    yaml.safe_dump_all(kept, sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
