"""`arkouda-bootstrap gate`: the always-on door of a release that sleeps when idle.

It listens on the client port (the client Service selects it) and splices every client TCP connection to the
server pod while the release is awake: bytes are copied as they come, never parsed, and their direction tells
the idle decision (idle.py) whether a request is in flight. A connection that arrives while the release sleeps
or starts is accepted and held unread; the controller (sleepwake.py) scales the release up and the connection is
spliced once the server pod is Ready, so the client's own bytes reach the server first. A wake that misses its
deadline ends the held connections at a loopback ZeroMQ REP socket (pyzmq) that answers their request with an
Arkouda ERROR reply naming the reason, so the client raises instead of waiting for ever.

The release's pods reach the controller through a list-then-watch (podwatch.follow_pods) in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from arkouda_bootstrap.config import GateSettings
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.events import EventRecorder
from arkouda_bootstrap.gatemetrics import serve_metrics
from arkouda_bootstrap.idle import Traffic
from arkouda_bootstrap.kube import KubeApi, PodEvent, PodList, PodRef, ScaleApi
from arkouda_bootstrap.podwatch import follow_pods
from arkouda_bootstrap.sleepwake import Controller, StatefulSetMissingError

log = logging.getLogger(__name__)

# Seconds a failed client stays connected to the error socket (its request answered) before it is closed, so
# that its next request opens a new connection, which starts a new wake.
ERROR_LINGER_SECONDS = 5.0
# A Ready server that refuses the connection (just restarted) is tried again this much later.
RECONNECT_SECONDS = 1.0
# The gate reads a socket into one buffer of this size and writes what it read to the other side at once
# (BufferedProtocol: no bytes object per read). Large reads are what make a large transfer cheap: per 256 MiB the
# gate spent ~110 ms of CPU with 1 MiB reads against ~165 ms with asyncio's 256 KiB reads (bench/README.md).
READ_BUFFER_BYTES = 1 << 20
# A side that holds this much unsent stops the other side's reads until it has sent most of it (flow control).
WRITE_HIGH_WATER = 256 << 10
WATCH_CHUNK_SECONDS = 300
STATEFULSET_WAIT_SECONDS = 120.0


class GateApi(KubeApi, ScaleApi, Protocol):
    """What the gate calls: the pods of the release and the scale of its two StatefulSets."""


class ErrorAnswer:
    """ZeroMQ REP on a loopback port: every request gets an Arkouda ERROR reply with the current message (the
    reply record of Arkouda's MsgTuple; the request's `user` is echoed as the server does)."""

    def __init__(self) -> None:
        import zmq

        self._ctx: Any = zmq.Context()
        self._sock: Any = self._ctx.socket(zmq.REP)
        self._sock.setsockopt(zmq.LINGER, 0)
        self.port: int = self._sock.bind_to_random_port("tcp://127.0.0.1")
        self._message = "the Arkouda release is not available"
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def set_message(self, message: str) -> None:
        with self._lock:
            self._message = message

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name="gate-error-answer", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        import zmq

        while True:
            try:
                frames = self._sock.recv_multipart()
            except zmq.ZMQError:  # the context was terminated (close()): the socket is this thread's to close
                self._sock.close(0)
                return
            try:
                user = str(json.loads(frames[0].split(b"BINARY_PAYLOAD", 1)[0]).get("user") or "")
            except (ValueError, AttributeError, IndexError):
                user = ""
            with self._lock:
                message = self._message
            reply = {"msg": message, "msgType": "ERROR", "msgFormat": "STRING", "user": user, "payload": ""}
            self._sock.send(json.dumps(reply).encode())

    def close(self) -> None:
        # a ZeroMQ socket belongs to one thread: term() wakes the serving thread, which closes it
        if self._thread is None:
            self._sock.close(0)
        self._ctx.term()


class _Link:
    """One client connection, held or spliced to a server (or to the error socket)."""

    def __init__(self, gate: Gate, client: asyncio.Transport) -> None:
        self._gate = gate
        self.client = client
        self.backend: asyncio.Transport | None = None
        self.accepted_at = gate.clock()
        self._conn: int | None = None  # its id in Traffic while spliced to the server
        self._done = False
        self._eofs: set[str] = set()
        self._early: list[bytes] = []  # client bytes read before there was a backend, in order

    @property
    def read_buffer(self) -> memoryview:
        return self._gate.read_buffer

    # HeldClient
    def splice(self, host: str, port: int) -> None:
        self._gate.spawn(self._connect(host, port, failed=False))

    def fail(self, message: str) -> None:
        log.warning("client %s: %s", self._peer(), message)
        self._gate.errors.set_message(message)
        self._gate.spawn(self._connect("127.0.0.1", self._gate.errors.port, failed=True))

    async def _connect(self, host: str, port: int, *, failed: bool) -> None:
        if self._done:
            return
        loop = asyncio.get_running_loop()
        try:
            backend, _ = await loop.create_connection(lambda: _BackendSide(self), host, port)
        except OSError as exc:
            if failed:
                self.close()
                return
            log.info("server %s:%d refused the connection (%s); holding the client", host, port, exc)
            loop.call_later(RECONNECT_SECONDS, self._gate.arrived, self)
            return
        if self._done:
            backend.close()
            return
        backend.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        self.client.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        self.backend = backend
        if failed:
            loop.call_later(ERROR_LINGER_SECONDS, self.close)
        else:
            self._conn = self._gate.traffic.opened()
            log.debug("client %s spliced to %s:%d", self._peer(), host, port)
        if self._early:  # the client's first bytes (ZeroMQ's greeting) go first
            if self._conn is not None:
                self._gate.traffic.client_sent(self._conn)
            for chunk in self._early:
                backend.write(chunk)
            self._early.clear()
        self.client.resume_reading()

    def from_client(self, nbytes: int) -> None:
        if self.backend is None:
            # A held client's bytes can be read despite pause_reading() in connection_made (seen on the cluster
            # with ZeroMQ's 10-byte greeting through kubectl port-forward); dropped, the server would never see the
            # greeting and the client would hang until its handshake timeout (30 s). Keep them for the backend.
            self._early.append(bytes(self.read_buffer[:nbytes]))
            self.client.pause_reading()
            log.debug("client %s: %d bytes read before the splice; kept for the server", self._peer(), nbytes)
            return
        if self._conn is not None:
            self._gate.traffic.client_sent(self._conn)
        self._gate.forward(self.backend, nbytes)

    def from_backend(self, nbytes: int) -> None:
        if self._conn is not None:
            self._gate.traffic.server_sent(self._conn)
        self._gate.forward(self.client, nbytes)

    # A half-close is passed on (the other side may still be sending); the link ends when both sides have.
    def client_eof(self) -> None:
        self._eofs.add("client")
        if self.backend is None or not self.backend.can_write_eof() or len(self._eofs) == 2:
            self.close()
        else:
            self.backend.write_eof()

    def backend_eof(self) -> None:
        self._eofs.add("backend")
        if not self.client.can_write_eof() or len(self._eofs) == 2:
            self.close()
        else:
            self.client.write_eof()

    def close(self) -> None:
        if self._done:
            return
        self._done = True
        self.client.close()
        if self.backend is not None:
            self.backend.close()
        if self._conn is not None:
            self._gate.traffic.closed(self._conn)
            self._gate.changed()

    def _peer(self) -> str:
        peer = self.client.get_extra_info("peername")
        return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else "?"


class _ClientSide(asyncio.BufferedProtocol):
    def __init__(self, gate: Gate) -> None:
        self._gate = gate
        self._link: _Link | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not isinstance(transport, asyncio.Transport):  # create_server gives a Transport
            return
        transport.pause_reading()  # held: its bytes stay in the kernel until the server can take them
        self._link = _Link(self._gate, transport)
        self._gate.arrived(self._link)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._gate.read_buffer

    def buffer_updated(self, nbytes: int) -> None:
        if self._link is not None:
            self._link.from_client(nbytes)

    def eof_received(self) -> bool:
        if self._link is not None:
            self._link.client_eof()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        if self._link is not None:
            self._link.close()

    def pause_writing(self) -> None:
        if self._link is not None and self._link.backend is not None:
            self._link.backend.pause_reading()

    def resume_writing(self) -> None:
        if self._link is not None and self._link.backend is not None:
            self._link.backend.resume_reading()


class _BackendSide(asyncio.BufferedProtocol):
    def __init__(self, link: _Link) -> None:
        self._link = link

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._link.read_buffer

    def buffer_updated(self, nbytes: int) -> None:
        self._link.from_backend(nbytes)

    def eof_received(self) -> bool:
        self._link.backend_eof()
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self._link.close()

    def pause_writing(self) -> None:
        self._link.client.pause_reading()

    def resume_writing(self) -> None:
        self._link.client.resume_reading()


class Gate:
    """The listening socket, the splices and the controller's loop, on one asyncio event loop."""

    def __init__(self, *, controller: Controller, traffic: Traffic, clock: Callable[[], float]) -> None:
        self.controller = controller
        self.traffic = traffic
        self.clock = clock
        self.errors = ErrorAnswer()
        self._changed = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._fatal: BaseException | None = None
        self._stop = asyncio.Event()
        self.listening = threading.Event()  # set once `port` is bound (tests and benches start it in a thread)
        self.port = 0
        # what every connection of this gate reads into (one event loop: a read is forwarded before the next)
        self.read_buffer = memoryview(bytearray(READ_BUFFER_BYTES))

    def forward(self, to: asyncio.Transport, nbytes: int) -> None:
        """Write the first `nbytes` of the read buffer to `to`. A transport that cannot send them all keeps the
        rest: Python 3.11 copies it, 3.12 and later keep a view of this buffer, so the next reads go to a new one."""
        to.write(self.read_buffer[:nbytes])
        if to.get_write_buffer_size():
            self.read_buffer = memoryview(bytearray(READ_BUFFER_BYTES))

    def spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def changed(self) -> None:
        self._changed.set()

    def arrived(self, link: _Link) -> None:
        self.controller.client_arrived(link)
        self.changed()

    def on_pods(self, item: PodList | PodEvent) -> None:
        self.controller.on_pods(item)
        self.changed()

    def fatal(self, exc: BaseException) -> None:
        self._fatal = exc
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()

    async def serve(self, *, host: str, port: int, on_listening: Callable[[], None] | None = None) -> None:
        loop = asyncio.get_running_loop()
        self.errors.start()
        server = await loop.create_server(lambda: _ClientSide(self), host, port, reuse_address=True)
        self.port = server.sockets[0].getsockname()[1]
        self.listening.set()
        log.info("gate listening on %s:%d", host, self.port)
        if on_listening is not None:
            on_listening()
        control = loop.create_task(self._control())
        stop = loop.create_task(self._stop.wait())
        try:
            await asyncio.wait({control, stop}, return_when=asyncio.FIRST_COMPLETED)
            if control.done() and control.exception() is not None:
                raise control.exception()  # type: ignore[misc]
            if self._fatal is not None:
                raise self._fatal
        finally:
            control.cancel()
            stop.cancel()
            await asyncio.gather(control, stop, return_exceptions=True)
            server.close()
            self.errors.close()

    async def _control(self) -> None:
        while True:
            self._changed.clear()
            delay = self.controller.step()
            # asyncio.timeout, not wait_for: wait_for in 3.11 can swallow the cancellation at shutdown
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.05, delay)):
                    await self._changed.wait()


def _watch(api: KubeApi, settings: GateSettings, loop: asyncio.AbstractEventLoop, gate: Gate) -> None:
    """The release's pods into the controller; API errors are retried with a growing pause, RBAC is fatal."""
    pause = 1.0
    while True:
        try:
            for item in follow_pods(
                api, namespace=settings.namespace, selector=settings.release_selector, chunk_seconds=WATCH_CHUNK_SECONDS
            ):
                if isinstance(item, PodList | PodEvent):
                    loop.call_soon_threadsafe(gate.on_pods, item)
                pause = 1.0
        except BootstrapError as exc:
            if str(exc).startswith("missing RBAC"):
                loop.call_soon_threadsafe(gate.fatal, exc)
                return
            log.warning("pod watch: %s; again in %g s", exc, pause)
            time.sleep(pause)
            pause = min(30.0, pause * 2)


def run_gate(api: GateApi, settings: GateSettings, *, clock: Callable[[], float] = time.monotonic) -> int:
    own = api.get_pod(namespace=settings.namespace, name=settings.pod_name)
    events = EventRecorder(
        api, PodRef(namespace=settings.namespace, name=settings.pod_name, uid=own.uid if own else "")
    )
    traffic = Traffic(clock=clock)
    controller = Controller(settings=settings, scale=api, events=events, traffic=traffic, clock=clock)
    # Helm creates Deployments before StatefulSets: give them a moment on a fresh install
    for attempt in Retrying(
        stop=stop_after_delay(STATEFULSET_WAIT_SECONDS),
        wait=wait_exponential(max=10),
        retry=retry_if_exception_type(StatefulSetMissingError),
        reraise=True,
    ):
        with attempt:
            controller.start()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        gate = Gate(controller=controller, traffic=traffic, clock=clock)
        if threading.current_thread() is threading.main_thread():  # signal handlers: main thread only (tests)
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, gate.stop)
        threading.Thread(target=_watch, args=(api, settings, loop, gate), name="gate-pod-watch", daemon=True).start()

        def metrics() -> None:  # the readiness probe's port: open once clients can be taken
            if settings.metrics_port:
                serve_metrics(port=settings.metrics_port, controller=controller, traffic=traffic)

        await gate.serve(host=settings.listen_host, port=settings.listen_port, on_listening=metrics)

    asyncio.run(main())
    return 0
