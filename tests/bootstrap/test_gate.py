"""The gate's TCP splice on loopback: real pyzmq REQ clients, a pyzmq REP server standing in for arkouda_server
(a test double answering every request with its own bytes, optionally after a pause), the controller on
FakeKube. Proves bytes pass unchanged, a held client's own request reaches the woken server, the direction of
the bytes marks a request in flight, and a wake that misses its deadline answers the client with an error."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import zmq
from arkouda_bootstrap.config import GateSettings
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.gate.idle import Traffic
from arkouda_bootstrap.gate.main import Gate, _Link, run_gate
from arkouda_bootstrap.gate.sleepwake import Controller
from arkouda_bootstrap.kube.api import ApiUnavailableError, ForbiddenError, PodCondition, PodInfo, PodList, PodRef
from arkouda_bootstrap.kube.events import EventRecorder
from conftest import free_port
from fakes import FakeKube, make_pod

SERVER, LOCALE = "r-arkouda-server", "r-arkouda-locale"


class EchoServer:
    """Test double of arkouda_server's client port: REP that sends each request back, after `pause` s when the
    request starts with b"slow"."""

    def __init__(self, *, pause: float = 0.5) -> None:
        self.ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.sock = self.ctx.socket(zmq.REP)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.pause = pause
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                msg = self.sock.recv()
            except zmq.ZMQError:  # term() from close(): the socket is this thread's to close
                self.sock.close(0)
                return
            if msg.startswith(b"slow"):
                time.sleep(self.pause)
            self.sock.send(msg)

    def close(self) -> None:
        self.ctx.term()


def settings(*, wake_timeout: float = 30) -> GateSettings:
    return GateSettings(
        namespace="ns",
        pod_name="r-arkouda-gate-x",
        release_selector="app.kubernetes.io/instance=r",
        server_statefulset=SERVER,
        locale_statefulset=LOCALE,
        num_locales=2,
        server_port=0,  # set per test to the echo server's port
        listen_port=0,
        listen_host="127.0.0.1",
        idle_timeout=3600,
        wake_timeout=wake_timeout,
        wake_backoff=60,
    )


def server_pod(*, ready: bool = True, **kwargs: Any) -> PodInfo:
    labels = {"app.kubernetes.io/component": "server"}
    return make_pod(f"{SERVER}-0", ip="127.0.0.1", ready=ready, labels=labels, **kwargs)


def listing(*pods: PodInfo) -> PodList:
    return PodList(pods=tuple(pods), resource_version="1")


class Running:
    def __init__(self, gate: Gate, loop: asyncio.AbstractEventLoop, api: FakeKube, traffic: Traffic) -> None:
        self.gate, self.loop, self.api, self.traffic = gate, loop, api, traffic

    def pods(self, item: PodList) -> None:
        self.loop.call_soon_threadsafe(self.gate.on_pods, item)


@contextlib.contextmanager
def running(s: GateSettings, *, asleep: bool, pods: PodList) -> Iterator[Running]:
    api = FakeKube(replicas={SERVER: 0 if asleep else 1, LOCALE: 0 if asleep else 1})
    traffic = Traffic(clock=time.monotonic)
    ctl = Controller(
        settings=s,
        scale=api,
        events=EventRecorder(api, PodRef(namespace="ns", name=s.pod_name)),
        traffic=traffic,
        clock=time.monotonic,
    )
    ctl.start()
    ctl.on_pods(pods)
    loop = asyncio.new_event_loop()
    gate = Gate(controller=ctl, traffic=traffic, clock=time.monotonic)
    thread = threading.Thread(
        target=loop.run_until_complete, args=(gate.serve(host=s.listen_host, port=s.listen_port),), daemon=True
    )
    thread.start()
    assert gate.listening.wait(10), "the gate did not start listening"
    try:
        yield Running(gate, loop, api, traffic)
    finally:
        loop.call_soon_threadsafe(gate.stop)
        thread.join(10)
        loop.close()


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


@contextlib.contextmanager
def req(port: int, *, timeout: float = 10) -> Iterator[zmq.Socket[bytes]]:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sock = ctx.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, int(timeout * 1000))
    sock.connect(f"tcp://127.0.0.1:{port}")
    try:
        yield sock
    finally:
        sock.close(0)
        ctx.term()


def test_requests_and_large_replies_pass_unchanged_and_a_request_is_in_flight_until_its_reply(
    echo: EchoServer,
) -> None:
    s = settings()
    s = GateSettings(**{**s.__dict__, "server_port": echo.port})
    with running(s, asleep=False, pods=listing(server_pod())) as gate, req(gate.gate.port) as sock:
        sock.send(b"hello")
        assert sock.recv() == b"hello"
        big = os.urandom(8 << 20)
        sock.send(big)
        assert sock.recv() == big
        sock.send(b"slow request")
        time.sleep(0.2)
        assert gate.traffic.snapshot().in_flight == 1  # client bytes after the server's last ones
        assert sock.recv() == b"slow request"
        assert gate.traffic.snapshot().in_flight == 0
        assert gate.traffic.snapshot().open_connections == 1


def test_a_reply_larger_than_the_client_takes_at_once_arrives_unchanged_and_its_end_is_passed_on() -> None:
    """A plain TCP server sends 32 MiB of random bytes and half-closes; the client reads them slowly, so the
    gate's writes to it stay partial while it reads more from the server: every byte must arrive as sent (the
    unsent rest of a write is never overwritten by the next read) and the server's end must reach the client."""
    payload = os.urandom(32 << 20)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.sendall(payload)
            conn.shutdown(socket.SHUT_WR)
            conn.recv(1)  # until the gate closes its side

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    s = GateSettings(**{**settings().__dict__, "server_port": port})
    try:
        with running(s, asleep=False, pods=listing(server_pod())) as gate:
            with socket.create_connection(("127.0.0.1", gate.gate.port), timeout=10) as client:
                client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
                received = bytearray()
                while chunk := client.recv(256 << 10):
                    received += chunk
                    if len(received) < (4 << 20):
                        time.sleep(0.002)  # slow at first: the gate's writes to the client stay partial
            assert len(received) == len(payload)
            assert bytes(received) == payload
    finally:
        server.join(10)
        listener.close()


def test_a_client_of_a_sleeping_release_is_held_and_its_own_request_reaches_the_woken_server(
    echo: EchoServer,
) -> None:
    s = GateSettings(**{**settings().__dict__, "server_port": echo.port})
    with running(s, asleep=True, pods=listing()) as gate, req(gate.gate.port) as sock:
        sock.send(b"first request")  # queued by ZeroMQ, its bytes held by the gate
        deadline = time.monotonic() + 10
        while gate.api.replicas[SERVER] != 1:
            assert time.monotonic() < deadline, "the gate did not scale the server up"
            time.sleep(0.02)
        assert gate.api.replicas == {SERVER: 1, LOCALE: 1}
        sock.setsockopt(zmq.RCVTIMEO, 300)
        with pytest.raises(zmq.Again):
            sock.recv()  # no server yet: no reply, no error
        gate.pods(listing(server_pod()))
        sock.setsockopt(zmq.RCVTIMEO, 10_000)
        assert sock.recv() == b"first request"
        assert [e.reason for e in gate.api.created_events] == ["Asleep", "Waking", "Awake"]


def test_a_wake_past_its_deadline_answers_the_client_with_an_arkouda_error_naming_the_reason(
    echo: EchoServer,
) -> None:
    s = GateSettings(**{**settings(wake_timeout=3).__dict__, "server_port": echo.port})
    pending = server_pod(
        ready=False,
        phase="Pending",
        conditions=(
            PodCondition(
                type="PodScheduled", status="False", reason="Unschedulable", message="0/1 nodes: Insufficient cpu"
            ),
        ),
    )
    # the pending pod must be seen before the deadline (else the reason is "no pod yet"): 3 s leaves room on a
    # loaded machine for the 0.3 s below
    with running(s, asleep=True, pods=listing()) as gate, req(gate.gate.port) as sock:
        request = {"user": "alice", "token": "", "cmd": "getconfig", "format": "STRING", "args": "", "size": -1}
        sock.send(json.dumps(request).encode())
        time.sleep(0.3)
        gate.pods(listing(pending))
        reply = json.loads(sock.recv())
        assert reply["msgType"] == "ERROR"
        assert reply["user"] == "alice"
        assert "not Ready after 3 s" in reply["msg"]
        assert "0/1 nodes: Insufficient cpu" in reply["msg"]
        assert gate.api.replicas == {SERVER: 0, LOCALE: 0}
        reasons = [e.reason for e in gate.api.created_events]
        assert reasons[:3] == ["Asleep", "Waking", "WakeTimeout"]


def start_run_gate(api: FakeKube, s: GateSettings) -> tuple[threading.Thread, list[BaseException | int]]:
    """run_gate as the CLI calls it, in a thread; the list gets its return value or its exception."""
    outcome: list[BaseException | int] = []

    def target() -> None:
        try:
            outcome.append(run_gate(api, s))
        except BaseException as exc:  # the thread's result, checked by the caller
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, outcome


def test_run_gate_wires_the_pod_watch_the_splice_and_a_refused_watch_ends_it(echo: EchoServer) -> None:
    """run_gate as the CLI calls it, on FakeKube: the listed server pod is where clients go; an API that cannot
    answer for a while is retried (the gate goes on serving); a watch the API refuses (RBAC) ends the gate with
    that one line."""
    s = GateSettings(**{**settings().__dict__, "server_port": echo.port, "listen_port": free_port()})
    api = FakeKube(
        replicas={SERVER: 1, LOCALE: 1},
        pods={f"{SERVER}-0": server_pod(), s.pod_name: make_pod(s.pod_name)},
        block=True,
    )
    thread, outcome = start_run_gate(api, s)
    deadline = time.monotonic() + 10
    while not any(op == "watch_pods" for op, _ in api.calls):
        assert time.monotonic() < deadline, api.calls
        time.sleep(0.02)
    with req(s.listen_port) as sock:
        sock.send(b"through run_gate")
        assert sock.recv() == b"through run_gate"
    api.script(ApiUnavailableError("watch pods in namespace ns failed: HTTP 503 Service Unavailable"))
    while sum(op == "watch_pods" for op, _ in api.calls) < 2:  # watching again after the first pause (1 s)
        assert time.monotonic() < deadline + 10, api.calls
        time.sleep(0.02)
    assert not outcome and [op for op, _ in api.calls].count("list_pods") == 1  # resumed, not listed again
    with req(s.listen_port) as sock:
        sock.send(b"after the outage")
        assert sock.recv() == b"after the outage"
    api.script(ForbiddenError(verb="watch", resource="pods", namespace="ns"))
    thread.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], BootstrapError)
    assert str(outcome[0]) == "missing RBAC: watch pods in namespace ns"
    assert ("get_pod", s.pod_name) in api.calls  # for the uid of its Events


def test_the_metrics_port_is_the_readiness_probe_and_scraping_it_never_wakes_a_sleeping_release() -> None:
    """A kubelet probe or a scrape of /metrics is not a client: the sleeping release stays at 0 and the scrape
    shows it asleep; the first client connection on the client port is what wakes it."""
    import urllib.request

    s = GateSettings(**{**settings().__dict__, "listen_port": free_port(), "metrics_port": free_port()})
    api = FakeKube(replicas={SERVER: 0, LOCALE: 0}, pods={s.pod_name: make_pod(s.pod_name)}, block=True)

    def scrape() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{s.metrics_port}/metrics", timeout=5) as reply:
            text: str = reply.read().decode()
            return text

    thread, outcome = start_run_gate(api, s)
    deadline = time.monotonic() + 10
    while True:
        try:
            text = scrape()
            break
        except OSError:
            assert time.monotonic() < deadline, "no /metrics"
            time.sleep(0.05)
    for _ in range(5):
        text = scrape()
        time.sleep(0.05)
    assert 'arkouda_gate_phase{phase="asleep"} 1.0' in text, text
    assert "arkouda_gate_wakes_total 0.0" in text
    assert api.replicas == {SERVER: 0, LOCALE: 0}
    with req(s.listen_port, timeout=0.3) as sock:
        sock.send(b"wake up")
        while api.replicas[SERVER] != 1:
            assert time.monotonic() < deadline + 10, "a client did not wake the release"
            time.sleep(0.02)
    text = scrape()
    assert "arkouda_gate_wakes_total 1.0" in text
    assert 'arkouda_gate_phase{phase="waking"} 1.0' in text
    api.script(ForbiddenError(verb="watch", resource="pods", namespace="ns"))
    thread.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], BootstrapError)


def test_a_held_clients_bytes_wait_in_the_kernel_and_reach_the_server_in_order_and_its_end_is_passed_on() -> None:
    """Plain TCP both sides: a client of a sleeping release sends before there is a server (the gate holds it
    unread), then more after the wake, then half-closes. The server must get every byte in order and the client's
    end; the server's answer, sent after that end, must still reach the client (a half-close is passed on, not
    taken for the end of the connection)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    got = bytearray()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            while chunk := conn.recv(65536):
                got.extend(chunk)
            conn.sendall(b"received %d" % len(got))

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    s = GateSettings(**{**settings().__dict__, "server_port": port})
    early = os.urandom(3000)
    late = os.urandom(2 << 20)
    try:
        with (
            running(s, asleep=True, pods=listing()) as gate,
            socket.create_connection(("127.0.0.1", gate.gate.port), timeout=10) as client,
        ):
            client.sendall(early)
            deadline = time.monotonic() + 10
            while not gate.gate.controller.held:
                assert time.monotonic() < deadline, "the client was not held"
                time.sleep(0.02)
            assert isinstance(gate.gate.controller.held[0], _Link)
            assert got == b""
            gate.pods(listing(server_pod()))
            client.sendall(late)
            client.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := client.recv(100):
                answer += chunk
        server.join(10)
        assert bytes(got) == early + late
        assert answer == b"received %d" % (len(early) + len(late))
    finally:
        listener.close()
