"""Wait for the locale pods: list, then watch from the list's resourceVersion, with a deadline.

Prints progress lines (at most one per PROGRESS_MIN_INTERVAL while pods change, and each change shows within a
watch chunk), e.g.
`3/7 locales ready; waiting for arkouda-locale-4 (Pending: 0/3 nodes are available: 3 Insufficient cpu)`,
with the reason taken from the pod's conditions, container states and (for the first waiting pod) its Events; a
locale not created yet shows why its StatefulSet cannot create it (its latest FailedCreate Event: a quota, a
LimitRange, an admission webhook) when the StatefulSet is known.
Ready locales are returned ordered by StatefulSet ordinal (label `apps.kubernetes.io/pod-index`, else the pod
name's numeric suffix) — never in API order.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from arkouda_bootstrap.errors import EXIT_TIMEOUT, BootstrapError
from arkouda_bootstrap.kube.api import ApiUnavailableError, EventInfo, KubeApi, PodInfo, PodList
from arkouda_bootstrap.kube.netstatus import Addresses
from arkouda_bootstrap.kube.podwatch import ChunkEnded, PodCache, follow_pods
from arkouda_bootstrap.kube.retry import Deadline, OutageListener

log = logging.getLogger(__name__)

POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
_SUFFIX = re.compile(r"-(\d+)$")
# One watch request lasts at most this long; between requests we re-check the deadline and the pod's Events.
WATCH_CHUNK_SECONDS = 10
MAX_WAITING_SHOWN = 3
# Seconds between two Events lookups for progress lines (keeps the API requests constant in the locale count).
EVENTS_MIN_INTERVAL = 5.0
# Seconds between two progress lines while locales change (plus one when a watch chunk ends, and the last).
PROGRESS_MIN_INTERVAL = 1.0


class WaitTimeoutError(BootstrapError):
    """The deadline passed; the message is the last progress line."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=EXIT_TIMEOUT)


def ordinal(pod: PodInfo) -> int:
    """StatefulSet ordinal from the pod-index label, else the name's `-<n>` suffix."""
    return _ordinal(pod.name, pod.labels.get(POD_INDEX_LABEL))


@functools.lru_cache(maxsize=65536)
def _ordinal(name: str, label: str | None) -> int:
    # Cached: a progress line evaluates every pod, and there is one per watch event at most.
    if label is not None and label.isdigit():
        return int(label)
    match = _SUFFIX.search(name)
    if match is None:
        raise BootstrapError(
            f"pod {name} matches the locale selector but has no StatefulSet ordinal "
            f"(no {POD_INDEX_LABEL} label, no -<n> name suffix): fix the selector"
        )
    return int(match.group(1))


def order_pods(pods: Iterable[PodInfo]) -> list[PodInfo]:
    """Sort by ordinal; two pods with the same ordinal is a selector error."""
    by_ordinal: dict[int, PodInfo] = {}
    for pod in pods:
        n = ordinal(pod)
        if n in by_ordinal:
            raise BootstrapError(
                f"pods {by_ordinal[n].name} and {pod.name} have the same ordinal {n}: "
                "the locale selector matches more than one StatefulSet"
            )
        by_ordinal[n] = pod
    return [by_ordinal[n] for n in sorted(by_ordinal)]


def _one_line(text: str) -> str:
    return " ".join(text.split()).rstrip(".")


def _latest_warning(events: Iterable[EventInfo], *, reason: str | None = None) -> EventInfo | None:
    warnings = [e for e in events if e.type == "Warning" and e.message and (reason is None or e.reason == reason)]
    if not warnings:
        return None
    return max(warnings, key=lambda e: e.last_seen.timestamp() if e.last_seen is not None else float("-inf"))


def creation_refused(events: Iterable[EventInfo]) -> str | None:
    """Why a StatefulSet cannot create its pods, from its latest FailedCreate Event, or None."""
    latest = _latest_warning(events, reason="FailedCreate")
    return None if latest is None else f"{latest.reason}: {_one_line(latest.message)}"


def pod_reason(pod: PodInfo, events: Iterable[EventInfo] = ()) -> str:
    """Why a pod is not ready, in a few words: `Pending: 0/3 nodes are available: 3 Insufficient cpu`."""
    if pod.deleting:
        return "Terminating"
    detail = ""
    scheduled = pod.condition("PodScheduled")
    if scheduled is not None and scheduled.status == "False":
        detail = scheduled.message or scheduled.reason
    if not detail:
        for cs in pod.containers:
            if cs.state == "waiting" and cs.reason and cs.reason not in ("ContainerCreating", "PodInitializing"):
                detail = f"{cs.name}: {cs.reason}" + (f": {cs.message}" if cs.message else "")
                break
            if cs.state == "terminated" and (cs.exit_code or 0) != 0:
                detail = f"{cs.name}: {cs.reason or 'Error'} (exit {cs.exit_code})"
                break
    if not detail and (latest := _latest_warning(events)) is not None:
        detail = f"{latest.reason}: {latest.message}"
    if not detail:
        for cs in pod.containers:
            if cs.state == "waiting" and cs.reason:
                detail = f"{cs.name}: {cs.reason}"
                break
    if not detail and pod.phase == "Running":
        ready = pod.condition("Ready")
        not_ready = [cs.name for cs in pod.containers if cs.state == "running" and not cs.ready]
        if not_ready:
            detail = "not ready: " + ", ".join(not_ready)
        elif ready is not None and ready.status != "True":
            detail = ready.reason or "not ready"
        elif not pod.pod_ip:
            detail = "no pod IP yet"
    text = pod.phase + (f": {_one_line(detail)}" if detail else "")
    return text


@dataclass(frozen=True)
class Progress:
    ready: int
    expected: int
    line: str
    done: bool


def evaluate(
    pods: Mapping[str, PodInfo],
    *,
    expected: int,
    events_for: Callable[[PodInfo], list[EventInfo]] | None = None,
    addresses: Addresses | None = None,
    not_created: Callable[[], str | None] | None = None,
    statefulset: str | None = None,
    hold: Callable[[PodInfo], str | None] | None = None,
) -> tuple[Progress, list[PodInfo]]:
    """Compute progress from the current pods; the ready locales (ordinal < expected) in ordinal order. With
    `addresses` (a secondary network) a Ready pod counts once its address there is known. `not_created` says why
    the missing locales are not created (None: no reason known); `statefulset` names them (else a present pod's
    name does, or their ordinals). `hold` says why a Ready pod does not count yet (liveness.HeldBack)."""
    # One pass over the pods: this runs for every progress line.
    wanted = [p for p in order_pods(pods.values()) if ordinal(p) < expected]
    ready: list[PodInfo] = []
    waiting: list[PodInfo] = []
    held: dict[str, str] = {}
    for p in wanted:
        # a held pod says why even when NotReady: its readiness probe fails for the same reason
        if hold is not None and (why := hold(p)) is not None:
            held[p.name] = why
        counts = p.ready and p.name not in held and (addresses is None or addresses.reason(p) is None)
        (ready if counts else waiting).append(p)
    if len(ready) >= expected:
        return Progress(
            ready=expected, expected=expected, line=f"{expected}/{expected} locales ready", done=True
        ), ready
    parts: list[str] = []
    for i, pod in enumerate(waiting[:MAX_WAITING_SHOWN]):
        events = events_for(pod) if (events_for is not None and i == 0) else []
        unattached = addresses.reason(pod) if addresses is not None and pod.ready else None
        parts.append(f"{pod.name} ({held.get(pod.name) or unattached or pod_reason(pod, events)})")
    if len(waiting) > MAX_WAITING_SHOWN:
        parts[-1] += f" and {len(waiting) - MAX_WAITING_SHOWN} more"
    missing = expected - len(wanted)
    if missing > 0:
        present = {ordinal(p) for p in wanted}
        absent = [n for n in range(expected) if n not in present]
        base = statefulset or (_SUFFIX.sub("", wanted[0].name) if wanted else None)
        names = [f"{base}-{n}" for n in absent] if base else [f"ordinal {n}" for n in absent]
        shown = ", ".join(names[:MAX_WAITING_SHOWN]) + (
            f" and {len(names) - MAX_WAITING_SHOWN} more" if len(names) > MAX_WAITING_SHOWN else ""
        )
        refused = not_created() if not_created is not None else None
        parts.append(f"{shown} ({refused or 'not created yet'})")
    line = f"{len(ready)}/{expected} locales ready; waiting for " + ", ".join(parts)
    return Progress(ready=len(ready), expected=expected, line=line, done=False), ready


def wait_for_locales(
    api: KubeApi,
    *,
    namespace: str,
    selector: str,
    expected: int,
    timeout: float,
    report: Callable[[str], None],
    clock: Callable[[], float] = time.monotonic,
    chunk_seconds: int = WATCH_CHUNK_SECONDS,
    sleep: Callable[[float], object] = time.sleep,
    on_ready: Callable[[PodInfo], None] | None = None,
    line_interval: float = PROGRESS_MIN_INTERVAL,
    addresses: Addresses | None = None,
    keep: Callable[[PodInfo], bool] | None = None,
    statefulset: str | None = None,
    listener: OutageListener | None = None,
    hold: Callable[[PodInfo], str | None] | None = None,
) -> list[PodInfo]:
    """Block until `expected` locale pods are Ready with an IP; return them in ordinal order.

    Each watch event costs O(1): the set of Ready locales is kept up to date per pod, and the progress line (a
    pass over every pod) is computed at most once per `line_interval` seconds, again when a watch chunk ends,
    and once more for the final `N/N locales ready`, so a rollout of many locales cannot outrun the bootstrap.

    `on_ready` is called once per pod name and IP as soon as that locale is seen Ready (the server starts its
    ssh probe there, while the others are still coming up). Raises WaitTimeoutError (with the last progress
    line) when `timeout` seconds pass first. Time the API was unreachable does not count (kube.retry.Deadline):
    the locales cannot be seen then, nor mostly scheduled or started, so the timeout would judge the control
    plane, not the release; the outage is retried for as long as it lasts and told to `listener`.

    With `addresses` (a secondary network) a locale counts as Ready once its address there is known; a Ready
    locale still without it after the grace of `addresses` raises its NetworkStatusError (checked at every watch
    event and chunk end).

    With `keep` (kube.ownership.OwnedBy) only the pods it keeps are locales. With `statefulset` (the locales'
    StatefulSet) a locale not created yet is shown with the StatefulSet's latest FailedCreate Event, read at most
    once per EVENTS_MIN_INTERVAL. With `hold` (the locales a relaunch holds back: liveness.HeldBack) a Ready pod
    counts only once `hold` gives no reason any more; it is asked again at every watch chunk's end."""
    if expected <= 0:
        return []
    deadline = Deadline.after(timeout, clock=clock)
    last_line = ""
    last_line_at: float | None = None
    events_broken = False
    # Events of the first waiting pod, fetched once per pod version and again after each watch chunk, but at
    # most once per EVENTS_MIN_INTERVAL: in an ordinal-order rollout the first waiting pod changes on every
    # Ready, and the API requests must not grow with the number of locales.
    events_cache: dict[tuple[str, str], list[EventInfo]] = {}
    last_events_fetch: float | None = None
    announced: set[tuple[str, str | None]] = set()
    ready: dict[str, PodInfo] = {}  # the wanted locales (ordinal < expected) that are Ready, by pod name

    def events_for(pod: PodInfo) -> list[EventInfo]:
        nonlocal events_broken, last_events_fetch
        if events_broken:
            return []
        key = (pod.name, pod.resource_version)
        if key not in events_cache:
            now = clock()
            if last_events_fetch is not None and now - last_events_fetch < EVENTS_MIN_INTERVAL:
                return []
            last_events_fetch = now
            try:
                events_cache[key] = api.list_pod_events(namespace=namespace, pod_name=pod.name)
            except ApiUnavailableError as exc:  # an outage: the watch sees it too; ask again next time
                log.debug("pod Events not read: %s", exc)
                return []
            except BootstrapError as exc:  # reasons from Events are a nicety, not a requirement
                log.warning("not showing pod Events in progress lines: %s", exc)
                events_broken = True
                return []
        return events_cache[key]

    refusal: str | None = None
    last_refusal_fetch: float | None = None

    def not_created() -> str | None:
        nonlocal events_broken, refusal, last_refusal_fetch
        if statefulset is None or events_broken:
            return None
        now = clock()
        if last_refusal_fetch is None or now - last_refusal_fetch >= EVENTS_MIN_INTERVAL:
            last_refusal_fetch = now
            try:
                refusal = creation_refused(api.list_statefulset_events(namespace=namespace, name=statefulset))
            except ApiUnavailableError as exc:
                log.debug("StatefulSet Events not read: %s", exc)
                return refusal
            except BootstrapError as exc:
                log.warning("not showing StatefulSet Events in progress lines: %s", exc)
                events_broken = True
                return None
        return refusal

    def track(name: str, pod: PodInfo | None) -> None:
        """Keep `ready` current for one pod (None: deleted)."""
        if (
            pod is not None
            and pod.ready
            and ordinal(pod) < expected
            and (addresses is None or addresses.usable(pod))
            and (hold is None or hold(pod) is None)
        ):
            ready[name] = pod
            if on_ready is not None and (name, pod.pod_ip) not in announced:
                announced.add((name, pod.pod_ip))
                on_ready(pod)
        else:
            ready.pop(name, None)
            if addresses is not None and (pod is None or not pod.ready):
                addresses.forget(name)

    def say(line: str) -> None:
        nonlocal last_line, last_line_at
        last_line_at = clock()
        if line != last_line:
            report(line)
            last_line = line

    def check(pods: Mapping[str, PodInfo], *, force: bool = False) -> list[PodInfo] | None:
        if len(ready) >= expected:
            result = order_pods(ready.values())  # also refuses two pods with one ordinal
            say(f"{expected}/{expected} locales ready")
            return result
        if force or last_line_at is None or clock() - last_line_at >= line_interval:
            progress, _ = evaluate(
                pods,
                expected=expected,
                events_for=events_for,
                addresses=addresses,
                not_created=not_created,
                statefulset=statefulset,
                hold=hold,
            )
            say(progress.line)
        return None

    cache = PodCache(keep=keep)
    try:
        with contextlib.closing(
            follow_pods(
                api,
                namespace=namespace,
                selector=selector,
                chunk_seconds=chunk_seconds,
                deadline=deadline,
                clock=clock,
                sleep=sleep,
                listener=listener,
            )
        ) as followed:
            for item in followed:
                cache.apply(item)
                if isinstance(item, PodList):
                    ready.clear()
                    if addresses is not None:
                        addresses.retain(cache.pods)
                    for name, pod in cache.pods.items():
                        track(name, pod)
                    force = True
                elif isinstance(item, ChunkEnded):
                    # show what changed since the last line; Events may give other reasons without a pod change
                    events_cache.clear()
                    if hold is not None:  # a held pod gives no event when it answers again: ask it now
                        for name, pod in cache.pods.items():
                            track(name, pod)
                    force = True
                elif item.pod is not None:  # always: follow_pods yields pod changes only
                    track(item.pod.name, cache.pods.get(item.pod.name))
                    force = False
                else:
                    continue
                if (result := check(cache.pods, force=force)) is not None:
                    return result
                if addresses is not None:
                    addresses.check()
                if deadline.passed():
                    break
    except ApiUnavailableError as exc:  # an outage that began after the deadline had passed
        shown = f"; last: {last_line}" if last_line else ""
        raise WaitTimeoutError(f"timed out after {_waited(timeout, deadline)}: {exc}{shown}") from None
    check(cache.pods, force=True)
    raise WaitTimeoutError(f"timed out after {_waited(timeout, deadline)}: {last_line}")


def _waited(timeout: float, deadline: Deadline) -> str:
    if deadline.excluded < 1:
        return f"{timeout:g}s"
    return f"{timeout:g}s (not counting {deadline.excluded:.0f}s while the Kubernetes API was unreachable)"
