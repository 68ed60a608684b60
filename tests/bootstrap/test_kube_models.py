"""The seam's conversions from the client's real model classes, and API error translation."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.kube import (
    GoneError,
    KubernetesApi,
    event_from_model,
    event_from_watch,
    pod_from_model,
    resolve_namespace,
    translate_api_error,
)
from kubernetes import client
from kubernetes.client.exceptions import ApiException


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
                client.V1ContainerStatus(
                    name="sshd",
                    ready=False,
                    restart_count=3,
                    image="i",
                    image_id="",
                    state=client.V1ContainerState(
                        waiting=client.V1ContainerStateWaiting(reason="CrashLoopBackOff", message="back-off")
                    ),
                )
            ],
        ),
    )


def test_pod_from_model() -> None:
    pod = pod_from_model(v1pod())
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
    assert pod.containers[0].restart_count == 3


def test_event_from_model() -> None:
    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    ev = event_from_model(
        client.CoreV1Event(
            metadata=client.V1ObjectMeta(name="x"),
            involved_object=client.V1ObjectReference(name="p"),
            type="Warning",
            reason="FailedScheduling",
            message=" 0/3 nodes\n",
            last_timestamp=when,
        )
    )
    assert (ev.type, ev.reason, ev.message, ev.last_seen) == ("Warning", "FailedScheduling", "0/3 nodes", when)


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
    assert str(err).startswith(expected)


class ForbiddenCore:
    """Test double of CoreV1Api that answers every call with the given HTTP status."""

    def __init__(self, status: int) -> None:
        self.status = status

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            raise ApiException(status=self.status, reason="Forbidden")

        return call


def test_real_seam_names_missing_rbac_verb() -> None:
    api = KubernetesApi(ForbiddenCore(403))
    with pytest.raises(BootstrapError, match="^missing RBAC: list pods in namespace ns$"):
        api.list_pods(namespace="ns", selector="a=b")
    with pytest.raises(BootstrapError, match="^missing RBAC: create secrets in namespace ns$"):
        api.create_secret(namespace="ns", name="s", data={}, labels={})
    with pytest.raises(BootstrapError, match="^missing RBAC: get secrets in namespace ns$"):
        api.get_secret(namespace="ns", name="s")


def test_real_seam_404_secret_is_none_and_410_watch_is_gone() -> None:
    assert KubernetesApi(ForbiddenCore(404)).get_secret(namespace="ns", name="s") is None
    assert KubernetesApi(ForbiddenCore(404)).delete_secret(namespace="ns", name="s") is False
    with pytest.raises(GoneError):
        list(
            KubernetesApi(ForbiddenCore(410)).watch_pods(
                namespace="ns", selector="a=b", resource_version="1", timeout_seconds=1
            )
        )


def test_resolve_namespace(tmp_path: Any) -> None:
    assert resolve_namespace("explicit", namespace_file=tmp_path / "none") == "explicit"
    f = tmp_path / "namespace"
    f.write_text("from-file\n")
    assert resolve_namespace(None, namespace_file=f) == "from-file"
    with pytest.raises(BootstrapError, match="namespace unknown"):
        resolve_namespace(None, namespace_file=tmp_path / "none")


def test_from_kubeconfig_builds_a_seam(tmp_path: Any) -> None:
    cfg = tmp_path / "kubeconfig"
    cfg.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u, namespace: ns}}]\n"
    )
    assert isinstance(KubernetesApi.from_kubeconfig(cfg), KubernetesApi)


def test_event_from_watch() -> None:
    ev = event_from_watch({"type": "MODIFIED", "object": v1pod(), "raw_object": {}})
    assert ev is not None
    assert (ev.type, ev.resource_version) == ("MODIFIED", "77")
    assert ev.pod is not None
    assert ev.pod.name == "rel-arkouda-locale-2"
    # the client leaves BOOKMARK objects as raw dicts
    bookmark = {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "12345"}}
    ev = event_from_watch({"type": "BOOKMARK", "object": bookmark, "raw_object": bookmark})
    assert ev is not None
    assert (ev.type, ev.pod, ev.resource_version) == ("BOOKMARK", None, "12345")
    with pytest.raises(GoneError):
        event_from_watch({"type": "ERROR", "object": {}, "raw_object": {"code": 410, "message": "too old"}})
    with pytest.raises(BootstrapError, match="watch pods failed: 500"):
        event_from_watch({"type": "ERROR", "object": {}, "raw_object": {"code": 500, "message": "boom"}})
