"""List, then watch from the list's resourceVersion, in chunks; list again when the version is too old (410).

Discovery (waiting for the locales) and the supervisor (noticing a lost locale) both follow the locale pods
this way, through `follow_pods`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass

from arkouda_bootstrap.kube.api import GoneError, KubeApi, PodEvent, PodList

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChunkEnded:
    """One watch request ended (its server-side timeout passed, or the connection closed)."""

    resource_version: str


def follow_pods(
    api: KubeApi,
    *,
    namespace: str,
    selector: str,
    chunk_seconds: int,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> Generator[PodList | PodEvent | ChunkEnded, None, None]:
    """Yield the pod list (again after every 410), then each pod change, and a ChunkEnded after every watch
    request. Bookmarks only move the resourceVersion. With a `deadline` (of `clock`) the watch requests are cut
    to the time left and the iteration ends when it has passed; API errors other than 410 propagate."""
    while True:  # one iteration per (re)list
        listing = api.list_pods(namespace=namespace, selector=selector)
        yield listing
        rv = listing.resource_version
        try:
            while True:  # one iteration per watch request
                seconds = chunk_seconds
                if deadline is not None:
                    remaining = deadline - clock()
                    if remaining <= 0:
                        return
                    seconds = max(1, min(chunk_seconds, int(remaining + 0.999)))
                started, seen = clock(), 0
                for event in api.watch_pods(
                    namespace=namespace, selector=selector, resource_version=rv, timeout_seconds=seconds
                ):
                    seen += 1
                    if event.resource_version:
                        rv = event.resource_version
                    if event.pod is not None:
                        yield event
                if seen == 0 and clock() - started < 1:
                    sleep(1)  # a server that ends watches at once must not turn this into a busy loop
                yield ChunkEnded(resource_version=rv)
        except GoneError as exc:
            log.info("watch expired (%s); listing again", exc)
