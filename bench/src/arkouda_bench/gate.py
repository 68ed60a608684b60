"""The idle gate's cost (global.idle): what forwarding through `arkouda-bootstrap gate` adds to a request, on
loopback, in the same run as the direct connection.

A pyzmq REP server stands in for arkouda_server's client port (it answers each request at once; a request of
b"big" gets GATE_TRANSFER_BYTES back), a pyzmq REQ client plays Arkouda's client. The gate is the
product's own code (arkouda_bootstrap.gate.main.Gate) in a process of its own, its controller told by a test
double of the pod watch that the server pod is Ready at 127.0.0.1, so it splices every connection at once.
Rows:

- round trip of a small request, direct and through the gate (µs, median of the repeats; each repeat is the
  mean of GATE_ROUND_TRIPS requests) and the gate's overhead (µs and the ratio through/direct);
- a 256 MiB reply through the gate ÷ direct (throughput ratio, goal ≥ 0.9);
- the CPU time the gate process spends per 256 MiB reply (its event loop thread, from /proc), next to what the
  client and the server (this process) spend: on a machine whose cores are all busy the ratio cannot exceed
  about client+server ÷ (client+server + gate), whatever the load was during the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import resource
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import zmq

from arkouda_bench.results import Row
from arkouda_bootstrap.config import GateSettings
from arkouda_bootstrap.gate.idle import Traffic
from arkouda_bootstrap.gate.main import Gate
from arkouda_bootstrap.gate.sleepwake import Controller
from arkouda_bootstrap.kube.api import PodCondition, PodInfo, PodList
from arkouda_bootstrap.kube.events import EventRecorder

log = logging.getLogger(__name__)

GROUP = "idle gate"
GATE_ROUND_TRIPS = 2000
GATE_TRANSFER_BYTES = 256 << 20


class _ReplyServer:
    """Test double of arkouda_server's client port: REP answering b"ok" (b"big": GATE_TRANSFER_BYTES)."""

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
                msg = self._sock.recv()
            except zmq.ZMQError:
                self._sock.close(0)
                return
            self._sock.send(self._big if msg == b"big" else b"ok", copy=False)

    def close(self) -> None:
        self._ctx.term()


@contextlib.contextmanager
def _gate(server_port: int) -> Iterator[tuple[int, int]]:
    """The product's Gate in its own process (as in its pod: no interpreter shared with the client), awake,
    splicing to 127.0.0.1:server_port; yields its port and its pid."""
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
    )
    traffic = Traffic(clock=time.monotonic)
    controller = Controller(
        settings=settings,
        scale=_AwakeScale(),
        events=EventRecorder(None, None),
        traffic=traffic,
        clock=time.monotonic,
    )
    controller.start()
    # test double of the pod watch: the server pod is Ready at 127.0.0.1
    ready = PodInfo(
        name="bench-arkouda-server-0",
        labels={"app.kubernetes.io/component": "server"},
        phase="Running",
        pod_ip="127.0.0.1",
        conditions=(PodCondition(type="Ready", status="True"),),
    )
    controller.on_pods(PodList(pods=(ready,), resource_version="1"))

    async def main() -> None:
        gate = Gate(controller=controller, traffic=traffic, clock=time.monotonic)
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


def _loop_cpu(pid: int) -> Callable[[], float]:
    """CPU seconds so far of the process's main thread (the gate's event loop; /proc/PID/schedstat)."""

    def read() -> float:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9

    return read


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class _Figures:
    rtt_us: float
    transfer_s: float
    transfer_cpu_s: float  # client + server (this process) during the transfer
    gate_cpu_s: float  # the gate's event loop during the transfer (0 for the direct path)


def _measure(port: int, *, round_trips: int, gate_cpu: Callable[[], float] | None = None) -> _Figures:
    ctx: Any = zmq.Context()
    sock: Any = ctx.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 60_000)
    try:
        sock.connect(f"tcp://127.0.0.1:{port}")
        for _ in range(50):  # connection and handshake out of the timing
            sock.send(b"x")
            sock.recv()
        began = time.perf_counter()
        for _ in range(round_trips):
            sock.send(b"x")
            sock.recv()
        rtt = (time.perf_counter() - began) / round_trips * 1e6
        gate_began = gate_cpu() if gate_cpu else 0.0
        cpu_began = _own_cpu()
        began = time.perf_counter()
        sock.send(b"big")
        reply = sock.recv(copy=False)
        transfer = time.perf_counter() - began
        transfer_cpu = _own_cpu() - cpu_began
        gate_used = gate_cpu() - gate_began if gate_cpu else 0.0
        if len(reply) != GATE_TRANSFER_BYTES:
            raise RuntimeError(f"the {GATE_TRANSFER_BYTES}-byte reply arrived as {len(reply)} bytes")
        return _Figures(rtt_us=rtt, transfer_s=transfer, transfer_cpu_s=transfer_cpu, gate_cpu_s=gate_used)
    finally:
        sock.close(0)
        ctx.term()


def run(*, repeats: int, command: str, round_trips: int = GATE_ROUND_TRIPS) -> list[Row]:
    server = _ReplyServer()
    direct: list[_Figures] = []
    gated: list[_Figures] = []
    try:
        with _gate(server.port) as (gate_port, gate_pid):
            gate_cpu = _loop_cpu(gate_pid)
            for i in range(repeats):
                # alternate the order so neither path always runs on a warmer machine
                pair = [(direct, server.port, None), (gated, gate_port, gate_cpu)]
                for sink, port, cpu in pair if i % 2 == 0 else reversed(pair):
                    sink.append(_measure(port, round_trips=round_trips, gate_cpu=cpu))
                log.info(
                    "gate repeat %d: rtt direct %.1f µs, gate %.1f µs; 256 MiB direct %.3f s, gate %.3f s",
                    i + 1,
                    direct[-1].rtt_us,
                    gated[-1].rtt_us,
                    direct[-1].transfer_s,
                    gated[-1].transfer_s,
                )
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
            case=f"{mib:.0f} MiB reply",
            metric="throughput gate ÷ direct (goal ≥ 0.9)",
            unit="x",
            values=[d.transfer_s / g.transfer_s for g, d in pairs],
            note=f"direct {mib / min(f.transfer_s for f in direct):.0f} MiB/s best, "
            f"gate {mib / min(f.transfer_s for f in gated):.0f} MiB/s best",
        ),
        row(
            case=f"{mib:.0f} MiB reply",
            metric="gate CPU per reply",
            unit="ms",
            values=[f.gate_cpu_s * 1e3 for f in gated],
            note="the gate's event loop thread; client + server CPU per reply (median): "
            f"direct {statistics.median(f.transfer_cpu_s for f in direct) * 1e3:.0f} ms, "
            f"through the gate {statistics.median(f.transfer_cpu_s for f in gated) * 1e3:.0f} ms",
        ),
    ]
