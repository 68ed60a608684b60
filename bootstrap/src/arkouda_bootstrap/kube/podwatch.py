"""List, then watch from the list's resourceVersion, in chunks; list again when the version is too old (410).

Everything that follows pods does it through `follow_pods`: discovery (waiting for the locales), the supervisor
(noticing a lost locale), the server's wait for its own secondary address, nodewatch and the idle gate; each keeps
the pods it follows in a `PodCache`. An API server that cannot answer is retried here, per kube.retry, so that none
of them writes a retry loop of its own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass

from arkouda_bootstrap.kube.api import ApiUnavailableError, GoneError, KubeApi, PodEvent, PodInfo, PodList
from arkouda_bootstrap.kube.retry import ApiRetry, Deadline, OutageListener

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChunkEnded:
    """One watch request ended (its server-side timeout passed, or the connection closed)."""

    resource_version: str


class PodCache:
    """The followed pods by name, as the last list and the watch events since then leave them: give it every item
    of `follow_pods`. Pods for which `keep` is False are left out."""

    def __init__(self, *, keep: Callable[[PodInfo], bool] | None = None) -> None:
        self.pods: dict[str, PodInfo] = {}
        self.listed = False  # a first list arrived
        self._keep = keep

    def apply(self, item: PodList | PodEvent | ChunkEnded) -> None:
        if isinstance(item, PodList):
            self.pods = {p.name: p for p in item.pods if self._keep is None or self._keep(p)}
            self.listed = True
        elif isinstance(item, PodEvent) and item.pod is not None:
            if item.type == "DELETED" or (self._keep is not None and not self._keep(item.pod)):
                self.pods.pop(item.pod.name, None)
            else:
                self.pods[item.pod.name] = item.pod


def follow_pods(
    api: KubeApi,
    *,
    namespace: str,
    selector: str,
    chunk_seconds: int,
    deadline: Deadline | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
    stop: threading.Event | None = None,
    listener: OutageListener | None = None,
) -> Generator[PodList | PodEvent | ChunkEnded, None, None]:
    """Yield the pod list (again after every 410), then each pod change, and a ChunkEnded after every watch
    request. Bookmarks only move the resourceVersion.

    An API that cannot answer (ApiUnavailableError) is retried per kube.retry: a failed list is made again, a
    failed watch resumes from the last resourceVersion seen, and `listener` hears when an outage begins and ends.
    That goes on until `stop` is set (then the iteration ends). With a `deadline` (of `clock`) the watch requests
    are cut to the time left and the iteration ends when it has passed; an outage pauses it (kube.retry.Deadline),
    so only an outage that began after it had passed raises its last error. Other API errors (ForbiddenError, ...)
    propagate at once."""
    retry = ApiRetry(
        f"pods {selector} in namespace {namespace}",
        clock=clock,
        sleep=sleep,
        deadline=deadline,
        stop=stop,
        listener=listener,
    )
    try:
        while True:  # one iteration per (re)list
            listing = retry.call(lambda: api.list_pods(namespace=namespace, selector=selector))
            yield listing
            rv = listing.resource_version
            try:
                while stop is None or not stop.is_set():  # one iteration per watch request
                    if deadline is not None and deadline.passed():
                        return
                    started, seen = clock(), 0
                    for attempt in retry.attempts():
                        with attempt:
                            seconds = chunk_seconds
                            if deadline is not None:  # a retry's last attempt comes at the deadline
                                seconds = max(1, min(chunk_seconds, int(deadline.left() + 0.999)))
                            for event in api.watch_pods(
                                namespace=namespace, selector=selector, resource_version=rv, timeout_seconds=seconds
                            ):
                                seen += 1
                                retry.answer_arrived()
                                if event.resource_version:
                                    rv = event.resource_version
                                if event.pod is not None:
                                    yield event
                    retry.request_succeeded()  # a watch that ended without an event is an answer too
                    if seen == 0 and clock() - started < 1:
                        sleep(1)  # a server that ends watches at once must not turn this into a busy loop
                    yield ChunkEnded(resource_version=rv)
                return
            except GoneError as exc:
                log.info("watch expired (%s); listing again", exc)
    except ApiUnavailableError:
        if stop is not None and stop.is_set():
            return
        raise
