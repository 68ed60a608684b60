"""The thin seam over the official `kubernetes` client.

Everything the bootstrap needs from the API server goes through `KubeApi` (a Protocol), so unit tests drive the
logic with a named fake and the e2e tests run the same code paths against a real kube-apiserver through
`KubernetesApi` (build one with `KubernetesApi.from_kubeconfig(path)` or `KubernetesApi.from_environment()`).

The seam speaks in small frozen dataclasses (`PodInfo`, `PodList`, `PodEvent`, `EventInfo`) instead of the
client's generated models, and turns API errors into one actionable line: a 403 becomes
`missing RBAC: <verb> <resource> in namespace <ns>`.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from arkouda_bootstrap.errors import BootstrapError

log = logging.getLogger(__name__)

SERVICEACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
COMPONENT = "arkouda-bootstrap"

T = TypeVar("T")


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
# Conversion from the client's models (pure functions, unit-tested with the real model classes)


def _s(value: object) -> str:
    return "" if value is None else str(value)


def pod_from_model(pod: Any) -> PodInfo:
    """Convert a `kubernetes.client.V1Pod` into PodInfo."""
    meta = pod.metadata
    status = pod.status
    conditions: list[PodCondition] = []
    containers: list[ContainerState] = []
    phase = "Pending"
    pod_ip: str | None = None
    if status is not None:
        phase = _s(status.phase) or "Pending"
        pod_ip = status.pod_ip or None
        for cond in status.conditions or ():
            conditions.append(
                PodCondition(
                    type=_s(cond.type),
                    status=_s(cond.status),
                    reason=_s(cond.reason),
                    message=_s(cond.message),
                )
            )
        for cs in [*(status.init_container_statuses or ()), *(status.container_statuses or ())]:
            containers.append(_container_from_model(cs))
    return PodInfo(
        name=_s(meta.name),
        namespace=_s(meta.namespace),
        uid=_s(meta.uid),
        labels=dict(meta.labels or {}),
        phase=phase,
        pod_ip=pod_ip,
        deleting=meta.deletion_timestamp is not None,
        conditions=tuple(conditions),
        containers=tuple(containers),
        resource_version=_s(meta.resource_version),
    )


def _container_from_model(cs: Any) -> ContainerState:
    state = cs.state
    name = _s(cs.name)
    ready = bool(cs.ready)
    restarts = int(cs.restart_count or 0)
    if state is not None and state.waiting is not None:
        return ContainerState(
            name=name,
            state="waiting",
            ready=ready,
            restart_count=restarts,
            reason=_s(state.waiting.reason),
            message=_s(state.waiting.message),
        )
    if state is not None and state.terminated is not None:
        term = state.terminated
        return ContainerState(
            name=name,
            state="terminated",
            ready=ready,
            restart_count=restarts,
            reason=_s(term.reason),
            message=_s(term.message),
            exit_code=term.exit_code,
        )
    if state is not None and state.running is not None:
        return ContainerState(name=name, state="running", ready=ready, restart_count=restarts)
    return ContainerState(name=name, state="unknown", ready=ready, restart_count=restarts)


def event_from_watch(raw: Mapping[str, Any]) -> PodEvent | None:
    """Convert one event of `kubernetes.watch.Watch().stream(list_namespaced_pod, ...)`.

    BOOKMARK objects are left as raw dicts by the client (they are incomplete pods); ERROR 410 arrives as an
    ApiException from the client, but a raw ERROR event is handled too."""
    kind = raw.get("type")
    obj = raw.get("object")
    if kind == "BOOKMARK":
        meta = obj.get("metadata", {}) if isinstance(obj, dict) else getattr(obj, "metadata", None)
        rv = _s(meta.get("resourceVersion")) if isinstance(meta, dict) else _s(getattr(meta, "resource_version", ""))
        return PodEvent(type="BOOKMARK", pod=None, resource_version=rv)
    if kind in ("ADDED", "MODIFIED", "DELETED"):
        pod = pod_from_model(obj)
        return PodEvent(type=kind, pod=pod, resource_version=pod.resource_version)
    if kind == "ERROR":
        status = raw.get("raw_object") or {}
        if status.get("code") == 410:
            raise GoneError(_s(status.get("message")) or "410 Gone")
        raise BootstrapError(f"watch pods failed: {status.get('code')} {status.get('message', '')}".rstrip())
    log.debug("ignoring watch event of type %s", kind)
    return None


def event_from_model(event: Any) -> EventInfo:
    last = event.last_timestamp or event.event_time or event.first_timestamp
    if last is None and event.metadata is not None:
        last = event.metadata.creation_timestamp
    return EventInfo(type=_s(event.type), reason=_s(event.reason), message=_s(event.message).strip(), last_seen=last)


# ----------------------------------------------------------------------------------------------------------
# The real implementation


class KubernetesApi:
    """`KubeApi` over `kubernetes.client.CoreV1Api`."""

    def __init__(self, core_v1: Any) -> None:
        self._core = core_v1

    @classmethod
    def from_kubeconfig(cls, path: str | Path, *, context: str | None = None) -> KubernetesApi:
        """Build from a kubeconfig file (used by the e2e tests and outside a cluster)."""
        from kubernetes import client, config

        api_client = config.new_client_from_config(config_file=str(path), context=context)
        return cls(client.CoreV1Api(api_client))

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
        return cls(client.CoreV1Api())

    # -- helpers -------------------------------------------------------------------------------------------

    def _call(self, verb: str, resource: str, namespace: str, fn: Callable[[], T]) -> T:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn()
        except ApiException as exc:
            raise translate_api_error(exc, verb=verb, resource=resource, namespace=namespace) from None
        except HTTPError as exc:
            raise BootstrapError(f"cannot reach the Kubernetes API to {verb} {resource}: {exc}") from None

    # -- pods ----------------------------------------------------------------------------------------------

    def list_pods(self, *, namespace: str, selector: str) -> PodList:
        result = self._call(
            "list",
            "pods",
            namespace,
            lambda: self._core.list_namespaced_pod(namespace=namespace, label_selector=selector),
        )
        return PodList(
            pods=tuple(pod_from_model(p) for p in result.items or ()),
            resource_version=_s(result.metadata.resource_version),
        )

    def watch_pods(
        self, *, namespace: str, selector: str, resource_version: str, timeout_seconds: int
    ) -> Iterator[PodEvent]:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        watcher = watch.Watch()
        stream = watcher.stream(
            self._core.list_namespaced_pod,
            namespace=namespace,
            label_selector=selector,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            allow_watch_bookmarks=True,
            # a dead TCP connection must not hang us past the deadline
            _request_timeout=timeout_seconds + 15,
        )
        try:
            for raw in stream:
                event = event_from_watch(raw)
                if event is not None:
                    yield event
        except ApiException as exc:
            if exc.status == 410:
                raise GoneError(str(exc.reason)) from None
            raise translate_api_error(exc, verb="watch", resource="pods", namespace=namespace) from None
        except HTTPError as exc:
            # a read timeout or reset ends this watch chunk; the caller re-watches from its last version
            log.debug("watch connection ended: %s", exc)
        finally:
            watcher.stop()

    def get_pod(self, *, namespace: str, name: str) -> PodInfo | None:
        from kubernetes.client.exceptions import ApiException

        try:
            return pod_from_model(self._core.read_namespaced_pod(name=name, namespace=namespace))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise translate_api_error(exc, verb="get", resource="pods", namespace=namespace) from None

    def list_pod_events(self, *, namespace: str, pod_name: str) -> list[EventInfo]:
        result = self._call(
            "list",
            "events",
            namespace,
            lambda: self._core.list_namespaced_event(
                namespace=namespace,
                field_selector=f"involvedObject.kind=Pod,involvedObject.name={pod_name}",
            ),
        )
        return [event_from_model(e) for e in result.items or ()]

    def create_event(self, *, pod: PodRef, reason: str, message: str, type_: str = "Normal") -> None:
        from kubernetes import client

        now = dt.datetime.now(dt.UTC)
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{pod.name}.", namespace=pod.namespace),
            involved_object=client.V1ObjectReference(
                api_version="v1", kind="Pod", name=pod.name, namespace=pod.namespace, uid=pod.uid or None
            ),
            reason=reason,
            message=message[:1024],
            type=type_,
            count=1,
            first_timestamp=now,
            last_timestamp=now,
            source=client.V1EventSource(component=COMPONENT),
            reporting_component=COMPONENT,
            reporting_instance=pod.name,
        )
        self._call(
            "create",
            "events",
            pod.namespace,
            lambda: self._core.create_namespaced_event(namespace=pod.namespace, body=body),
        )

    # -- secrets -------------------------------------------------------------------------------------------

    def get_secret(self, *, namespace: str, name: str) -> dict[str, bytes] | None:
        import base64

        from kubernetes.client.exceptions import ApiException

        try:
            secret = self._core.read_namespaced_secret(name=name, namespace=namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise translate_api_error(exc, verb="get", resource="secrets", namespace=namespace) from None
        return {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}

    def _secret_body(self, name: str, namespace: str, data: Mapping[str, bytes], labels: Mapping[str, str]) -> Any:
        import base64

        from kubernetes import client

        return client.V1Secret(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace, labels=dict(labels)),
            type="Opaque",
            data={k: base64.b64encode(v).decode("ascii") for k, v in data.items()},
        )

    def create_secret(self, *, namespace: str, name: str, data: Mapping[str, bytes], labels: Mapping[str, str]) -> None:
        body = self._secret_body(name, namespace, data, labels)
        self._call(
            "create",
            "secrets",
            namespace,
            lambda: self._core.create_namespaced_secret(namespace=namespace, body=body),
        )

    def replace_secret(
        self, *, namespace: str, name: str, data: Mapping[str, bytes], labels: Mapping[str, str]
    ) -> None:
        body = self._secret_body(name, namespace, data, labels)
        self._call(
            "update",
            "secrets",
            namespace,
            lambda: self._core.replace_namespaced_secret(name=name, namespace=namespace, body=body),
        )

    def delete_secret(self, *, namespace: str, name: str) -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            self._core.delete_namespaced_secret(name=name, namespace=namespace)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise translate_api_error(exc, verb="delete", resource="secrets", namespace=namespace) from None
        return True


def translate_api_error(exc: Any, *, verb: str, resource: str, namespace: str) -> BootstrapError:
    """Map a client ApiException to one actionable line."""
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
