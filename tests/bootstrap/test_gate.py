"""The gate on loopback: real pyzmq REQ clients, a pyzmq REP socket standing in for arkouda_server's request loop
(ArkoudaDouble, a test double that answers like Arkouda and can be wedged or restarted), the controller on
FakeKube. Proves checked requests and large frames pass unchanged, refused ones are answered by the gate and
never reach the server, requests are held while the server is not Ready and forwarded in order, a client's
session survives a server restart, and a server whose loop stops answering is deleted for a relaunch."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import zmq
from arkouda_bootstrap.config import GateSettings
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.gate.envelope import BINARY_MARKER, Refusal
from arkouda_bootstrap.gate.main import Gate, build_gate, run_gate
from arkouda_bootstrap.gate.metrics import serve_metrics
from arkouda_bootstrap.kube.api import ApiUnavailableError, ForbiddenError, OwnerRef, PodInfo, PodList, PodRef
from arkouda_bootstrap.kube.events import EventRecorder, Reason
from conftest import free_port
from fakes import FakeKube, make_pod

SERVER, LOCALE = "r-arkouda-server", "r-arkouda-locale"
TOKEN = b"tok-123"


def request(cmd: str, *, token: str = "", user: str = "u", **params: str) -> bytes:
    items = [json.dumps({"key": k, "dtype": "str", "val": v}) for k, v in params.items()]
    body = {
        "user": user,
        "token": token,
        "cmd": cmd,
        "format": "STRING",
        "args": json.dumps(items) if items else "",
        "size": len(items) or -1,
    }
    return json.dumps(body).encode()


def binary_request(cmd: str, payload: bytes | memoryview) -> list[Any]:
    body = {
        "user": "u",
        "token": "",
        "cmd": cmd,
        "format": "BINARY",
        "args": "",
        "size": -1,
    }
    return [json.dumps(body).encode() + BINARY_MARKER, payload]


class ArkoudaDouble:
    """Test double of arkouda_server's request loop: one REP socket, one request at a time. `echo` answers
    with the request's size and cmd; `sleep` takes `seconds`; `big` answers with `n` bytes; `wedge` answers, then
    the loop stops reading (as a dead Arkouda loop with a live process). Records every cmd it got."""

    def __init__(self, port: int = 0) -> None:
        self.ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.sock = self.ctx.socket(zmq.REP)
        self.sock.setsockopt(zmq.LINGER, 0)
        if port:
            self.sock.bind(f"tcp://127.0.0.1:{port}")
            self.port = port
        else:
            self.port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.cmds: list[str] = []
        self.sizes: list[int] = []
        self.wedged = threading.Event()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            while self._answer(self.sock.recv_multipart(copy=False)):
                pass
        except zmq.ZMQError:  # term() from close(): the socket is this thread's to close
            pass
        self.sock.close(0)

    def _answer(self, frames: list[zmq.Frame]) -> bool:
        body = json.loads(frames[0].bytes.removesuffix(BINARY_MARKER))
        cmd = body["cmd"]
        self.cmds.append(cmd)
        self.sizes.append(sum(len(f.buffer) for f in frames))
        params = {json.loads(i)["key"]: json.loads(i)["val"] for i in json.loads(body["args"] or "[]")}
        if cmd == "sleep" and self.stopping.wait(float(params["seconds"])):
            return False
        if cmd == "big":
            self.sock.send(b"x" * int(params["n"]), copy=False)
            return True
        msg = f"{cmd} {self.sizes[-1]}"
        self.sock.send(json.dumps({"msg": msg, "msgType": "NORMAL", "user": body["user"]}).encode())
        if cmd == "wedge":
            self.wedged.set()
            self.stopping.wait()  # never reads again, until close()
            return False
        return True

    def close(self) -> None:
        self.stopping.set()
        self.ctx.term()
        self.thread.join(5)


def settings(**changes: Any) -> GateSettings:
    base = GateSettings(
        namespace="ns",
        pod_name="r-arkouda-gate-x",
        release_selector="app.kubernetes.io/instance=r",
        server_statefulset=SERVER,
        locale_statefulset=LOCALE,
        num_locales=2,
        server_port=0,
        listen_port=0,
        listen_host="127.0.0.1",
        idle_timeout=3600,
        wake_timeout=30,
        wake_backoff=60,
        health_interval=0,
    )
    return replace(base, **changes)


def server_pod(*, ready: bool = True, uid: str = "", **kwargs: Any) -> PodInfo:
    labels = {"app.kubernetes.io/component": "server"}
    return make_pod(f"{SERVER}-0", ip="127.0.0.1", ready=ready, labels=labels, uid=uid, **kwargs)


def listing(*pods: PodInfo) -> PodList:
    return PodList(pods=tuple(pods), resource_version="1")


class Running:
    def __init__(self, gate: Gate, loop: asyncio.AbstractEventLoop, api: FakeKube) -> None:
        self.gate, self.loop, self.api = gate, loop, api

    def pods(self, item: PodList) -> None:
        self.loop.call_soon_threadsafe(self.gate.on_pods, item)

    def reasons(self) -> list[str]:
        return [e.reason for e in self.api.created_events]


@contextlib.contextmanager
def running(s: GateSettings, *, pods: PodList, asleep: bool = False) -> Iterator[Running]:
    api = FakeKube(replicas={SERVER: 0 if asleep else 1, LOCALE: 0 if asleep else 1})
    events = EventRecorder(api, PodRef(namespace="ns", name=s.pod_name))
    gate = build_gate(settings=s, scale=api, api=api, events=events)
    gate.controller.start()
    gate.controller.on_pods(pods)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(
        target=loop.run_until_complete, args=(gate.serve(host=s.listen_host, port=s.listen_port),), daemon=True
    )
    thread.start()
    assert gate.listening.wait(10), "the gate did not start listening"
    try:
        yield Running(gate, loop, api)
    finally:
        loop.call_soon_threadsafe(gate.stop)
        thread.join(10)
        loop.close()


@pytest.fixture
def arkouda() -> Iterator[ArkoudaDouble]:
    server = ArkoudaDouble()
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


def ask(sock: zmq.Socket[bytes], raw: bytes | list[Any]) -> dict[str, Any]:
    if isinstance(raw, list):
        sock.send_multipart(raw, copy=False)
    else:
        sock.send(raw)
    reply: dict[str, Any] = json.loads(sock.recv())
    return reply


def test_a_checked_request_and_a_binary_payload_reach_the_server_and_the_replies_come_back(
    arkouda: ArkoudaDouble,
) -> None:
    s = settings(server_port=arkouda.port)
    payload = bytes(range(256)) * 4096  # 1 MiB, not JSON: never parsed
    with running(s, pods=listing(server_pod())) as gate, req(gate.gate.port) as sock:
        assert ask(sock, request("connect"))["msg"].startswith("connect ")
        reply = ask(sock, binary_request("array", payload))
        assert reply["msgType"] == "NORMAL"
        assert arkouda.sizes[-1] == len(payload) + len(binary_request("array", b"")[0])
        sock.send(request("big", n=str(3 << 20)))
        assert sock.recv() == b"x" * (3 << 20)
        assert gate.gate.traffic.in_flight == 0
        assert gate.gate.stats.forwarded == 3
    assert arkouda.cmds == ["connect", "array", "big"]


MALFORMED = [
    pytest.param(b"", "not Arkouda's JSON envelope", id="empty"),
    pytest.param(b"\xff\xfe not utf-8", "not Arkouda's JSON envelope", id="not-utf8"),
    pytest.param(b"GET / HTTP/1.1\r\n\r\n", "not Arkouda's JSON envelope", id="http"),
    pytest.param(b'["a list"]', "not a JSON object", id="json-list"),
    pytest.param(
        b'{"cmd": "connect"}',
        "lacks the field(s) user, token, format, args, size",
        id="missing-fields",
    ),
]


@pytest.mark.parametrize(("raw", "reason"), MALFORMED)
def test_a_malformed_request_is_answered_by_the_gate_and_the_next_client_is_served_at_once(
    arkouda: ArkoudaDouble, raw: bytes, reason: str
) -> None:
    s = settings(server_port=arkouda.port)
    with running(s, pods=listing(server_pod())) as gate:
        with req(gate.gate.port) as bad:
            reply = ask(bad, raw)
        assert reply["msgType"] == "ERROR"
        assert reason in reply["msg"]
        with req(gate.gate.port) as good:
            began = time.monotonic()
            assert ask(good, request("getconfig"))["msgType"] == "NORMAL"
            assert time.monotonic() - began < 2
        assert gate.gate.stats.refused[Refusal.MALFORMED] == 1
    assert arkouda.cmds == ["getconfig"]  # the malformed one never reached the server


def test_an_oversized_envelope_is_refused_unparsed_and_an_oversized_frame_ends_only_its_connection(
    arkouda: ArkoudaDouble,
) -> None:
    s = settings(server_port=arkouda.port, max_envelope_bytes=1024, max_message_bytes=1 << 20)
    with running(s, pods=listing(server_pod())) as gate:
        with req(gate.gate.port) as sock:
            reply = ask(sock, request("x", pad="y" * 2000))
            assert reply["msgType"] == "ERROR"
            assert "above the gate's limit of 1024" in reply["msg"]
        with req(gate.gate.port, timeout=1) as sock:
            sock.send_multipart(binary_request("array", b"z" * (2 << 20)))
            with pytest.raises(zmq.Again):
                sock.recv()
        with req(gate.gate.port) as sock:
            assert ask(sock, request("getconfig"))["msgType"] == "NORMAL"
        assert gate.gate.stats.refused[Refusal.TOO_LARGE] == 1
    assert arkouda.cmds == ["getconfig"]


def test_tokens_are_checked_before_the_server_and_only_the_current_one_passes(
    arkouda: ArkoudaDouble, tmp_path: Path
) -> None:
    (tmp_path / "token").write_bytes(TOKEN)
    s = settings(server_port=arkouda.port, token_file=tmp_path / "token")
    with running(s, pods=listing(server_pod())) as gate, req(gate.gate.port) as sock:
        assert "carries no token" in ask(sock, request("connect"))["msg"]
        stale = ask(sock, request("connect", token="tok-old", user="nb"))
        assert stale["msgType"] == "ERROR"
        assert stale["user"] == "nb"
        assert "not the release's current token" in stale["msg"]
        assert "not the release's current token" in ask(sock, request("connect", token=TOKEN.decode() + "\n"))["msg"]
        assert ask(sock, request("connect", token=TOKEN.decode()))["msgType"] == "NORMAL"
        assert gate.gate.stats.refused[Refusal.TOKEN] == 3
    assert arkouda.cmds == ["connect"]


def test_shutdown_is_refused_unless_allowed(arkouda: ArkoudaDouble) -> None:
    with (
        running(settings(server_port=arkouda.port), pods=listing(server_pod())) as gate,
        req(gate.gate.port) as sock,
    ):
        reply = ask(sock, request("shutdown"))
        assert reply["msgType"] == "ERROR"
        assert "shutdown is refused by the gate" in reply["msg"]
        assert "helm uninstall" in reply["msg"]
    assert arkouda.cmds == []
    s = settings(server_port=arkouda.port, allow_shutdown=True)
    with running(s, pods=listing(server_pod())) as gate, req(gate.gate.port) as sock:
        assert ask(sock, request("shutdown"))["msgType"] == "NORMAL"
    assert arkouda.cmds == ["shutdown"]


def test_requests_are_held_until_the_server_is_ready_then_forwarded_in_order(
    arkouda: ArkoudaDouble,
) -> None:
    s = settings(server_port=arkouda.port)
    with (
        running(s, pods=listing(server_pod(ready=False))) as gate,
        contextlib.ExitStack() as stack,
    ):
        socks = [stack.enter_context(req(gate.gate.port)) for _ in range(3)]
        for i, sock in enumerate(socks):
            sock.send(request(f"c{i}"))
            deadline = time.monotonic() + 5
            while len(gate.gate.controller.held) < i + 1:
                assert time.monotonic() < deadline, "the request was not held"
                time.sleep(0.01)
        assert arkouda.cmds == []
        assert gate.gate.traffic.in_flight == 3
        gate.pods(listing(server_pod(ready=True)))
        assert [json.loads(sock.recv())["msg"].split()[0] for sock in socks] == [
            "c0",
            "c1",
            "c2",
        ]
    assert arkouda.cmds == ["c0", "c1", "c2"]


def test_a_client_session_survives_a_server_restart_and_an_in_flight_request_gets_an_error() -> None:
    port = free_port()
    first = ArkoudaDouble(port)
    s = settings(server_port=port)
    with (
        running(s, pods=listing(server_pod(uid="a"))) as gate,
        req(gate.gate.port) as sock,
    ):
        assert ask(sock, request("connect"))["msgType"] == "NORMAL"
        sock.send(request("sleep", seconds="5"))
        time.sleep(0.3)
        first.close()  # the server process ends with the request in flight
        reply = json.loads(sock.recv())
        assert reply["msgType"] == "ERROR"
        assert "ended while this request was in flight" in reply["msg"]
        second = ArkoudaDouble(port)  # relaunched in place: the same address
        try:
            gate.pods(listing(server_pod(uid="b")))
            assert ask(sock, request("getconfig"))["msgType"] == "NORMAL"  # the same REQ socket
            assert second.cmds == ["getconfig"]
        finally:
            second.close()
        assert gate.gate.stats.refused[Refusal.SERVER_LOST] == 1


def test_a_wedged_request_loop_is_reported_the_server_pod_deleted_and_the_gate_unready_until_it_answers() -> None:
    port, metrics = free_port(), free_port()
    first = ArkoudaDouble(port)
    s = settings(server_port=port, health_interval=0.2, health_timeout=0.5)
    with (
        running(s, pods=listing(server_pod(uid="a"))) as gate,
        req(gate.gate.port) as sock,
    ):
        serve_metrics(port=metrics, gate=gate.gate, host="127.0.0.1")
        assert ask(sock, request("wedge"))["msgType"] == "NORMAL"
        assert first.wedged.wait(5)
        deadline = time.monotonic() + 10
        while ("delete_pod", f"{SERVER}-0") not in gate.api.calls:
            assert time.monotonic() < deadline, gate.api.calls
            time.sleep(0.02)
        assert "ServerUnresponsive" in gate.reasons()
        message = next(e.message for e in gate.api.created_events if e.reason == "ServerUnresponsive")
        assert "did not answer `ruok` for 0.5 s" in message
        assert f"deleting pod {SERVER}-0" in message
        with pytest.raises(urllib.error.HTTPError) as unready:
            urllib.request.urlopen(f"http://127.0.0.1:{metrics}/readyz", timeout=5)
        assert unready.value.code == 503
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=5) as scrape:
            text = scrape.read().decode()
        assert "arkouda_gate_server_answering 0.0" in text
        assert "arkouda_gate_server_unresponsive_total 1.0" in text
        # a request now waits for the next server pod, though the watch still shows the old one Ready
        sock.send(request("getconfig"))
        time.sleep(0.3)
        assert len(gate.gate.controller.held) == 1
        first.close()
        second = ArkoudaDouble(port)  # the StatefulSet's new pod
        try:
            gate.pods(listing(server_pod(uid="b")))
            assert json.loads(sock.recv())["msgType"] == "NORMAL"  # the same session, answered by the new pod
            while "ServerAnswering" not in gate.reasons():
                assert time.monotonic() < deadline, gate.reasons()
                time.sleep(0.02)
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/readyz", timeout=5) as ready:
                assert ready.status == 200
        finally:
            second.close()


def test_a_long_request_is_never_taken_for_a_dead_loop(arkouda: ArkoudaDouble) -> None:
    """A request five times the health timeout: no probe goes out while it runs, so none can time out."""
    s = settings(server_port=arkouda.port, health_interval=0.1, health_timeout=0.3)
    with running(s, pods=listing(server_pod())) as gate, req(gate.gate.port) as sock:
        deadline = time.monotonic() + 5
        while "ruok" not in arkouda.cmds:  # a new server is checked at once
            assert time.monotonic() < deadline, arkouda.cmds
            time.sleep(0.01)
        probes = arkouda.cmds.count("ruok")
        assert ask(sock, request("sleep", seconds="1.5"))["msg"].startswith("sleep")
        assert arkouda.cmds.count("ruok") == probes  # none queued behind the long request
        assert "ServerUnresponsive" not in gate.reasons()
        assert all(op != "delete_pod" for op, _ in gate.api.calls)
        assert gate.gate.ready
        time.sleep(0.5)
        assert arkouda.cmds.count("ruok") > probes  # and checked again once it was answered


def test_a_silent_connected_client_lets_the_release_sleep_and_its_next_request_wakes_it(
    arkouda: ArkoudaDouble,
) -> None:
    s = settings(server_port=arkouda.port, sleep_when_idle=True, idle_timeout=0.5)
    with running(s, pods=listing(server_pod())) as gate, req(gate.gate.port) as sock:
        assert ask(sock, request("connect"))["msgType"] == "NORMAL"
        deadline = time.monotonic() + 10
        while gate.api.replicas[SERVER] != 0:
            assert time.monotonic() < deadline, "a silent session kept the release awake"
            time.sleep(0.02)
        gate.pods(listing())
        time.sleep(1.0)  # asleep, the session open: nothing wakes it
        assert "Waking" not in gate.reasons()
        sock.send(request("getconfig"))
        while gate.api.replicas[SERVER] != 1:
            assert time.monotonic() < deadline, "the request did not wake the release"
            time.sleep(0.02)
        gate.pods(listing(server_pod(uid="woken")))
        assert json.loads(sock.recv())["msgType"] == "NORMAL"
        assert gate.reasons().count("Waking") == 1
        assert "client request" in next(e.message for e in gate.api.created_events if e.reason == "Waking")


def test_a_wake_past_its_deadline_answers_each_held_request_with_the_reason() -> None:
    s = settings(sleep_when_idle=True, wake_timeout=1)
    pending = make_pod(
        f"{SERVER}-0",
        ip=None,
        ready=False,
        phase="Pending",
        labels={"app.kubernetes.io/component": "server"},
        conditions=(),
    )
    with running(s, pods=listing(), asleep=True) as gate:
        with req(gate.gate.port) as a, req(gate.gate.port) as b:
            a.send(request("connect", user="a"))
            b.send(request("connect", user="b"))
            gate.pods(listing(pending))
            replies = [json.loads(a.recv()), json.loads(b.recv())]
        assert [r["user"] for r in replies] == ["a", "b"]
        assert all("not Ready after 1 s" in r["msg"] for r in replies)
        assert gate.api.replicas == {SERVER: 0, LOCALE: 0}
        assert gate.reasons().count("Waking") == 1
        assert "WakeTimeout" in gate.reasons()


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


def test_run_gate_wires_the_pod_watch_the_token_and_metrics_and_a_refused_watch_ends_it(
    arkouda: ArkoudaDouble, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_bytes(TOKEN)
    s = settings(
        server_port=arkouda.port,
        listen_port=free_port(),
        metrics_port=free_port(),
        token_file=token,
    )
    api = FakeKube(
        replicas={SERVER: 1, LOCALE: 1},
        pods={f"{SERVER}-0": server_pod(), s.pod_name: make_pod(s.pod_name)},
        block=True,
    )
    # an outage at start is waited out (one pause of 1 s), not a crash
    api.fail_next["get_pod"] = [ApiUnavailableError("cannot reach the Kubernetes API to get pods: refused")]
    thread, outcome = start_run_gate(api, s)
    deadline = time.monotonic() + 10
    while not any(op == "watch_pods" for op, _ in api.calls):
        assert time.monotonic() < deadline, api.calls
        time.sleep(0.02)
    with req(s.listen_port) as sock:
        assert ask(sock, request("connect", token="wrong"))["msgType"] == "ERROR"
        assert ask(sock, request("connect", token=TOKEN.decode()))["msgType"] == "NORMAL"
    with urllib.request.urlopen(f"http://127.0.0.1:{s.metrics_port}/metrics", timeout=5) as scrape:
        text = scrape.read().decode()
    assert 'arkouda_gate_refused_requests_total{reason="token"} 1.0' in text
    assert "arkouda_gate_forwarded_requests_total 1.0" in text
    # an API that cannot answer for a while is retried (the gate goes on serving); a refused watch (RBAC) ends it
    api.script(ApiUnavailableError("watch pods in namespace ns failed: HTTP 503 Service Unavailable"))
    while sum(op == "watch_pods" for op, _ in api.calls) < 2:  # watching again after the first pause (1 s)
        assert time.monotonic() < deadline + 10, api.calls
        time.sleep(0.02)
    assert not outcome and [op for op, _ in api.calls].count("list_pods") == 1  # resumed, not listed again
    api.script(api.event("MODIFIED", server_pod()))  # the API answers again: the outage's Event, with its length
    while not any(e.reason == "ApiOutage" for e in api.created_events):
        assert time.monotonic() < deadline + 20, api.created_events
        time.sleep(0.02)
    [outage] = [e.message for e in api.created_events if e.reason == "ApiOutage"]
    assert outage.startswith("the Kubernetes API was unreachable for ")
    assert "(watch pods in namespace ns failed: HTTP 503 Service Unavailable); the gate keeps serving" in outage
    with req(s.listen_port) as sock:
        assert ask(sock, request("connect", token=TOKEN.decode()))["msgType"] == "NORMAL"
    api.script(ForbiddenError(verb="watch", resource="pods", namespace="ns"))
    thread.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], BootstrapError)
    assert str(outcome[0]) == "missing RBAC: watch pods in namespace ns"
    assert api.calls.count(("get_pod", s.pod_name)) == 2  # for the uid of its Events, once refused
    assert all(op != "get_replicas" for op, _ in api.calls)  # idle sleep off: the counts are the chart's


def test_a_pod_that_only_wears_the_servers_labels_is_named_and_never_gets_a_request(arkouda: ArkoudaDouble) -> None:
    """A pod with the server's labels whose controller is not the server StatefulSet (a `kubectl debug --copy-to
    --keep-labels` copy, say) is named once in an ImpostorPod Event and ignored: a request waits for the real server
    pod instead of going to the impostor, and is answered once that pod is Ready."""
    s = settings(server_port=arkouda.port, listen_port=free_port())
    impostor = server_pod(controller=OwnerRef(kind="ReplicaSet", name="debug-copy", uid="uid-rs"))
    api = FakeKube(
        replicas={SERVER: 1, LOCALE: 1},
        pods={impostor.name: impostor, s.pod_name: make_pod(s.pod_name)},
        block=True,
    )
    thread, outcome = start_run_gate(api, s)
    deadline = time.monotonic() + 10
    while not any(e.reason == Reason.IMPOSTOR_POD for e in api.created_events):
        assert time.monotonic() < deadline and not outcome, (api.calls, outcome)
        time.sleep(0.02)
    [named] = [e for e in api.created_events if e.reason == Reason.IMPOSTOR_POD]
    assert f"ignoring pod {impostor.name}" in named.message and "ReplicaSet debug-copy" in named.message
    assert ("get_statefulset_uid", SERVER) in api.calls and ("get_statefulset_uid", LOCALE) in api.calls
    with req(s.listen_port, timeout=1.0) as sock:
        sock.send(request("getconfig"))
        with pytest.raises(zmq.Again):  # held for the real server pod, not sent to the impostor
            sock.recv()
    assert "getconfig" not in arkouda.cmds
    with req(s.listen_port) as sock:
        api.script(api.event("ADDED", server_pod(uid="uid-real-server")))
        assert ask(sock, request("getconfig"))["msgType"] == "NORMAL"
    api.script(ForbiddenError(verb="watch", resource="pods", namespace="ns"))
    thread.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], BootstrapError)
