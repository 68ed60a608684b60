"""What the `helm test` scripts read from the Kubernetes API with the test pod's own service account
(templates/tests/test-rbac.yaml): a GET helper, and, with global.scheduling.queueName, whether the release waits
in its Kueue queue, in Kueue's words, so that a queued release fails the test at once with the reason instead of
timing out. Standard library only (the image's python3).

Environment (templates/tests/test-pod.yaml): KUEUE_WORKLOAD, KUEUE_QUEUE (with a queue only).
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

# The pod's own service account and the in-cluster API address.
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
API_SERVER = "https://kubernetes.default.svc"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads/{name}"

Get = Callable[[str], bytes]


def api_getter(*, account: Path = SERVICE_ACCOUNT, server: str = API_SERVER) -> Get:
    """GET an API path with the pod's service account token, verified against the cluster CA."""
    token = (account / "token").read_text().strip()
    context = ssl.create_default_context(cafile=str(account / "ca.crt"))

    def get(path: str) -> bytes:
        request = urllib.request.Request(server + path, headers={"Authorization": f"Bearer {token}"})  # noqa: S310
        with urllib.request.urlopen(request, timeout=10, context=context) as resp:  # noqa: S310 - the API server
            return bytes(resp.read())

    return get


def namespace(*, account: Path = SERVICE_ACCOUNT) -> str:
    return (account / "namespace").read_text().strip()


def gated(pod: Mapping[str, Any]) -> bool:
    """The pod waits for its scheduling gates (Kueue's admission) to be removed."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return bool(cond.get("reason") == "SchedulingGated")
    return False


def queue_reason(get: Get, *, ns: str, pod: Mapping[str, Any], environ: Mapping[str, str]) -> str | None:
    """With a queue (KUEUE_WORKLOAD, KUEUE_QUEUE), `pod` gated and Kueue's word that it cannot admit the group (its
    Workload's QuotaReserved=False with a reason): the one line saying the release is queued. None otherwise: no
    queue, not gated, or a moment Kueue has not judged yet (no Workload before every pod of the group exists, or
    admitted with the gates still being removed): the test then waits as for any release that starts."""
    workload, queue = environ.get("KUEUE_WORKLOAD", ""), environ.get("KUEUE_QUEUE", "")
    if not workload or not gated(pod):
        return None
    try:
        found = json.loads(get(WORKLOADS.format(namespace=ns, name=workload)))
    except (OSError, ValueError):
        return None
    conditions = (found.get("status") or {}).get("conditions") or []
    if any(c.get("type") == "Admitted" and c.get("status") == "True" for c in conditions):
        return None
    why = next(
        (c.get("message") or c.get("reason") for c in conditions
         if c.get("type") == "QuotaReserved" and c.get("status") == "False"),
        None,
    )  # fmt: skip
    if not why:
        return None
    name = pod["metadata"]["name"]
    where = f"the release is queued in LocalQueue {queue} (Kueue Workload {workload}; pod {name} gated)"
    return f"{where}: {why}; it starts once Kueue admits it (kubectl describe workload {workload})"


def server_pod_queue_reason(get: Get, *, ns: str, pod_name: str, environ: Mapping[str, str]) -> str | None:
    """`queue_reason` of the named pod; None when it does not exist (a sleeping release) or cannot be read."""
    if not environ.get("KUEUE_WORKLOAD"):
        return None
    try:
        pod = json.loads(get(f"/api/v1/namespaces/{ns}/pods/{pod_name}"))
    except (OSError, ValueError):
        return None
    return queue_reason(get, ns=ns, pod=pod, environ=environ)
