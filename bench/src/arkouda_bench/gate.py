"""The gate's cost (`arkouda-bootstrap gate`, the front door of every arkouda-mode release): what passing
through it adds to a request, on loopback, in the same run as the direct connection.

A pyzmq REP server stands in for arkouda_server's client port (a test double: it answers each request at
once; `big` gets GATE_TRANSFER_BYTES back, a BINARY request of GATE_TRANSFER_BYTES is answered with a short
reply), a pyzmq REQ client sends the pinned client's envelopes (the gate checks them). The gate is the
product's own code (arkouda_bootstrap.gate.main.Gate) in a process of its own, its controller told by a test
double of the pod watch that the server pod is Ready at 127.0.0.1. Rows:

- round trip of a small request, direct and through the gate (µs, median of the repeats; each repeat is the
  mean of GATE_ROUND_TRIPS requests) and the gate's overhead (µs and the ratio through/direct);
- a 256 MiB request (a BINARY payload) and a 256 MiB reply through the gate ÷ direct (time ratio: the gate
  stores and forwards each message once, so about 0.5 is the bound);
- the CPU time of the whole gate process (its event loop and libzmq's I/O thread, from /proc) per 256 MiB
  request and per 256 MiB reply, and its peak resident memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import zmq

from arkouda_bench.results import Row
from arkouda_bootstrap.config import GateSettings
from arkouda_bootstrap.gate.main import build_gate
from arkouda_bootstrap.kube.api import PodCondition, PodInfo, PodList
from arkouda_bootstrap.kube.events import EventRecorder

log = logging.getLogger(__name__)

GROUP = "gate"
GATE_ROUND_TRIPS = 2000
GATE_TRANSFER_BYTES = 256 << 20
_MARKER = b"BINARY_PAYLOAD"


def _request(cmd: str) -> bytes:
    body = {"user": "bench", "token": "", "cmd": cmd, "format": "STRING", "args": "", "size": -1}
    return json.dumps(body).encode()


def _binary_request(cmd: str) -> bytes:
    body = {"user": "bench", "token": "", "cmd": cmd, "format": "BINARY", "args": "", "size": -1}
    return json.dumps(body).encode() + _MARKER


_OK = json.dumps(
    {"msg": "ok", "msgType": "NORMAL", "msgFormat": "STRING", "user": "bench", "payload": ""}
).encode()


class _ReplyServer:
    """Test double of arkouda_server's client port: REP answering _OK (`big`: GATE_TRANSFER_BYTES)."""

    def __init__(self) -> None:
        self._ctx: Any = zmq.Context()
        self._sock: Any = self._ctx.socket(zmq.REP)
        self._sock.setsockopt(zmq.LINGER, 0)
        self.port: int = self._sock.bind_to_random_port("tcp://127.0.0.1")
        self._big = bytes(GATE_TRANSFER_BYTES)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                frames = self._sock.recv_multipart(copy=False)
            except zmq.ZMQError:
                self._sock.close(0)
                return
            big = frames[0].bytes == _request("big")
            self._sock.send(self._big if big else _OK, copy=False)

    def close(self) -> None:
        self._ctx.term()


@contextlib.contextmanager
def _gate(server_port: int) -> Iterator[tuple[int, int]]:
    """The product's Gate in its own process (as in its pod: no interpreter shared with the client), awake,
    forwarding to 127.0.0.1:server_port; yields its port and its pid."""
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: no inherited ZeroMQ context or threads
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_gate_process, args=(server_port, child), daemon=True)
    proc.start()
    try:
        if not parent.poll(30):
            raise RuntimeError("the gate process did not start listening within 30 s")
        assert proc.pid is not None
        yield int(parent.recv()), proc.pid
    finally:
        proc.terminate()
        proc.join(10)


def _gate_process(server_port: int, conn: Any) -> None:
    settings = GateSettings(
        namespace="bench",
        pod_name="bench-gate",
        release_selector="app.kubernetes.io/instance=bench",
        server_statefulset="bench-arkouda-server",
        locale_statefulset="bench-arkouda-locale",
        num_locales=1,
        server_port=server_port,
        listen_port=0,
        listen_host="127.0.0.1",
        idle_timeout=3600,
        max_message_bytes=2 * GATE_TRANSFER_BYTES,
    )
    gate = build_gate(settings=settings, scale=_AwakeScale(), api=None, events=EventRecorder(None, None))
    gate.controller.start()
    # test double of the pod watch: the server pod is Ready at 127.0.0.1 (the health check as in the chart,
    # 10 s / 30 s: the bench's requests keep it quiet)
    ready = PodInfo(
        name="bench-arkouda-server-0",
        labels={"app.kubernetes.io/component": "server"},
        phase="Running",
        pod_ip="127.0.0.1",
        conditions=(PodCondition(type="Ready", status="True"),),
    )
    gate.controller.on_pods(PodList(pods=(ready,), resource_version="1"))

    async def main() -> None:
        serving = asyncio.get_running_loop().create_task(gate.serve(host="127.0.0.1", port=0))
        while not gate.listening.is_set():
            await asyncio.sleep(0.01)
        conn.send(gate.port)
        await serving

    asyncio.run(main())


class _AwakeScale:
    """Test double of the scale API: both StatefulSets at their awake counts, changes ignored."""

    def get_replicas(self, *, namespace: str, statefulset: str) -> int | None:
        return 1 if statefulset.endswith("server") else 0

    def set_replicas(self, *, namespace: str, statefulset: str, replicas: int) -> None:
        return None


def _process_cpu(pid: int) -> Callable[[], float]:
    """CPU seconds so far of the whole process (every thread: libzmq's I/O thread moves the bytes)."""
    ticks = os.sysconf("SC_CLK_TCK")

    def read() -> float:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime

    return read


def _peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


@dataclass(frozen=True)
class _Figures:
    rtt_us: float
    request_s: float  # a 256 MiB BINARY request, until its short reply
    reply_s: float  # a short request, until its 256 MiB reply
    gate_request_cpu_s: float  # the gate process during the request (0 for the direct path)
    gate_reply_cpu_s: float


def _timed(
    sock: Any, frames: list[Any], gate_cpu: Callable[[], float] | None, *, expect: int
) -> tuple[float, float]:
    cpu_began = gate_cpu() if gate_cpu else 0.0
    began = time.perf_counter()
    sock.send_multipart(frames, copy=False)
    reply = sock.recv(copy=False)
    took = time.perf_counter() - began
    used = gate_cpu() - cpu_began if gate_cpu else 0.0
    if len(reply) != expect:
        raise RuntimeError(f"the reply arrived as {len(reply)} bytes, not {expect}")
    return took, used


def _measure(
    port: int, *, round_trips: int, payload: memoryview, gate_cpu: Callable[[], float] | None = None
) -> _Figures:
    ctx: Any = zmq.Context()
    sock: Any = ctx.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 60_000)
    small = _request("getconfig")
    try:
        sock.connect(f"tcp://127.0.0.1:{port}")
        for _ in range(50):  # connection and handshake out of the timing
            sock.send(small)
            sock.recv()
        began = time.perf_counter()
        for _ in range(round_trips):
            sock.send(small)
            sock.recv()
        rtt = (time.perf_counter() - began) / round_trips * 1e6
        request_s, request_cpu = _timed(sock, [_binary_request("array"), payload], gate_cpu, expect=len(_OK))
        reply_s, reply_cpu = _timed(sock, [_request("big")], gate_cpu, expect=GATE_TRANSFER_BYTES)
        return _Figures(
            rtt_us=rtt,
            request_s=request_s,
            reply_s=reply_s,
            gate_request_cpu_s=request_cpu,
            gate_reply_cpu_s=reply_cpu,
        )
    finally:
        sock.close(0)
        ctx.term()


def run(*, repeats: int, command: str, round_trips: int = GATE_ROUND_TRIPS) -> list[Row]:
    server = _ReplyServer()
    direct: list[_Figures] = []
    gated: list[_Figures] = []
    payload = memoryview(bytes(GATE_TRANSFER_BYTES))
    peak_mib = 0.0
    try:
        with _gate(server.port) as (gate_port, gate_pid):
            gate_cpu = _process_cpu(gate_pid)
            for i in range(repeats):
                # alternate the order so neither path always runs on a warmer machine
                pair = [(direct, server.port, None), (gated, gate_port, gate_cpu)]
                for sink, port, cpu in pair if i % 2 == 0 else reversed(pair):
                    sink.append(_measure(port, round_trips=round_trips, payload=payload, gate_cpu=cpu))
                log.info(
                    "gate repeat %d: rtt direct %.1f µs, gate %.1f µs; 256 MiB request direct %.3f s, "
                    "gate %.3f s; reply direct %.3f s, gate %.3f s",
                    i + 1,
                    direct[-1].rtt_us,
                    gated[-1].rtt_us,
                    direct[-1].request_s,
                    gated[-1].request_s,
                    direct[-1].reply_s,
                    gated[-1].reply_s,
                )
            peak_mib = _peak_rss_mib(gate_pid)
    finally:
        server.close()
    mib = GATE_TRANSFER_BYTES / (1 << 20)
    note = (
        f"loopback, pyzmq REQ→REP, {round_trips} requests per repeat; REP is a test double of arkouda_server"
    )
    pairs = list(zip(gated, direct, strict=True))

    def row(*, case: str, metric: str, unit: str, values: Sequence[float], note: str) -> Row:
        return Row.measured(
            group=GROUP, case=case, metric=metric, unit=unit, command=command, values=values, note=note
        )

    def best(attr: str) -> str:
        direct_best = mib / min(getattr(f, attr) for f in direct)
        gate_best = mib / min(getattr(f, attr) for f in gated)
        return f"direct {direct_best:.0f} MiB/s best, gate {gate_best:.0f} MiB/s best"

    return [
        row(case="direct", metric="round trip", unit="µs", values=[f.rtt_us for f in direct], note=note),
        row(
            case="through the gate",
            metric="round trip",
            unit="µs",
            values=[f.rtt_us for f in gated],
            note=note,
        ),
        row(
            case="gate overhead",
            metric="round trip added (goal ≤ 300)",
            unit="µs",
            values=[g.rtt_us - d.rtt_us for g, d in pairs],
            note="same run, pairwise",
        ),
        row(
            case="gate ÷ direct",
            metric="round trip ratio",
            unit="x",
            values=[g.rtt_us / d.rtt_us for g, d in pairs],
            note="same run, pairwise",
        ),
        row(
            case=f"{mib:.0f} MiB request",
            metric="throughput gate ÷ direct (goal ≥ 0.45)",
            unit="x",
            values=[d.request_s / g.request_s for g, d in pairs],
            note=best("request_s"),
        ),
        row(
            case=f"{mib:.0f} MiB reply",
            metric="throughput gate ÷ direct (goal ≥ 0.45)",
            unit="x",
            values=[d.reply_s / g.reply_s for g, d in pairs],
            note=best("reply_s"),
        ),
        row(
            case=f"{mib:.0f} MiB request",
            metric="gate CPU per request",
            unit="ms",
            values=[f.gate_request_cpu_s * 1e3 for f in gated],
            note="the whole gate process (event loop and libzmq I/O thread), /proc/PID/stat at 10 ms ticks",
        ),
        row(
            case=f"{mib:.0f} MiB reply",
            metric="gate CPU per reply",
            unit="ms",
            values=[f.gate_reply_cpu_s * 1e3 for f in gated],
            note=f"the whole gate process; its peak resident memory over the run {peak_mib:.0f} MiB",
        ),
    ]
