"""The thin seam over the official `kubernetes` client.

Everything the bootstrap needs from the API server goes through `KubeApi` (a Protocol), so unit tests drive the
logic with a named fake and the e2e tests run the same code paths against a real kube-apiserver through
`KubernetesApi` (build one with `KubernetesApi.from_kubeconfig(path)` or `KubernetesApi.from_environment()`).

The seam speaks in small frozen dataclasses (`PodInfo`, `PodList`, `PodEvent`, `EventInfo`) made straight from
the API server's JSON: `KubernetesApi` calls the client's public `CoreV1Api` and `watch.Watch` with
`_preload_content=False`, so the client builds no model objects (validating them cost ≈1.2 ms per pod), and
turns API errors into one actionable line: a 403 becomes `missing RBAC: <verb> <resource> in namespace <ns>`.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from arkouda_bootstrap.errors import BootstrapError

log = logging.getLogger(__name__)

SERVICEACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
COMPONENT = "arkouda-bootstrap"
# Kueue's API (global.scheduling.queueName): the version its CRDs store since v0.15
KUEUE_GROUP = "kueue.x-k8s.io"
# the finalizer Kueue puts on a pod group's pods (and keeps after their deletion until it lets them go)
KUEUE_FINALIZER = "kueue.x-k8s.io/managed"
KUEUE_VERSION = "v1beta2"


class ConflictError(BootstrapError):
    """HTTP 409: the object already exists (e.g. two keygen Jobs racing)."""


class ForbiddenError(BootstrapError):
    """HTTP 403: our service account may not do this. The message names the missing RBAC permission, so the
    user can fix the Role; callers tell it from other API errors by this type (it is never worth retrying)."""

    def __init__(self, *, verb: str, resource: str, namespace: str) -> None:
        super().__init__(f"missing RBAC: {verb} {resource} in namespace {namespace}")
        self.verb = verb
        self.resource = resource
        self.namespace = namespace


class ApiUnavailableError(BootstrapError):
    """The API server could not answer: the connection was refused or broke, a request timed out, or it answered
    HTTP 5xx or 429 (overloaded). Worth trying again (kube.retry); every other API error is not."""


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
    # status.containerStatuses[].restartCount: the kubelet started the container again (the supervisor's evidence)
    restart_count: int = 0


@dataclass(frozen=True)
class OwnerRef:
    """A pod's controller (the metadata.ownerReferences entry with controller: true)."""

    kind: str
    name: str
    uid: str


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
    node_name: str = ""
    # metadata.deletionGracePeriodSeconds: how long the kubelet was given to confirm the deletion
    deletion_grace_seconds: int | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)  # read for the secondary network (netstatus)
    # the controller: what proves a pod is the release's own (kube.ownership), where labels prove nothing
    controller: OwnerRef | None = None
    # metadata.finalizers: Kueue's keeps a pod group's pod after its deletion (nodewatch)
    finalizers: tuple[str, ...] = ()

    def condition(self, type_: str) -> PodCondition | None:
        for cond in self.conditions:
            if cond.type == type_:
                return cond
        return None

    @property
    def gated(self) -> bool:
        """Not scheduled because a scheduling gate (e.g. Kueue's admission) is still on it."""
        cond = self.condition("PodScheduled")
        return cond is not None and cond.status == "False" and cond.reason == "SchedulingGated"

    @property
    def ready(self) -> bool:
        """Ready condition True, has an IP and is not being deleted."""
        cond = self.condition("Ready")
        return bool(cond is not None and cond.status == "True" and self.pod_ip and not self.deleting)


@dataclass(frozen=True)
class WorkloadInfo:
    """The parts of a Kueue Workload the bootstrap reads: whose it is and whether Kueue admitted it."""

    name: str
    uid: str
    owner_uids: frozenset[str] = frozenset()
    # status.conditions (QuotaReserved, Admitted, Evicted, ...): type, status, reason and Kueue's message
    conditions: tuple[PodCondition, ...] = ()
    deleting: bool = False

    def condition(self, type_: str) -> PodCondition | None:
        return next((c for c in self.conditions if c.type == type_), None)


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
    """What an Event needs to be attached to a pod so that `kubectl describe pod` shows it (or, with `kind` and
    `api_version`, another object of the namespace, e.g. the Job that owns the pod: `kubectl describe job`)."""

    namespace: str
    name: str
    uid: str = ""
    kind: str = "Pod"
    api_version: str = "v1"


class ReplicaSetter(Protocol):
    """The one way the bootstrap scales a StatefulSet: its `scale` subresource only (the Roles name the
    StatefulSets and grant nothing else on them). `server --scale-down-when-done` and the idle gate use it."""

    def set_replicas(self, *, namespace: str, statefulset: str, replicas: int) -> None:
        """spec.replicas, as a JSON patch of the scale subresource (RBAC: patch statefulsets/scale)."""
        ...


class ScaleApi(ReplicaSetter, Protocol):
    """What the idle gate needs: the replica count of two StatefulSets, read and set through their `scale`
    subresource."""

    def get_replicas(self, *, namespace: str, statefulset: str) -> int | None:
        """spec.replicas; None when the StatefulSet does not exist."""
        ...


class KubeApi(ScaleApi, Protocol):
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

    def list_statefulset_events(self, *, namespace: str, name: str) -> list[EventInfo]:
        """The Events of StatefulSet `name` (FailedCreate: why its controller cannot create pods)."""
        ...

    def get_statefulset_uid(self, *, namespace: str, name: str) -> str | None:
        """metadata.uid of StatefulSet `name` (RBAC: get statefulsets); None when it does not exist."""
        ...

    def create_event(
        self, *, pod: PodRef, reason: str, message: str, type_: str = "Normal", name: str | None = None
    ) -> None:
        """Record an Event on `pod`; with `name` the Event's own name (a second create of it raises
        ConflictError), else a generated one."""
        ...

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

    def delete_pod(self, *, namespace: str, name: str) -> bool:
        """Delete; False when it did not exist."""
        ...

    def force_delete_pod(self, *, namespace: str, name: str, uid: str) -> bool:
        """Delete at once (grace 0: no kubelet confirmation), only the pod with this `uid`; False when it no
        longer exists or the name now belongs to another pod."""
        ...

    def delete_config_map(self, *, namespace: str, name: str) -> bool:
        """Delete; False when it did not exist."""
        ...

    def delete_job(self, *, namespace: str, name: str) -> str | None:
        """Delete a Job, its pods first (Foreground: the Job stays until they are gone); the uid of the Job being
        deleted, None when it did not exist."""
        ...

    def wait_job_gone(self, *, namespace: str, name: str, uid: str, timeout_seconds: float) -> bool:
        """Wait, by list-then-watch on this name, until the Job with this `uid` no longer exists; False when it
        still does after `timeout_seconds`."""
        ...

    def delete_kueue_workload(
        self, *, namespace: str, name: str, owner_uid: str | None = None, uid: str | None = None
    ) -> bool:
        """Delete a Kueue Workload (kueue.x-k8s.io/v1beta2); False when it, or Kueue's API, does not exist. With
        `owner_uid`, only the Workload that lists that pod among its owners, by its own uid (RBAC: get too): Kueue
        reuses the name for the group's next Workload, which must not be deleted on an old pod's account. With
        `uid`, only the Workload of that uid (one read before)."""
        ...

    def get_kueue_workload(self, *, namespace: str, name: str) -> WorkloadInfo | None:
        """A Kueue Workload (kueue.x-k8s.io/v1beta2); None when it, or Kueue's API, does not exist."""
        ...

    def wait_kueue_workload_gone(self, *, namespace: str, name: str, uid: str, timeout_seconds: float) -> bool:
        """Wait, by list-then-watch on this name, until the Workload with this `uid` no longer exists; False when
        it still does after `timeout_seconds`."""
        ...


class ServiceApi(Protocol):
    """What publishing a server outside the cluster needs (`server --register-service`): one Service without a
    selector and its EndpointSlice, as the API's JSON. `create_*` raise ConflictError when the object exists."""

    def create_service(self, *, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def get_service(self, *, namespace: str, name: str) -> dict[str, Any] | None: ...

    def replace_service(self, *, namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def delete_service(self, *, namespace: str, name: str) -> bool:
        """Delete; False when it did not exist."""
        ...

    def create_endpoint_slice(self, *, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def get_endpoint_slice(self, *, namespace: str, name: str) -> dict[str, Any] | None: ...

    def replace_endpoint_slice(self, *, namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def delete_endpoint_slice(self, *, namespace: str, name: str) -> bool:
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
        annotations=dict(meta.get("annotations") or {}),
        node_name=_s(_d(obj.get("spec")).get("nodeName")),
        deletion_grace_seconds=_int_or_none(meta.get("deletionGracePeriodSeconds")),
        controller=_controller(meta.get("ownerReferences")),
        finalizers=tuple(_s(f) for f in meta.get("finalizers") or ()),
    )


def _controller(refs: object) -> OwnerRef | None:
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            return OwnerRef(kind=_s(ref.get("kind")), name=_s(ref.get("name")), uid=_s(ref.get("uid")))
    return None


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _container_from_json(cs: Mapping[str, Any]) -> ContainerState:
    state = _d(cs.get("state"))
    name = _s(cs.get("name"))
    ready = bool(cs.get("ready"))
    restarts = _int_or_none(cs.get("restartCount")) or 0
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
    """Convert one event of a pod watch (`{"type": ..., "object": {...}}`; watch.Watch raises ERROR events).

    BOOKMARK objects are incomplete pods that carry only a resourceVersion."""
    kind = raw.get("type")
    obj = _d(raw.get("object"))
    if kind == "BOOKMARK":
        return PodEvent(type="BOOKMARK", pod=None, resource_version=_s(_d(obj.get("metadata")).get("resourceVersion")))
    if kind in ("ADDED", "MODIFIED", "DELETED"):
        pod = pod_from_json(obj)
        return PodEvent(type=kind, pod=pod, resource_version=pod.resource_version)
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
# The real implementation: CoreV1Api and watch.Watch, every call with `_preload_content=False` (the answer is
# the raw urllib3 response, so no model is built or validated) and a client-side timeout

REQUEST_TIMEOUT_SECONDS = 30.0
# A watch chunk's connection may stay silent this much longer than its server-side timeout before we give up
# on it (a dead TCP connection must not hang discovery past its deadline).
WATCH_GRACE_SECONDS = 15
# Client-side timeouts go to the client as (connect, read) pairs: older clients silently drop a float.
# What watch.Watch should make of each event's object: the plain dict (the client's name for "no model").
_RAW_OBJECT = "object"


def _single_attempt(configuration: Any) -> Any:
    """No retries inside the client: urllib3's default (3) would hide an API server that does not answer for up to
    4 connect timeouts (2 minutes) before kube.retry hears of it, and a 60 s outage not at all; each failed attempt
    must reach kube.retry at once (logged, counted, and the outage told). 0, not False: urllib3 then raises
    MaxRetryError, which names the request."""
    configuration.retries = 0
    return configuration


class KubernetesApi:
    """`KubeApi` and `ServiceApi` over the official client's public API (`CoreV1Api`, `DiscoveryV1Api` for
    EndpointSlices, `watch.Watch`)."""

    def __init__(self, api_client: Any, *, request_timeout: float = REQUEST_TIMEOUT_SECONDS) -> None:
        # Imported here, not at module level: the generated CoreV1Api imports its model classes, which costs
        # the `locale` and `exporter` subcommands (they never call the API) a noticeable share of their start.
        from kubernetes.client import CoreV1Api

        self._client = api_client
        self._core = CoreV1Api(api_client)
        self._discovery: Any = None
        self._apps: Any = None
        self._batch: Any = None
        self._timeout = request_timeout

    def _discovery_api(self) -> Any:
        """DiscoveryV1Api, built on first use: only `server --register-service` needs it."""
        if self._discovery is None:
            from kubernetes.client import DiscoveryV1Api

            self._discovery = DiscoveryV1Api(self._client)
        return self._discovery

    def _apps_api(self) -> Any:
        """AppsV1Api, built on first use: StatefulSets (their uid, their scale) are read by some callers only."""
        if self._apps is None:
            from kubernetes.client import AppsV1Api

            self._apps = AppsV1Api(self._client)
        return self._apps

    def _batch_api(self) -> Any:
        """BatchV1Api, built on first use: only the uninstall clean-up deletes (and watches) a Job."""
        if self._batch is None:
            from kubernetes.client import BatchV1Api

            self._batch = BatchV1Api(self._client)
        return self._batch

    @classmethod
    def from_kubeconfig(
        cls, path: str | Path, *, context: str | None = None, request_timeout: float = REQUEST_TIMEOUT_SECONDS
    ) -> KubernetesApi:
        """Build from a kubeconfig file (used by the e2e tests and outside a cluster)."""
        from kubernetes import client, config

        # load_kube_config into our own Configuration: new_client_from_config takes none in client 29, our floor
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(path), context=context, client_configuration=configuration)
        return cls(client.ApiClient(_single_attempt(configuration)), request_timeout=request_timeout)

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
        return cls(client.ApiClient(_single_attempt(client.Configuration.get_default_copy())))

    # -- helpers -------------------------------------------------------------------------------------------

    def _call(
        self,
        op: str,
        namespace: str,
        call: Callable[..., Any],
        *args: Any,
        missing_ok: bool = False,
        **kwargs: Any,
    ) -> dict[str, Any] | None:
        """One API call (`op` is `<verb> <resource>` for errors) with a JSON answer, read raw; None for a
        404 when `missing_ok`; every error as one line."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        verb, resource = op.split()
        try:
            response = call(*args, _preload_content=False, _request_timeout=(self._timeout, self._timeout), **kwargs)
        except ApiException as exc:
            if missing_ok and exc.status == 404:
                return None
            raise translate_api_error(exc, verb=verb, resource=resource, namespace=namespace) from None
        except HTTPError as exc:
            raise ApiUnavailableError(f"cannot reach the Kubernetes API to {op}: {exc}") from None
        try:
            data = response.data
        except HTTPError as exc:
            raise ApiUnavailableError(f"{op}: the connection broke while reading the answer: {exc}") from None
        finally:
            response.release_conn()
        try:
            parsed = json.loads(data) if data else {}
        except ValueError:
            raise BootstrapError(f"{op}: the API server sent something that is not JSON") from None
        return parsed if isinstance(parsed, dict) else {}

    # -- pods ----------------------------------------------------------------------------------------------

    def list_pods(self, *, namespace: str, selector: str) -> PodList:
        result = self._call("list pods", namespace, self._core.list_namespaced_pod, namespace, label_selector=selector)
        result = result or {}
        return PodList(
            pods=tuple(pod_from_json(p) for p in result.get("items") or ()),
            resource_version=_s(_d(result.get("metadata")).get("resourceVersion")),
        )

    def watch_pods(
        self, *, namespace: str, selector: str, resource_version: str, timeout_seconds: int
    ) -> Iterator[PodEvent]:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError, MaxRetryError

        # With timeout_seconds set, Watch makes exactly one request and raises a 410 instead of retrying it.
        stream = watch.Watch(return_type=_RAW_OBJECT).stream(
            self._core.list_namespaced_pod,
            namespace,
            label_selector=selector,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            allow_watch_bookmarks=True,
            _request_timeout=(self._timeout, timeout_seconds + WATCH_GRACE_SECONDS),
        )
        try:
            for raw in stream:
                event = event_from_watch(raw) if isinstance(raw, dict) else None
                if event is not None:
                    yield event
        except ApiException as exc:
            if exc.status == 410:
                raise GoneError(_s(exc.reason) or "410 Gone") from None
            raise translate_api_error(exc, verb="watch", resource="pods", namespace=namespace) from None
        except MaxRetryError as exc:
            raise ApiUnavailableError(f"cannot reach the Kubernetes API to watch pods: {exc.reason or exc}") from None
        except HTTPError as exc:
            # a read timeout or reset ends this watch chunk; the caller re-watches from its last version
            log.debug("watch connection ended: %s", exc)
        finally:
            stream.close()

    def get_pod(self, *, namespace: str, name: str) -> PodInfo | None:
        result = self._call("get pods", namespace, self._core.read_namespaced_pod, name, namespace, missing_ok=True)
        return None if result is None else pod_from_json(result)

    def list_pod_events(self, *, namespace: str, pod_name: str) -> list[EventInfo]:
        return self._list_events(namespace, kind="Pod", name=pod_name)

    def list_statefulset_events(self, *, namespace: str, name: str) -> list[EventInfo]:
        return self._list_events(namespace, kind="StatefulSet", name=name)

    def _list_events(self, namespace: str, *, kind: str, name: str) -> list[EventInfo]:
        selector = f"involvedObject.kind={kind},involvedObject.name={name}"
        result = self._call(
            "list events", namespace, self._core.list_namespaced_event, namespace, field_selector=selector
        )
        return [event_from_json(e) for e in (result or {}).get("items") or ()]

    def get_statefulset_uid(self, *, namespace: str, name: str) -> str | None:
        call = self._apps_api().read_namespaced_stateful_set
        result = self._call("get statefulsets", namespace, call, name, namespace, missing_ok=True)
        return None if result is None else _s(_d(result.get("metadata")).get("uid"))

    def create_event(
        self, *, pod: PodRef, reason: str, message: str, type_: str = "Normal", name: str | None = None
    ) -> None:
        body = event_body(pod=pod, reason=reason, message=message, type_=type_, now=dt.datetime.now(dt.UTC))
        if name is not None:
            body["metadata"] = {"name": name, "namespace": pod.namespace}
        self._call("create events", pod.namespace, self._core.create_namespaced_event, pod.namespace, body)

    # -- secrets -------------------------------------------------------------------------------------------

    def get_secret(self, *, namespace: str, name: str) -> dict[str, bytes] | None:
        result = self._call(
            "get secrets", namespace, self._core.read_namespaced_secret, name, namespace, missing_ok=True
        )
        if result is None:
            return None
        return {k: base64.b64decode(v) for k, v in _d(result.get("data")).items()}

    def create_secret(self, *, namespace: str, name: str, data: Mapping[str, bytes], labels: Mapping[str, str]) -> None:
        body = secret_body(name=name, namespace=namespace, data=data, labels=labels)
        self._call("create secrets", namespace, self._core.create_namespaced_secret, namespace, body)

    def replace_secret(
        self, *, namespace: str, name: str, data: Mapping[str, bytes], labels: Mapping[str, str]
    ) -> None:
        body = secret_body(name=name, namespace=namespace, data=data, labels=labels)
        self._call("update secrets", namespace, self._core.replace_namespaced_secret, name, namespace, body)

    def delete_secret(self, *, namespace: str, name: str) -> bool:
        call = self._core.delete_namespaced_secret
        result = self._call("delete secrets", namespace, call, name, namespace, missing_ok=True)
        return result is not None

    def delete_pod(self, *, namespace: str, name: str) -> bool:
        call = self._core.delete_namespaced_pod
        return self._call("delete pods", namespace, call, name, namespace, missing_ok=True) is not None

    def force_delete_pod(self, *, namespace: str, name: str, uid: str) -> bool:
        # the uid precondition: never the replacement the StatefulSet made under the same name (HTTP 409)
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
        call = self._core.delete_namespaced_pod
        try:
            return self._call("delete pods", namespace, call, name, namespace, body=body, missing_ok=True) is not None
        except ConflictError:
            return False

    def delete_config_map(self, *, namespace: str, name: str) -> bool:
        call = self._core.delete_namespaced_config_map
        return self._call("delete configmaps", namespace, call, name, namespace, missing_ok=True) is not None

    def delete_kueue_workload(
        self, *, namespace: str, name: str, owner_uid: str | None = None, uid: str | None = None
    ) -> bool:
        from kubernetes.client import CustomObjectsApi

        custom = CustomObjectsApi(self._client)
        args = (KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads", name)
        kwargs: dict[str, Any] = {}
        if uid is not None:
            kwargs["body"] = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
        elif owner_uid is not None:
            found = self._call(f"get workloads.{KUEUE_GROUP}", namespace, custom.get_namespaced_custom_object,
                               *args, missing_ok=True)  # fmt: skip
            if found is None:
                return False
            meta = _d(found.get("metadata"))
            owners = {_s(_d(r).get("uid")) for r in meta.get("ownerReferences") or ()}
            if owner_uid not in owners:
                return False
            uid = _s(meta.get("uid"))
            kwargs["body"] = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
        call = custom.delete_namespaced_custom_object
        try:
            answer = self._call(f"delete workloads.{KUEUE_GROUP}", namespace, call, *args, missing_ok=True, **kwargs)
        except ConflictError:  # replaced between our get and delete
            return False
        return answer is not None

    def get_kueue_workload(self, *, namespace: str, name: str) -> WorkloadInfo | None:
        from kubernetes.client import CustomObjectsApi

        custom = CustomObjectsApi(self._client)
        args = (KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads", name)
        found = self._call(f"get workloads.{KUEUE_GROUP}", namespace, custom.get_namespaced_custom_object, *args,
                           missing_ok=True)  # fmt: skip
        if found is None:
            return None
        meta, status = _d(found.get("metadata")), _d(found.get("status"))
        conditions = tuple(
            PodCondition(
                type=_s(c.get("type")),
                status=_s(c.get("status")),
                reason=_s(c.get("reason")),
                message=_s(c.get("message")),
            )
            for c in (_d(x) for x in status.get("conditions") or ())
        )
        return WorkloadInfo(
            name=_s(meta.get("name")),
            uid=_s(meta.get("uid")),
            owner_uids=frozenset(_s(_d(r).get("uid")) for r in meta.get("ownerReferences") or ()),
            conditions=conditions,
            deleting=meta.get("deletionTimestamp") is not None,
        )

    def delete_job(self, *, namespace: str, name: str) -> str | None:
        # Foreground: the API's default for Jobs orphans their pods, and Background lets the Job go while its pods
        # still run; with Foreground the Job is gone only once no pod of it is left.
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground"}
        call = self._batch_api().delete_namespaced_job
        answer = self._call("delete jobs", namespace, call, name, namespace, body=body, missing_ok=True)
        if answer is None:
            return None
        # the Job itself while its pods go; a Status when nothing held it (its uid is then in details)
        uid = _d(answer.get("metadata")).get("uid") or _d(answer.get("details")).get("uid")
        return _s(uid)

    def wait_job_gone(self, *, namespace: str, name: str, uid: str, timeout_seconds: float) -> bool:
        call = self._batch_api().list_namespaced_job
        return self._wait_gone("jobs", call, (namespace,), namespace=namespace, name=name, uid=uid,
                               timeout_seconds=timeout_seconds)  # fmt: skip

    def wait_kueue_workload_gone(self, *, namespace: str, name: str, uid: str, timeout_seconds: float) -> bool:
        from kubernetes.client import CustomObjectsApi

        call = CustomObjectsApi(self._client).list_namespaced_custom_object
        args = (KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads")
        return self._wait_gone(f"workloads.{KUEUE_GROUP}", call, args, namespace=namespace, name=name, uid=uid,
                               timeout_seconds=timeout_seconds)  # fmt: skip

    def _wait_gone(
        self,
        resource: str,
        call: Callable[..., Any],
        args: tuple[str, ...],
        *,
        namespace: str,
        name: str,
        uid: str,
        timeout_seconds: float,
    ) -> bool:
        """List-then-watch `resource` by this name until the object of `uid` is gone; False at the deadline."""
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError, MaxRetryError

        by_name = f"metadata.name={name}"  # also what lets a Role grant list/watch by resourceNames
        deadline = time.monotonic() + timeout_seconds
        while True:
            listed = self._call(f"list {resource}", namespace, call, *args, field_selector=by_name) or {}
            if all(_d(job.get("metadata")).get("uid") != uid for job in listed.get("items") or ()):
                return True
            left = int(deadline - time.monotonic())
            if left <= 0:
                return False
            stream = watch.Watch(return_type=_RAW_OBJECT).stream(
                call,
                *args,
                field_selector=by_name,
                resource_version=_s(_d(listed.get("metadata")).get("resourceVersion")),
                timeout_seconds=left,
                _request_timeout=(self._timeout, left + WATCH_GRACE_SECONDS),
            )
            try:
                for raw in stream:
                    meta = _d(_d(raw.get("object")).get("metadata")) if isinstance(raw, dict) else {}
                    if raw.get("type") == "DELETED" and meta.get("uid") == uid:
                        return True
            except ApiException as exc:
                if exc.status != 410:  # 410: the version is too old; the next list starts afresh
                    raise translate_api_error(exc, verb="watch", resource=resource, namespace=namespace) from None
            except MaxRetryError as exc:
                reason = exc.reason or exc
                raise ApiUnavailableError(f"cannot reach the Kubernetes API to watch {resource}: {reason}") from None
            except HTTPError as exc:
                log.debug("watch connection ended: %s", exc)
            finally:
                stream.close()

    # -- services and endpointslices (server --register-service) ------------------------------------------

    def create_service(self, *, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        call = self._core.create_namespaced_service
        return self._call("create services", namespace, call, namespace, dict(body)) or {}

    def get_service(self, *, namespace: str, name: str) -> dict[str, Any] | None:
        call = self._core.read_namespaced_service
        return self._call("get services", namespace, call, name, namespace, missing_ok=True)

    def replace_service(self, *, namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        call = self._core.replace_namespaced_service
        return self._call("update services", namespace, call, name, namespace, dict(body)) or {}

    def delete_service(self, *, namespace: str, name: str) -> bool:
        call = self._core.delete_namespaced_service
        return self._call("delete services", namespace, call, name, namespace, missing_ok=True) is not None

    def create_endpoint_slice(self, *, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        call = self._discovery_api().create_namespaced_endpoint_slice
        return self._call("create endpointslices", namespace, call, namespace, dict(body)) or {}

    def get_endpoint_slice(self, *, namespace: str, name: str) -> dict[str, Any] | None:
        call = self._discovery_api().read_namespaced_endpoint_slice
        return self._call("get endpointslices", namespace, call, name, namespace, missing_ok=True)

    def replace_endpoint_slice(self, *, namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        call = self._discovery_api().replace_namespaced_endpoint_slice
        return self._call("update endpointslices", namespace, call, name, namespace, dict(body)) or {}

    def delete_endpoint_slice(self, *, namespace: str, name: str) -> bool:
        call = self._discovery_api().delete_namespaced_endpoint_slice
        return self._call("delete endpointslices", namespace, call, name, namespace, missing_ok=True) is not None

    # -- statefulsets/scale (the idle gate, server --scale-down-when-done) ----------------------------------

    def get_replicas(self, *, namespace: str, statefulset: str) -> int | None:
        call = self._apps_api().read_namespaced_stateful_set_scale
        result = self._call("get statefulsets/scale", namespace, call, statefulset, namespace, missing_ok=True)
        if result is None:
            return None
        return int(_d(result.get("spec")).get("replicas") or 0)

    def set_replicas(self, *, namespace: str, statefulset: str, replicas: int) -> None:
        # A JSON patch (a list): every client version sends it as such, whereas a dict body's patch type
        # depends on the client's version.
        body = [{"op": "replace", "path": "/spec/replicas", "value": replicas}]
        call = self._apps_api().patch_namespaced_stateful_set_scale
        self._call("patch statefulsets/scale", namespace, call, statefulset, namespace, body)


def event_body(*, pod: PodRef, reason: str, message: str, type_: str, now: dt.datetime) -> dict[str, Any]:
    """A core/v1 Event on `pod` (so `kubectl describe pod` lists it), as the API's JSON."""
    stamp = _rfc3339(now)
    involved: dict[str, str] = {
        "apiVersion": pod.api_version,
        "kind": pod.kind,
        "name": pod.name,
        "namespace": pod.namespace,
    }
    if pod.uid:
        involved["uid"] = pod.uid
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{pod.name}.", "namespace": pod.namespace},
        "involvedObject": involved,
        "reason": reason,
        "message": message[:1024],
        "type": type_,
        "count": 1,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": pod.name,
    }


def secret_body(*, name: str, namespace: str, data: Mapping[str, bytes], labels: Mapping[str, str]) -> dict[str, Any]:
    """An Opaque Secret as the API's JSON."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "type": "Opaque",
        "data": {k: base64.b64encode(v).decode("ascii") for k, v in data.items()},
    }


def translate_api_error(exc: Any, *, verb: str, resource: str, namespace: str) -> BootstrapError:
    """Map an API error (the client's ApiException: `status` and `reason`) to one actionable line."""
    status = getattr(exc, "status", None)
    if status == 403:
        return ForbiddenError(verb=verb, resource=resource, namespace=namespace)
    if status == 401:
        return BootstrapError(f"unauthorized: the API server rejected our credentials ({verb} {resource})")
    if status == 404:
        return BootstrapError(f"{verb} {resource} in namespace {namespace}: not found (does the namespace exist?)")
    if status == 409:
        return ConflictError(f"{verb} {resource} in namespace {namespace}: conflict ({getattr(exc, 'reason', '')})")
    if status == 422:
        # the API server refused the object itself; its Status message names the field and why
        return BootstrapError(f"{verb} {resource} in namespace {namespace}: refused: {_status_message(exc)}")
    failed = f"{verb} {resource} in namespace {namespace} failed: HTTP {status} {getattr(exc, 'reason', '')}".rstrip()
    if isinstance(status, int) and (status >= 500 or status == 429):
        return ApiUnavailableError(failed)
    return BootstrapError(failed)


def _status_message(exc: Any) -> str:
    """The `message` of the Status an API error carries, else its HTTP reason."""
    try:
        body = json.loads(getattr(exc, "body", None) or "{}")
    except (TypeError, ValueError):
        body = {}
    message = body.get("message") if isinstance(body, dict) else None
    return str(message) if message else str(getattr(exc, "reason", "") or "invalid")
