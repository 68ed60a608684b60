"""The seam's conversions from the API server's JSON, its HTTP layer (driven by a named test double of the
transport) and API error translation. The JSON is made from the client's real model classes (the wire form the
API server sends); the real transport against a real kube-apiserver runs in tests/e2e and `make bench-scale`."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.kube import (
    ApiStatusError,
    GoneError,
    KubernetesApi,
    PodRef,
    _Urllib3Response,
    event_from_json,
    event_from_watch,
    pod_from_json,
    resolve_namespace,
    translate_api_error,
)
from kubernetes import client


def wire(model: Any) -> dict[str, Any]:
    """The JSON the API server sends for a model (camelCase keys, RFC 3339 times)."""
    data = json.loads(json.dumps(client.ApiClient().sanitize_for_serialization(model)))
    assert isinstance(data, dict)
    return data


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
                client.V1ContainerStatus(
                    name="init",
                    ready=True,
                    restart_count=0,
                    image="i",
                    image_id="",
                    state=client.V1ContainerState(
                        terminated=client.V1ContainerStateTerminated(exit_code=0, reason="Completed")
                    ),
                )
            ],
            container_statuses=[
                client.V1ContainerStatus(
                    name="sshd",
                    ready=True,
                    restart_count=1,
                    image="i",
                    image_id="",
                    state=client.V1ContainerState(running=client.V1ContainerStateRunning()),
                )
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
    assert pod.containers[0].restart_count == 3


def test_pod_from_json_running_terminated_and_deleting() -> None:
    pod = pod_from_json(wire(ready_pod()))
    assert (pod.pod_ip, pod.phase, pod.deleting) == ("10.244.0.7", "Running", True)
    assert not pod.ready  # Ready condition but being deleted
    assert [(c.name, c.state, c.exit_code) for c in pod.containers] == [
        ("init", "terminated", 0),
        ("sshd", "running", None),
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
    err = translate_api_error(ApiStatusError(status, "x"), verb="list", resource="pods", namespace="ns")
    assert isinstance(err, BootstrapError)
    assert str(err).startswith(expected)


@dataclass
class CannedResponse:
    """Test double of one HTTP answer."""

    status: int = 200
    reason: str = "OK"
    payload: bytes = b"{}"
    watch_lines: Sequence[bytes] = ()
    closed: bool = False

    def body(self) -> bytes:
        return self.payload

    def lines(self) -> Iterator[bytes]:
        yield from self.watch_lines

    def close(self) -> None:
        self.closed = True


@dataclass
class ScriptedTransport:
    """Test double of the seam's Transport: answers each request with the next canned response and records it."""

    responses: list[CannedResponse]
    requests: list[dict[str, Any]] = field(default_factory=list)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any] | None = None,
        timeout: float,
        stream: bool = False,
    ) -> CannedResponse:
        self.requests.append(
            {
                "method": method,
                "path": path,
                "query": dict(query),
                "body": body,
                "timeout": timeout,
                "stream": stream,
            }
        )
        return self.responses.pop(0)


def seam(*responses: CannedResponse) -> tuple[KubernetesApi, ScriptedTransport]:
    transport = ScriptedTransport(list(responses))
    return KubernetesApi(transport), transport


def test_real_seam_names_missing_rbac_verb() -> None:
    forbidden = CannedResponse(403, "Forbidden")
    api, _ = seam(forbidden, CannedResponse(403, "Forbidden"), CannedResponse(403, "Forbidden"))
    with pytest.raises(BootstrapError, match="^missing RBAC: list pods in namespace ns$"):
        api.list_pods(namespace="ns", selector="a=b")
    with pytest.raises(BootstrapError, match="^missing RBAC: create secrets in namespace ns$"):
        api.create_secret(namespace="ns", name="s", data={}, labels={})
    with pytest.raises(BootstrapError, match="^missing RBAC: get secrets in namespace ns$"):
        api.get_secret(namespace="ns", name="s")
    assert forbidden.closed


def test_real_seam_404_secret_is_none_and_410_watch_is_gone() -> None:
    api, _ = seam(
        CannedResponse(404, "Not Found"),
        CannedResponse(404, "Not Found"),
        CannedResponse(410, "Gone"),
    )
    assert api.get_secret(namespace="ns", name="s") is None
    assert api.delete_secret(namespace="ns", name="s") is False
    with pytest.raises(GoneError):
        list(api.watch_pods(namespace="ns", selector="a=b", resource_version="1", timeout_seconds=1))


def test_list_pods_sends_the_selector_and_returns_the_list_version() -> None:
    listing = {
        "metadata": {"resourceVersion": "42"},
        "items": [wire(ready_pod()), wire(v1pod())],
    }
    api, transport = seam(CannedResponse(payload=json.dumps(listing).encode()))
    result = api.list_pods(namespace="my ns", selector="app=x,component=locale")
    assert result.resource_version == "42"
    assert [p.name for p in result.pods] == [
        "rel-arkouda-locale-0",
        "rel-arkouda-locale-2",
    ]
    assert transport.requests[0]["path"] == "/api/v1/namespaces/my%20ns/pods"
    assert transport.requests[0]["query"] == {"labelSelector": "app=x,component=locale"}
    assert transport.requests[0]["timeout"] > 0


def test_watch_pods_reads_lines_bookmarks_and_a_410_error_line() -> None:
    modified = json.dumps({"type": "MODIFIED", "object": wire(v1pod())}).encode()
    bookmark = json.dumps(
        {
            "type": "BOOKMARK",
            "object": {"kind": "Pod", "metadata": {"resourceVersion": "99"}},
        }
    )
    gone = json.dumps(
        {
            "type": "ERROR",
            "object": {"kind": "Status", "code": 410, "message": "too old"},
        }
    ).encode()
    api, transport = seam(CannedResponse(watch_lines=[modified, b"not json", bookmark.encode(), gone]))
    events = api.watch_pods(namespace="ns", selector="a=b", resource_version="7", timeout_seconds=10)
    first = next(events)
    assert (first.type, first.resource_version, first.pod is not None) == (
        "MODIFIED",
        "77",
        True,
    )
    second = next(events)
    assert (second.type, second.pod, second.resource_version) == (
        "BOOKMARK",
        None,
        "99",
    )
    with pytest.raises(GoneError, match="too old"):
        next(events)
    request = transport.requests[0]
    assert request["stream"] is True
    assert request["query"]["watch"] == "true"
    assert request["query"]["resourceVersion"] == "7"
    assert request["query"]["timeoutSeconds"] == "10"
    assert request["query"]["allowWatchBookmarks"] == "true"
    assert request["timeout"] > 10  # the client-side timeout outlasts the server's


def test_event_from_watch_error_other_than_410_is_one_line() -> None:
    with pytest.raises(BootstrapError, match="watch pods failed: 500 boom"):
        event_from_watch({"type": "ERROR", "object": {"code": 500, "message": "boom"}})


def test_create_event_body_is_a_valid_event_for_the_client_models() -> None:
    api, transport = seam(CannedResponse(201, "Created"))
    api.create_event(
        pod=PodRef(namespace="ns", name="r-arkouda-server-0", uid="u-1"),
        reason="Probed",
        message="m",
    )
    request = transport.requests[0]
    assert (request["method"], request["path"]) == (
        "POST",
        "/api/v1/namespaces/ns/events",
    )
    # the client's own model accepts the body: field names and types are the API's
    event = client.ApiClient().deserialize(json.dumps(request["body"]), "CoreV1Event", "application/json")
    assert event.involved_object.uid == "u-1"
    assert event.involved_object.kind == "Pod"
    assert event.reason == "Probed"
    assert event.last_timestamp is not None


def test_secret_round_trip_bodies() -> None:
    created = CannedResponse(201, "Created")
    got = CannedResponse(payload=json.dumps({"data": {"k": "aGVsbG8="}}).encode())
    api, transport = seam(created, got)
    api.create_secret(namespace="ns", name="s", data={"k": b"hello"}, labels={"a": "b"})
    secret = client.ApiClient().deserialize(json.dumps(transport.requests[0]["body"]), "V1Secret", "application/json")
    assert (secret.metadata.name, secret.metadata.labels, secret.data) == (
        "s",
        {"a": "b"},
        {"k": "aGVsbG8="},
    )
    assert api.get_secret(namespace="ns", name="s") == {"k": b"hello"}
    assert transport.requests[1]["path"] == "/api/v1/namespaces/ns/secrets/s"


class ChunkedRaw:
    """Test double of a urllib3 response whose body arrives in chunks that split lines."""

    status = 200
    reason = "OK"

    def __init__(self, chunks: Sequence[bytes]) -> None:
        self.chunks = chunks
        self.released = False

    def stream(self, amt: int, decode_content: bool) -> Iterator[bytes]:
        yield from self.chunks

    def release_conn(self) -> None:
        self.released = True


def test_watch_lines_are_reassembled_across_chunks() -> None:
    raw = ChunkedRaw([b'{"a":', b' 1}\n\n{"b": 2}\n{"c"', b": 3}"])
    response = _Urllib3Response(raw)
    assert [json.loads(line) for line in response.lines()] == [
        {"a": 1},
        {"b": 2},
        {"c": 3},
    ]
    response.close()
    assert raw.released


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
