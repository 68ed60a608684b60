"""KubernetesApi through the real client (CoreV1Api, watch.Watch, urllib3) against a named test double of the
API server on loopback: the requests it sends, the answers it understands, its one-line errors and its
timeouts. The same code against a real kube-apiserver runs in tests/e2e and `make bench-scale`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from apiserver_double import TOKEN, Answer, ApiServerDouble, serving
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.kube import api as kube
from arkouda_bootstrap.kube.api import (
    ApiUnavailableError,
    ConflictError,
    ForbiddenError,
    GoneError,
    KubernetesApi,
    PodRef,
)
from kubernetes import client
from test_kube_models import ready_pod, v1pod, wire

PODS = "/api/v1/namespaces/ns/pods"
SECRET = "/api/v1/namespaces/ns/secrets/s"
JOBS = "/apis/batch/v1/namespaces/ns/jobs"
JOB = f"{JOBS}/j"


@pytest.fixture
def apiserver() -> Iterator[ApiServerDouble]:
    with serving() as double:
        yield double


def as_model(body: dict[str, Any] | None, type_name: str) -> Any:
    """`body` read by the client's own model class (it refuses field names and types the API does not have)."""
    text = json.dumps(body)
    try:
        return client.ApiClient().deserialize(text, type_name, "application/json")
    except TypeError:  # older clients deserialize a response object with the text as `.data`
        return client.ApiClient().deserialize(SimpleNamespace(data=text), type_name)


def watch(api: KubernetesApi, *, rv: str = "7", seconds: int = 10) -> list[Any]:
    return list(api.watch_pods(namespace="ns", selector="a=b", resource_version=rv, timeout_seconds=seconds))


def test_list_pods_sends_selector_and_token_and_returns_the_list_version(apiserver: ApiServerDouble) -> None:
    apiserver.answer(
        Answer("GET", "/api/v1/namespaces/my%20ns/pods", body={"metadata": {"resourceVersion": "42"}, "items": []}),
        Answer("GET", PODS, body={"metadata": {"resourceVersion": "43"}, "items": [wire(ready_pod()), wire(v1pod())]}),
    )
    api = apiserver.api()
    assert api.list_pods(namespace="my ns", selector="x=y").resource_version == "42"
    result = api.list_pods(namespace="ns", selector="app=x,component=locale")
    assert result.resource_version == "43"
    assert [p.name for p in result.pods] == ["rel-arkouda-locale-0", "rel-arkouda-locale-2"]
    seen = apiserver.seen[1]
    assert seen.query == {"labelSelector": "app=x,component=locale"}
    assert seen.headers["authorization"] == f"Bearer {TOKEN}"


def test_watch_asks_for_bookmarks_from_the_version_and_yields_changes(apiserver: ApiServerDouble) -> None:
    apiserver.answer(
        Answer(
            "GET",
            PODS,
            lines=[
                {"type": "MODIFIED", "object": wire(v1pod())},
                b"",
                {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "99"}}},
                {"type": "DELETED", "object": wire(ready_pod())},
            ],
        )
    )
    events = watch(apiserver.api())
    assert [(e.type, e.pod.name if e.pod else None, e.resource_version) for e in events] == [
        ("MODIFIED", "rel-arkouda-locale-2", "77"),
        ("BOOKMARK", None, "99"),
        ("DELETED", "rel-arkouda-locale-0", "80"),
    ]
    # booleans as the client spells them (older clients send "True"; the API server reads both)
    assert {k: v.lower() for k, v in apiserver.seen[0].query.items()} == {
        "labelSelector": "a=b",
        "watch": "true",
        "resourceVersion": "7",
        "timeoutSeconds": "10",
        "allowWatchBookmarks": "true",
    }
    assert len(apiserver.seen) == 1  # one request per chunk: the caller decides when to watch again


def test_watch_410_as_an_event_or_a_status_is_gone(apiserver: ApiServerDouble) -> None:
    gone_event = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "old"}}
    apiserver.answer(
        Answer("GET", PODS, lines=[{"type": "ADDED", "object": wire(v1pod())}, gone_event]),
        Answer("GET", PODS, status=410, body={"kind": "Status", "code": 410}),
    )
    api = apiserver.api()
    stream = api.watch_pods(namespace="ns", selector="a=b", resource_version="7", timeout_seconds=5)
    assert next(stream).type == "ADDED"
    with pytest.raises(GoneError):
        next(stream)
    with pytest.raises(GoneError):
        watch(api)
    assert len(apiserver.seen) == 2  # the client's own retry after a 410 is off: the caller relists


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda api: api.list_pods(namespace="ns", selector="a=b"), "missing RBAC: list pods in namespace ns"),
        (watch, "missing RBAC: watch pods in namespace ns"),
        (lambda api: api.get_pod(namespace="ns", name="p"), "missing RBAC: get pods in namespace ns"),
        (
            lambda api: api.list_pod_events(namespace="ns", pod_name="p"),
            "missing RBAC: list events in namespace ns",
        ),
        (lambda api: api.get_secret(namespace="ns", name="s"), "missing RBAC: get secrets in namespace ns"),
        (
            lambda api: api.create_secret(namespace="ns", name="s", data={}, labels={}),
            "missing RBAC: create secrets in namespace ns",
        ),
        (
            lambda api: api.replace_secret(namespace="ns", name="s", data={}, labels={}),
            "missing RBAC: update secrets in namespace ns",
        ),
        (lambda api: api.delete_secret(namespace="ns", name="s"), "missing RBAC: delete secrets in namespace ns"),
        (lambda api: api.delete_pod(namespace="ns", name="p"), "missing RBAC: delete pods in namespace ns"),
        (
            lambda api: api.delete_config_map(namespace="ns", name="c"),
            "missing RBAC: delete configmaps in namespace ns",
        ),
        (
            lambda api: api.create_event(pod=PodRef(namespace="ns", name="p"), reason="r", message="m"),
            "missing RBAC: create events in namespace ns",
        ),
        (lambda api: api.delete_job(namespace="ns", name="j"), "missing RBAC: delete jobs in namespace ns"),
        (
            lambda api: api.wait_job_gone(namespace="ns", name="j", uid="u", timeout_seconds=5),
            "missing RBAC: list jobs in namespace ns",
        ),
    ],
)
def test_every_call_names_the_missing_rbac(
    apiserver: ApiServerDouble, call: Callable[[KubernetesApi], object], expected: str
) -> None:
    for method in ("GET", "POST", "PUT", "DELETE"):
        for path in (
            PODS,
            f"{PODS}/p",
            "/api/v1/namespaces/ns/events",
            "/api/v1/namespaces/ns/secrets",
            SECRET,
            "/api/v1/namespaces/ns/configmaps/c",
            JOBS,
            JOB,
        ):
            apiserver.answer(Answer(method, path, status=403, body={"kind": "Status", "code": 403}))
    with pytest.raises(ForbiddenError) as err:  # typed: callers tell a refusal from other API errors by its type
        call(apiserver.api())
    assert str(err.value) == expected


def test_missing_pod_or_secret_is_none_not_an_error(apiserver: ApiServerDouble) -> None:
    apiserver.answer(
        Answer("GET", f"{PODS}/p", status=404),
        Answer("GET", SECRET, status=404),
        Answer("DELETE", SECRET, status=404),
        Answer("DELETE", f"{PODS}/p", status=404),
        Answer("DELETE", "/api/v1/namespaces/ns/configmaps/c", status=404),
        Answer("DELETE", JOB, status=404),
    )
    api = apiserver.api()
    assert api.get_pod(namespace="ns", name="p") is None
    assert api.get_secret(namespace="ns", name="s") is None
    assert api.delete_secret(namespace="ns", name="s") is False
    assert api.delete_pod(namespace="ns", name="p") is False
    assert api.delete_config_map(namespace="ns", name="c") is False
    assert api.delete_job(namespace="ns", name="j") is None


def test_the_uninstall_clean_up_deletes_the_test_pod_and_config_map(apiserver: ApiServerDouble) -> None:
    apiserver.answer(
        Answer("DELETE", f"{PODS}/p", body={"kind": "Pod"}),
        Answer("DELETE", "/api/v1/namespaces/ns/configmaps/c", body={"kind": "Status"}),
    )
    api = apiserver.api()
    assert api.delete_pod(namespace="ns", name="p") is True
    assert api.delete_config_map(namespace="ns", name="c") is True
    assert [(s.method, s.path) for s in apiserver.seen] == [
        ("DELETE", f"{PODS}/p"),
        ("DELETE", "/api/v1/namespaces/ns/configmaps/c"),
    ]


def test_events_are_looked_up_by_pod_and_created_as_valid_core_events(apiserver: ApiServerDouble) -> None:
    apiserver.answer(
        Answer(
            "GET",
            "/api/v1/namespaces/ns/events",
            body={"items": [{"type": "Warning", "reason": "FailedScheduling", "message": "0/3 nodes\n"}]},
        ),
        Answer("POST", "/api/v1/namespaces/ns/events", status=201, body={"kind": "Event"}),
    )
    api = apiserver.api()
    events = api.list_pod_events(namespace="ns", pod_name="rel-arkouda-locale-1")
    assert [(e.type, e.reason, e.message) for e in events] == [("Warning", "FailedScheduling", "0/3 nodes")]
    assert apiserver.seen[0].query == {
        "fieldSelector": "involvedObject.kind=Pod,involvedObject.name=rel-arkouda-locale-1"
    }
    api.create_event(pod=PodRef(namespace="ns", name="r-arkouda-server-0", uid="u-1"), reason="Launched", message="m")
    sent = apiserver.seen[1].body
    # the client's own model accepts what reached the server: field names and types are the API's
    event = as_model(sent, "CoreV1Event")
    assert (event.involved_object.uid, event.involved_object.kind, event.reason) == ("u-1", "Pod", "Launched")
    assert event.last_timestamp is not None
    assert event.metadata.generate_name == "r-arkouda-server-0."


def test_an_event_with_a_name_of_its_own_is_refused_the_second_time(apiserver: ApiServerDouble) -> None:
    events = "/api/v1/namespaces/ns/events"
    apiserver.answer(
        Answer("POST", events, status=201, body={"kind": "Event"}),
        Answer("POST", events, status=409, body={"kind": "Status", "code": 409, "reason": "AlreadyExists"}),
    )
    api = apiserver.api()
    pod = PodRef(namespace="ns", name="p", uid="u")
    api.create_event(pod=pod, reason="NodeLost", message="m", name="p.nodelost-u")
    with pytest.raises(ConflictError):
        api.create_event(pod=pod, reason="NodeLost", message="m", name="p.nodelost-u")
    sent = as_model(apiserver.seen[0].body, "CoreV1Event")
    assert (sent.metadata.name, sent.metadata.generate_name) == ("p.nodelost-u", None)


def test_secrets_round_trip(apiserver: ApiServerDouble) -> None:
    apiserver.answer(
        Answer("POST", "/api/v1/namespaces/ns/secrets", status=201),
        Answer("PUT", SECRET),
        Answer("GET", SECRET, body={"data": {"k": "aGVsbG8="}}),
        Answer("DELETE", SECRET, body={"kind": "Status"}),
    )
    api = apiserver.api()
    api.create_secret(namespace="ns", name="s", data={"k": b"hello"}, labels={"a": "b"})
    api.replace_secret(namespace="ns", name="s", data={"k": b"bye"}, labels={"a": "b"})
    assert api.get_secret(namespace="ns", name="s") == {"k": b"hello"}
    assert api.delete_secret(namespace="ns", name="s") is True
    created = as_model(apiserver.seen[0].body, "V1Secret")
    assert (created.metadata.name, created.metadata.labels, created.data) == ("s", {"a": "b"}, {"k": "aGVsbG8="})
    assert apiserver.seen[1].body is not None and apiserver.seen[1].body["data"] == {"k": "Ynll"}


def test_a_silent_api_server_times_out_every_call_with_one_line(apiserver: ApiServerDouble) -> None:
    """Every call carries a client-side timeout: an API server that accepts and never answers ends in an error
    naming the operation, not a hung bootstrap."""
    for method, path in [("GET", PODS), ("GET", SECRET), ("POST", "/api/v1/namespaces/ns/events")]:
        apiserver.answer(Answer(method, path, stall=30, times=10))
    api = apiserver.api(request_timeout=0.3)
    calls: list[tuple[str, Callable[[], object]]] = [
        ("list pods", lambda: api.list_pods(namespace="ns", selector="a=b")),
        ("get secrets", lambda: api.get_secret(namespace="ns", name="s")),
        ("create events", lambda: api.create_event(pod=PodRef(namespace="ns", name="p"), reason="r", message="m")),
    ]
    for what, call in calls:
        started = time.monotonic()
        with pytest.raises(ApiUnavailableError, match=f"^cannot reach the Kubernetes API to {what}: "):
            call()
        assert time.monotonic() - started < 10  # retries included; the stall is 30 s


def test_a_watch_that_goes_silent_ends_its_chunk(apiserver: ApiServerDouble, monkeypatch: pytest.MonkeyPatch) -> None:
    """A watch connection that stays open but silent past its server-side timeout (plus the grace) ends the
    chunk quietly after the events it delivered; the caller watches again from the last version."""
    monkeypatch.setattr(kube, "WATCH_GRACE_SECONDS", 0)
    apiserver.answer(Answer("GET", PODS, lines=[{"type": "ADDED", "object": wire(v1pod())}], stall=30))
    started = time.monotonic()
    assert [e.type for e in watch(apiserver.api(), seconds=1)] == ["ADDED"]
    assert time.monotonic() - started < 10


def test_an_unreachable_api_server_is_one_line(apiserver: ApiServerDouble) -> None:
    apiserver.port = 1  # nothing listens there
    api = apiserver.api(request_timeout=1)
    with pytest.raises(ApiUnavailableError, match="^cannot reach the Kubernetes API to list pods: "):
        api.list_pods(namespace="ns", selector="a=b")
    with pytest.raises(ApiUnavailableError, match="^cannot reach the Kubernetes API to watch pods: "):
        watch(api)


@pytest.mark.parametrize("status", [500, 503, 429])
def test_an_api_server_that_cannot_answer_now_is_worth_a_retry(apiserver: ApiServerDouble, status: int) -> None:
    """HTTP 5xx and 429 are ApiUnavailableError (kube.retry tries again); other refusals are not."""
    apiserver.answer(Answer("GET", PODS, status=status, body={"kind": "Status", "code": status}, times=2))
    with pytest.raises(ApiUnavailableError, match=f"^list pods in namespace ns failed: HTTP {status}"):
        apiserver.api().list_pods(namespace="ns", selector="a=b")
    with pytest.raises(ApiUnavailableError, match=f"^watch pods in namespace ns failed: HTTP {status}"):
        watch(apiserver.api())


def test_a_missing_namespace_is_not_worth_a_retry(apiserver: ApiServerDouble) -> None:
    apiserver.answer(Answer("GET", PODS, status=404, body={"kind": "Status", "code": 404}))
    with pytest.raises(BootstrapError, match="not found") as err:
        apiserver.api().list_pods(namespace="ns", selector="a=b")
    assert not isinstance(err.value, ApiUnavailableError)


def test_from_kubeconfig_talks_to_the_configured_server(apiserver: ApiServerDouble, tmp_path: Path) -> None:
    cfg = tmp_path / "kubeconfig"
    cfg.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: 'http://127.0.0.1:{apiserver.port}'}}}}]\n"
        "users: [{name: u, user: {token: from-kubeconfig}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u, namespace: ns}}]\n"
    )
    apiserver.answer(Answer("GET", f"{PODS}/p", body={"metadata": {"name": "p"}, "status": {"phase": "Running"}}))
    pod = KubernetesApi.from_kubeconfig(cfg).get_pod(namespace="ns", name="p")
    assert pod is not None and (pod.name, pod.phase) == ("p", "Running")
    assert apiserver.seen[0].headers["authorization"] == "Bearer from-kubeconfig"


def test_the_uninstall_clean_up_deletes_a_left_keygen_job_with_its_pods(apiserver: ApiServerDouble) -> None:
    held = {"kind": "Job", "metadata": {"name": "j", "uid": "u1", "finalizers": ["foregroundDeletion"]}}
    apiserver.answer(
        Answer("DELETE", JOB, body=held), Answer("DELETE", JOB, body={"kind": "Status", "details": {"uid": "u2"}})
    )
    api = apiserver.api()
    assert api.delete_job(namespace="ns", name="j") == "u1"  # held until its pods are gone
    assert api.delete_job(namespace="ns", name="j") == "u2"  # nothing held it: deleted at once
    seen = apiserver.seen[0]
    assert (seen.method, seen.path) == ("DELETE", JOB)
    # the API's default orphans a Job's pods, and Background lets the Job go while its pod still runs keygen
    assert seen.body is not None and seen.body["propagationPolicy"] == "Foreground"


def job_list(*uids: str, rv: str = "50") -> dict[str, Any]:
    return {"metadata": {"resourceVersion": rv}, "items": [{"metadata": {"name": "j", "uid": u}} for u in uids]}


def test_waiting_for_a_deleted_job_lists_then_watches_its_name_until_its_uid_is_deleted(
    apiserver: ApiServerDouble,
) -> None:
    apiserver.answer(
        Answer("GET", JOBS, body=job_list("u1")),
        Answer(
            "GET",
            JOBS,
            lines=[
                {"type": "MODIFIED", "object": {"metadata": {"name": "j", "uid": "u1"}}},
                {"type": "DELETED", "object": {"metadata": {"name": "j", "uid": "u1"}}},
            ],
        ),
    )
    assert apiserver.api().wait_job_gone(namespace="ns", name="j", uid="u1", timeout_seconds=20) is True
    listed, watched = apiserver.seen
    # by name, which is also what lets the keygen Role grant list and watch on that one Job
    assert listed.query == {"fieldSelector": "metadata.name=j"}
    assert watched.query["fieldSelector"] == "metadata.name=j"
    # "True" from older clients; the API server reads both
    assert (watched.query["watch"].lower(), watched.query["resourceVersion"]) == ("true", "50")


def test_a_job_already_gone_or_replaced_needs_no_watch(apiserver: ApiServerDouble) -> None:
    apiserver.answer(Answer("GET", JOBS, body=job_list()), Answer("GET", JOBS, body=job_list("a-new-one")))
    api = apiserver.api()
    assert api.wait_job_gone(namespace="ns", name="j", uid="u1", timeout_seconds=20) is True
    assert api.wait_job_gone(namespace="ns", name="j", uid="u1", timeout_seconds=20) is True
    assert [s.method for s in apiserver.seen] == ["GET", "GET"]


def test_a_job_that_stays_is_reported_at_the_deadline(apiserver: ApiServerDouble) -> None:
    # the watch chunk ends without the deletion; the list after it still has the Job, and the time is up
    modified = {"type": "MODIFIED", "object": {"metadata": {"name": "j", "uid": "u1"}}}
    apiserver.answer(
        Answer("GET", JOBS, body=job_list("u1")),
        Answer("GET", JOBS, lines=[modified], stall=1.2),
        Answer("GET", JOBS, body=job_list("u1")),
    )
    t0 = time.monotonic()
    assert apiserver.api().wait_job_gone(namespace="ns", name="j", uid="u1", timeout_seconds=1.5) is False
    assert time.monotonic() - t0 < 10
    assert [(s.query.get("watch") or "").lower() for s in apiserver.seen] == ["", "true", ""]


def test_a_watch_too_old_lists_again(apiserver: ApiServerDouble) -> None:
    apiserver.answer(
        Answer("GET", JOBS, body=job_list("u1")),
        Answer("GET", JOBS, status=410, body={"kind": "Status", "code": 410}),
        Answer("GET", JOBS, body=job_list()),
    )
    assert apiserver.api().wait_job_gone(namespace="ns", name="j", uid="u1", timeout_seconds=20) is True


def test_the_client_makes_one_attempt_per_request_and_leaves_retries_to_kube_retry(
    apiserver: ApiServerDouble, tmp_path: Path
) -> None:
    """urllib3's own retries (3 by default) would make a silent API server take 4 timeouts before kube.retry hears
    of it: the API built from a kubeconfig tries once."""
    cfg = tmp_path / "kubeconfig"
    cfg.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: 'http://127.0.0.1:{apiserver.port}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u, namespace: ns}}]\n"
    )
    apiserver.answer(Answer("GET", PODS, stall=30, times=10))
    api = KubernetesApi.from_kubeconfig(cfg, request_timeout=0.3)
    with pytest.raises(ApiUnavailableError, match="^cannot reach the Kubernetes API to list pods: "):
        api.list_pods(namespace="ns", selector="a=b")
    assert len(apiserver.seen) == 1


def test_the_uninstall_clean_up_deletes_the_kueue_workload_by_name(apiserver: ApiServerDouble) -> None:
    workload = "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/rel-arkouda-group"
    apiserver.answer(
        Answer("DELETE", workload, body={"kind": "Status", "status": "Success"}),
        Answer("DELETE", workload, status=404, body={"kind": "Status", "code": 404}),  # gone, or no Kueue at all
        Answer("DELETE", workload, status=403, body={"kind": "Status", "code": 403}),
    )
    api = apiserver.api()
    assert api.delete_kueue_workload(namespace="ns", name="rel-arkouda-group") is True
    assert api.delete_kueue_workload(namespace="ns", name="rel-arkouda-group") is False
    with pytest.raises(BootstrapError, match="^missing RBAC: delete workloads.kueue.x-k8s.io in namespace ns$"):
        api.delete_kueue_workload(namespace="ns", name="rel-arkouda-group")
    assert [(s.method, s.path) for s in apiserver.seen] == [("DELETE", workload)] * 3


def test_nodewatch_deletes_only_the_workload_that_owns_the_held_pod_by_its_uid(apiserver: ApiServerDouble) -> None:
    workload = "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/rel-arkouda-group"
    owned = {"metadata": {"name": "rel-arkouda-group", "uid": "w1", "ownerReferences": [{"uid": "pod-old"}]}}
    apiserver.answer(
        Answer("GET", workload, body=owned),
        Answer("DELETE", workload, body={"kind": "Status", "status": "Success"}),
        Answer("GET", workload, body=owned),  # the next Workload would list other pods: not this one
    )
    api = apiserver.api()
    assert api.delete_kueue_workload(namespace="ns", name="rel-arkouda-group", owner_uid="pod-old") is True
    assert api.delete_kueue_workload(namespace="ns", name="rel-arkouda-group", owner_uid="pod-new") is False
    assert [(s.method, s.path) for s in apiserver.seen] == [("GET", workload), ("DELETE", workload), ("GET", workload)]
    deleted = apiserver.seen[1].body
    assert deleted is not None and deleted["preconditions"] == {"uid": "w1"}
