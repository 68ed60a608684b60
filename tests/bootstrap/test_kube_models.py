"""The seam's conversions from the API server's JSON and its error translation. The JSON is made from the
client's real model classes (the wire form the API server sends); the requests themselves are in
test_kube_api.py."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.kube.api import (
    ApiUnavailableError,
    ForbiddenError,
    event_from_json,
    event_from_watch,
    pod_from_json,
    resolve_namespace,
    translate_api_error,
)
from kubernetes import client
from kubernetes.client.exceptions import ApiException


def wire(model: Any) -> dict[str, Any]:
    """The JSON the API server sends for a model (camelCase keys, RFC 3339 times)."""
    data = json.loads(json.dumps(client.ApiClient().sanitize_for_serialization(model)))
    assert isinstance(data, dict)
    return data


def container_status(name: str, *, ready: bool, restarts: int, state: Any) -> Any:
    return client.V1ContainerStatus(
        name=name, ready=ready, restart_count=restarts, image="i", image_id="", state=client.V1ContainerState(**state)
    )


def v1pod() -> Any:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            name="rel-arkouda-locale-2",
            namespace="ns",
            uid="u1",
            labels={"apps.kubernetes.io/pod-index": "2"},
            resource_version="77",
        ),
        status=client.V1PodStatus(
            phase="Pending",
            pod_ip=None,
            conditions=[
                client.V1PodCondition(
                    type="PodScheduled",
                    status="False",
                    reason="Unschedulable",
                    message="0/3 nodes are available: 3 Insufficient cpu.",
                )
            ],
            container_statuses=[
                container_status(
                    "sshd",
                    ready=False,
                    restarts=3,
                    state={"waiting": client.V1ContainerStateWaiting(reason="CrashLoopBackOff", message="back-off")},
                )
            ],
        ),
    )


def ready_pod() -> Any:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            name="rel-arkouda-locale-0",
            namespace="ns",
            resource_version="80",
            deletion_timestamp=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        ),
        status=client.V1PodStatus(
            phase="Running",
            pod_ip="10.244.0.7",
            conditions=[client.V1PodCondition(type="Ready", status="True")],
            init_container_statuses=[
                container_status(
                    "init",
                    ready=True,
                    restarts=0,
                    state={"terminated": client.V1ContainerStateTerminated(exit_code=0, reason="Completed")},
                )
            ],
            container_statuses=[
                container_status("sshd", ready=True, restarts=1, state={"running": client.V1ContainerStateRunning()})
            ],
        ),
    )


def test_pod_from_json() -> None:
    pod = pod_from_json(wire(v1pod()))
    assert pod.name == "rel-arkouda-locale-2"
    assert pod.labels["apps.kubernetes.io/pod-index"] == "2"
    assert pod.phase == "Pending"
    assert pod.pod_ip is None
    assert not pod.ready
    assert pod.resource_version == "77"
    cond = pod.condition("PodScheduled")
    assert cond is not None and cond.message.startswith("0/3 nodes")
    assert pod.containers[0].state == "waiting"
    assert pod.containers[0].reason == "CrashLoopBackOff"
    assert pod.containers[0].restart_count == 3  # the supervisor's evidence of a restarted locale


def test_pod_from_json_running_terminated_and_deleting() -> None:
    pod = pod_from_json(wire(ready_pod()))
    assert (pod.pod_ip, pod.phase, pod.deleting) == ("10.244.0.7", "Running", True)
    assert not pod.ready  # Ready condition but being deleted
    assert [(c.name, c.state, c.exit_code, c.restart_count) for c in pod.containers] == [
        ("init", "terminated", 0, 0),
        ("sshd", "running", None, 1),
    ]
    assert pod.containers[1].ready


def test_event_from_json() -> None:
    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    ev = event_from_json(
        wire(
            client.CoreV1Event(
                metadata=client.V1ObjectMeta(name="x"),
                involved_object=client.V1ObjectReference(name="p"),
                type="Warning",
                reason="FailedScheduling",
                message=" 0/3 nodes\n",
                last_timestamp=when,
            )
        )
    )
    assert (ev.type, ev.reason, ev.message, ev.last_seen) == (
        "Warning",
        "FailedScheduling",
        "0/3 nodes",
        when,
    )
    # the API server writes UTC as `Z`; events.k8s.io-style events only have eventTime (with microseconds)
    ev = event_from_json({"type": "Normal", "eventTime": "2026-01-01T00:00:01.500000Z"})
    assert ev.last_seen == dt.datetime(2026, 1, 1, 0, 0, 1, 500000, tzinfo=dt.UTC)
    assert event_from_json({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}}).last_seen == when


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (403, "missing RBAC: list pods in namespace ns"),
        (401, "unauthorized"),
        (500, "list pods in namespace ns failed: HTTP 500"),
    ],
)
def test_translate_api_error(status: int, expected: str) -> None:
    err = translate_api_error(ApiException(status=status, reason="x"), verb="list", resource="pods", namespace="ns")
    assert isinstance(err, BootstrapError)
    assert isinstance(err, ForbiddenError) == (status == 403)
    assert isinstance(err, ApiUnavailableError) == (status == 500)  # worth a retry
    assert str(err).startswith(expected)


def test_event_from_watch_bookmark_change_and_unknown() -> None:
    bookmark = event_from_watch({"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "9"}}})
    assert bookmark is not None and (bookmark.type, bookmark.pod, bookmark.resource_version) == ("BOOKMARK", None, "9")
    deleted = event_from_watch({"type": "DELETED", "object": wire(v1pod())})
    assert deleted is not None and deleted.pod is not None
    assert (deleted.type, deleted.pod.name, deleted.resource_version) == ("DELETED", "rel-arkouda-locale-2", "77")
    assert event_from_watch({"type": "SOMETHING-NEW", "object": {}}) is None


def test_resolve_namespace(tmp_path: Any) -> None:
    assert resolve_namespace("explicit", namespace_file=tmp_path / "none") == "explicit"
    f = tmp_path / "namespace"
    f.write_text("from-file\n")
    assert resolve_namespace(None, namespace_file=f) == "from-file"
    with pytest.raises(BootstrapError, match="namespace unknown"):
        resolve_namespace(None, namespace_file=tmp_path / "none")
