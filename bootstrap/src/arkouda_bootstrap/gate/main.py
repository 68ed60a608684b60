"""`arkouda-bootstrap gate`: the front door of an Arkouda release (pyzmq on an asyncio loop).

Clients' ZeroMQ sessions end here: a ROUTER socket on the client port takes every client (Arkouda's client is a
REQ socket), so a session survives a server relaunch, a sleep and a wake without the client reconnecting. Each
request is checked (envelope.py) before it goes on; one that fails is answered here with Arkouda's ERROR reply
and never reaches the server, whose request loop it would end. A checked request goes to the controller
(sleepwake.py), which forwards it to the Ready server pod or holds it until the pod is Ready (a wake, a
relaunch), in order and within bounds.

The gate's own connection to the server is one DEALER socket per server incarnation (a pod uid): Arkouda's REP
socket returns the envelope it received, so each request carries the gate's tag and the reply finds its client.
Frames pass as zero-copy pyzmq frames: a payload is never parsed nor copied in Python. A lost connection or a
new server answers the requests it had in flight with an error, so no client waits for ever.

While nothing is in flight the gate checks the server's request loop (health.py); a loop that stops answering
gets a ServerUnresponsive Event, the gate's readiness goes false, and the server pod is deleted so that its
StatefulSet starts it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import zmq
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential
from zmq.utils.monitor import parse_monitor_message

from arkouda_bootstrap.config import GateSettings
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.gate.checkpoint import CheckpointPolicy, DirectoryStore, OnUnsaved
from arkouda_bootstrap.gate.envelope import (
    Limits,
    Refusal,
    Refused,
    TokenFile,
    check_request,
    error_reply,
    parse_reply,
    request_bytes,
)
from arkouda_bootstrap.gate.health import PROBE_COMMAND, HealthCheck, HealthPolicy
from arkouda_bootstrap.gate.idle import Traffic
from arkouda_bootstrap.gate.metrics import GateStats, serve_metrics
from arkouda_bootstrap.gate.pump import Pump
from arkouda_bootstrap.gate.queue import KueueGroup
from arkouda_bootstrap.gate.sleepwake import Backend, Controller, Reply, StatefulSetMissingError
from arkouda_bootstrap.kube.api import KubeApi, PodEvent, PodInfo, PodList, PodRef, ScaleApi
from arkouda_bootstrap.kube.events import EventRecorder, Reason
from arkouda_bootstrap.kube.outage import OutageNotice
from arkouda_bootstrap.kube.ownership import OwnedBy
from arkouda_bootstrap.kube.podwatch import follow_pods
from arkouda_bootstrap.kube.retry import ApiRetry

log = logging.getLogger(__name__)

WATCH_CHUNK_SECONDS = 300
COALESCE_SECONDS = 0.01
STATEFULSET_WAIT_SECONDS = 120.0
# The user name of the gate's own health-check requests (Arkouda logs it).
PROBE_USER = "arkouda-gate"


class GateApi(KubeApi, ScaleApi, Protocol):
    """What the gate calls: the pods of the release (and delete of the server pod) and the scale of its two
    StatefulSets."""


@dataclass
class GateRequest:
    """A checked client request: its envelope (the client's routing id and delimiter), its frames."""

    gate: Gate
    envelope: list[zmq.Frame]
    frames: list[zmq.Frame]
    session: bytes
    user: str
    cmd: str
    received_at: float
    done: bool = False

    def forward(self, backend: Backend) -> None:
        self.gate.forward(self, backend)

    def fail(self, message: str) -> None:
        self.gate.answer_error(self, message, Refusal.NOT_READY)


@dataclass
class _Link:
    """The gate's DEALER to one server incarnation and the requests it has in flight (by tag)."""

    backend: Backend
    pending: dict[bytes, GateRequest] = field(default_factory=dict)
    probe: bytes | None = None
    # the gate's own requests (save, load) and what to call with their reply
    own: dict[bytes, Callable[[Reply], None]] = field(default_factory=dict)
    pump: Pump = field(init=False)
    monitor: Pump = field(init=False)

    def close(self) -> None:
        self.pump.sock.disable_monitor()
        self.monitor.close()
        self.pump.close()


class Gate:
    """The client ROUTER, the server link, the controller's loop and the health check, on one event loop."""

    def __init__(
        self,
        *,
        settings: GateSettings,
        controller: Controller,
        traffic: Traffic,
        health: HealthCheck,
        events: EventRecorder,
        api: KubeApi | None,
        clock: Callable[[], float],
        token: Callable[[], bytes] | None,
    ) -> None:
        self._s = settings
        self.controller = controller
        self.traffic = traffic
        self.health = health
        self._events = events
        self._api = api
        self.clock = clock
        self._token = token
        self._limits = Limits(max_envelope_bytes=settings.max_envelope_bytes, allow_shutdown=settings.allow_shutdown)
        self.stats = GateStats()
        self._ctx: zmq.Context[Any] = zmq.Context()
        self._front: Pump | None = None
        self._link: _Link | None = None
        self._tags = itertools.count(1)
        controller.commands = self
        self._changed = asyncio.Event()
        self._stop = asyncio.Event()
        self._fatal: BaseException | None = None
        self.listening = threading.Event()  # set once `port` is bound (tests and benches start it in a thread)
        self.port = 0

    # -- plumbing --------------------------------------------------------------------------------------------

    def _control_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.fatal(task.exception())  # type: ignore[arg-type]

    def changed(self) -> None:
        self._changed.set()

    def on_pods(self, item: PodList | PodEvent) -> None:
        self.controller.on_pods(item)
        self.changed()

    def fatal(self, exc: BaseException) -> None:
        self._fatal = exc
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()

    def _send_front(self, frames: list[Any]) -> None:
        if self._front is not None:
            self._front.send(frames)

    # -- the clients -----------------------------------------------------------------------------------------

    async def serve(self, *, host: str, port: int, on_listening: Callable[[], None] | None = None) -> None:
        front = self._ctx.socket(zmq.ROUTER)
        front.setsockopt(zmq.LINGER, 0)
        front.setsockopt(zmq.ROUTER_MANDATORY, 1)
        front.setsockopt(zmq.MAXMSGSIZE, self._s.max_message_bytes)
        front.setsockopt(zmq.SNDHWM, 0)  # replies wait for a slow client instead of being dropped
        address = f"tcp://{'*' if host in ('0.0.0.0', '') else host}"  # noqa: S104 - the listen address
        if port:
            front.bind(f"{address}:{port}")
            self.port = port
        else:
            self.port = front.bind_to_random_port(address)
        monitor = Pump(front.get_monitor_socket(zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED), self._connection)
        self._front = Pump(front, self._received)
        self.listening.set()
        log.info("gate listening on %s:%d", host, self.port)
        if on_listening is not None:
            on_listening()
        control = asyncio.get_running_loop().create_task(self._control())
        control.add_done_callback(self._control_done)
        try:
            await self._stop.wait()
            if self._fatal is not None:
                raise self._fatal
        finally:
            control.cancel()
            await asyncio.gather(control, return_exceptions=True)
            self._drop_link("the gate is stopping")
            front.disable_monitor()
            monitor.close()
            self._front.close()
            self._front = None
            self._ctx.term()

    def _connection(self, frames: list[zmq.Frame]) -> None:
        """Open client connections: only `connectionIsActivity` reads them (a session is not a request)."""
        event = parse_monitor_message([f.bytes for f in frames])
        if event["event"] == zmq.EVENT_ACCEPTED:
            self.traffic.connection_opened()
        elif event["event"] == zmq.EVENT_DISCONNECTED:
            self.traffic.connection_closed()
        self.changed()

    def _received(self, frames: list[zmq.Frame]) -> None:
        # [routing id, empty delimiter (REQ), request frames...]; a client without the delimiter gets the same
        # envelope back
        cut = 2 if len(frames) > 1 and len(frames[1].buffer) == 0 else 1
        envelope, body = frames[:cut], frames[cut:]
        checked = check_request([f.buffer for f in body], limits=self._limits, token=self._current_token)
        if isinstance(checked, Refused):
            log.warning("refused a request of user %r (%s): %s", checked.user, checked.cmd or "?", checked.message)
            self.stats.refused[checked.reason] += 1
            self._send_front([*envelope, error_reply(checked.message, user=checked.user, cmd=checked.cmd)])
            return
        request = GateRequest(
            gate=self,
            envelope=envelope,
            frames=body,
            session=envelope[0].bytes,
            user=checked.user,
            cmd=checked.cmd,
            received_at=self.clock(),
        )
        self.traffic.request_started()
        self.controller.request_arrived(request)
        self.changed()

    def _current_token(self) -> bytes | None:
        return None if self._token is None else self._token()

    def answer_error(self, request: GateRequest, message: str, reason: Refusal) -> None:
        if request.done:
            return
        request.done = True
        log.warning("answering %s of user %r with an error: %s", request.cmd, request.user, message)
        self.stats.refused[reason] += 1
        self.traffic.request_ended()
        self._send_front([*request.envelope, error_reply(message, user=request.user, cmd=request.cmd)])
        self.changed()

    # -- the server ------------------------------------------------------------------------------------------

    def forward(self, request: GateRequest, backend: Backend) -> None:
        link = self._link_to(backend)
        tag = next(self._tags).to_bytes(8, "big")
        link.pending[tag] = request
        link.pump.send([tag, b"", *request.frames])
        request.frames = []  # libzmq holds its own reference until the bytes are out; a large request is not kept
        self.stats.forwarded += 1

    def _link_to(self, backend: Backend) -> _Link:
        if self._link is not None and self._link.backend == backend:
            return self._link
        self._drop_link(f"the server is now pod {backend.pod} ({backend.host})")
        sock = self._ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDHWM, 0)  # the gate bounds what it holds itself
        sock.setsockopt(zmq.RCVHWM, 0)
        monitor = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        sock.connect(f"tcp://{backend.host}:{backend.port}")
        link = _Link(backend=backend)
        link.pump = Pump(sock, functools.partial(self._reply, link))
        link.monitor = Pump(monitor, functools.partial(self._server_lost, link))
        self._link = link
        self.health.reset()
        log.info("connected to the server pod %s at %s:%d", backend.pod, backend.host, backend.port)
        return link

    def _drop_link(self, why: str) -> None:
        link, self._link = self._link, None
        if link is None:
            return
        link.close()
        self._fail_pending(link, why)

    def send_command(
        self, backend: Backend, cmd: str, params: dict[str, str], on_reply: Callable[[Reply], None]
    ) -> None:
        """One of the gate's own requests (its user name, the release's token); `on_reply` gets the answer, or a
        failure when the connection ends first."""
        link = self._link_to(backend)
        tag = next(self._tags).to_bytes(8, "big")
        link.own[tag] = on_reply
        link.pump.send([tag, b"", request_bytes(cmd, user=PROBE_USER, token=self._current_token(), params=params)])

    def _fail_pending(self, link: _Link, why: str) -> None:
        pending, link.pending = link.pending, {}
        link.probe = None
        own, link.own = link.own, {}
        for on_reply in own.values():
            on_reply(Reply(ok=False, message=f"the connection to the server ended ({why})"))
        for request in pending.values():
            self.answer_error(
                request,
                f"the connection to the Arkouda server ended while this request was in flight ({why}); its "
                "result is lost: send it again",
                Refusal.SERVER_LOST,
            )

    def _reply(self, link: _Link, frames: list[zmq.Frame]) -> None:
        tag = frames[0].bytes
        on_reply = link.own.pop(tag, None)
        if on_reply is not None:
            ok, message = parse_reply(frames[-1].bytes)
            on_reply(Reply(ok=ok, message=message))
            self._answered()
            return
        if tag == link.probe:
            link.probe = None
            self._answered()
            return
        request = link.pending.pop(tag, None)
        if request is None or request.done:
            return  # answered already (its connection was given up)
        request.done = True
        self._send_front([*request.envelope, *frames[2:]])
        self.traffic.request_ended()
        self._answered()

    def _answered(self) -> None:
        down = self.health.answered()
        if down is not None:
            self._events.emit(
                Reason.SERVER_ANSWERING, f"the server answers requests again, {down:.1f} s after it stopped"
            )
        self.changed()

    def _server_lost(self, link: _Link, frames: list[zmq.Frame]) -> None:
        """The connection broke (the server process ended or restarted): what it had in flight is lost."""
        event = parse_monitor_message([f.bytes for f in frames])
        log.warning("the connection to the server pod %s ended (%s)", link.backend.pod, event["endpoint"])
        if self._link is link:
            # a new socket for the same pod: the old one's queue and reconnect state go with it
            self._drop_link("the server process ended or restarted")
            self.health.reset()
            self.changed()

    # -- the health check ------------------------------------------------------------------------------------

    def _check_health(self) -> float:
        """Send a due probe or act on an overdue one; return the seconds until the next check."""
        link = self._link
        backend = self.controller.backend()
        if link is None or backend is None or link.backend != backend:
            if backend is not None and self.health.enabled:
                self._link_to(backend)  # a new server: connect and check it before any client needs it
                return 0.0
            return float("inf")
        in_flight = len(link.pending) + len(link.own)
        waited = self.health.overdue()
        if waited is not None:
            self._unresponsive(link, waited)
            return 0.0
        if self.health.due(in_flight=in_flight):
            tag = next(self._tags).to_bytes(8, "big")
            link.probe = tag
            probe = request_bytes(PROBE_COMMAND, user=PROBE_USER, token=self._current_token())
            link.pump.send([tag, b"", probe])
            self.health.sent()
        return self.health.next_due(in_flight=len(link.pending) + len(link.own))

    def _unresponsive(self, link: _Link, waited: float) -> None:
        pod = link.backend.pod
        self.stats.unresponsive += 1
        self._events.emit(
            Reason.SERVER_UNRESPONSIVE,
            f"the server's request loop did not answer `{PROBE_COMMAND}` for {waited:.1f} s with nothing else in "
            f"flight (its port and pod look fine); deleting pod {pod} so that its StatefulSet starts it again",
        )
        self.controller.unresponsive_uid = link.backend.uid  # requests wait for the next server pod
        self._drop_link(f"the server's request loop stopped answering for {waited:.0f} s")
        if self._api is None:
            return
        try:
            self._api.delete_pod(namespace=self._s.namespace, name=pod)
            self.stats.relaunches += 1
        except BootstrapError as exc:
            if str(exc).startswith("missing RBAC"):
                self._events.emit(Reason.RBAC_MISSING, str(exc))
            log.warning("could not delete the unresponsive server pod %s: %s", pod, exc)

    # -- the controller's loop -------------------------------------------------------------------------------

    async def _control(self) -> None:
        while True:
            self._changed.clear()
            delay = min(self.controller.step(), self._check_health())
            # asyncio.timeout, not wait_for: wait_for in 3.11 can swallow the cancellation at shutdown
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.05, delay)):
                    await self._changed.wait()
            # news that come meanwhile are taken in the next step: under load the controller runs at most
            # every COALESCE_SECONDS, not once per request (requests are forwarded without it)
            await asyncio.sleep(COALESCE_SECONDS)

    @property
    def ready(self) -> bool:
        """The gate's readiness: false while the server's request loop is known not to answer."""
        return self.health.answering


def _watch(
    api: KubeApi, settings: GateSettings, loop: asyncio.AbstractEventLoop, gate: Gate, events: EventRecorder
) -> None:
    """The release's pods into the controller. Only the release's own pods count: the pods of its two StatefulSets
    (by controller UID, kube.ownership) and the gate's own pod (its wake annotation); a pod that only wears the
    labels is named once (Event ImpostorPod) and never reaches the controller, so it can neither pass for a Ready
    server nor keep a release awake. An unreachable API is retried for ever (kube.retry); an error no retry can fix
    (ForbiddenError: the Role is wrong) ends the gate with its one line."""

    def impostor(pod: PodInfo, message: str) -> None:
        loop.call_soon_threadsafe(events.emit, Reason.IMPOSTOR_POD, message)

    try:
        owned = OwnedBy(
            api,
            namespace=settings.namespace,
            statefulsets=(settings.server_statefulset, settings.locale_statefulset),
            on_impostor=impostor,
        )

        def keep(pod: PodInfo) -> bool:
            return pod.name == settings.pod_name or owned(pod)

        notice = OutageNotice(
            doing="the gate keeps serving and resumes following the release's pods",
            emit=lambda reason, message: loop.call_soon_threadsafe(events.emit, reason, message),
        )
        for item in follow_pods(
            api,
            namespace=settings.namespace,
            selector=settings.release_selector,
            chunk_seconds=WATCH_CHUNK_SECONDS,
            listener=notice,
        ):
            if isinstance(item, PodList):
                own = PodList(pods=tuple(p for p in item.pods if keep(p)), resource_version=item.resource_version)
                loop.call_soon_threadsafe(gate.on_pods, own)
            elif isinstance(item, PodEvent) and (item.pod is None or item.type == "DELETED" or keep(item.pod)):
                loop.call_soon_threadsafe(gate.on_pods, item)
    except BootstrapError as exc:
        loop.call_soon_threadsafe(gate.fatal, exc)


def build_gate(
    *,
    settings: GateSettings,
    scale: ScaleApi,
    api: KubeApi | None,
    events: EventRecorder,
    clock: Callable[[], float] = time.monotonic,
) -> Gate:
    """The gate and its parts from the settings (the CLI, the tests and the bench build it the same way).
    `api`: where the unresponsive server pod is deleted (None: nowhere)."""
    traffic = Traffic(clock=clock)
    checkpoint = None
    if settings.checkpoint_path:
        checkpoint = CheckpointPolicy(
            path=settings.checkpoint_path,
            release=settings.server_statefulset.removesuffix("-server"),
            num_locales=settings.num_locales,
            on_unsaved=OnUnsaved(settings.checkpoint_on_unsaved),
            timeout=settings.checkpoint_timeout,
        )
    queue = None
    if api is not None and settings.kueue_workload and settings.kueue_queue:
        queue = KueueGroup(
            api=api, namespace=settings.namespace, workload=settings.kueue_workload, queue=settings.kueue_queue
        )
    controller = Controller(
        settings=settings,
        scale=scale,
        events=events,
        traffic=traffic,
        clock=clock,
        checkpoint=checkpoint,
        store=DirectoryStore(checkpoint) if checkpoint is not None else None,
        queue=queue,
    )
    health = HealthCheck(
        policy=HealthPolicy(interval=settings.health_interval, timeout=settings.health_timeout), clock=clock
    )
    return Gate(
        settings=settings,
        controller=controller,
        traffic=traffic,
        health=health,
        events=events,
        api=api,
        clock=clock,
        token=TokenFile(settings.token_file, clock=clock) if settings.token_file else None,
    )


def run_gate(api: GateApi, settings: GateSettings, *, clock: Callable[[], float] = time.monotonic) -> int:
    # the reads at start wait out an API outage (kube.retry) like the watch does: no crash loop for it
    api_retry = ApiRetry(f"the gate's start in namespace {settings.namespace}")
    own = api_retry.call(lambda: api.get_pod(namespace=settings.namespace, name=settings.pod_name))
    events = EventRecorder(
        api, PodRef(namespace=settings.namespace, name=settings.pod_name, uid=own.uid if own else "")
    )
    gate = build_gate(settings=settings, scale=api, api=api, events=events, clock=clock)
    # Helm creates Deployments before StatefulSets: give them a moment on a fresh install
    for attempt in Retrying(
        stop=stop_after_delay(STATEFULSET_WAIT_SECONDS),
        wait=wait_exponential(max=10),
        retry=retry_if_exception_type(StatefulSetMissingError),
        reraise=True,
    ):
        with attempt:
            api_retry.call(gate.controller.start)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        if threading.current_thread() is threading.main_thread():  # signal handlers: main thread only (tests)
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, gate.stop)
        threading.Thread(
            target=_watch, args=(api, settings, loop, gate, events), name="gate-pod-watch", daemon=True
        ).start()

        def metrics() -> None:  # the readiness probe's port: open once clients can be taken
            if settings.metrics_port:
                serve_metrics(port=settings.metrics_port, gate=gate)

        await gate.serve(host=settings.listen_host, port=settings.listen_port, on_listening=metrics)

    asyncio.run(main())
    return 0
