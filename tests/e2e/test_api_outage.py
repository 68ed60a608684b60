"""An API server outage is not a lost locale (docs/node-loss.md, "An API server outage is not a node loss"): the
API server is stopped once for 60 s by the cluster's own script (`hack/cluster/component.sh stop|start
kube-apiserver`, with the flags up.sh starts it with), while one release is Ready and serving and another's server
waits for its locales. No pod, node or process of either release is touched.

- Ready and serving (`ao`): no relaunch (the `Launched` count and the program's pid unchanged, that process still
  running), no container restart in the release, a client that connected before the outage (a pod in the
  release's namespace, on one ZeroMQ connection) is answered after it, and `helm test` passes.
- Waiting for its locales (`aw`, its locale StatefulSet scaled to 0 until after the outage): no container
  restart, the outage named in the server's progress, Ready once the locales start.

One outage serves both (each costs a minute and the nodes' NotReady round trip). Marked disruptive: every module's
API calls fail while the API server is stopped, so it runs alone.

The chart's defaults throughout, tolerations included: when the API server returns, the node controller marks every
node NotReady (stale leases) until its kubelet reports again; the chart's 300 s toleration keeps the taint manager
from evicting anything meanwhile, and nodewatch forces nothing because every pod answers on the pod network
(docs/node-loss.md). An eviction here would be a failure of the defaults, not noise.
"""

from __future__ import annotations

import functools
import re
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from kubehelpers import CHART, REPO_ROOT, VALUES, Kube, all_ready, helm, image_args, release_pods, run, wait_for

pytestmark = pytest.mark.disruptive

SERVING = "ao"
WAITING = "aw"
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


# What the outage test saw before and when the API server answered again, for the tests that check each release.
BEFORE: dict[str, Any] = {}


def server_pod(release: str) -> str:
    return f"{release}-arkouda-server-0"


@pytest.fixture(scope="module")
def ns(make_namespace: Any) -> str:
    if not COMPONENT.is_file():
        pytest.skip(f"the API server outage needs {COMPONENT.relative_to(REPO_ROOT)} (the local cluster's scripts)")
    name: str = make_namespace("ao-e2e")
    return name


@pytest.fixture
def outage() -> Iterator[None]:
    """The test stops the API server and ends the outage with `end_outage()`; the API server is started again
    whatever happens."""
    yield
    run([str(COMPONENT), "start", "kube-apiserver"], timeout=300)


@pytest.fixture
def after_outage() -> dict[str, Any]:
    if "back" not in BEFORE:
        pytest.skip("the outage did not happen (see test_one_outage_under_both_releases)")
    return BEFORE


def stop_api() -> float:
    run([str(COMPONENT), "stop", "kube-apiserver"], timeout=120)
    return time.time()


def end_outage(stopped: float) -> float:
    time.sleep(max(0.0, stopped + OUTAGE_SECONDS - time.time()))
    run([str(COMPONENT), "start", "kube-apiserver"], timeout=300)
    back = time.time()
    print(f"\nAPI server stopped for {back - stopped:.0f}s (until /readyz)")
    return back


def restarts(kube: Kube, ns: str, release: str) -> dict[str, int]:
    return {f"{p.metadata.name}/{c.name}": c.restart_count
            for p in kube.pods(ns, release_pods(release)) for c in (p.status.container_statuses or [])}


def launched(kube: Kube, ns: str, release: str) -> list[str]:
    return [str(e.message) for e in kube.events_for(ns, server_pod(release)) if e.reason == "Launched"]


def program_pid(messages: list[str]) -> int:
    m = re.search(r"; pid (\d+)$", messages[-1])
    assert m, messages[-1]
    return int(m.group(1))


def alive_in_server(ns: str, pid: int) -> bool:
    return run(["kubectl", "-n", ns, "exec", server_pod(SERVING), "-c", "server", "--", "test", "-d",
                f"/proc/{pid}"], timeout=60, check=False).returncode == 0


def nodes_ready(kube: Kube) -> bool:
    return all(any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))
               for n in kube.core.list_node().items)


def events(kube: Kube, ns: str, reason: str) -> list[str]:
    return [str(e.message) for e in kube.core.list_namespaced_event(ns).items if e.reason == reason]


def start_client(kube: Kube, ns: str) -> None:
    """A client pod in the serving release's namespace (server.networkPolicy.clientFrom lets any in) that keeps one
    connection open, in the release's own image (its stand-in client library). Not with the release's labels: the
    gate would name it an ImpostorPod."""
    sc = {"runAsNonRoot": True, "runAsUser": 65534, "allowPrivilegeEscalation": False,
          "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
    server = kube.core.read_namespaced_pod(server_pod(SERVING), ns)
    image = next(c.image for c in server.spec.containers if c.name == "server")
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": CLIENT, "namespace": ns,
                     "labels": {"app": CLIENT}},
        "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False, "containers": [{
            "name": "client", "image": image, "imagePullPolicy": "Never",
            "command": ["python3", "-c", CLIENT_SCRIPT, f"tcp://{SERVING}-arkouda-server:5555", str(CLIENT_SECONDS)],
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
    """The waiting release's server log since its last relaunch decision (empty before the first)."""
    log = kube.logs(ns, server_pod(WAITING), "server")
    at = log.rfind("relaunching when all locales are Ready again")
    return "" if at < 0 else log[at:]


def previous_server_log(kube: Kube, ns: str) -> str:
    """Why the waiting release's server container restarted: the end of its previous run's log."""
    pod = kube.core.read_namespaced_pod(server_pod(WAITING), ns)
    ended = [f"{c.name}: {c.last_state.terminated}" for c in (pod.status.container_statuses or [])
             if c.last_state and c.last_state.terminated]
    try:
        log = kube.logs(ns, server_pod(WAITING), "server", previous=True)[-4000:]
    except ApiException as exc:
        log = f"(none: {exc.reason})"
    return f"ended containers: {ended}\nprevious server log:\n{log}"


def client_story(kube: Kube, ns: str) -> str:
    gate = run(["kubectl", "-n", ns, "logs", f"deploy/{SERVING}-arkouda-gate", "--tail=30"], check=False)
    try:
        client = kube.logs(ns, CLIENT, "client")
    except ApiException as exc:
        client = str(exc)
    return f"client log:\n{client[-2000:]}\ngate log:\n{gate.stdout[-3000:]}{gate.stderr[-500:]}"


def install_args(release: str, ns: str) -> list[str]:
    return ["helm", "install", release, str(CHART), "-n", ns, "-f", str(VALUES / "local.yaml"), *image_args(),
            "--wait", "--timeout", "8m"]


def test_install_both_releases(kube: Kube, ns: str) -> None:
    # the two installs side by side: each waits mostly for its own pods to start
    waiting = subprocess.Popen(install_args(WAITING, ns), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    try:
        helm(*install_args(SERVING, ns)[1:], timeout=600)
    finally:
        out, _ = waiting.communicate(timeout=600)
    assert waiting.returncode == 0, f"helm install {WAITING} failed:\n{out}"
    for release in (SERVING, WAITING):
        kube.watch_pods_until(ns, release_pods(release), all_ready(3), timeout=120,
                              what=f"3 Ready pods of {release}")
        wait_for(f"the first launch of {release}", functools.partial(launched, kube, ns, release), timeout=180)
    start_client(kube, ns)
    wait_for("the client's first answer", lambda: client_answers(kube, ns), timeout=120,
             describe=lambda: client_story(kube, ns))
    # no locale pods of the waiting release until after the outage: its server stops the program and waits
    run(["kubectl", "-n", ns, "scale", "statefulset", f"{WAITING}-arkouda-locale", "--replicas=0"])
    wait_for(f"{WAITING}'s server waiting for its locales again",
             lambda: "locales ready; waiting for" in since_relaunch(kube, ns), timeout=120)


def test_one_outage_under_both_releases(kube: Kube, ns: str, outage: None) -> None:
    launches = launched(kube, ns, SERVING)
    BEFORE.update(launched=launches, pid=program_pid(launches),
                  restarts={r: restarts(kube, ns, r) for r in (SERVING, WAITING)},
                  waiting_uid=kube.core.read_namespaced_pod(server_pod(WAITING), ns).metadata.uid)
    stopped = stop_api()
    BEFORE["back"] = end_outage(stopped)
    wait_for("every node Ready again", lambda: nodes_ready(kube), timeout=180)


def test_the_serving_release_stopped_nothing(kube: Kube, ns: str, after_outage: dict[str, Any]) -> None:
    time.sleep(20)  # the node controller's NotReady marks and the supervisor's answer to them come and go
    assert launched(kube, ns, SERVING) == after_outage["launched"], events(kube, ns, "LocaleLost")
    assert alive_in_server(ns, after_outage["pid"]), f"pid {after_outage['pid']} of the program is gone"
    assert restarts(kube, ns, SERVING) == after_outage["restarts"][SERVING]
    wait_for("an answer to the client after the outage",
             lambda: [t for t in client_answers(kube, ns) if t > after_outage["back"]],
             timeout=60, describe=lambda: client_story(kube, ns))
    print(f"  LocaleNotReady: {events(kube, ns, 'LocaleNotReady')}\n  ApiOutage: {events(kube, ns, 'ApiOutage')}")
    helm("test", SERVING, "-n", ns, "--timeout", "5m", timeout=400)


def test_the_waiting_release_rode_through(kube: Kube, ns: str, after_outage: dict[str, Any]) -> None:
    run(["kubectl", "-n", ns, "scale", "statefulset", f"{WAITING}-arkouda-locale", "--replicas=2"])
    kube.watch_pods_until(ns, release_pods(WAITING), all_ready(3), timeout=240, what=f"3 Ready pods of {WAITING}")
    # the same server pod (not evicted and replaced after the nodes' NotReady), its containers never restarted
    assert kube.core.read_namespaced_pod(server_pod(WAITING), ns).metadata.uid == after_outage["waiting_uid"], \
        events(kube, ns, "Killing")
    before = after_outage["restarts"][WAITING]
    assert {k: v for k, v in restarts(kube, ns, WAITING).items() if "locale" not in k} == \
        {k: v for k, v in before.items() if "locale" not in k}, previous_server_log(kube, ns)
    log = since_relaunch(kube, ns)
    assert "the Kubernetes API is unreachable" in log and "the Kubernetes API answers again after" in log, log[-3000:]


def test_uninstall(kube: Kube, ns: str) -> None:
    run(["kubectl", "-n", ns, "delete", "pod", CLIENT, "--ignore-not-found", "--wait=false"])
    for release in (SERVING, WAITING):
        helm("uninstall", release, "-n", ns, "--wait", "--timeout", "3m", timeout=240)
