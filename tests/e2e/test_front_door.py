"""The gate in front of a release with the chart's defaults (metrics on, the gate rendered), on the real cluster.

Top to bottom against one release: a request that is not Arkouda's envelope is answered by the gate with its
reason and the next correct client is served at once (the server never saw it, its container never restarted);
`shutdown` from a client is refused with its reason; a server whose request loop stops answering (the
stand-in's test-double command standin_wedge: it replies, then its loop reads nothing more while the process,
its port and its metrics daemon live on) gives the Warning ServerUnresponsive on the gate pod and the release
answers again without a human; `helm uninstall` leaves nothing of the gate behind.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

import pytest
import zmq

from kubehelpers import (
    CHART,
    REPO_ROOT,
    VALUES,
    Kube,
    all_ready,
    gate_selector,
    helm,
    image_args,
    port_forward,
    ready_gate_pod,
    release_pods,
)

sys.path.insert(0, str(REPO_ROOT / "docker" / "arkouda" / "standin" / "lib"))
from arkouda_standin.client import handshake
from arkouda_standin.protocol import request_bytes

log = logging.getLogger(__name__)

RELEASE = "door"
SERVICE = f"{RELEASE}-arkouda-server"
SERVER_POD = f"{RELEASE}-arkouda-server-0"
GATE_SEL = gate_selector(RELEASE)
PODS_SEL = release_pods(RELEASE)
HEALTH_TIMEOUT = 10


@pytest.fixture(scope="module")
def ns(make_namespace: Any) -> str:
    name: str = make_namespace("door-e2e")
    return name


def gate_pod(kube: Kube, ns: str) -> str:
    return ready_gate_pod(kube, ns, RELEASE, timeout=180)


def server_restarts(kube: Kube, ns: str) -> int:
    pod = kube.core.read_namespaced_pod(SERVER_POD, ns)
    return sum(c.restart_count for c in pod.status.container_statuses)


def ask(port: int, raw: bytes, *, timeout: float = 30) -> dict[str, Any]:
    """One raw request on a fresh REQ socket (as a client that is not Arkouda's would send it)."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sock = ctx.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, int(timeout * 1000))
    try:
        sock.connect(f"tcp://127.0.0.1:{port}")
        sock.send(raw)
        reply: dict[str, Any] = json.loads(sock.recv())
        return reply
    finally:
        sock.close(0)
        ctx.term()


def served_at_once(port: int) -> float:
    began = time.monotonic()
    result = handshake(host="127.0.0.1", port=port, token=None, user="e2e", timeout=30)
    took = time.monotonic() - began
    assert result.config["numLocales"] == 2
    return took


def test_install_with_the_defaults_puts_the_gate_in_front(kube: Kube, ns: str) -> None:
    helm("install", RELEASE, str(CHART), "-n", ns, "-f", str(VALUES / "local.yaml"), *image_args(),
         "--set", "global.numLocales=2",
         "--set", f"server.gate.health.timeoutSeconds={HEALTH_TIMEOUT}",
         "--set", "server.gate.health.intervalSeconds=2",
         "--wait", "--timeout", "8m", timeout=600)
    gate_pod(kube, ns)
    svc = kube.core.read_namespaced_service(SERVICE, ns)
    assert svc.spec.selector["app.kubernetes.io/component"] == "gate"
    server = kube.core.read_namespaced_pod(SERVER_POD, ns)
    assert "metrics" in [c.name for c in server.spec.containers]  # the chart's default: the METRICS daemon on
    with port_forward(ns, SERVICE, 5555) as port:
        served_at_once(port)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        pytest.param(b"GET / HTTP/1.1\r\n\r\n", "not Arkouda's JSON envelope", id="not-json"),
        pytest.param(b'{"cmd": "getconfig"}', "lacks the field(s) user, token, format, args, size", id="fields"),
    ],
)
def test_a_malformed_request_gets_the_gates_error_and_the_next_client_is_served_at_once(
    kube: Kube, ns: str, raw: bytes, reason: str
) -> None:
    restarts = server_restarts(kube, ns)
    with port_forward(ns, SERVICE, 5555) as port:
        reply = ask(port, raw)
        assert reply["msgType"] == "ERROR"
        assert reason in reply["msg"]
        took = served_at_once(port)
    print(f"\nmalformed request ({reason}): the gate's error, then the next client's handshake in {took:.2f} s")
    assert took < 5
    assert server_restarts(kube, ns) == restarts  # the server's loop never saw it


def test_shutdown_from_a_client_is_refused_with_its_reason(kube: Kube, ns: str) -> None:
    restarts = server_restarts(kube, ns)
    with port_forward(ns, SERVICE, 5555) as port:
        reply = ask(port, request_bytes("shutdown", user="e2e", token=None))
        assert reply["msgType"] == "ERROR"
        assert "shutdown is refused by the gate" in reply["msg"]
        served_at_once(port)
    assert server_restarts(kube, ns) == restarts


def test_a_wedged_request_loop_is_reported_and_the_release_answers_again_without_a_human(
    kube: Kube, ns: str
) -> None:
    gate = gate_pod(kube, ns)
    old_uid = kube.core.read_namespaced_pod(SERVER_POD, ns).metadata.uid
    with port_forward(ns, SERVICE, 5555) as port:
        reply = ask(port, request_bytes("standin_wedge", user="e2e", token=None))
        wedged_at = time.monotonic()
        assert reply["msgType"] == "NORMAL", reply
    deadline = wedged_at + 120
    while not [e for e in kube.events_for(ns, gate) if e.reason == "ServerUnresponsive"]:
        assert time.monotonic() < deadline, "no ServerUnresponsive Event"
        time.sleep(0.5)
    noticed = time.monotonic() - wedged_at
    event = next(e for e in kube.events_for(ns, gate) if e.reason == "ServerUnresponsive")
    assert event.type == "Warning"
    assert "did not answer `ruok` for" in event.message
    assert f"deleting pod {SERVER_POD}" in event.message
    # nobody touches the release: the StatefulSet's new pod answers through the same Service
    kube.watch_pods_until(
        ns, PODS_SEL,
        lambda pods: all_ready(2)(pods) and any(p.metadata.uid != old_uid for p in pods
                                                if p.metadata.name == SERVER_POD),
        timeout=300, what="a new server pod Ready")
    with port_forward(ns, SERVICE, 5555) as port:
        served_at_once(port)
    answered = time.monotonic() - wedged_at
    print(f"\nwedged request loop: ServerUnresponsive {noticed:.1f} s after the wedge (health timeout "
          f"{HEALTH_TIMEOUT} s), the release answered again {answered:.1f} s after it, no human involved")
    deadline = time.monotonic() + 30
    while "ServerAnswering" not in [e.reason for e in kube.events_for(ns, gate)]:
        assert time.monotonic() < deadline, "no ServerAnswering Event after the release answered"
        time.sleep(0.5)
    # the gate's readiness came back with the answering server
    gate_pod(kube, ns)


def test_uninstall_removes_the_gate(kube: Kube, ns: str) -> None:
    helm("uninstall", RELEASE, "-n", ns, "--wait", "--timeout", "3m", timeout=300)
    kube.watch_pods_until(ns, f"app.kubernetes.io/instance={RELEASE}", lambda pods: not pods, timeout=120,
                          what="no pod of the release")
    assert kube.apps.list_namespaced_deployment(ns, label_selector=GATE_SEL).items == []
