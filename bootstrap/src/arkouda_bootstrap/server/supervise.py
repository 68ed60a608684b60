"""Run the launched program as a child: forward SIGTERM/SIGINT, exit with its code, and end it when a locale
pod is deleted, turns NotReady or changes IP (so the server can rebuild the cluster: server.run_server).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType

from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.kube.api import KubeApi, PodEvent, PodInfo, PodList
from arkouda_bootstrap.kube.podwatch import ChunkEnded, PodCache, follow_pods
from arkouda_bootstrap.kube.retry import OutageListener
from arkouda_bootstrap.server.discovery import pod_reason

log = logging.getLogger(__name__)

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT)
DEFAULT_GRACE_SECONDS = 10.0
# A launcher such as amudprun ends the whole job by itself when a locale dies (its ssh session drops), often
# before the pod's deletion or NotReady reaches our watch: after a failed exit the monitor gets this long to
# name a lost locale, so that the exit counts as a loss (relaunch in place) rather than a failure of the program.
DEFAULT_SETTLE_SECONDS = 15.0
# With an output tap: how long the copy may go on after the program exited (a leftover grandchild that holds the
# pipe open must not keep the server from finishing).
DRAIN_SECONDS = 5.0


def lost_reason(tracked: PodInfo, event_type: str, pod: PodInfo | None) -> str | None:
    """Why `pod` (the current state of the tracked locale, None when gone) means the cluster is broken."""
    if pod is None or event_type == "DELETED":
        return f"locale pod {tracked.name} was deleted"
    if tracked.uid and pod.uid and tracked.uid != pod.uid:
        return f"locale pod {tracked.name} was replaced (uid {tracked.uid} -> {pod.uid})"
    if pod.deleting:
        return f"locale pod {tracked.name} is terminating"
    if pod.pod_ip != tracked.pod_ip:
        return f"locale pod {tracked.name} changed IP {tracked.pod_ip} -> {pod.pod_ip}"
    if not pod.ready:
        return f"locale pod {tracked.name} turned NotReady ({pod_reason(pod)})"
    return None


class LocaleMonitor:
    """Follows the locale pods (podwatch.follow_pods) in a daemon thread and calls `on_lost(reason)` once when a
    tracked locale breaks (a pod of a tracked name that `owned` refuses counts as gone). An unreachable API is
    retried for as long as the program runs (kube.retry); an error no retry can fix (e.g. the Role lost `watch
    pods`) ends the monitoring, never the program."""

    def __init__(
        self,
        api: KubeApi,
        *,
        namespace: str,
        selector: str,
        locales: Sequence[PodInfo],
        chunk_seconds: int = 30,
        owned: Callable[[PodInfo], bool] | None = None,
        listener: OutageListener | None = None,
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._selector = selector
        self._tracked = {p.name: p for p in locales}
        self._chunk = chunk_seconds
        # a pod that takes a lost locale's name without being its StatefulSet's is no locale (kube.ownership)
        self._owned = owned
        self._listener = listener  # told of an API outage (the program runs on meanwhile)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, on_lost: Callable[[str], None]) -> None:
        self._thread = threading.Thread(target=self._run, args=(on_lost,), name="locale-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _check(self, cache: PodCache, item: PodList | PodEvent | ChunkEnded) -> str | None:
        """Why the cluster is broken after this list or change (already applied to `cache`), or None."""
        if isinstance(item, PodList):
            for name, tracked in self._tracked.items():
                if (reason := lost_reason(tracked, "LISTED", cache.pods.get(name))) is not None:
                    return reason
        elif isinstance(item, PodEvent) and item.pod is not None and item.pod.name in self._tracked:
            return lost_reason(self._tracked[item.pod.name], item.type, cache.pods.get(item.pod.name))
        return None

    def _run(self, on_lost: Callable[[str], None]) -> None:
        followed = follow_pods(
            self._api,
            namespace=self._namespace,
            selector=self._selector,
            chunk_seconds=self._chunk,
            sleep=self._stop.wait,
            stop=self._stop,
            listener=self._listener,
        )
        owned = self._owned
        cache = PodCache(keep=lambda pod: pod.name in self._tracked and (owned is None or owned(pod)))
        try:
            with contextlib.closing(followed):
                for item in followed:
                    if self._stop.is_set():
                        return
                    cache.apply(item)
                    if (reason := self._check(cache, item)) is not None:
                        on_lost(reason)
                        return
        except BootstrapError as exc:  # not a lost locale: the program keeps running, unwatched
            log.error("locale monitor stopped: %s; a lost locale will not end the program", exc)


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    lost_reason: str | None = None
    # SIGTERM/SIGINT reached us (the pod is being deleted): never relaunch after that
    signalled: bool = False


def exit_status(returncode: int) -> int:
    """Shell convention: killed by signal N -> 128+N."""
    return returncode if returncode >= 0 else 128 - returncode


def run_supervised(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    monitor: LocaleMonitor | None = None,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
    settle_seconds: float = DEFAULT_SETTLE_SECONDS,
    on_started: Callable[[int], None] | None = None,
    on_lost: Callable[[str], None] | None = None,
    output: Callable[[str], None] | None = None,
) -> Outcome:
    """Start `argv`, forward SIGTERM/SIGINT to it, wait; on a lost locale terminate it (grace, then SIGKILL).

    A failed exit that no signal explains waits up to `settle_seconds` for the monitor: a locale lost just before
    (the launcher noticed first) still makes the outcome a lost locale. With `output`, the program's stdout and
    stderr go through a pipe: every line is copied to our stdout and passed to `output` (to name why it failed)."""
    started: list[subprocess.Popen[bytes]] = []
    pending: list[int] = []  # signals that arrived before the child existed

    received: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        if not started:
            pending.append(signum)
            return
        log.info("forwarding %s to pid %d", signal.Signals(signum).name, started[0].pid)
        with contextlib.suppress(ProcessLookupError):
            started[0].send_signal(signum)

    # handlers first, so a SIGTERM during start-up is not lost (nor kills us without the child hearing it)
    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED_SIGNALS}
    try:
        child = subprocess.Popen(
            list(argv),
            env=dict(env),
            stdout=subprocess.PIPE if output is not None else None,
            stderr=subprocess.STDOUT if output is not None else None,
        )
    except OSError as exc:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        raise BootstrapError(f"cannot start {argv[0]}: {exc.strerror or exc}") from None
    started.append(child)
    copier = _start_copy(child, output) if output is not None else None
    for signum in pending:
        forward(signum, None)
    lost: list[str] = []
    lost_seen = threading.Event()
    lock = threading.Lock()

    def terminate(reason: str) -> None:
        with lock:
            if lost:
                return
            lost.append(reason)
        lost_seen.set()
        if child.poll() is not None:
            log.error("%s (the program had already exited)", reason)
            if on_lost is not None:
                on_lost(reason)
            return
        log.error("%s: terminating pid %d (grace %gs)", reason, child.pid, grace_seconds)
        if on_lost is not None:
            on_lost(reason)
        try:
            child.terminate()
            child.wait(timeout=grace_seconds)
        except subprocess.TimeoutExpired:
            log.error("pid %d ignored SIGTERM for %gs: SIGKILL", child.pid, grace_seconds)
            child.kill()
        except ProcessLookupError:
            pass

    try:
        if on_started is not None:
            on_started(child.pid)
        if monitor is not None:
            monitor.start(terminate)
        returncode = child.wait()
        if returncode != 0 and monitor is not None and not received and not lost_seen.is_set():
            log.info(
                "pid %d exited with status %d; waiting up to %gs for the locale monitor to tell whether a locale "
                "was lost",
                child.pid,
                exit_status(returncode),
                settle_seconds,
            )
            lost_seen.wait(settle_seconds)
    finally:
        if monitor is not None:
            monitor.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if copier is not None:
        copier.join(DRAIN_SECONDS)
    with lock:
        reason = lost[0] if lost else None
    code = exit_status(returncode)
    log.info("pid %d exited with status %d", child.pid, code)
    return Outcome(exit_code=code, lost_reason=reason, signalled=bool(received))


def _start_copy(child: subprocess.Popen[bytes], output: Callable[[str], None]) -> threading.Thread:
    """Copy the child's output to our stdout line by line (so the container log keeps it) and hand each line on."""
    stream = child.stdout
    if stream is None:
        raise ValueError("the child has no stdout pipe")

    def copy() -> None:
        with stream:
            for raw in stream:
                sys.stdout.buffer.write(raw)
                sys.stdout.flush()
                output(raw.decode("utf-8", "replace").rstrip("\r\n"))

    thread = threading.Thread(target=copy, name="program-output", daemon=True)
    thread.start()
    return thread
