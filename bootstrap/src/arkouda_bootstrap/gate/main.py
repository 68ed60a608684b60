"""`arkouda-bootstrap gate`: the always-on door of a release that sleeps when idle.

It listens on the client port (the client Service selects it) and splices every client TCP connection to the
server pod while the release is awake: bytes move socket → pipe → socket with splice(2) as they come, never
parsed or copied through this process, and their direction tells the idle decision (idle.py) whether a request
is in flight. A connection that arrives while the release sleeps or starts is accepted and held unread (its
bytes wait in the kernel); the controller (sleepwake.py) scales the release up and the connection is spliced
once the server pod is Ready, so the client's own bytes reach the server first. A wake that misses its
deadline ends the held connections at a loopback ZeroMQ REP socket (pyzmq) that answers their request with an
Arkouda ERROR reply naming the reason, so the client raises instead of waiting for ever.

The release's pods reach the controller through a list-then-watch (podwatch.follow_pods) in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from arkouda_bootstrap.config import GateSettings
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.gate.idle import Traffic
from arkouda_bootstrap.gate.metrics import serve_metrics
from arkouda_bootstrap.gate.sleepwake import Controller, StatefulSetMissingError
from arkouda_bootstrap.kube.api import KubeApi, PodEvent, PodList, PodRef, ScaleApi
from arkouda_bootstrap.kube.events import EventRecorder
from arkouda_bootstrap.kube.podwatch import follow_pods

log = logging.getLogger(__name__)

# Seconds a failed client stays connected to the error socket (its request answered) before it is closed, so
# that its next request opens a new connection, which starts a new wake.
ERROR_LINGER_SECONDS = 5.0
# A Ready server that refuses the connection (just restarted) is tried again this much later.
RECONNECT_SECONDS = 1.0
# Bytes are moved with splice(2) through a pipe of this size per direction: no copy through user space and one
# system call pair per pipe full (the cost of a large transfer: bench/README.md, "idle gate").
PIPE_BYTES = 1 << 20
SPLICE_FLAGS = os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK
# An accept that fails for want of file descriptors is tried again this much later, not in a tight loop.
ACCEPT_PAUSE_SECONDS = 1.0
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


class _Flow:
    """One direction of a spliced connection: `src` → a pipe → `dst` with splice(2), so the bytes move between the
    two sockets inside the kernel (socket buffers to pipe pages and back) and never through this process's memory.
    Readiness comes from the event loop (add_reader/add_writer); every splice is non-blocking. While `dst` cannot
    take what the pipe holds, `src` is not read (flow control: at most one pipe of bytes in the gate)."""

    def __init__(
        self,
        *,
        link: _Link,
        src: socket.socket,
        dst: socket.socket,
        moved: Callable[[], None],
    ) -> None:
        self._link = link
        self._loop = asyncio.get_running_loop()
        self._src, self._dst = src.fileno(), dst.fileno()
        self._dst_sock = dst
        self._moved = moved
        self._pipe_r, self._pipe_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        with contextlib.suppress(OSError):  # above /proc/sys/fs/pipe-max-size: the default size serves too
            fcntl.fcntl(self._pipe_w, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        self._capacity = fcntl.fcntl(self._pipe_w, fcntl.F_GETPIPE_SZ)
        self._pending = 0  # bytes in the pipe, not yet in dst
        self._eof = False
        self.done = False
        self._reading = self._writing = False

    def start(self) -> None:
        self._read(on=True)

    def _read(self, *, on: bool) -> None:
        if on and not self._reading:
            self._loop.add_reader(self._src, self._readable)
        elif not on and self._reading:
            self._loop.remove_reader(self._src)
        self._reading = on

    def _write(self, *, on: bool) -> None:
        if on and not self._writing:
            self._loop.add_writer(self._dst, self._writable)
        elif not on and self._writing:
            self._loop.remove_writer(self._dst)
        self._writing = on

    def _readable(self) -> None:
        try:
            n = os.splice(self._src, self._pipe_w, self._capacity - self._pending, flags=SPLICE_FLAGS)
        except BlockingIOError:
            return
        except OSError as exc:
            self._link.close(f"read: {exc}")
            return
        if n == 0:
            self._eof = True
            self._read(on=False)
        else:
            self._pending += n
            self._moved()
        self._drain()

    def _writable(self) -> None:
        self._drain()

    def _drain(self) -> None:
        while self._pending:
            try:
                self._pending -= os.splice(self._pipe_r, self._dst, self._pending, flags=SPLICE_FLAGS)
            except BlockingIOError:
                break
            except OSError as exc:
                self._link.close(f"write: {exc}")
                return
        if self._pending:  # dst is full: wait until it can take more, read nothing meanwhile
            self._read(on=False)
            self._write(on=True)
            return
        self._write(on=False)
        if not self._eof:
            self._read(on=True)
        elif not self.done:  # the end is passed on: the other side may still be sending
            self.done = True
            with contextlib.suppress(OSError):
                self._dst_sock.shutdown(socket.SHUT_WR)
            self._link.flow_done()

    def stop(self) -> None:
        self._read(on=False)
        self._write(on=False)
        os.close(self._pipe_r)
        os.close(self._pipe_w)


class _Link:
    """One client connection: held unread, then spliced to a server (or to the error socket)."""

    def __init__(self, gate: Gate, client: socket.socket) -> None:
        self._gate = gate
        self.client = client
        self.backend: socket.socket | None = None
        self.accepted_at = gate.clock()
        self._conn: int | None = None  # its id in Traffic while spliced to the server
        self._done = False
        self._flows: list[_Flow] = []
        self._peer = _peer(client)

    # HeldClient
    def splice(self, host: str, port: int) -> None:
        self._gate.spawn(self._connect(host, port, failed=False))

    def fail(self, message: str) -> None:
        log.warning("client %s: %s", self._peer, message)
        self._gate.errors.set_message(message)
        self._gate.spawn(self._connect("127.0.0.1", self._gate.errors.port, failed=True))

    async def _connect(self, host: str, port: int, *, failed: bool) -> None:
        if self._done:
            return
        loop = asyncio.get_running_loop()
        backend: socket.socket | None = None
        try:
            family, kind, proto, _, address = (await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM))[0]
            backend = socket.socket(family, kind, proto)
            backend.setblocking(False)
            await loop.sock_connect(backend, address)
        except OSError as exc:
            if backend is not None:
                backend.close()
            if failed:
                self.close(f"error socket: {exc}")
                return
            log.info("server %s:%d refused the connection (%s); holding the client", host, port, exc)
            loop.call_later(RECONNECT_SECONDS, self._gate.arrived, self)
            return
        if self._done:
            backend.close()
            return
        _nodelay(backend)
        self.backend = backend
        if failed:
            loop.call_later(ERROR_LINGER_SECONDS, self.close)
        else:
            self._conn = self._gate.traffic.opened()
            log.debug("client %s spliced to %s:%d", self._peer, host, port)
        # the client's bytes held so far (ZeroMQ's greeting, its first request) are still in the kernel: the
        # first splice of the client's flow moves them to the server first
        self._flows = [
            _Flow(link=self, src=self.client, dst=backend, moved=self._client_sent),
            _Flow(link=self, src=backend, dst=self.client, moved=self._server_sent),
        ]
        for flow in self._flows:
            flow.start()

    def _client_sent(self) -> None:
        if self._conn is not None:
            self._gate.traffic.client_sent(self._conn)

    def _server_sent(self) -> None:
        if self._conn is not None:
            self._gate.traffic.server_sent(self._conn)

    def flow_done(self) -> None:
        """Both sides have ended their bytes: the link ends."""
        if all(flow.done for flow in self._flows):
            self.close()

    def close(self, why: str = "") -> None:
        if self._done:
            return
        self._done = True
        if why:
            log.debug("client %s: closed (%s)", self._peer, why)
        for flow in self._flows:
            flow.stop()
        self.client.close()
        if self.backend is not None:
            self.backend.close()
        if self._conn is not None:
            self._gate.traffic.closed(self._conn)
            self._gate.changed()


def _peer(sock: socket.socket) -> str:
    try:
        peer = sock.getpeername()
    except OSError:
        return "?"
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else "?"


def _nodelay(sock: socket.socket) -> None:
    """Requests and replies are passed on as they come (ZeroMQ sets the same on its own sockets)."""
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


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
        family, _, _, _, address = (
            await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        )[0]
        listener = socket.create_server(address, family=family, backlog=128)
        listener.setblocking(False)
        loop.add_reader(listener.fileno(), self._accept, listener)
        self.port = listener.getsockname()[1]
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
            loop.remove_reader(listener.fileno())
            listener.close()
            self.errors.close()

    def _accept(self, listener: socket.socket) -> None:
        """Every pending connection is taken and held unread (its bytes stay in the kernel until the splice)."""
        while True:
            try:
                client, _ = listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:  # e.g. out of file descriptors: the listener stays readable, so pause it
                log.warning("accepting a client: %s; again in %g s", exc, ACCEPT_PAUSE_SECONDS)
                loop = asyncio.get_running_loop()
                loop.remove_reader(listener.fileno())
                loop.call_later(ACCEPT_PAUSE_SECONDS, loop.add_reader, listener.fileno(), self._accept, listener)
                return
            client.setblocking(False)
            _nodelay(client)
            self.arrived(_Link(self, client))

    async def _control(self) -> None:
        while True:
            self._changed.clear()
            delay = self.controller.step()
            # asyncio.timeout, not wait_for: wait_for in 3.11 can swallow the cancellation at shutdown
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.05, delay)):
                    await self._changed.wait()


def _watch(api: KubeApi, settings: GateSettings, loop: asyncio.AbstractEventLoop, gate: Gate) -> None:
    """The release's pods into the controller. An unreachable API is retried for ever (kube.retry); an error no
    retry can fix (ForbiddenError: the Role is wrong) ends the gate with its one line."""
    try:
        for item in follow_pods(
            api, namespace=settings.namespace, selector=settings.release_selector, chunk_seconds=WATCH_CHUNK_SECONDS
        ):
            if isinstance(item, PodList | PodEvent):
                loop.call_soon_threadsafe(gate.on_pods, item)
    except BootstrapError as exc:
        loop.call_soon_threadsafe(gate.fatal, exc)


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
