"""Run the launched program as a child: forward SIGTERM/SIGINT, exit with its code, and end it when a locale is
lost, on evidence only (the decision table below), so the server can rebuild the cluster (server.run_server).

An Arkouda server holds its users' arrays in memory: stopping a healthy program loses them all. The pod's Ready
condition is the control plane's opinion (the node controller sets every pod of a node whose lease went stale
Ready=False, e.g. after an API server outage); whether a locale is alive is a fact of the data plane. So the
supervisor stops the program only on the rows marked "stop":

| # | what the supervisor sees | decision |
| - | --- | --- |
| 1 | the program exited by itself | its exit status (a failed exit first waits `settle_seconds` for rows 2-6, 9) |
| 2 | the locale pod was deleted (DELETED, gone from a relist, its name taken by a pod not its StatefulSet's) | stop |
| 3 | the pod's uid changed (replaced) | stop |
| 4 | the pod is terminating (deletionTimestamp: its containers are being killed) | stop |
| 5 | the pod's IP changed (a new sandbox) | stop |
| 6 | a container's restartCount grew, or it terminated (the kubelet saw the process end) | stop |
| 7 | Ready=False while the locale answers on the pod network (stale node lease, API outage) | Event, no stop |
| 8 | Ready=False and the locale does not answer | no stop yet: row 9 |
| 9 | its sshd port missed every probe for 20 s (server.liveness), whatever Ready says | stop |
| 10 | the API server does not answer | wait (kube.retry) |

Row 7's Event is `LocaleNotReady`, naming the pod and its node, once per NotReady spell of a locale.
`judge` is rows 2-8, `Liveness` row 9, `run_supervised` row 1; docs/node-loss.md has the same table.
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
from enum import StrEnum
from types import FrameType

from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.kube.api import KubeApi, PodEvent, PodInfo, PodList
from arkouda_bootstrap.kube.podwatch import ChunkEnded, PodCache, follow_pods
from arkouda_bootstrap.kube.retry import OutageListener
from arkouda_bootstrap.server.discovery import pod_reason
from arkouda_bootstrap.server.liveness import Liveness

log = logging.getLogger(__name__)

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT)
DEFAULT_GRACE_SECONDS = 10.0
# A launcher such as amudprun ends the whole job by itself when a locale dies (its ssh session drops), often
# before the pod's deletion reaches our watch: after a failed exit the monitor gets this long to name a lost
# locale, so that the exit counts as a loss (relaunch in place) rather than a failure of the program. Longer than
# the probe's bound plus one probe interval (row 9: 20 s + 5 s), so a dead node's locale is named in time.
DEFAULT_SETTLE_SECONDS = 30.0
# With an output tap: how long the copy may go on after the program exited (a leftover grandchild that holds the
# pipe open must not keep the server from finishing).
DRAIN_SECONDS = 5.0


class Action(StrEnum):
    STOP = "stop"
    RECORD = "record"  # an Event; the program runs on
    WAIT = "wait"  # nothing yet: the probe decides (row 9)
    NONE = "none"


@dataclass(frozen=True)
class Verdict:
    action: Action
    why: str = ""


NOTHING = Verdict(Action.NONE)


def _restarted(tracked: PodInfo, pod: PodInfo) -> str | None:
    """Row 6: which container the kubelet saw end since the launch (init containers stay terminated: skipped)."""
    before = {c.name: c for c in tracked.containers}
    for c in pod.containers:
        was = before.get(c.name)
        if was is None or was.state == "terminated":
            continue
        if c.restart_count > was.restart_count:
            return f"its container {c.name} restarted (restart count {was.restart_count} -> {c.restart_count})"
        if c.state == "terminated":
            return f"its container {c.name} terminated ({c.reason or 'exit'} {c.exit_code})"
    return None


def judge(
    tracked: PodInfo, event_type: str, pod: PodInfo | None, *, answers: Callable[[], bool] | None = None
) -> Verdict:
    """Rows 2-8 of the decision table for the tracked locale's current state (`pod`, None when gone).
    `answers()` probes the locale on the pod network, asked only when the pod is Ready=False (None: no probe)."""
    name = tracked.name
    if pod is None or event_type == "DELETED":
        return Verdict(Action.STOP, f"locale pod {name} was deleted")
    if tracked.uid and pod.uid and tracked.uid != pod.uid:
        return Verdict(Action.STOP, f"locale pod {name} was replaced (uid {tracked.uid} -> {pod.uid})")
    if pod.deleting:
        return Verdict(Action.STOP, f"locale pod {name} is terminating")
    if pod.pod_ip != tracked.pod_ip:
        return Verdict(Action.STOP, f"locale pod {name} changed IP {tracked.pod_ip} -> {pod.pod_ip}")
    if (restart := _restarted(tracked, pod)) is not None:
        return Verdict(Action.STOP, f"locale pod {name}: {restart}")
    if pod.ready:
        return NOTHING
    node = pod.node_name or tracked.node_name or "(unknown)"
    said = f"locale pod {name} on node {node} turned NotReady ({pod_reason(pod)})"
    if answers is None:
        return Verdict(Action.RECORD, f"{said}; not probed: the program keeps running")
    if answers():
        return Verdict(Action.RECORD, f"{said} but answers on the pod network: the program keeps running")
    return Verdict(Action.WAIT, f"{said} and does not answer on the pod network")


class LocaleMonitor:
    """Follows the locale pods (podwatch.follow_pods) in a daemon thread and, with `liveness`, probes them on the
    pod network in another; calls `on_lost(reason)` once when the decision table says stop (a pod of a tracked
    name that `owned` refuses counts as gone), and `on_note(message)` for row 7 (once per NotReady spell of a
    locale). An unreachable API is retried for as long as the program runs (kube.retry) and told to `listener`;
    an error no retry can fix (e.g. the Role lost `watch pods`) ends the pod watch, never the program (the probe
    goes on)."""

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
        liveness: Liveness | None = None,
        on_note: Callable[[str], None] | None = None,
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._selector = selector
        self._tracked = {p.name: p for p in locales}
        self._chunk = chunk_seconds
        # a pod that takes a lost locale's name without being its StatefulSet's is no locale (kube.ownership)
        self._owned = owned
        self._listener = listener  # told of an API outage (the program runs on meanwhile)
        self._liveness = liveness
        self._on_note = on_note
        self._noted: set[str] = set()  # locales in a NotReady spell already recorded (row 7) or logged (row 8)
        self._stop = threading.Event()
        self._lost_once = threading.Lock()
        self._lost = False

    def start(self, on_lost: Callable[[str], None]) -> None:
        once = self._once(on_lost)
        threading.Thread(target=self._run, args=(once,), name="locale-monitor", daemon=True).start()
        if self._liveness is not None:
            threading.Thread(target=self._probe, args=(once,), name="locale-probe", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _once(self, on_lost: Callable[[str], None]) -> Callable[[str], None]:
        def lost(reason: str) -> None:
            with self._lost_once:
                if self._lost:
                    return
                self._lost = True
            self._stop.set()
            on_lost(reason)

        return lost

    def _answers(self, name: str) -> Callable[[], bool] | None:
        liveness = self._liveness
        if liveness is None or name not in liveness.pods:
            return None
        return lambda: liveness.answers(name)

    def _judge(self, name: str, event_type: str, pod: PodInfo | None) -> str | None:
        """The stop reason for this locale's state, if any; rows 7 and 8 are told once per NotReady spell."""
        verdict = judge(self._tracked[name], event_type, pod, answers=self._answers(name))
        if verdict.action is Action.STOP:
            return verdict.why
        if verdict.action is Action.NONE:
            self._noted.discard(name)  # Ready again: the next NotReady spell is told again
        elif name not in self._noted:
            self._noted.add(name)
            if verdict.action is Action.RECORD:
                log.warning("%s", verdict.why)
                if self._on_note is not None:
                    self._on_note(verdict.why)
            else:
                log.warning("%s: stopping the program if it does not answer for %gs", verdict.why, self._bound())
        return None

    def _bound(self) -> float:
        return self._liveness.policy.lost_after if self._liveness is not None else 0.0

    def _check(self, cache: PodCache, item: PodList | PodEvent | ChunkEnded) -> str | None:
        """Why the program must stop after this list or change (already applied to `cache`), or None."""
        if isinstance(item, PodList):
            for name in self._tracked:
                if (reason := self._judge(name, "LISTED", cache.pods.get(name))) is not None:
                    return reason
        elif isinstance(item, PodEvent) and item.pod is not None and item.pod.name in self._tracked:
            return self._judge(item.pod.name, item.type, cache.pods.get(item.pod.name))
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
            log.error("locale monitor stopped: %s; a deleted locale pod will not end the program", exc)

    def _probe(self, on_lost: Callable[[str], None]) -> None:
        """Row 9: probe every locale each interval until one has missed for the bound."""
        liveness = self._liveness
        if liveness is None:
            return
        for lost in liveness.rounds(self._stop):
            if lost:
                on_lost(lost[0])
                return


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
    """Copy the child's output to our stdout line by line (so the container log keeps it) and hand each line on.
    The copy goes on whatever `output` does: a copier that died would leave the pipe to fill up and the program
    blocked at its next write. A failing `output` is logged once."""
    stream = child.stdout
    if stream is None:
        raise ValueError("the child has no stdout pipe")

    def copy() -> None:
        told = False
        with stream:
            for raw in stream:
                sys.stdout.buffer.write(raw)
                sys.stdout.flush()
                try:
                    output(raw.decode("utf-8", "replace").rstrip("\r\n"))
                except Exception:  # e.g. no thread can be started under the pod's pids limit
                    if not told:
                        log.warning("the program's output tap failed; its output is still copied", exc_info=True)
                    told = True

    thread = threading.Thread(target=copy, name="program-output", daemon=True)
    thread.start()
    return thread
