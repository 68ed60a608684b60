"""The idle gate on the local node (global.idle, values/local.yaml: numLocales 3, images present): how long a
sleeping release takes to answer its first client, and how long after the idle timeout its pods are gone.

One release with `global.idle.timeoutSeconds` = IDLE_SECONDS. Each repeat: a pyzmq REQ client connects
through `kubectl port-forward` to the client Service (the gate) of the sleeping release and sends Arkouda's
`connect`; the time to its reply is the wake row. Then the client closes, and the time from (last reply + idle
timeout) to the moment the watch shows no server or locale pod is the drain row.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from pathlib import Path
from typing import Any

import zmq

from arkouda_bench.cluster import Cluster, _ready, workload
from arkouda_bench.results import Row

log = logging.getLogger(__name__)

GROUP = "idle gate on the local node"
RELEASE = "gatebench"
IDLE_SECONDS = 5


def _all_ready(pods: dict[str, Any]) -> bool:
    return len([p for p in workload(pods) if _ready(p)]) == 3


def _none(pods: dict[str, Any]) -> bool:
    return not workload(pods)


def _first_reply(port: int, *, timeout: float) -> tuple[float, float]:
    """Seconds from connect to the reply of Arkouda's `connect` request, and time.time() after a getconfig."""
    ctx: Any = zmq.Context()
    sock: Any = ctx.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, int(timeout * 1000))
    request = {"user": "bench", "token": "", "format": "STRING", "args": "", "size": -1}
    try:
        began = time.monotonic()
        sock.connect(f"tcp://127.0.0.1:{port}")
        sock.send(json.dumps({**request, "cmd": "connect"}).encode())
        reply = json.loads(sock.recv())
        took = time.monotonic() - began
        if reply.get("msgType") == "ERROR":
            raise RuntimeError(f"connect answered with an error: {reply.get('msg')}")
        sock.send(json.dumps({**request, "cmd": "getconfig"}).encode())
        config = json.loads(json.loads(sock.recv())["msg"])
        if config.get("numLocales") != 3:
            raise RuntimeError(f"getconfig says numLocales={config.get('numLocales')}, expected 3")
        return took, time.time()
    finally:
        sock.close(0)
        ctx.term()


def run(*, kubeconfig: Path, repo_root: Path, repeats: int, command: str) -> list[Row]:
    cl = Cluster.connect(kubeconfig=kubeconfig, repo_root=repo_root)
    ns = cl.namespace(f"bench-gate-{uuid.uuid4().hex[:6]}")
    wake: list[float] = []
    drain: list[float] = []
    try:
        cl.helm(
            "install", RELEASE, str(cl.chart), "-n", ns, "-f", str(cl.values("local.yaml")),
            "--set", "global.idle.enabled=true", "--set", f"global.idle.timeoutSeconds={IDLE_SECONDS}",
            "--set", "tests.enabled=false", "--wait", "--timeout", "5m",
        )  # fmt: skip
        ready_at = cl.wait_pods(
            ns,
            lambda pods: len([p for p in workload(pods) if _ready(p)]) == 3,
            timeout=300,
            what="3 locales Ready",
        )
        gone_at = cl.wait_pods(ns, lambda pods: not workload(pods), timeout=300, what="no server/locale pod")
        drain.append(gone_at - ready_at - IDLE_SECONDS)
        for i in range(repeats):
            with cl.port_forward(ns, f"svc/{RELEASE}-arkouda-server", 5555) as port:
                took, last = _first_reply(port, timeout=300)
            wake.append(took)
            gone_at = cl.wait_pods(
                ns, lambda pods: not workload(pods), timeout=300, what="no server/locale pod"
            )
            drain.append(gone_at - last - IDLE_SECONDS)
            log.info(
                "gate cycle %d: wake → first reply %.1f s; idle → all pods gone %.1f s",
                i + 1,
                took,
                drain[-1],
            )
    finally:
        cl.drop_namespace(ns)
    note = f"values/local.yaml (numLocales 3), global.idle.timeoutSeconds={IDLE_SECONDS}, images present"
    return [
        Row.measured(
            group=GROUP, case="sleeping release", metric="client connect → first reply (goal ≤ 15)", unit="s",
            command=command, values=wake, note=note,
        ),
        Row.measured(
            group=GROUP, case="idle release", metric="idle timeout → all pods gone", unit="s",
            command=command, values=drain, note=note + "; the first value is from the install's Ready",
        ),
    ]  # fmt: skip
