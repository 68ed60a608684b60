"""FakeKube: a named test double of arkouda_bootstrap.kube.api.KubeApi and ServiceApi (in-memory pods, Secrets,
Events, Services and EndpointSlices, and a scripted watch stream). No API server is involved; the e2e suite runs
the same code against a real one."""

from __future__ import annotations

import copy
import queue
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.kube.api import (
    ConflictError,
    EventInfo,
    GoneError,
    OwnerRef,
    PodCondition,
    PodEvent,
    PodInfo,
    PodList,
    PodRef,
    WorkloadInfo,
)

END = "END"  # ends one watch request (the server's timeout_seconds elapsed)


@dataclass(frozen=True)
class Gate:
    """Watch-script item: the watch holds the next items back until `path` exists (at most `timeout` s), so a
    test can deliver an event only after the launched program reached a point (e.g. a file it writes)."""

    path: Path
    timeout: float = 30.0

    def wait(self) -> None:
        deadline = time.monotonic() + self.timeout
        while not self.path.exists():
            if time.monotonic() > deadline:
                raise AssertionError(f"gate {self.path} did not open within {self.timeout}s")
            time.sleep(0.02)


WatchItem = PodEvent | Exception | str | Gate


class FakeNetwork:
    """Test double of the pod network for Liveness: an address in `down` lets connects time out, one in `refused`
    refuses them, any other answers."""

    def __init__(self) -> None:
        self.down: set[str] = set()
        self.refused: set[str] = set()
        self.connects = 0

    def connect(self, address: str, port: int, timeout: float) -> str | None:
        self.connects += 1
        if address in self.down:
            return f"no answer within {timeout:g}s"
        if address in self.refused:
            return "Connection refused"
        return None


class FakeClock:
    """Test double of time.monotonic: moves only when advanced (`sleep` is the matching time.sleep, and keeps
    what it was asked in `slept`)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(seconds)


def fake_statefulset_uid(statefulset: str) -> str:
    """The UID FakeKube gives StatefulSet `statefulset` unless a test sets another."""
    return f"uid-sts-{statefulset}"


def owner_of(name: str) -> OwnerRef | None:
    """The controller make_pod gives pod `<statefulset>-<ordinal>`: that StatefulSet, with fake_statefulset_uid."""
    match = re.fullmatch(r"(.+)-\d+", name)
    if match is None:
        return None
    return OwnerRef(kind="StatefulSet", name=match.group(1), uid=fake_statefulset_uid(match.group(1)))


def make_pod(
    name: str,
    *,
    ip: str | None = "10.0.0.1",
    ready: bool = True,
    phase: str = "Running",
    labels: Mapping[str, str] | None = None,
    uid: str = "",
    conditions: tuple[PodCondition, ...] | None = None,
    rv: str = "1",
    **kwargs: object,
) -> PodInfo:
    if conditions is None:
        conditions = (PodCondition(type="Ready", status="True" if ready else "False"),)
    kwargs.setdefault("controller", owner_of(name))  # a StatefulSet's pod unless the test says otherwise
    return PodInfo(
        name=name,
        namespace="ns",
        uid=uid or f"uid-{name}",
        labels=dict(labels or {}),
        phase=phase,
        pod_ip=ip,
        conditions=conditions,
        resource_version=rv,
        **kwargs,  # type: ignore[arg-type]
    )


@dataclass
class CreatedEvent:
    pod: PodRef
    reason: str
    message: str
    type: str


@dataclass
class FakeKube:
    """Test double of KubeApi. `watch_script` items are consumed in order by watch requests; with
    `block=True` an empty script waits (real time, up to timeout_seconds) for items put by another thread."""

    pods: dict[str, PodInfo] = field(default_factory=dict)
    list_rv: int = 100
    event_rv: int = 1000  # resourceVersions of scripted watch events (after any list)
    secrets: dict[tuple[str, str], tuple[dict[str, bytes], dict[str, str]]] = field(default_factory=dict)
    config_maps: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    jobs: dict[tuple[str, str], str] = field(default_factory=dict)  # (namespace, name) -> its pod, which goes with it
    # (namespace, name) -> the uids of the pods it lists as owners
    kueue_workloads: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    # Workloads whose delete does not end (no Kueue controller to drop its finalizer): deleted, they stay
    stuck_workloads: set[tuple[str, str]] = field(default_factory=set)
    # (namespace, name) -> the Workload's status.conditions (get_kueue_workload)
    kueue_conditions: dict[tuple[str, str], tuple[PodCondition, ...]] = field(default_factory=dict)
    # Jobs whose pod does not end (its node is gone): deleted, they stay until the wait's deadline
    stuck_jobs: set[tuple[str, str]] = field(default_factory=set)
    pod_events: dict[str, list[EventInfo]] = field(default_factory=dict)
    created_events: list[CreatedEvent] = field(default_factory=list)
    event_names: set[str] = field(default_factory=set)  # of Events created with a name of their own
    watch_script: queue.Queue[WatchItem] = field(default_factory=queue.Queue)
    block: bool = False
    on_idle_watch: Callable[[int], None] | None = None
    fail_with: dict[str, BootstrapError] = field(default_factory=dict)
    # one-shot failures by operation, raised in order by its next calls (before any fail_with)
    fail_next: dict[str, list[BootstrapError]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    services: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    endpoint_slices: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    object_rv: int = 5000
    replicas: dict[str, int] = field(default_factory=dict)  # StatefulSet name -> spec.replicas (ScaleApi)
    # StatefulSet name -> metadata.uid (None: it does not exist); others have fake_statefulset_uid
    statefulset_uids: dict[str, str | None] = field(default_factory=dict)
    statefulset_events: dict[str, list[EventInfo]] = field(default_factory=dict)

    def _check(self, op: str, arg: str = "") -> None:
        self.calls.append((op, arg))
        if self.fail_next.get(op):
            raise self.fail_next[op].pop(0)
        if op in self.fail_with:
            raise self.fail_with[op]

    def script(self, *items: WatchItem) -> None:
        for item in items:
            self.watch_script.put(item)

    def event(self, kind: Literal["ADDED", "MODIFIED", "DELETED"], pod: PodInfo) -> PodEvent:
        self.event_rv += 1
        pod = replace(pod, resource_version=str(self.event_rv))
        return PodEvent(type=kind, pod=pod, resource_version=str(self.event_rv))

    # -- KubeApi -----------------------------------------------------------------------------------------

    def list_pods(self, *, namespace: str, selector: str) -> PodList:
        self._check("list_pods", selector)
        # API order deliberately scrambled (reverse of insertion) to prove callers sort by ordinal
        return PodList(pods=tuple(reversed(list(self.pods.values()))), resource_version=str(self.list_rv))

    def watch_pods(
        self, *, namespace: str, selector: str, resource_version: str, timeout_seconds: int
    ) -> Iterator[PodEvent]:
        self._check("watch_pods", resource_version)
        while True:
            try:
                item = self.watch_script.get(timeout=timeout_seconds) if self.block else self.watch_script.get_nowait()
            except queue.Empty:
                if self.on_idle_watch is not None:
                    self.on_idle_watch(timeout_seconds)
                return
            if item == END:
                return
            if isinstance(item, Gate):
                item.wait()
                continue
            if isinstance(item, Exception):
                raise item
            assert isinstance(item, PodEvent)
            if item.pod is not None:
                if item.type == "DELETED":
                    self.pods.pop(item.pod.name, None)
                else:
                    self.pods[item.pod.name] = item.pod
            yield item

    def get_pod(self, *, namespace: str, name: str) -> PodInfo | None:
        self._check("get_pod", name)
        return self.pods.get(name)

    def list_pod_events(self, *, namespace: str, pod_name: str) -> list[EventInfo]:
        self._check("list_pod_events", pod_name)
        return list(self.pod_events.get(pod_name, []))

    def list_statefulset_events(self, *, namespace: str, name: str) -> list[EventInfo]:
        self._check("list_statefulset_events", name)
        return list(self.statefulset_events.get(name, []))

    def get_statefulset_uid(self, *, namespace: str, name: str) -> str | None:
        self._check("get_statefulset_uid", name)
        return self.statefulset_uids.get(name, fake_statefulset_uid(name))

    def create_event(
        self, *, pod: PodRef, reason: str, message: str, type_: str = "Normal", name: str | None = None
    ) -> None:
        self._check("create_event", reason)
        if name is not None:
            if name in self.event_names:
                raise ConflictError(f"create events in namespace {pod.namespace}: {name} already exists")
            self.event_names.add(name)
        self.created_events.append(CreatedEvent(pod=pod, reason=reason, message=message, type=type_))

    def get_secret(self, *, namespace: str, name: str) -> dict[str, bytes] | None:
        self._check("get_secret", name)
        found = self.secrets.get((namespace, name))
        return dict(found[0]) if found else None

    def create_secret(self, *, namespace: str, name: str, data: Mapping[str, bytes], labels: Mapping[str, str]) -> None:
        self._check("create_secret", name)
        if (namespace, name) in self.secrets:
            raise ConflictError(f"create secrets in namespace {namespace}: conflict (AlreadyExists)")
        self.secrets[(namespace, name)] = (dict(data), dict(labels))

    def replace_secret(
        self, *, namespace: str, name: str, data: Mapping[str, bytes], labels: Mapping[str, str]
    ) -> None:
        self._check("replace_secret", name)
        self.secrets[(namespace, name)] = (dict(data), dict(labels))

    def delete_secret(self, *, namespace: str, name: str) -> bool:
        self._check("delete_secret", name)
        return self.secrets.pop((namespace, name), None) is not None

    def delete_pod(self, *, namespace: str, name: str) -> bool:
        self._check("delete_pod", name)
        return self.pods.pop(name, None) is not None

    def force_delete_pod(self, *, namespace: str, name: str, uid: str) -> bool:
        self._check("force_delete_pod", name)
        current = self.pods.get(name)
        if current is None or current.uid != uid:  # the API server's uid precondition (409) or 404
            return False
        del self.pods[name]
        return True

    def delete_config_map(self, *, namespace: str, name: str) -> bool:
        self._check("delete_config_map", name)
        return self.config_maps.pop((namespace, name), None) is not None

    def delete_kueue_workload(
        self, *, namespace: str, name: str, owner_uid: str | None = None, uid: str | None = None
    ) -> bool:
        self._check("delete_kueue_workload", name)
        owners = self.kueue_workloads.get((namespace, name))
        if owners is None or (owner_uid is not None and owner_uid not in owners):
            return False
        if uid is not None and uid != f"wl-{name}":
            return False
        if (namespace, name) not in self.stuck_workloads:
            del self.kueue_workloads[(namespace, name)]
        return True

    def wait_kueue_workload_gone(self, *, namespace: str, name: str, uid: str, timeout_seconds: float) -> bool:
        self._check("wait_kueue_workload_gone", name)
        return (namespace, name) not in self.kueue_workloads

    def get_kueue_workload(self, *, namespace: str, name: str) -> WorkloadInfo | None:
        self._check("get_kueue_workload", name)
        owners = self.kueue_workloads.get((namespace, name))
        if owners is None:
            return None
        conditions = self.kueue_conditions.get((namespace, name), ())
        return WorkloadInfo(name=name, uid=f"wl-{name}", owner_uids=frozenset(owners), conditions=conditions)

    def delete_job(self, *, namespace: str, name: str) -> str | None:
        self._check("delete_job", name)
        pod = self.jobs.get((namespace, name))
        if pod is None:
            return None
        if (namespace, name) not in self.stuck_jobs:  # propagation Foreground: the pod first, then the Job
            self.pods.pop(pod, None)
            del self.jobs[(namespace, name)]
        return f"uid-of-{name}"

    def wait_job_gone(self, *, namespace: str, name: str, uid: str, timeout_seconds: float) -> bool:
        self._check("wait_job_gone", f"{name} {timeout_seconds:g}s")
        return (namespace, name) not in self.jobs or uid != f"uid-of-{name}"

    # -- ScaleApi (the idle gate, server --scale-down-when-done) -------------------------------------------------

    def get_replicas(self, *, namespace: str, statefulset: str) -> int | None:
        self._check("get_replicas", statefulset)
        return self.replicas.get(statefulset)

    def set_replicas(self, *, namespace: str, statefulset: str, replicas: int) -> None:
        self._check("set_replicas", f"{statefulset}={replicas}")
        if statefulset not in self.replicas:
            raise BootstrapError(f"patch statefulsets/scale in namespace {namespace}: not found")
        self.replicas[statefulset] = replicas

    # -- ServiceApi (server --register-service): objects kept as the API's JSON -----------------------------

    def _create(
        self, op: str, store: dict[tuple[str, str], dict[str, Any]], namespace: str, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        name = str(body["metadata"]["name"])
        self._check(op, name)
        if (namespace, name) in store:
            raise ConflictError(f"{op}: conflict (AlreadyExists)")
        self.object_rv += 1
        obj = copy.deepcopy(dict(body))
        obj["metadata"].update(uid=f"uid-{name}-{self.object_rv}", resourceVersion=str(self.object_rv))
        store[(namespace, name)] = obj
        return copy.deepcopy(obj)

    def _replace(
        self, op: str, store: dict[tuple[str, str], dict[str, Any]], namespace: str, name: str, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        self._check(op, name)
        current = store.get((namespace, name))
        if current is None:
            raise BootstrapError(f"{op} in namespace {namespace}: not found")
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise ConflictError(f"{op}: conflict (the object has been modified)")
        self.object_rv += 1
        obj = copy.deepcopy(dict(body))
        obj["metadata"].update(uid=current["metadata"]["uid"], resourceVersion=str(self.object_rv))
        store[(namespace, name)] = obj
        return copy.deepcopy(obj)

    def create_service(self, *, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._create("create_service", self.services, namespace, body)

    def get_service(self, *, namespace: str, name: str) -> dict[str, Any] | None:
        self._check("get_service", name)
        found = self.services.get((namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def replace_service(self, *, namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._replace("replace_service", self.services, namespace, name, body)

    def delete_service(self, *, namespace: str, name: str) -> bool:
        self._check("delete_service", name)
        return self.services.pop((namespace, name), None) is not None

    def create_endpoint_slice(self, *, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._create("create_endpoint_slice", self.endpoint_slices, namespace, body)

    def get_endpoint_slice(self, *, namespace: str, name: str) -> dict[str, Any] | None:
        self._check("get_endpoint_slice", name)
        found = self.endpoint_slices.get((namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def replace_endpoint_slice(self, *, namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._replace("replace_endpoint_slice", self.endpoint_slices, namespace, name, body)

    def delete_endpoint_slice(self, *, namespace: str, name: str) -> bool:
        self._check("delete_endpoint_slice", name)
        return self.endpoint_slices.pop((namespace, name), None) is not None


__all__ = ["END", "CreatedEvent", "FakeClock", "FakeKube", "GoneError", "make_pod"]
