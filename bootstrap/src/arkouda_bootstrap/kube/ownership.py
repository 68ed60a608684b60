"""Which pods are the release's own: those whose controller (the ownerReferences entry with controller: true) is
one of the release's StatefulSets, by UID.

Labels prove nothing: anyone who may create pods in the namespace, or a `kubectl debug --copy-to --keep-labels`,
makes a pod the label selector matches. Such a pod must neither enter the host list nor block a relaunch with a
duplicate ordinal; every follower of the release's pods (discovery, the supervisor's LocaleMonitor, nodewatch, the
idle gate) gives an `OwnedBy` to its `PodCache` as the `keep` filter, and each impostor is named once through
`on_impostor`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable

from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.kube.api import KubeApi, PodInfo
from arkouda_bootstrap.kube.retry import ApiRetry

log = logging.getLogger(__name__)

STATEFULSET = "StatefulSet"


def impostor_message(pod: PodInfo, statefulsets: Iterable[str]) -> str:
    """One line naming the pod and what it lacks."""
    owner = pod.controller
    what = f"its controller is {owner.kind} {owner.name} (uid {owner.uid})" if owner else "it has no controller"
    return (
        f"ignoring pod {pod.name} (uid {pod.uid}): it carries this release's labels but is not a pod of "
        f"StatefulSet {' or '.join(sorted(statefulsets))} ({what}); delete it or take the release's labels off it"
    )


class OwnedBy:
    """A `PodCache` keep filter: True for the pods of the named StatefulSets (their UIDs read once, and again when
    a pod names a StatefulSet of the same name with another UID: it was re-created), False for any other pod,
    which is reported once per pod UID to `on_impostor(pod, message)`.

    The first read waits out an API outage (kube.retry: every follower starts with it, and none may exit for an
    outage); a later read that fails keeps the cached UID, so the watch it runs in is never held up."""

    def __init__(
        self,
        api: KubeApi,
        *,
        namespace: str,
        statefulsets: Iterable[str],
        on_impostor: Callable[[PodInfo, str], None] | None = None,
        retry: ApiRetry | None = None,
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._names = tuple(statefulsets)
        self._on_impostor = on_impostor
        first = retry or ApiRetry(f"StatefulSets {', '.join(self._names)} in namespace {namespace}")
        self._uids: dict[str, str | None] = {
            name: first.call(functools.partial(self._read_uid, name)) for name in self._names
        }
        self._rechecked: set[str] = set()  # owner UIDs already compared with a fresh read of the StatefulSet
        self._named: set[str] = set()  # pod UIDs already reported

    def _read_uid(self, name: str) -> str | None:
        uid = self._api.get_statefulset_uid(namespace=self._namespace, name=name)
        if uid is None:
            log.info("StatefulSet %s not found in namespace %s: no pod counts as its own yet", name, self._namespace)
        return uid

    def __call__(self, pod: PodInfo) -> bool:
        owner = pod.controller
        if owner is not None and owner.kind == STATEFULSET and owner.name in self._uids:
            if owner.uid and owner.uid == self._uids[owner.name]:
                return True
            if owner.uid not in self._rechecked:
                self._rechecked.add(owner.uid)
                try:
                    self._uids[owner.name] = self._read_uid(owner.name)
                except BootstrapError as exc:  # the cached UID stays; the pod is judged by it
                    log.warning("could not read StatefulSet %s again: %s", owner.name, exc)
                if owner.uid == self._uids[owner.name]:
                    return True
        if pod.uid not in self._named:
            self._named.add(pod.uid)
            message = impostor_message(pod, self._names)
            log.warning("%s", message)
            if self._on_impostor is not None:
                self._on_impostor(pod, message)
        return False
