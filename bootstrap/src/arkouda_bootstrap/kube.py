"""The thin seam over the official `kubernetes` client.

Everything the bootstrap needs from the API server goes through `KubeApi` (a Protocol), so unit tests drive the
logic with a named fake and the e2e tests run the same code paths against a real kube-apiserver through
`KubernetesApi` (build one with `KubernetesApi.from_kubeconfig(path)` or `KubernetesApi.from_environment()`).

The seam speaks in small frozen dataclasses (`PodInfo`, `PodList`, `PodEvent`, `EventInfo`) made straight from
the API server's JSON — the client is used for its configuration, TLS and auth only, not for its generated
models (see ApiClientTransport), and turns API errors into one actionable line: a 403 becomes
`missing RBAC: <verb> <resource> in namespace <ns>`.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import quote

from arkouda_bootstrap.errors import BootstrapError

log = logging.getLogger(__name__)

SERVICEACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
COMPONENT = "arkouda-bootstrap"


class ConflictError(BootstrapError):
    """HTTP 409: the object already exists (e.g. two keygen Jobs racing)."""


class GoneError(Exception):
    """The watch's resourceVersion is too old (HTTP 410 Gone): the caller must list again."""


@dataclass(frozen=True)
class PodCondition:
    type: str
    status: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class ContainerState:
    """One container's status; `state` is `waiting`, `running`, `terminated` or `unknown`."""

    name: str
    state: str
    ready: bool = False
    reason: str = ""
    message: str = ""
    exit_code: int | None = None
    restart_count: int = 0


@dataclass(frozen=True)
class PodInfo:
    name: str
    namespace: str = ""
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    phase: str = "Pending"
    pod_ip: str | None = None
    deleting: bool = False
    conditions: tuple[PodCondition, ...] = ()
    containers: tuple[ContainerState, ...] = ()
    resource_version: str = ""

    def condition(self, type_: str) -> PodCondition | None:
        for cond in self.conditions:
            if cond.type == type_:
                return cond
        return None

    @property
    def ready(self) -> bool:
        """Ready condition True, has an IP and is not being deleted."""
        cond = self.condition("Ready")
        return bool(cond is not None and cond.status == "True" and self.pod_ip and not self.deleting)


@dataclass(frozen=True)
class PodList:
    pods: tuple[PodInfo, ...]
    resource_version: str


@dataclass(frozen=True)
class PodEvent:
    """One watch event. BOOKMARK events carry only a resource_version (pod is None)."""

    type: Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]
    pod: PodInfo | None
    resource_version: str


@dataclass(frozen=True)
class EventInfo:
    type: str
    reason: str
    message: str
    last_seen: dt.datetime | None = None


@dataclass(frozen=True)
class PodRef:
    """What an Event needs to be attached to a pod so that `kubectl describe pod` shows it."""

    namespace: str
    name: str
    uid: str = ""


class KubeApi(Protocol):
    """The operations the bootstrap performs against the API server (namespaced, least privilege)."""

    def list_pods(self, *, namespace: str, selector: str) -> PodList: ...

    def watch_pods(
        self, *, namespace: str, selector: str, resource_version: str, timeout_seconds: int
    ) -> Iterator[PodEvent]:
        """Yield events after `resource_version` until the server closes the watch after `timeout_seconds`.

        Raises GoneError when the resource version is too old."""
        ...

    def get_pod(self, *, namespace: str, name: str) -> PodInfo | None: ...

    def list_pod_events(self, *, namespace: str, pod_name: str) -> list[EventInfo]: ...

    def create_event(self, *, pod: PodRef, reason: str, message: str, type_: str = "Normal") -> None: ...

    def get_secret(self, *, namespace: str, name: str) -> dict[str, bytes] | None: ...

    def create_secret(
        self, *, namespace: str, name: str, data: Mapping[str, bytes], labels: Mapping[str, str]
    ) -> None: ...

    def replace_secret(
        self, *, namespace: str, name: str, data: Mapping[str, bytes], labels: Mapping[str, str]
    ) -> None: ...

    def delete_secret(self, *, namespace: str, name: str) -> bool:
        """Delete; False when it did not exist."""
        ...


def resolve_namespace(explicit: str | None, *, namespace_file: Path = SERVICEACCOUNT_NAMESPACE_FILE) -> str:
    """Flag/env value, else the in-cluster service account's namespace file, else a clear error."""
    if explicit:
        return explicit
    try:
        value = namespace_file.read_text(encoding="utf-8").strip()
    except OSError:
        value = ""
    if value:
        return value
    raise BootstrapError(f"namespace unknown: set --namespace or POD_NAMESPACE (no {namespace_file} outside a pod)")


# ----------------------------------------------------------------------------------------------------------
# Conversion from the API's JSON (pure functions, unit-tested with JSON made from the client's real models)


def _s(value: object) -> str:
    return "" if value is None else str(value)


def _d(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _timestamp(value: object) -> dt.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return dt.datetime.fromisoformat(value)
    except ValueError:
        return None


def pod_from_json(obj: Mapping[str, Any]) -> PodInfo:
    """Convert a Pod as the API server sends it (JSON, camelCase) into PodInfo."""
    meta = _d(obj.get("metadata"))
    status = _d(obj.get("status"))
    conditions = tuple(
        PodCondition(
            type=_s(c.get("type")), status=_s(c.get("status")), reason=_s(c.get("reason")), message=_s(c.get("message"))
        )
        for c in status.get("conditions") or ()
    )
    containers = tuple(
        _container_from_json(cs)
        for cs in [*(status.get("initContainerStatuses") or ()), *(status.get("containerStatuses") or ())]
    )
    return PodInfo(
        name=_s(meta.get("name")),
        namespace=_s(meta.get("namespace")),
        uid=_s(meta.get("uid")),
        labels=dict(meta.get("labels") or {}),
        phase=_s(status.get("phase")) or "Pending",
        pod_ip=status.get("podIP") or None,
        deleting=meta.get("deletionTimestamp") is not None,
        conditions=conditions,
        containers=containers,
        resource_version=_s(meta.get("resourceVersion")),
    )


def _container_from_json(cs: Mapping[str, Any]) -> ContainerState:
    state = _d(cs.get("state"))
    name = _s(cs.get("name"))
    ready = bool(cs.get("ready"))
    restarts = int(cs.get("restartCount") or 0)
    if (waiting := state.get("waiting")) is not None:
        w = _d(waiting)
        return ContainerState(
            name=name,
            state="waiting",
            ready=ready,
            restart_count=restarts,
            reason=_s(w.get("reason")),
            message=_s(w.get("message")),
        )
    if (terminated := state.get("terminated")) is not None:
        t = _d(terminated)
        code = t.get("exitCode")
        return ContainerState(
            name=name,
            state="terminated",
            ready=ready,
            restart_count=restarts,
            reason=_s(t.get("reason")),
            message=_s(t.get("message")),
            exit_code=int(code) if code is not None else None,
        )
    if state.get("running") is not None:
        return ContainerState(name=name, state="running", ready=ready, restart_count=restarts)
    return ContainerState(name=name, state="unknown", ready=ready, restart_count=restarts)


def event_from_watch(raw: Mapping[str, Any]) -> PodEvent | None:
    """Convert one line of a pod watch (`{"type": ..., "object": {...}}`).

    BOOKMARK objects are incomplete pods that carry only a resourceVersion; ERROR 410 means the version is too
    old (GoneError: list again)."""
    kind = raw.get("type")
    obj = _d(raw.get("object"))
    if kind == "BOOKMARK":
        return PodEvent(type="BOOKMARK", pod=None, resource_version=_s(_d(obj.get("metadata")).get("resourceVersion")))
    if kind in ("ADDED", "MODIFIED", "DELETED"):
        pod = pod_from_json(obj)
        return PodEvent(type=kind, pod=pod, resource_version=pod.resource_version)
    if kind == "ERROR":
        if obj.get("code") == 410:
            raise GoneError(_s(obj.get("message")) or "410 Gone")
        raise BootstrapError(f"watch pods failed: {obj.get('code')} {obj.get('message', '')}".rstrip())
    log.debug("ignoring watch event of type %s", kind)
    return None


def event_from_json(event: Mapping[str, Any]) -> EventInfo:
    last = (
        _timestamp(event.get("lastTimestamp"))
        or _timestamp(event.get("eventTime"))
        or _timestamp(event.get("firstTimestamp"))
        or _timestamp(_d(event.get("metadata")).get("creationTimestamp"))
    )
    return EventInfo(
        type=_s(event.get("type")),
        reason=_s(event.get("reason")),
        message=_s(event.get("message")).strip(),
        last_seen=last,
    )


def _rfc3339(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ----------------------------------------------------------------------------------------------------------
# HTTP: the client's ApiClient for config, TLS and auth (token refresh included); JSON in and out ourselves


@dataclass(frozen=True)
class ApiStatusError(Exception):
    """A non-2xx answer; `translate_api_error` turns it into one line."""

    status: int
    reason: str = ""


class HttpResponse(Protocol):
    """What KubernetesApi needs of an answer: the status, the body, or its lines for a watch."""

    status: int
    reason: str

    def body(self) -> bytes: ...

    def lines(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


class Transport(Protocol):
    def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any] | None = None,
        timeout: float,
        stream: bool = False,
    ) -> HttpResponse: ...


class _Urllib3Response:
    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self.status = int(raw.status)
        self.reason = _s(raw.reason)

    def body(self) -> bytes:
        return bytes(self._raw.data)

    def lines(self) -> Iterator[bytes]:
        pending = b""
        for chunk in self._raw.stream(65536, decode_content=True):
            pending += chunk
            *complete, pending = pending.split(b"\n")
            yield from (line for line in complete if line.strip())
        if pending.strip():
            yield pending

    def close(self) -> None:
        self._raw.release_conn()


class ApiClientTransport:
    """Requests through `kubernetes.client.ApiClient`: its configuration (in-cluster or kubeconfig), TLS and
    bearer-token auth, without the generated CoreV1Api (importing it costs ≈1.4 s of CPU at every start) and
    without model (de)serialization (≈1.2 ms per pod: 1.2 s for a list of 1024 locales)."""

    def __init__(self, api_client: Any) -> None:
        self._client = api_client

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any] | None = None,
        timeout: float,
        stream: bool = False,
    ) -> HttpResponse:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        serialized = self._client.param_serialize(
            method=method,
            resource_path=path,
            query_params=list(query),
            header_params=headers,
            body=dict(body) if body is not None else None,
            auth_settings=["BearerToken"],
        )
        raw = self._client.rest_client.request(
            serialized[0],
            serialized[1],
            headers=serialized[2],
            body=serialized[3],
            post_params=serialized[4],
            _request_timeout=timeout,
        )
        response = raw.response
        if not stream:
            response.data  # noqa: B018 -- reads the whole body now (urllib3 preload)
        return _Urllib3Response(response)


# ----------------------------------------------------------------------------------------------------------
# The real implementation

REQUEST_TIMEOUT_SECONDS = 30.0
# A watch chunk's connection may stay silent this much longer than its server-side timeout before we give up
# on it (a dead TCP connection must not hang discovery past its deadline).
WATCH_GRACE_SECONDS = 15


class KubernetesApi:
    """`KubeApi` over the API server's REST interface (see ApiClientTransport)."""

    def __init__(self, transport: Transport, *, request_timeout: float = REQUEST_TIMEOUT_SECONDS) -> None:
        self._http = transport
        self._timeout = request_timeout

    @classmethod
    def from_kubeconfig(cls, path: str | Path, *, context: str | None = None) -> KubernetesApi:
        """Build from a kubeconfig file (used by the e2e tests and outside a cluster)."""
        from kubernetes import config

        return cls(ApiClientTransport(config.new_client_from_config(config_file=str(path), context=context)))

    @classmethod
    def from_environment(cls) -> KubernetesApi:
        """In-cluster service account config, falling back to the kubeconfig ($KUBECONFIG or ~/.kube/config)."""
        from kubernetes import client, config

        try:
            config.load_incluster_config()
            log.debug("using in-cluster Kubernetes config")
        except config.ConfigException as in_cluster_error:
            try:
                config.load_kube_config()
            except (config.ConfigException, OSError) as kubeconfig_error:
                raise BootstrapError(
                    "no Kubernetes config: not in a pod "
                    f"({in_cluster_error}) and no usable kubeconfig ({kubeconfig_error}); set KUBECONFIG"
                ) from None
            log.debug("using kubeconfig")
        return cls(ApiClientTransport(client.ApiClient()))

    # -- helpers -------------------------------------------------------------------------------------------

    def _open(
        self,
        verb: str,
        resource: str,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        stream: bool = False,
    ) -> HttpResponse:
        """Send one request; a non-2xx answer raises ApiStatusError (closed), a transport error one line."""
        from urllib3.exceptions import HTTPError

        try:
            response = self._http.request(
                method, path, query=query, body=body, timeout=timeout or self._timeout, stream=stream
            )
        except HTTPError as exc:
            raise BootstrapError(f"cannot reach the Kubernetes API to {verb} {resource}: {exc}") from None
        if not 200 <= response.status <= 299:
            response.close()
            raise ApiStatusError(response.status, response.reason)
        return response

    def _json(
        self,
        verb: str,
        resource: str,
        namespace: str,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any] | None = None,
        missing_ok: bool = False,
    ) -> dict[str, Any] | None:
        """One request with a JSON answer; None for a 404 when `missing_ok`."""
        try:
            response = self._open(verb, resource, method, path, query=query, body=body)
        except ApiStatusError as exc:
            if missing_ok and exc.status == 404:
                return None
            raise translate_api_error(exc, verb=verb, resource=resource, namespace=namespace) from None
        try:
            data = response.body()
        finally:
            response.close()
        try:
            parsed = json.loads(data) if data else {}
        except ValueError:
            raise BootstrapError(f"{verb} {resource}: the API server sent something that is not JSON") from None
        return parsed if isinstance(parsed, dict) else {}

    @staticmethod
    def _ns_path(namespace: str, resource: str, name: str = "") -> str:
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/{resource}"
        return f"{path}/{quote(name, safe='')}" if name else path

    # -- pods ----------------------------------------------------------------------------------------------

    def list_pods(self, *, namespace: str, selector: str) -> PodList:
        result = (
            self._json(
                "list", "pods", namespace, "GET", self._ns_path(namespace, "pods"), query=[("labelSelector", selector)]
            )
            or {}
        )
        return PodList(
            pods=tuple(pod_from_json(p) for p in result.get("items") or ()),
            resource_version=_s(_d(result.get("metadata")).get("resourceVersion")),
        )

    def watch_pods(
        self, *, namespace: str, selector: str, resource_version: str, timeout_seconds: int
    ) -> Iterator[PodEvent]:
        from urllib3.exceptions import HTTPError

        try:
            response = self._open(
                "watch",
                "pods",
                "GET",
                self._ns_path(namespace, "pods"),
                query=[
                    ("labelSelector", selector),
                    ("watch", "true"),
                    ("resourceVersion", resource_version),
                    ("timeoutSeconds", str(timeout_seconds)),
                    ("allowWatchBookmarks", "true"),
                ],
                timeout=timeout_seconds + WATCH_GRACE_SECONDS,
                stream=True,
            )
        except ApiStatusError as exc:
            if exc.status == 410:
                raise GoneError(exc.reason or "410 Gone") from None
            raise translate_api_error(exc, verb="watch", resource="pods", namespace=namespace) from None
        try:
            for line in response.lines():
                try:
                    raw = json.loads(line)
                except ValueError:
                    log.warning("ignoring a watch line that is not JSON: %.80r", line)
                    continue
                event = event_from_watch(raw) if isinstance(raw, dict) else None
                if event is not None:
                    yield event
        except HTTPError as exc:
            # a read timeout or reset ends this watch chunk; the caller re-watches from its last version
            log.debug("watch connection ended: %s", exc)
        finally:
            response.close()

    def get_pod(self, *, namespace: str, name: str) -> PodInfo | None:
        result = self._json("get", "pods", namespace, "GET", self._ns_path(namespace, "pods", name), missing_ok=True)
        return None if result is None else pod_from_json(result)

    def list_pod_events(self, *, namespace: str, pod_name: str) -> list[EventInfo]:
        result = (
            self._json(
                "list",
                "events",
                namespace,
                "GET",
                self._ns_path(namespace, "events"),
                query=[("fieldSelector", f"involvedObject.kind=Pod,involvedObject.name={pod_name}")],
            )
            or {}
        )
        return [event_from_json(e) for e in result.get("items") or ()]

    def create_event(self, *, pod: PodRef, reason: str, message: str, type_: str = "Normal") -> None:
        now = _rfc3339(dt.datetime.now(dt.UTC))
        involved: dict[str, str] = {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "namespace": pod.namespace}
        if pod.uid:
            involved["uid"] = pod.uid
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{pod.name}.", "namespace": pod.namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message[:1024],
            "type": type_,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": pod.name,
        }
        self._json("create", "events", pod.namespace, "POST", self._ns_path(pod.namespace, "events"), body=body)

    # -- secrets -------------------------------------------------------------------------------------------

    def get_secret(self, *, namespace: str, name: str) -> dict[str, bytes] | None:
        result = self._json(
            "get", "secrets", namespace, "GET", self._ns_path(namespace, "secrets", name), missing_ok=True
        )
        if result is None:
            return None
        return {k: base64.b64decode(v) for k, v in _d(result.get("data")).items()}

    @staticmethod
    def _secret_body(name: str, namespace: str, data: Mapping[str, bytes], labels: Mapping[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "type": "Opaque",
            "data": {k: base64.b64encode(v).decode("ascii") for k, v in data.items()},
        }

    def create_secret(self, *, namespace: str, name: str, data: Mapping[str, bytes], labels: Mapping[str, str]) -> None:
        body = self._secret_body(name, namespace, data, labels)
        self._json("create", "secrets", namespace, "POST", self._ns_path(namespace, "secrets"), body=body)

    def replace_secret(
        self, *, namespace: str, name: str, data: Mapping[str, bytes], labels: Mapping[str, str]
    ) -> None:
        body = self._secret_body(name, namespace, data, labels)
        self._json("update", "secrets", namespace, "PUT", self._ns_path(namespace, "secrets", name), body=body)

    def delete_secret(self, *, namespace: str, name: str) -> bool:
        result = self._json(
            "delete", "secrets", namespace, "DELETE", self._ns_path(namespace, "secrets", name), missing_ok=True
        )
        return result is not None


def translate_api_error(exc: Any, *, verb: str, resource: str, namespace: str) -> BootstrapError:
    """Map an HTTP error (ApiStatusError, or anything with `status` and `reason`) to one actionable line."""
    status = getattr(exc, "status", None)
    if status == 403:
        return BootstrapError(f"missing RBAC: {verb} {resource} in namespace {namespace}")
    if status == 401:
        return BootstrapError(f"unauthorized: the API server rejected our credentials ({verb} {resource})")
    if status == 404:
        return BootstrapError(f"{verb} {resource} in namespace {namespace}: not found (does the namespace exist?)")
    if status == 409:
        return ConflictError(f"{verb} {resource} in namespace {namespace}: conflict ({getattr(exc, 'reason', '')})")
    return BootstrapError(
        f"{verb} {resource} in namespace {namespace} failed: HTTP {status} {getattr(exc, 'reason', '')}".rstrip()
    )
