"""An API server outage is not a lost locale (docs/node-loss.md, "An API server outage is not a node loss"): the
API server is stopped for 60 s by the cluster's own script (`hack/cluster/component.sh stop|start kube-apiserver`,
with the flags up.sh starts it with), first while a release is Ready and serving, then while its server waits for
its locales. No pod, node or process of the release is touched.

- Ready and serving: no relaunch (the `Launched` count and the program's pid unchanged, that process still
  running), no container restart in the release, a client that connected before the outage (a pod in the
  release's namespace, on one ZeroMQ connection) is answered after it, and `helm test` passes.
- Waiting for its locales (their StatefulSet scaled to 0 until after the outage): no container restart, the
  outage named in the server's progress, Ready once the locales start.

Marked disruptive: every module's API calls fail while the API server is stopped, so it runs alone.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from kubehelpers import CHART, REPO_ROOT, VALUES, Kube, all_ready, helm, image_args, release_pods, run, wait_for

pytestmark = pytest.mark.disruptive

RELEASE = "ao"
SERVER_POD = f"{RELEASE}-arkouda-server-0"
RELEASE_SEL = release_pods(RELEASE)
LOCALE_STS = f"{RELEASE}-arkouda-locale"
COMPONENT = REPO_ROOT / "hack" / "cluster" / "component.sh"
OUTAGE_SECONDS = 60
CLIENT = "ao-outage-client"
# The client asks `getconfig` on one connection every 5 s for this long: the outage and the API server's restart
# fit in it with room to spare.
CLIENT_SECONDS = 200
CLIENT_SCRIPT = """
import json, socket, sys, time, zmq
sys.path.insert(0, "/opt/arkouda/lib")
from arkouda_standin.protocol import request_bytes
url = sys.argv[1]
host, port = url[len("tcp://"):].rsplit(":", 1)
try:  # says whether the network or the server is in the way, when no answer comes
    socket.create_connection((host, int(port)), timeout=5).close()
    print(f"{time.time():.0f} tcp connect to {host}:{port} ok", flush=True)
except OSError as exc:
    print(f"{time.time():.0f} tcp connect to {host}:{port} failed: {exc}", flush=True)
ctx = zmq.Context()
sock = ctx.socket(zmq.REQ)
# a plain REQ socket as Arkouda's client has (REQ_CORRELATE's extra frame would not survive the gate's envelope)
for option, value in ((zmq.LINGER, 0), (zmq.RCVTIMEO, 10000), (zmq.SNDTIMEO, 10000)):
    sock.setsockopt(option, value)
sock.connect(url)
end = time.time() + float(sys.argv[2])
while time.time() < end:
    try:
        sock.send(request_bytes("getconfig", user="outage-client", token=None))
        reply = json.loads(sock.recv())
        config = json.loads(reply["msg"]) if reply.get("msgType") == "NORMAL" else {}
        print(f"{time.time():.0f} answered {reply.get('msgType')} numLocales={config.get('numLocales')}", flush=True)
    except zmq.Again:  # a REQ socket without its reply can send no more: this connection is over
        print(f"{time.time():.0f} no reply", flush=True)
        sys.exit(1)
    time.sleep(5)
"""


@pytest.fixture(scope="module")
def ns(make_namespace: Any) -> str:
    if not COMPONENT.is_file():
        pytest.skip(f"the API server outage needs {COMPONENT.relative_to(REPO_ROOT)} (the local cluster's scripts)")
    name: str = make_namespace("ao-e2e")
    return name


@pytest.fixture
def outage() -> Iterator[None]:
    """Stops the API server; the test ends the outage with `end_outage()`, and the API server is started again
    whatever happens."""
    yield
    run([str(COMPONENT), "start", "kube-apiserver"], timeout=300)


def stop_api() -> float:
    run([str(COMPONENT), "stop", "kube-apiserver"], timeout=120)
    return time.time()


def end_outage(stopped: float) -> float:
    time.sleep(max(0.0, stopped + OUTAGE_SECONDS - time.time()))
    run([str(COMPONENT), "start", "kube-apiserver"], timeout=300)
    back = time.time()
    print(f"\nAPI server stopped for {back - stopped:.0f}s (until /readyz)")
    return back


def restarts(kube: Kube, ns: str) -> dict[str, int]:
    return {f"{p.metadata.name}/{c.name}": c.restart_count
            for p in kube.pods(ns, RELEASE_SEL) for c in (p.status.container_statuses or [])}


def launched(kube: Kube, ns: str) -> list[str]:
    return [str(e.message) for e in kube.events_for(ns, SERVER_POD) if e.reason == "Launched"]


def program_pid(messages: list[str]) -> int:
    m = re.search(r"; pid (\d+)$", messages[-1])
    assert m, messages[-1]
    return int(m.group(1))


def alive_in_server(ns: str, pid: int) -> bool:
    return run(["kubectl", "-n", ns, "exec", SERVER_POD, "-c", "server", "--", "test", "-d", f"/proc/{pid}"],
               timeout=60, check=False).returncode == 0


def nodes_ready(kube: Kube) -> bool:
    return all(any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))
               for n in kube.core.list_node().items)


def events(kube: Kube, ns: str, reason: str) -> list[str]:
    return [str(e.message) for e in kube.core.list_namespaced_event(ns).items if e.reason == reason]


def start_client(kube: Kube, ns: str) -> None:
    """A client pod in the release's namespace (server.networkPolicy.clientFrom lets any in) that keeps one
    connection open, in the release's own image (its stand-in client library). Not with the release's labels: the
    gate would name it an ImpostorPod."""
    sc = {"runAsNonRoot": True, "runAsUser": 65534, "allowPrivilegeEscalation": False,
          "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
    server = kube.core.read_namespaced_pod(SERVER_POD, ns)
    image = next(c.image for c in server.spec.containers if c.name == "server")
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": CLIENT, "namespace": ns,
                     "labels": {"app": CLIENT}},
        "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False, "containers": [{
            "name": "client", "image": image, "imagePullPolicy": "Never",
            "command": ["python3", "-c", CLIENT_SCRIPT, f"tcp://{RELEASE}-arkouda-server:5555", str(CLIENT_SECONDS)],
            "securityContext": sc}]},
    }
    kube.core.create_namespaced_pod(ns, pod)


def client_answers(kube: Kube, ns: str) -> list[int]:
    """The times (the pod's clock: every node of the local cluster is this host) of the client's answers."""
    try:
        out = kube.logs(ns, CLIENT, "client")
    except ApiException:  # not started yet
        return []
    return [int(line.split()[0]) for line in out.splitlines() if " answered " in line]


def since_relaunch(kube: Kube, ns: str) -> str:
    """The server's log since its last relaunch decision (empty before the first)."""
    log = kube.logs(ns, SERVER_POD, "server")
    at = log.rfind("relaunching when all locales are Ready again")
    return "" if at < 0 else log[at:]


def client_story(kube: Kube, ns: str) -> str:
    gate = run(["kubectl", "-n", ns, "logs", f"deploy/{RELEASE}-arkouda-gate", "--tail=30"], check=False)
    try:
        client = kube.logs(ns, CLIENT, "client")
    except ApiException as exc:
        client = str(exc)
    return f"client log:\n{client[-2000:]}\ngate log:\n{gate.stdout[-3000:]}{gate.stderr[-500:]}"


def test_install_and_serve(kube: Kube, ns: str) -> None:
    helm("install", RELEASE, str(CHART), "-n", ns, "-f", str(VALUES / "local.yaml"), *image_args(),
         "--wait", "--timeout", "8m", timeout=600)
    kube.watch_pods_until(ns, RELEASE_SEL, all_ready(3), timeout=120, what="3 Ready pods of the release")
    wait_for("the first launch", lambda: launched(kube, ns), timeout=180)
    start_client(kube, ns)
    wait_for("the client's first answer", lambda: client_answers(kube, ns), timeout=120,
             describe=lambda: client_story(kube, ns))


def test_an_outage_while_serving_stops_nothing(kube: Kube, ns: str, outage: None) -> None:
    before_launched, before_restarts = launched(kube, ns), restarts(kube, ns)
    pid = program_pid(before_launched)
    stopped = stop_api()
    back = end_outage(stopped)
    wait_for("every node Ready again", lambda: nodes_ready(kube), timeout=180)
    time.sleep(20)  # the node controller's NotReady marks and the supervisor's answer to them come and go
    assert launched(kube, ns) == before_launched, events(kube, ns, "LocaleLost")
    assert alive_in_server(ns, pid), f"pid {pid} of the program is gone"
    assert restarts(kube, ns) == before_restarts
    wait_for("an answer to the client after the outage", lambda: [t for t in client_answers(kube, ns) if t > back],
             timeout=60, describe=lambda: client_story(kube, ns))
    print(f"  LocaleNotReady: {events(kube, ns, 'LocaleNotReady')}\n  ApiOutage: {events(kube, ns, 'ApiOutage')}")
    helm("test", RELEASE, "-n", ns, "--timeout", "5m", timeout=400)


def test_an_outage_while_the_server_waits_for_its_locales(kube: Kube, ns: str, outage: None) -> None:
    before = restarts(kube, ns)
    server_uid = kube.core.read_namespaced_pod(SERVER_POD, ns).metadata.uid
    # no locale pods until after the outage: the server stops the program (its locales were deleted) and waits
    run(["kubectl", "-n", ns, "scale", "statefulset", LOCALE_STS, "--replicas=0"])
    wait_for("the server waiting for its locales again",
             lambda: "locales ready; waiting for" in since_relaunch(kube, ns), timeout=120)
    stopped = stop_api()
    end_outage(stopped)
    run(["kubectl", "-n", ns, "scale", "statefulset", LOCALE_STS, "--replicas=2"])
    kube.watch_pods_until(ns, RELEASE_SEL, all_ready(3), timeout=240, what="3 Ready pods of the release")
    # the same server pod (not evicted and replaced after the nodes' NotReady), its containers never restarted
    assert kube.core.read_namespaced_pod(SERVER_POD, ns).metadata.uid == server_uid, events(kube, ns, "Killing")
    assert {k: v for k, v in restarts(kube, ns).items() if "locale" not in k} == \
        {k: v for k, v in before.items() if "locale" not in k}
    log = since_relaunch(kube, ns)
    assert "the Kubernetes API is unreachable" in log and "the Kubernetes API answers again after" in log, log[-3000:]


def test_uninstall(kube: Kube, ns: str) -> None:
    run(["kubectl", "-n", ns, "delete", "pod", CLIENT, "--ignore-not-found", "--wait=false"])
    helm("uninstall", RELEASE, "-n", ns, "--wait", "--timeout", "3m", timeout=240)
