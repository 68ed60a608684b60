"""The gate's controller: where a client request goes (to the Ready server pod, or held until it is Ready, with
bounds), and with global.idle.enabled the sleep (server and locale StatefulSets scaled to 0) after the idle
timeout and the wake (scaled back up) for a held request or a wake request, with a deadline and a back-off.

Phases: AWAKE (scaled up; requests are forwarded once the server pod is Ready), WAKING (scaled up after a
sleep, with a deadline), DRAINING (scaled to 0, pods still terminating), ASLEEP (no server or locale pod left).
Without idle sleep the release stays AWAKE and the controller never scales anything. With a checkpoint policy
(global.idle.checkpoint, checkpoint.py) two more: SAVING (idle: the gate's own save_checkpoint is at the server;
scaled to 0 only once it answered) and LOADING (woken: its load_checkpoint is at the server; no client request is
forwarded before it answered). Client requests that come meanwhile are held, as during a wake.
`step()` makes the transitions and says when it wants to run again; it calls the Kubernetes API directly: the
gate runs it on its event loop, and these calls only happen when no client is being served (idle or asleep).
The state of the pods comes in through `on_pods` (the gate's list-then-watch of the release's pods).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from arkouda_bootstrap.config import GateSettings
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.gate.checkpoint import (
    LOAD_COMMAND,
    SAVE_COMMAND,
    CheckpointPolicy,
    OnUnsaved,
    Record,
    Store,
    human_bytes,
    names,
    size_mismatch,
)
from arkouda_bootstrap.gate.idle import IdlePolicy, Traffic, idle_verdict, next_backoff
from arkouda_bootstrap.gate.queue import KueueGroup
from arkouda_bootstrap.kube.api import (
    ApiUnavailableError,
    ForbiddenError,
    PodEvent,
    PodInfo,
    PodList,
    PodRef,
    ScaleApi,
)
from arkouda_bootstrap.kube.events import EventRecorder, Reason
from arkouda_bootstrap.kube.podwatch import PodCache
from arkouda_bootstrap.kube.retry import ApiRetry

log = logging.getLogger(__name__)

COMPONENT_LABEL = "app.kubernetes.io/component"
# Changing this annotation on the gate pod (any new value) wakes a sleeping release.
WAKE_ANNOTATION = "arkouda-k8s.io/wake"
# How often step() runs at most without news, and after a refused change.
MAX_STEP_SECONDS = 30.0
RETRY_SECONDS = 5.0
# A queued wake's reads of its Kueue Workload until Kueue has said why it waits (gate/queue.py), and the pause
# between them: Kueue makes the Workload and tries it within a few seconds of the pods.
QUEUE_LOOKS = 5
QUEUE_LOOK_SECONDS = 2.0
# Container waiting reasons that only mean "still starting".
_STARTING = frozenset({"", "ContainerCreating", "PodInitializing"})


class Phase(StrEnum):
    AWAKE = "awake"
    WAKING = "waking"
    DRAINING = "draining"
    ASLEEP = "asleep"
    SAVING = "saving"
    LOADING = "loading"


@dataclass(frozen=True)
class Backend:
    """The Ready server pod: one incarnation of the server (a new pod uid is a new server)."""

    pod: str
    uid: str
    host: str
    port: int


@dataclass(frozen=True)
class Reply:
    """The server's answer to one of the gate's own requests: ok unless msgType ERROR (or no answer)."""

    ok: bool
    message: str


class ServerCommands(Protocol):
    """Sends the gate's own requests (with the release's token) to the server: the gate's link to it."""

    def send_command(
        self, backend: Backend, cmd: str, params: dict[str, str], on_reply: Callable[[Reply], None]
    ) -> None: ...


class HeldRequest(Protocol):
    """A checked client request the gate holds until the server can take it."""

    @property
    def received_at(self) -> float: ...

    @property
    def session(self) -> bytes: ...

    def forward(self, backend: Backend) -> None:
        """Send the request to the server."""
        ...

    def fail(self, message: str) -> None:
        """Answer the request with an Arkouda error naming `message`."""
        ...


@dataclass
class ReleaseView:
    """The release's pods as the watch reports them."""

    own_pod: str
    cache: PodCache = field(default_factory=PodCache)
    revision: int = 0  # counts the changes applied (the controller caches what it derives from the pods)

    def apply(self, item: PodList | PodEvent) -> None:
        self.revision += 1
        self.cache.apply(item)

    def workload(self) -> list[PodInfo]:
        """Server and locale pods (terminating ones included: their node is not free yet)."""
        return sorted(
            (p for p in self.cache.pods.values() if p.labels.get(COMPONENT_LABEL) in ("server", "locale")),
            key=lambda p: (p.labels.get(COMPONENT_LABEL) != "server", p.name),
        )

    def server(self) -> PodInfo | None:
        for pod in self.workload():
            if pod.labels.get(COMPONENT_LABEL) == "server" and not pod.deleting:
                return pod
        return None

    def wake_annotation(self) -> str | None:
        own = self.cache.pods.get(self.own_pod)
        return None if own is None else own.annotations.get(WAKE_ANNOTATION)

    def not_ready_reason(self) -> str:
        """Why the release is not Ready, in the words of whoever knows: the scheduler's PodScheduled message
        (e.g. `0/3 nodes are available: 3 Insufficient cpu`), else a container's waiting reason."""
        pods = self.workload()
        if not pods:
            return "no server or locale pod was created (kubectl describe statefulset shows why, e.g. a quota)"
        waiting = [p for p in pods if not p.ready]
        for pod in waiting:
            cond = pod.condition("PodScheduled")
            if cond is not None and cond.status == "False":
                return f"pod {pod.name} is not scheduled: {cond.message or cond.reason or 'Unschedulable'}"
        for pod in waiting:
            for c in pod.containers:
                if c.state == "waiting" and c.reason not in _STARTING:
                    return f"pod {pod.name} container {c.name}: {c.reason}: {c.message}".rstrip(": ")
                if c.state == "terminated" and c.exit_code not in (None, 0):
                    return f"pod {pod.name} container {c.name} exited with {c.exit_code} ({c.reason})"
        if waiting:
            return f"pod {waiting[0].name} is {waiting[0].phase} but not Ready"
        return "every pod is Ready"


class Controller:
    def __init__(
        self,
        *,
        settings: GateSettings,
        scale: ScaleApi,
        events: EventRecorder,
        traffic: Traffic,
        clock: Callable[[], float],
        checkpoint: CheckpointPolicy | None = None,
        store: Store | None = None,
        queue: KueueGroup | None = None,
    ) -> None:
        self._s = settings
        # admission through Kueue (gate/queue.py): the Workload deleted at each scale to 0, Kueue's reason told
        self._queue = queue
        # the gated pod last told about (Queued), the one being looked at, the reads of the Workload for it
        self._queue_told: str | None = None
        self._queue_looking: str | None = None
        self._queue_looks, self._queue_next_look = 0, 0.0
        self._quota_told = False  # QuotaReleased recorded for this scale to 0
        self._scale = scale
        self._events = events
        self._traffic = traffic
        self._clock = clock
        self._policy = IdlePolicy(
            timeout_seconds=settings.idle_timeout, connection_is_activity=settings.connection_is_activity
        )
        self.view = ReleaseView(own_pod=settings.pod_name)
        self.phase = Phase.AWAKE
        self.held: list[HeldRequest] = []
        self._backend_key: tuple[Phase, int, str | None] | None = None
        # the server pod whose request loop stopped answering (the gate deleted it): not a backend, even while
        # the watch still shows it Ready; requests are held for its successor
        self.unresponsive_uid: str | None = None
        self._backend: Backend | None = None
        self._wake_seen: str | None = None
        self._wake_requested = False
        self._wake_started = 0.0
        self._wake_deadline = 0.0
        self._backoff_until = 0.0
        self._failures = 0
        self._api_retry = ApiRetry("scaling the release", clock=clock)
        # saving before the sleep, loading after the wake (checkpoint.py); `commands` is the gate's link
        self._checkpoint = checkpoint if settings.sleep_when_idle else None
        if self._checkpoint is not None and store is None:
            raise ValueError("a checkpoint policy needs a store")
        self._store = store
        self.commands: ServerCommands | None = None
        self._op = 0  # counts the gate's saves and loads: a late reply to one given up is ignored
        self._op_started = 0.0
        self._op_deadline = 0.0
        self._idle_why = ""
        # the last_activity at which a save did not allow the sleep: no new save until the next request
        self._declined_at: float | None = None
        # what the next client is told (a load that failed, a checkpoint of another size)
        self.notice: str | None = None
        # transitions since start (the gate's /metrics)
        self.sleeps = 0
        self.wakes = 0
        self.wake_timeouts = 0

    # -- inputs ----------------------------------------------------------------------------------------------

    def start(self) -> None:
        """With idle sleep, take over the replica counts as they are (a restarted gate keeps a sleeping release
        asleep). The chart then leaves `replicas` out of both StatefulSets, so a fresh install comes up with 1
        each: the locale count is set here. Without, the chart owns the counts and this reads nothing."""
        if not self._s.sleep_when_idle:
            log.info("idle sleep is off: the gate forwards requests and never scales the release")
            return
        server = self._replicas(self._s.server_statefulset)
        locale = self._replicas(self._s.locale_statefulset)
        if server > 0:
            self.phase = Phase.AWAKE
            want = self._s.num_locales - 1
        else:
            self.phase = Phase.DRAINING
            want = 0
        if locale != want:
            log.info("setting %s to %d replicas (was %d)", self._s.locale_statefulset, want, locale)
            self._scale.set_replicas(namespace=self._s.namespace, statefulset=self._s.locale_statefulset, replicas=want)
        log.info(
            "release %s at start (%s: %d, %s: %d)",
            self.phase.value,
            self._s.server_statefulset,
            server,
            self._s.locale_statefulset,
            want,
        )

    def _replicas(self, name: str) -> int:
        count = self._scale.get_replicas(namespace=self._s.namespace, statefulset=name)
        if count is None:
            raise StatefulSetMissingError(f"StatefulSet {name} not found in namespace {self._s.namespace}")
        return count

    def on_pods(self, item: PodList | PodEvent) -> None:
        server = self.view.server()
        was_ready = server is not None and server.ready
        self.view.apply(item)
        server = self.view.server()
        if server is not None and server.ready and not was_ready:
            self._traffic.touch()  # the idle time counts from Ready (a start, a relaunch, a wake)
        value = self.view.wake_annotation()
        if isinstance(item, PodList) and self._wake_seen is None:
            self._wake_seen = value or ""  # the value at start is history, not a request
            return
        if value is not None and value != self._wake_seen:
            self._wake_seen = value
            if self.phase in (Phase.DRAINING, Phase.ASLEEP):
                log.info("wake requested (annotation %s=%s)", WAKE_ANNOTATION, value)
                self._wake_requested = True

    def request_arrived(self, request: HeldRequest) -> None:
        """Forward `request` to the Ready server (after the ones held before it, in order), or hold it within the
        bounds: per session (a REQ client has one request at a time) and in total."""
        now = self._clock()
        backend = self.backend()
        if backend is not None:
            self._release(backend)
            if self.notice is not None:
                notice, self.notice = self.notice, None
                request.fail(notice)
            else:
                request.forward(backend)
            return
        if now - request.received_at >= self._s.wake_timeout:
            request.fail(self._failure_message(self._not_ready_reason()))
            return
        same = sum(1 for r in self.held if r.session == request.session)
        if same >= self._s.max_held_per_session:
            request.fail(
                f"the gate already holds {same} request(s) of this client until the server is Ready (limit "
                f"{self._s.max_held_per_session} per client)"
            )
        elif len(self.held) >= self._s.max_held:
            request.fail(
                f"the gate already holds {len(self.held)} requests until the server is Ready (limit "
                f"{self._s.max_held}, server.gate.maxHeldRequests); try again once the release is awake"
            )
        else:
            self.held.append(request)

    def backend(self) -> Backend | None:
        """The server pod while the release is awake and the pod Ready (asked for every request: cached until
        the phase or the pods change)."""
        key = (self.phase, self.view.revision, self.unresponsive_uid)
        if key != self._backend_key:
            self._backend_key, self._backend = key, self._find_backend()
        return self._backend

    def _find_backend(self) -> Backend | None:
        return self._server_backend() if self.phase is Phase.AWAKE else None

    def _server_backend(self) -> Backend | None:
        """The Ready server pod whatever the phase (the gate's own save and load go there)."""
        server = self.view.server()
        if server is not None and self.unresponsive_uid is not None and server.uid == self.unresponsive_uid:
            return None
        if server is not None and server.ready and server.pod_ip:
            return Backend(pod=server.name, uid=server.uid, host=server.pod_ip, port=self._s.server_port)
        return None

    def _release(self, backend: Backend) -> None:
        held, self.held = self.held, []
        if held and self.notice is not None:
            notice, self.notice = self.notice, None
            for request in held:
                request.fail(notice)
            return
        for request in held:
            request.forward(backend)

    # -- transitions -----------------------------------------------------------------------------------------

    def step(self) -> float:
        """Make the due transitions; return the seconds until the next one may be due. An unreachable API is
        retried per kube.retry, another refused change (e.g. a StatefulSet being replaced) every RETRY_SECONDS;
        ForbiddenError (the Role is wrong) ends the gate."""
        try:
            wait = min(MAX_STEP_SECONDS, self._step(self._clock()))
        except StatefulSetMissingError:
            raise
        except ForbiddenError as exc:
            self._events.emit(Reason.RBAC_MISSING, str(exc))
            raise
        except ApiUnavailableError as exc:
            return self._api_retry.pause_after(exc)
        except BootstrapError as exc:
            log.warning("%s; trying again in %g s", exc, RETRY_SECONDS)
            return RETRY_SECONDS
        self._api_retry.request_succeeded()
        return wait

    def _step(self, now: float) -> float:
        if self.phase in (Phase.SAVING, Phase.LOADING):
            if now < self._op_deadline:
                return self._expire_held(now, self._op_deadline - now)
            self._op_timed_out(now)
        if self.phase is Phase.WAKING:
            self._release_queue()  # a wake that came before the watch showed the old pods deleting
            server = self.view.server()
            if server is not None and server.ready:
                self.phase = Phase.AWAKE
                self._failures = 0
                self._events.emit(
                    Reason.AWAKE, f"server pod {server.name} Ready {now - self._wake_started:.1f} s after the wake"
                )
                if self._checkpoint is not None and self._begin_load(now, self._checkpoint):
                    return self._op_deadline - now
            elif now >= self._wake_deadline:
                self._wake_failed(now)
            else:
                return self._expire_held(now, min(self._tell_queued(now), self._wake_deadline - now))
        if self.phase is Phase.AWAKE:
            return self._awake(now)
        self._release_queue()
        if self.phase is Phase.DRAINING and self.view.cache.listed and not self.view.workload():
            self.phase = Phase.ASLEEP
            self._events.emit(
                Reason.ASLEEP,
                f"{self._s.server_statefulset} and {self._s.locale_statefulset} have no pod left; the client Service "
                "stays: a client request wakes the release (a connection alone does not)",
            )
        if self.held or self._wake_requested:
            if self._queue is not None and self.phase is Phase.DRAINING:
                # through Kueue the old pods go first: Kueue may leave the gates on new pods whose predecessors of
                # the same name are still terminating
                return self._expire_held(now, MAX_STEP_SECONDS)
            if self._wake_requested or now >= self._backoff_until:
                # requests that waited out their deadline meanwhile (an API outage) are answered first: the wake's
                # deadline counts from the oldest one left
                self._expire_held(now, 0.0)
                if not self.held and not self._wake_requested:
                    return MAX_STEP_SECONDS
                why = "wake requested" if self._wake_requested and not self.held else "client request"
                self._wake(self._wake_due(now), why)
                return self._wake_deadline - now
            return self._expire_held(now, self._backoff_until - now)
        return MAX_STEP_SECONDS

    def _awake(self, now: float) -> float:
        backend = self.backend()
        if backend is None:  # starting (or queued) or relaunching: hold the requests, never sleep
            return self._expire_held(now, self._tell_queued(now))
        self._release(backend)
        if not self._s.sleep_when_idle:
            return MAX_STEP_SECONDS
        verdict = idle_verdict(policy=self._policy, traffic=self._traffic.snapshot(), now=now, server_ready=True)
        if verdict.remaining is None:
            return MAX_STEP_SECONDS
        if verdict.remaining > 0:
            return verdict.remaining
        if self._checkpoint is not None:
            if self._declined_at == self._traffic.snapshot().last_activity:
                return MAX_STEP_SECONDS  # a save did not allow the sleep: awake until the next request
            self._idle_why = verdict.why
            self._begin_save(now, backend, self._checkpoint)
            return self._op_deadline - now
        self._sleep(f"idle: {verdict.why}")
        return 0.0

    def _sleep(self, why: str) -> None:
        self._scale_all(0)
        self.phase = Phase.DRAINING
        self.sleeps += 1
        self._events.emit(
            Reason.IDLE_DRAINING,
            f"{why}; scaled {self._s.server_statefulset} and {self._s.locale_statefulset} to 0",
        )

    # -- saving before the sleep, loading after the wake -----------------------------------------------------

    def _parts(self) -> tuple[CheckpointPolicy, Store]:
        """The policy and its store (SAVING and LOADING are only entered with both)."""
        if self._checkpoint is None or self._store is None:
            raise RuntimeError("the gate has no checkpoint policy")
        return self._checkpoint, self._store

    def _begin_op(self, now: float, phase: Phase, policy: CheckpointPolicy) -> int:
        self.phase = phase
        self._op += 1
        self._op_started = now
        self._op_deadline = now + policy.timeout
        return self._op

    def _send(self, backend: Backend, cmd: str, params: dict[str, str], on_reply: Callable[[Reply], None]) -> None:
        if self.commands is None:
            raise RuntimeError("the controller has no link to the server (Gate attaches itself)")
        log.info("sending %s %s to the server pod %s", cmd, params, backend.pod)
        self.commands.send_command(backend, cmd, params, on_reply)

    def _begin_save(self, now: float, backend: Backend, policy: CheckpointPolicy) -> None:
        op = self._begin_op(now, Phase.SAVING, policy)
        params = {"name": policy.name, "path": policy.path, "mode": "overwrite"}
        self._send(backend, SAVE_COMMAND, params, lambda reply: self._saved(op, reply))

    def _saved(self, op: int, reply: Reply) -> None:
        if op != self._op or self.phase is not Phase.SAVING:
            log.info("ignoring a late reply to %s (given up): %s", SAVE_COMMAND, reply.message)
            return
        policy, store = self._parts()
        took = self._clock() - self._op_started
        self.phase = Phase.AWAKE
        if not reply.ok:
            self._save_failed(policy, store, f"Arkouda answered: {reply.message}", took)
            return
        where = policy.where(policy.name)
        found = store.inspect(policy.name)
        if found is None:
            self._save_failed(policy, store, f"the gate cannot read {where} after the save", took)
            return
        if self._client_came():
            return
        saved = len(found.entries) - len(found.unsaved)
        summary = f"{saved} array(s), {human_bytes(found.size_bytes)} in {took:.1f} s to {where}"
        if found.unsaved:
            what = (
                f"Arkouda does not save {names(found.unsaved)} (it saves 1-D numeric arrays only; a load stops at "
                "the first entry it did not save)"
            )
            if policy.on_unsaved is OnUnsaved.STAY_AWAKE:
                self._declined(
                    Reason.CHECKPOINT_INCOMPLETE,
                    f"not sleeping: {what}. Saved {summary}; the release stays awake until the next request, then "
                    "tries again after the idle timeout. Delete those objects, or set "
                    "global.idle.checkpoint.onUnsaved=sleep to sleep without them",
                )
                return
            self._events.emit(Reason.CHECKPOINT_INCOMPLETE, f"sleeping without them: {what}")
        store.write_record(
            Record(
                name=policy.name,
                num_locales=policy.num_locales,
                saved=True,
                unsaved=found.unsaved,
                size_bytes=found.size_bytes,
            )
        )
        self._events.emit(Reason.CHECKPOINTED, f"saved {summary}")
        self._sleep(f"idle: {self._idle_why}; checkpoint saved")

    def _save_failed(self, policy: CheckpointPolicy, store: Store, detail: str, took: float) -> None:
        where = policy.where(policy.name)
        if policy.on_unsaved is OnUnsaved.STAY_AWAKE:
            self._declined(
                Reason.CHECKPOINT_FAILED,
                f"saving the checkpoint {where} failed after {took:.1f} s ({detail}); not sleeping, so nothing is "
                "lost: the release stays awake until the next request, then tries again after the idle timeout",
            )
            return
        if self._client_came():
            return
        store.write_record(Record(name=policy.name, num_locales=policy.num_locales, saved=False, detail=detail))
        self._events.emit(
            Reason.CHECKPOINT_FAILED,
            f"saving the checkpoint {where} failed after {took:.1f} s ({detail}); sleeping anyway "
            "(global.idle.checkpoint.onUnsaved=sleep): everything in the server's memory is lost, and the next "
            "client is told so",
        )
        self._sleep(f"idle: {self._idle_why}; checkpoint failed")

    def _declined(self, reason: Reason, message: str) -> None:
        self._declined_at = self._traffic.snapshot().last_activity
        self._events.emit(reason, message)

    def _client_came(self) -> bool:
        """A client request came during the save: the release stays awake (the checkpoint is written, unused)."""
        if self.held or self._traffic.in_flight:
            log.info("a client request came during the save: not sleeping")
            return True
        return False

    def _begin_load(self, now: float, policy: CheckpointPolicy) -> bool:
        """Load what the last sleep saved, before any held request is forwarded; False when there is nothing
        to load (then the next client may be told why)."""
        store = self._parts()[1]
        record = store.read_record()
        if record is None:
            log.info("no checkpoint record: nothing to load")
            return False
        if record.num_locales != policy.num_locales:
            self.notice = size_mismatch(policy, record)
            self._events.emit(Reason.CHECKPOINT_SIZE_MISMATCH, self.notice)
            return False
        if not record.saved:
            self.notice = (
                f"the release woke without its data: the save before the sleep failed ({record.detail}); everything "
                "the server held before the sleep is lost"
            )
            self._events.emit(Reason.RESTORE_FAILED, self.notice)
            return False
        backend = self._server_backend()
        if backend is None:
            return False
        op = self._begin_op(now, Phase.LOADING, policy)
        params = {"name": record.name, "path": policy.path}
        self._send(backend, LOAD_COMMAND, params, lambda reply: self._loaded(op, record, reply))
        return True

    def _loaded(self, op: int, record: Record, reply: Reply) -> None:
        if op != self._op or self.phase is not Phase.LOADING:
            log.info("ignoring a late reply to %s (given up): %s", LOAD_COMMAND, reply.message)
            return
        policy = self._parts()[0]
        took = self._clock() - self._op_started
        self.phase = Phase.AWAKE
        where = policy.where(record.name)
        not_saved = f"; Arkouda did not save {names(record.unsaved)} before the sleep" if record.unsaved else ""
        if reply.ok:
            self._events.emit(
                Reason.RESTORED, f"loaded the checkpoint {where} ({human_bytes(record.size_bytes)}) in {took:.1f} s"
            )
            if record.unsaved:
                self.notice = f"the release woke with its arrays restored from {where}{not_saved}: those are lost"
            return
        self.notice = (
            f"the release woke without all of its data: loading the checkpoint {where} failed after {took:.1f} s "
            f"({reply.message}){not_saved}; what was not loaded is lost (the checkpoint is kept)"
        )
        self._events.emit(Reason.RESTORE_FAILED, self.notice)

    def _op_timed_out(self, now: float) -> None:
        cmd = SAVE_COMMAND if self.phase is Phase.SAVING else LOAD_COMMAND
        policy, store = self._parts()
        reply = Reply(ok=False, message=f"no reply to {cmd} within {policy.timeout:g} s")
        op = self._op
        if self.phase is Phase.SAVING:
            self._saved(op, reply)
        else:
            record = store.read_record()
            if record is not None:
                self._loaded(op, record, reply)
            else:
                self.phase = Phase.AWAKE
        self._op += 1  # the reply that may still come is for an operation given up

    def _wake_due(self, now: float) -> float:
        """When the wake became due: the first held request's arrival or the back-off's end, whichever is later
        (the loop sees it a moment after). Counting the wake's deadline from there makes the client that caused
        it reach its own deadline together with the wake's, so the WakeTimeout Event is recorded before that
        client is told."""
        if not self.held:
            return now
        return min(now, max(self._backoff_until, min(r.received_at for r in self.held)))

    def _wake(self, now: float, why: str) -> None:
        self._scale_all(1)
        self._wake_requested = False
        self.phase = Phase.WAKING
        self.wakes += 1
        self._wake_started = now
        self._wake_deadline = now + self._s.wake_timeout
        self._quota_told = False
        self._events.emit(
            Reason.WAKING,
            f"{why}: scaled {self._s.server_statefulset} to 1 and {self._s.locale_statefulset} to "
            f"{self._s.num_locales - 1}; deadline {self._s.wake_timeout:g} s",
        )

    def _release_queue(self) -> None:
        """With Kueue: delete the Workload of the pods this gate scaled away (Event QuotaReleased once per scale to
        0): Kueue keeps a group's deleted pods, and its quota or its place in the queue, until it is gone."""
        if self._queue is None or not self._queue.release(self.view.workload()) or self._quota_told:
            return
        self._quota_told = True
        self._events.emit(
            Reason.QUOTA_RELEASED,
            f"scaled to 0: deleted Kueue Workload {self._queue.workload}; its place in LocalQueue {self._queue.queue}, "
            "and the quota it held if it was admitted, are free now (Kueue keeps a group's deleted pods otherwise)",
        )

    def _tell_queued(self, now: float) -> float:
        """Once per gated pod: the release waits for Kueue's admission. Event Queued on that pod (the server pod:
        the one `kubectl describe` is run on) and, during a wake, WakeQueued on the gate's, with Kueue's reason.
        Kueue states it a moment after the pods appear, which changes no pod: the Workload is read again after
        QUEUE_LOOK_SECONDS, at most QUEUE_LOOKS times, then told as it is. Returns the seconds until the next look."""
        if self._queue is None or (pod := self._queue.gated(self.view.workload())) is None:
            return MAX_STEP_SECONDS
        if pod.uid == self._queue_told:
            return MAX_STEP_SECONDS
        if pod.uid != self._queue_looking:
            self._queue_looking, self._queue_looks, self._queue_next_look = pod.uid, 0, 0.0
        if now < self._queue_next_look:
            return self._queue_next_look - now
        self._queue_looks += 1
        waiting = self._queue.waiting(pod)
        if waiting.admitted:  # the gates are being removed: not queued, nothing to tell
            self._queue_told = pod.uid
            return MAX_STEP_SECONDS
        if not waiting.said and self._queue_looks < QUEUE_LOOKS:
            log.info("%s (look %d/%d)", waiting.text, self._queue_looks, QUEUE_LOOKS)
            self._queue_next_look = now + QUEUE_LOOK_SECONDS
            return QUEUE_LOOK_SECONDS
        self._queue_told = pod.uid
        log.info("%s", waiting.text)
        ref = PodRef(namespace=pod.namespace or self._s.namespace, name=pod.name, uid=pod.uid)
        self._events.regarding(ref).emit(Reason.QUEUED, waiting.text)
        if self.phase is Phase.WAKING:
            self._events.emit(Reason.WAKE_QUEUED, f"{waiting.text}; held requests wait for the admission until the "
                              f"wake deadline ({self._s.wake_timeout:g} s after the wake)")  # fmt: skip
        return MAX_STEP_SECONDS

    def _not_ready_reason(self) -> str:
        """Why the release is not Ready: Kueue's reason while a pod waits for admission, else the pods' own."""
        if self._queue is not None and (pod := self._queue.gated(self.view.workload())) is not None:
            return self._queue.waiting_reason(pod)
        return self.view.not_ready_reason()

    def _wake_failed(self, now: float) -> None:
        reason = self._not_ready_reason()
        self._failures += 1
        self.wake_timeouts += 1
        backoff = next_backoff(base_seconds=self._s.wake_backoff, failures=self._failures)
        self._scale_all(0)
        self.phase = Phase.DRAINING
        self._backoff_until = now + backoff
        self._events.emit(
            Reason.WAKE_TIMEOUT,
            f"the server was not Ready {self._s.wake_timeout:g} s after the wake: {reason}; scaled back to 0, next "
            f"wake attempt in {backoff:g} s at the earliest",
        )
        held, self.held = self.held, []
        for request in held:
            request.fail(self._failure_message(reason))

    def _expire_held(self, now: float, wait: float) -> float:
        """Fail the requests held longer than the wake timeout; return `wait` or the next request's deadline."""
        keep: list[HeldRequest] = []
        reason: str | None = None  # read once: with Kueue it is a GET of the Workload
        for request in self.held:
            if now - request.received_at >= self._s.wake_timeout:
                reason = reason if reason is not None else self._not_ready_reason()
                request.fail(self._failure_message(reason))
            else:
                keep.append(request)
        self.held = keep
        deadlines = [r.received_at + self._s.wake_timeout - now for r in keep]
        return max(0.0, min([wait, *deadlines]))

    def _failure_message(self, reason: str) -> str:
        return f"the Arkouda release is not Ready after {self._s.wake_timeout:g} s: {reason}"

    def _scale_all(self, up: int) -> None:
        locales = (self._s.num_locales - 1) * up
        # the server last on the way up (its bootstrap waits for the locales), first on the way down
        order = [(self._s.locale_statefulset, locales), (self._s.server_statefulset, up)]
        for name, replicas in order if up else reversed(order):
            self._scale.set_replicas(namespace=self._s.namespace, statefulset=name, replicas=replicas)


class StatefulSetMissingError(BootstrapError):
    """A StatefulSet of the release does not exist (yet: Helm creates Deployments before StatefulSets)."""
