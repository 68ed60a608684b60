"""Publishing a server that runs outside Kubernetes (a Slurm job) as a Service of a Kubernetes cluster
(`server --register-service NAME --kube-namespace NS`), so notebooks there connect to a stable name.

A Service without a selector (Kubernetes leaves its endpoints to us) and one EndpointSlice of the same name,
labelled `kubernetes.io/service-name=NAME`, with the server's address and port. Before launch both are created,
the endpoint marked not ready: that checks the credentials and RBAC before the allocation's time is spent, and
`kubectl get endpointslices` already shows where the server will be. Once the server's port accepts connections
the endpoint turns ready (kube-proxy routes only to ready endpoints). When the program exits, or the job is
cancelled (scancel sends SIGTERM), both are deleted. A registration left behind by a SIGKILL is taken over by
the next job with that name; objects of the same name that arkouda-bootstrap did not create are never touched.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from arkouda_bootstrap.config import DEFAULT_SERVER_PORT
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.kube.api import COMPONENT, ConflictError, ServiceApi

log = logging.getLogger(__name__)

MANAGED_BY = "app.kubernetes.io/managed-by"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
# EndpointSlices not made by Kubernetes' own controller name their manager here (the controller skips them).
SLICE_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
SLICE_MANAGER = "arkouda-bootstrap.arkouda.io"
PORT_NAME = "arkouda"
SERVER_PORT_FLAG = "--ServerPort"
LISTEN_POLL_SECONDS = 0.5


def server_port(command: Sequence[str]) -> int:
    """Arkouda's client port from its command line (`--ServerPort=N` or `--ServerPort N`), else its default."""
    for i, arg in enumerate(command):
        value: str | None = None
        if arg.startswith(SERVER_PORT_FLAG + "="):
            value = arg.split("=", 1)[1]
        elif arg == SERVER_PORT_FLAG and i + 1 < len(command):
            value = command[i + 1]
        if value is not None:
            if value.isdigit() and 0 < int(value) < 65536:
                return int(value)
            raise BootstrapError(f"the command's {SERVER_PORT_FLAG} {value!r} is not a port: set --service-port")
    return DEFAULT_SERVER_PORT


def service_body(*, name: str, namespace: str, port: int, annotations: Mapping[str, str]) -> dict[str, Any]:
    """A ClusterIP Service without a selector: Kubernetes takes its endpoints from our EndpointSlice."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {MANAGED_BY: COMPONENT},
            "annotations": dict(annotations),
        },
        "spec": {"ports": [{"name": PORT_NAME, "port": port, "targetPort": port, "protocol": "TCP"}]},
    }


def endpoint_slice_body(
    *, name: str, namespace: str, address: str, port: int, ready: bool, service_uid: str, annotations: Mapping[str, str]
) -> dict[str, Any]:
    """The Service's one EndpointSlice; owned by the Service, so deleting the Service also removes it."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {SERVICE_NAME_LABEL: name, SLICE_MANAGED_BY: SLICE_MANAGER, MANAGED_BY: COMPONENT},
        "annotations": dict(annotations),
    }
    if service_uid:
        metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Service", "name": name, "uid": service_uid}]
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": metadata,
        "addressType": "IPv4",
        "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [address], "conditions": {"ready": ready}}],
    }


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _ours(obj: Mapping[str, Any]) -> bool:
    labels = _meta(obj).get("labels")
    return isinstance(labels, Mapping) and labels.get(MANAGED_BY) == COMPONENT


@dataclass
class ServiceRegistration:
    """The Service and EndpointSlice of one server; `publish` before launch, `mark_ready` once it listens,
    `withdraw` at the end (each deletion logged, never raised: the program's own status matters more)."""

    api: ServiceApi
    name: str
    namespace: str
    address: str
    port: int
    annotations: Mapping[str, str] = field(default_factory=dict)
    _service_uid: str = ""
    _published: bool = False

    def _where(self, kind: str) -> str:
        return f"{kind} {self.name} in namespace {self.namespace}"

    def _check_ours(self, kind: str, existing: Mapping[str, Any]) -> Mapping[str, Any]:
        if not _ours(existing):
            raise BootstrapError(
                f"{self._where(kind)} exists and was not made by arkouda-bootstrap ({MANAGED_BY} is not {COMPONENT}): "
                "choose another --register-service name"
            )
        return existing

    def _take_over(self, kind: str, existing: Mapping[str, Any] | None) -> Mapping[str, Any]:
        if existing is None:
            raise BootstrapError(f"{self._where(kind)} exists and vanished while we looked at it: run the job again")
        self._check_ours(kind, existing)
        log.info("taking over %s left by an earlier job", self._where(kind))
        return existing

    def _put_service(self) -> None:
        body = service_body(name=self.name, namespace=self.namespace, port=self.port, annotations=self.annotations)
        try:
            created = self.api.create_service(namespace=self.namespace, body=body)
        except ConflictError:
            existing = self._take_over("Service", self.api.get_service(namespace=self.namespace, name=self.name))
            body["metadata"]["resourceVersion"] = _meta(existing).get("resourceVersion", "")
            spec = existing.get("spec")
            if isinstance(spec, Mapping):  # a Service keeps its cluster IP on update
                for key in ("clusterIP", "clusterIPs"):
                    if spec.get(key):
                        body["spec"][key] = spec[key]
            created = self.api.replace_service(namespace=self.namespace, name=self.name, body=body)
        self._service_uid = str(_meta(created).get("uid") or "")

    def _put_slice(self, *, ready: bool, create: bool) -> None:
        body = endpoint_slice_body(
            name=self.name,
            namespace=self.namespace,
            address=self.address,
            port=self.port,
            ready=ready,
            service_uid=self._service_uid,
            annotations=self.annotations,
        )
        # publish creates; mark_ready updates the one publish made (or creates it again if someone deleted it)
        existing: Mapping[str, Any] | None = (
            None if create else self.api.get_endpoint_slice(namespace=self.namespace, name=self.name)
        )
        if existing is not None:
            self._check_ours("EndpointSlice", existing)
        else:
            try:
                self.api.create_endpoint_slice(namespace=self.namespace, body=body)
                return
            except ConflictError:
                existing = self._take_over(
                    "EndpointSlice", self.api.get_endpoint_slice(namespace=self.namespace, name=self.name)
                )
        body["metadata"]["resourceVersion"] = _meta(existing).get("resourceVersion", "")
        self.api.replace_endpoint_slice(namespace=self.namespace, name=self.name, body=body)

    def publish(self) -> None:
        """Create (or take over) the Service and its EndpointSlice, the endpoint not ready yet."""
        self._published = True  # from here on, withdraw cleans up whatever part exists
        self._put_service()
        self._put_slice(ready=False, create=True)
        log.info(
            "registered Service %s in namespace %s -> %s:%d (not ready until the server listens)",
            self.name,
            self.namespace,
            self.address,
            self.port,
        )

    def mark_ready(self) -> None:
        self._put_slice(ready=True, create=False)
        log.info("Service %s in namespace %s is ready: %s:%d", self.name, self.namespace, self.address, self.port)

    def withdraw(self) -> None:
        if not self._published:
            return
        self._published = False
        for kind, delete in (
            ("EndpointSlice", self.api.delete_endpoint_slice),
            ("Service", self.api.delete_service),
        ):
            try:
                deleted = delete(namespace=self.namespace, name=self.name)
            except BootstrapError as exc:
                log.error("could not delete %s: %s", self._where(kind), exc)
            else:
                log.info("%s %s", "deleted" if deleted else "already gone:", self._where(kind))


def wait_listening(port: int, *, stop: threading.Event, host: str = "127.0.0.1") -> bool:
    """Poll until `host:port` accepts a connection (True) or `stop` is set (False). Arkouda binds every interface,
    so the batch host's loopback answers as soon as the registered address does."""
    while not stop.is_set():
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=LISTEN_POLL_SECONDS):
            return True
        stop.wait(LISTEN_POLL_SECONDS)
    return False


class ReadyWhenListening:
    """A daemon thread that marks the registration ready once the server listens; on failure it calls `on_error`
    with the one line (the caller stops the program: notebooks could not reach it)."""

    def __init__(
        self,
        registration: ServiceRegistration,
        *,
        on_error: Callable[[BootstrapError], None],
        listen_host: str = "127.0.0.1",
    ) -> None:
        self._registration = registration
        self._on_error = on_error
        self._listen_host = listen_host
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="register-service", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        port = self._registration.port
        log.info(
            "waiting for the server to listen on port %d before marking Service %s ready", port, self._registration.name
        )
        if not wait_listening(port, stop=self._stop, host=self._listen_host):
            return
        try:
            self._registration.mark_ready()
        except BootstrapError as exc:
            self._on_error(exc)

    def stop(self, *, timeout: float = 60.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
