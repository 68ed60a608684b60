"""The pods' addresses on a secondary network (`--network-attachment`, chart value global.network.attachment).

The chart asks Multus (or any meta-plugin of the Network Plumbing WG's de-facto standard) for the attachment with
the `k8s.v1.cni.cncf.io/networks` pod annotation; the plugin reports what it attached in the
`k8s.v1.cni.cncf.io/network-status` annotation: a JSON list of `{"name": "<ns>/<attachment>", "interface": ...,
"ips": [...], "default": bool}`. The server then uses each pod's address there for the host list, the SSH probe and
GASNET_MASTERIP / the MPI hostfile (GASNet's workers take their UDP interface from the connection to the master,
amudp_spmd.cpp `getsockname`, so they follow the master onto the secondary network).

Multus writes the annotation while it sets up the pod's sandbox, i.e. before the containers run, but the API
update can reach the watch after the pod's Ready change. A Ready pod without the annotation is therefore waited
for (through the same pod watch, no polling) for STATUS_GRACE_SECONDS before that is the error; an annotation that
is there but unparseable or without the attachment is final (Multus writes it once, after all attachments) and
fails at once.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from arkouda_bootstrap.errors import BootstrapError, UsageError
from arkouda_bootstrap.kube.api import KubeApi, PodInfo
from arkouda_bootstrap.kube.podwatch import ChunkEnded, PodCache, follow_pods
from arkouda_bootstrap.kube.retry import ApiRetry, Deadline

log = logging.getLogger(__name__)

NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
NETWORK_STATUS_ANNOTATION = "k8s.v1.cni.cncf.io/network-status"
# Seconds a Ready pod may lack its entry before that is the error (Multus writes it before the containers start).
STATUS_GRACE_SECONDS = 30.0
# The StatefulSet controller's label with the pod's own name: lets the server watch only its own pod (a pod
# without it, e.g. the mpi Job's, is watched by all of its labels and picked out by name).
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
SOURCE = "--network-attachment (ARKOUDA_NETWORK_ATTACHMENT, global.network.attachment)"

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_DNS_SUBDOMAIN = r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"
_ATTACHMENT = re.compile(rf"^(?:(?P<ns>{_DNS_LABEL})/)?(?P<name>{_DNS_SUBDOMAIN})$")


class NetworkStatusError(BootstrapError):
    """A pod has no usable address on the attachment (the message names the pod and what to check)."""


class NetworkStatusMissingError(NetworkStatusError):
    """The pod has no network-status annotation (yet): worth waiting for a little."""


@dataclass(frozen=True)
class Attachment:
    """A NetworkAttachmentDefinition: `name` in the pod's namespace, or `namespace/name`."""

    name: str
    namespace: str | None = None

    @classmethod
    def parse(cls, value: str) -> Attachment:
        match = _ATTACHMENT.match(value.strip())
        if match is None:
            raise UsageError(
                f"{SOURCE}: {value!r} is not a NetworkAttachmentDefinition name (<name> or <namespace>/<name>, "
                "lowercase DNS names)"
            )
        return cls(name=match.group("name"), namespace=match.group("ns"))

    def qualified(self, pod_namespace: str) -> str:
        """The name Multus reports in network-status: always `<namespace>/<name>`."""
        return f"{self.namespace or pod_namespace}/{self.name}"

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def secondary_address(pod: PodInfo, attachment: Attachment) -> str:
    """The pod's IPv4 address on `attachment`, from its network-status annotation; NetworkStatusError otherwise."""
    wanted = attachment.qualified(pod.namespace)
    raw = pod.annotations.get(NETWORK_STATUS_ANNOTATION)
    if raw is None:
        raise NetworkStatusMissingError(
            f"pod {pod.name} has no {NETWORK_STATUS_ANNOTATION} annotation: the secondary network {wanted} was not "
            f"attached (is Multus installed on its node and does the NetworkAttachmentDefinition exist? {SOURCE})"
        )
    try:
        entries = json.loads(raw)
    except ValueError as exc:
        raise NetworkStatusError(
            f"pod {pod.name}: its {NETWORK_STATUS_ANNOTATION} annotation is not JSON ({exc}): the CNI meta-plugin "
            "wrote something else than the network-status list"
        ) from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise NetworkStatusError(
            f"pod {pod.name}: its {NETWORK_STATUS_ANNOTATION} annotation is not a list of network statuses: the CNI "
            "meta-plugin wrote something else than the network-status list"
        )
    # Multus before 3.7 reported attachments of the pod's own namespace by bare name.
    names = {wanted} | ({attachment.name} if attachment.namespace in (None, pod.namespace) else set())
    for entry in entries:
        if entry.get("name") in names and not entry.get("default"):
            ips = entry.get("ips") if isinstance(entry.get("ips"), list) else []
            for ip in ips:
                with contextlib.suppress(ValueError, TypeError):
                    if ipaddress.ip_address(ip).version == 4:  # GASNet's host lists cannot carry IPv6 literals
                        return str(ip)
            raise NetworkStatusError(
                f"pod {pod.name} is attached to {wanted} but has no IPv4 address there (ips: {ips}): the "
                "NetworkAttachmentDefinition needs an IPv4 IPAM (e.g. host-local or whereabouts)"
            )
    listed = ", ".join(str(e.get("name")) for e in entries) or "none"
    raise NetworkStatusError(
        f"pod {pod.name} is not attached to {wanted} (its {NETWORK_STATUS_ANNOTATION} lists: {listed}): check the "
        f"NetworkAttachmentDefinition's name and namespace ({SOURCE})"
    )


class Addresses:
    """Which pods have their secondary address, with the bounded wait for those that are Ready without it.

    `usable(pod)` is True once the address is known; for a Ready pod without the annotation, it starts (or
    continues) the grace period and returns False; a wrong annotation raises at once. `check()` raises the pod's
    NetworkStatusError once its grace has passed (call it on every watch event and at the end of every watch
    chunk, so the error comes within a chunk of the bound)."""

    def __init__(
        self,
        attachment: Attachment,
        *,
        grace: float = STATUS_GRACE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.attachment = attachment
        self._grace = grace
        self._clock = clock
        self._waiting: dict[str, tuple[float, NetworkStatusError]] = {}  # Ready pods without it: since, why

    def address(self, pod: PodInfo) -> str:
        return secondary_address(pod, self.attachment)

    def usable(self, pod: PodInfo) -> bool:
        try:
            secondary_address(pod, self.attachment)
        except NetworkStatusMissingError as exc:
            since = self._waiting[pod.name][0] if pod.name in self._waiting else self._clock()
            self._waiting[pod.name] = (since, exc)
            return False
        self._waiting.pop(pod.name, None)
        return True

    def forget(self, name: str) -> None:
        """The pod is gone or not Ready any more: its grace starts afresh when it is Ready again."""
        self._waiting.pop(name, None)

    def retain(self, names: Iterable[str]) -> None:
        """After a new list: forget the pods that are not in it."""
        keep = set(names)
        self._waiting = {n: w for n, w in self._waiting.items() if n in keep}

    def reason(self, pod: PodInfo) -> str | None:
        """For a progress line: why a Ready pod is not counted yet (None: it is, or it is not Ready)."""
        if pod.name not in self._waiting:
            return None
        network = self.attachment.qualified(pod.namespace)
        return f"Ready, waiting for its address on {network} ({NETWORK_STATUS_ANNOTATION})"

    def check(self) -> None:
        now = self._clock()
        for name, (since, exc) in sorted(self._waiting.items()):
            if now - since >= self._grace:
                raise NetworkStatusError(f"{exc} (waited {self._grace:g}s)") from None
            log.debug("pod %s: no address on %s yet: %s", name, self.attachment, exc)


def own_address(
    api: KubeApi,
    *,
    namespace: str,
    pod_name: str,
    attachment: Attachment,
    grace: float = STATUS_GRACE_SECONDS,
    chunk_seconds: int = 10,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> str:
    """This (the server's) pod's address on `attachment`: read from its pod, and if the annotation is not there
    yet, followed through a watch of this pod only for at most `grace` seconds. NetworkStatusError otherwise."""
    # an outage is waited out (kube.retry), here as in the wait for the locales that follows
    retry = ApiRetry(f"pod {pod_name} in namespace {namespace}", clock=clock, sleep=sleep)
    own = retry.call(lambda: api.get_pod(namespace=namespace, name=pod_name))
    if own is None:
        raise NetworkStatusError(
            f"pod {pod_name} (this server pod) was not found in namespace {namespace} while looking up its address "
            f"on {attachment.qualified(namespace)} (--pod-name, POD_NAME)"
        )
    try:
        return secondary_address(own, attachment)
    except NetworkStatusMissingError as exc:
        last = exc
        log.info("%s; waiting up to %gs for it", exc, grace)
    deadline = Deadline.after(grace, clock=clock)
    labels = {POD_NAME_LABEL: pod_name} if own.labels.get(POD_NAME_LABEL) == pod_name else own.labels
    # this very pod (its uid), not another one the selector matches or one that takes its name later
    cache = PodCache(keep=lambda pod: pod.name == pod_name and pod.uid == own.uid)
    with contextlib.closing(
        follow_pods(
            api,
            namespace=namespace,
            selector=",".join(f"{k}={v}" for k, v in sorted(labels.items())),
            chunk_seconds=chunk_seconds,
            deadline=deadline,
            clock=clock,
            sleep=sleep,
        )
    ) as followed:
        for item in followed:
            cache.apply(item)
            if isinstance(item, ChunkEnded) or (pod := cache.pods.get(pod_name)) is None:
                continue
            try:
                return secondary_address(pod, attachment)
            except NetworkStatusMissingError as exc:
                last = exc
    raise NetworkStatusError(f"{last} (waited {grace:g}s)")
