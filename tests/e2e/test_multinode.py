"""The release on the multi-node local cluster (`make cluster-up NODES=3`, hack/cluster/README.md): spread over
the nodes with required anti-affinity as in values/bare-metal.yaml, launched across them, one locale too many
reported by the server, and the NetworkPolicies enforced by kube-router on every node.

The tests run top to bottom (pytest keeps file order) against one release, then a second one that asks for more
locales than there are nodes. The module skips, saying why, on a one-node cluster.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from test_arkouda_release import launch_report

from kubehelpers import CHART, VALUES, Kube, all_ready, helm, image_args, release_pods, run, wait_for

log = logging.getLogger(__name__)

RELEASE = "mn"
SERVER_POD = f"{RELEASE}-arkouda-server-0"
RELEASE_SEL = release_pods(RELEASE)
LOCALE_SEL = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=locale"
SSH_PORT = 2222  # global.sshPort's default (charts/arkouda/values.yaml)
PROBE_IMAGE = "localhost/arkouda-k8s/cluster-smoke:1"  # static busybox with nc, on every node (hack/cluster)
BANNER = "SSH-2.0-"
OVER = "mn4"  # the release that asks for one locale more than there are nodes
OVER_WAIT_S = 30
OVER_BACKOFF_S = 15  # its server's back-off after the timeout (waits 15-30 s)


def spread_values(release: str) -> dict[str, Any]:
    """values/bare-metal.yaml's placement on the local images: required anti-affinity between locales, and the
    server kept off every node with a locale of this release (so numLocales pods need numLocales nodes)."""
    return {
        "locale": {"antiAffinity": "required"},
        "server": {
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [{
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {
                            "app.kubernetes.io/instance": release,
                            "app.kubernetes.io/part-of": "arkouda",
                            "app.kubernetes.io/component": "locale",
                        }},
                    }],
                },
            },
        },
    }


def schedulable_nodes(kube: Kube) -> list[str]:
    names = []
    for n in kube.core.list_node().items:
        ready = any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))
        blocked = any(t.effect in ("NoSchedule", "NoExecute") for t in (n.spec.taints or []))
        if ready and not blocked and not n.spec.unschedulable:
            names.append(n.metadata.name)
    return sorted(names)


@pytest.fixture(scope="module")
def nodes(kube: Kube) -> list[str]:
    total = [n.metadata.name for n in kube.core.list_node().items]
    if len(total) == 1:
        reason = (f"the cluster has one node ({total[0]}): multi-node behaviour needs `make cluster-up NODES=3` "
                  "(hack/cluster/README.md)")
        print(f"SKIP test_multinode: {reason}")
        pytest.skip(reason)
    names = schedulable_nodes(kube)
    assert len(names) >= 3, f"these tests need 3 schedulable nodes (Ready, not tainted), found {names} of {total}"
    return names


@pytest.fixture(scope="module")
def ns(make_namespace: Any, nodes: list[str]) -> str:
    name: str = make_namespace("mn-e2e")
    return name


def write_values(tmp: Path, name: str, values: dict[str, Any]) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def node_of(kube: Kube, ns: str, pod: str) -> str:
    return str(kube.core.read_namespaced_pod(pod, ns).spec.node_name)


def probe_pod(kube: Kube, ns: str, name: str, node: str) -> str:
    """A pod outside the release (busybox, restricted), pinned to `node`; returns its name once Running."""
    sc = client.V1SecurityContext(run_as_non_root=True, run_as_user=65534, allow_privilege_escalation=False,
                                  capabilities=client.V1Capabilities(drop=["ALL"]),
                                  seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"))
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"app": "foreign-probe"}),
        spec=client.V1PodSpec(
            node_name=node, automount_service_account_token=False, termination_grace_period_seconds=1,
            containers=[client.V1Container(name="probe", image=PROBE_IMAGE, image_pull_policy="Never",
                                           args=["sleep", "3600"], security_context=sc)]))
    kube.core.create_namespaced_pod(ns, pod)
    kube.watch_pods_until(ns, "app=foreign-probe", lambda ps: any(
        p.metadata.name == name and p.status.phase == "Running" for p in ps), timeout=120,
        what=f"probe pod {name} Running on {node}")
    return name


def ssh_banner(ns: str, pod: str, ip: str) -> str:
    """What a TCP connect to ip:SSH_PORT from `pod` reads within 5 s ('' when refused or timed out)."""
    proc = run(["kubectl", "-n", ns, "exec", pod, "--", "nc", "-w", "5", ip, str(SSH_PORT)], check=False, timeout=60)
    log.info("nc %s:%s from %s: rc=%s out=%r err=%r", ip, SSH_PORT, pod, proc.returncode, proc.stdout[:80],
             proc.stderr[:200])
    return proc.stdout


@pytest.fixture(scope="module")
def probes(kube: Kube, ns: str, nodes: list[str]) -> Iterator[dict[str, str]]:
    """Foreign pods: one on the node of locale 1, one on another node (not the server's either, when possible)."""
    locale_node = node_of(kube, ns, f"{RELEASE}-arkouda-locale-1")
    other = next(n for n in nodes if n != locale_node)
    made = {"same": probe_pod(kube, ns, "probe-same", locale_node), "other": probe_pod(kube, ns, "probe-other", other)}
    yield made
    for name in made.values():
        kube.core.delete_namespaced_pod(name, ns, grace_period_seconds=0)


def test_install_spread_over_nodes(kube: Kube, ns: str, nodes: list[str], tmp_path: Path) -> None:
    t0 = time.monotonic()
    values = write_values(tmp_path, RELEASE, spread_values(RELEASE))
    helm("install", RELEASE, str(CHART), "-n", ns, "-f", str(VALUES / "local.yaml"), "-f", str(values),
         *image_args(), "--wait", "--timeout", "8m", timeout=600)
    log.info("helm install --wait took %.1fs", time.monotonic() - t0)
    pods = kube.watch_pods_until(ns, RELEASE_SEL, all_ready(3), timeout=60, what="3 Ready pods of the release")
    placement = {p.metadata.name: p.spec.node_name for p in pods}
    log.info("placement: %s", placement)
    assert len(set(placement.values())) == 3, f"required anti-affinity must put the 3 pods on 3 nodes: {placement}"


def test_launch_report_shows_hosts_on_several_nodes(kube: Kube, ns: str) -> None:
    """The real launch (amudprun's ssh spawner, GASNet udp: every locale exchanged active messages with every
    other and passed the barrier, which launch_report checks) ran with locales on other nodes than the server."""
    wait_for("the launch report in the server log",
             lambda: "ARKOUDA-STANDIN-GASNET-LOCALES " in kube.logs(ns, SERVER_POD, "server"), timeout=120)
    report = launch_report(kube.logs(ns, SERVER_POD, "server"))
    pods = {p.status.pod_ip: p for p in kube.pods(ns, RELEASE_SEL)}
    nodes_of_locales = []
    for loc in report["locales"]:
        pod = pods.get(loc["sshAddress"])
        assert pod is not None, f"locale {loc['id']} ran at {loc['sshAddress']}, no pod of the release has that IP"
        nodes_of_locales.append(pod.spec.node_name)
    log.info("locales by node: %s", nodes_of_locales)
    assert len(set(nodes_of_locales)) >= 2, f"every locale ran on one node: {nodes_of_locales}"
    server_node = node_of(kube, ns, SERVER_POD)
    assert any(n != server_node for n in nodes_of_locales[1:]), "no locale ran on another node than the server"


def locale_ip(kube: Kube, ns: str, ordinal: int) -> str:
    return str(kube.core.read_namespaced_pod(f"{RELEASE}-arkouda-locale-{ordinal}", ns).status.pod_ip)


def test_foreign_pods_cannot_reach_a_locales_sshd(kube: Kube, ns: str, probes: dict[str, str]) -> None:
    ip = locale_ip(kube, ns, 1)
    for where, pod in probes.items():
        out = ssh_banner(ns, pod, ip)
        assert BANNER not in out, f"a pod outside the release ({where} node) got sshd's banner: {out!r}"


def test_foreign_pods_get_the_banner_without_network_policy(kube: Kube, ns: str, probes: dict[str, str]) -> None:
    """The control: the same connects succeed once the chart renders no NetworkPolicy (so the test above can
    fail, and what stopped the connects was the policy, enforced on both nodes)."""
    helm("upgrade", RELEASE, str(CHART), "-n", ns, "--reuse-values", "--set", "global.networkPolicy.enabled=false",
         "--wait", "--timeout", "5m", timeout=400)
    assert not client.NetworkingV1Api(kube.api).list_namespaced_network_policy(ns).items
    ip = locale_ip(kube, ns, 1)
    for where, pod in probes.items():
        def banner(pod: str = pod) -> bool:
            return BANNER in ssh_banner(ns, pod, ip)
        assert wait_for(f"sshd's banner at {ip}:{SSH_PORT} from the {where}-node probe", banner, timeout=90,
                        interval=3)


def test_uninstall_spread_release(kube: Kube, ns: str) -> None:
    helm("uninstall", RELEASE, "-n", ns, "--wait", "--timeout", "3m", timeout=300)
    kube.watch_pods_until(ns, RELEASE_SEL, lambda ps: not ps, timeout=120, what="the release's pods gone")


@pytest.fixture()
def server_priority(kube: Kube) -> Iterator[str]:
    """A PriorityClass above the locales' (0) for the server pod. With Parallel pod management the locale pods
    are created first and could take every node, leaving the server, not a locale, unschedulable: preemption
    puts the server on a node and leaves one locale Pending, as a bare-metal install needs."""
    api = client.SchedulingV1Api(kube.api)
    name = f"{OVER}-e2e-server"
    api.create_priority_class(client.V1PriorityClass(metadata=client.V1ObjectMeta(name=name), value=1000,
                                                     description="test_multinode: the server before locales"))
    yield name
    api.delete_priority_class(name)


def test_one_locale_more_than_nodes_ends_in_wait_timeout_and_gives_the_nodes_back(
        kube: Kube, ns: str, nodes: list[str], tmp_path: Path, server_priority: str) -> None:
    """numLocales = nodes + 1 with bare-metal's anti-affinity: one locale pod cannot be scheduled. The server's
    progress line names it with the scheduler's reason, then it gives up with a WaitTimeout Event, scales its
    locale StatefulSet to 0 (LocalesReleased: no locale pod of it holds a node while it backs off) and asks again
    after server.releaseBackoffSeconds (LocalesRequested)."""
    n = len(nodes) + 1
    values = spread_values(OVER)
    values["global"] = {"numLocales": n}
    values["server"]["waitTimeoutSeconds"] = OVER_WAIT_S
    values["server"]["releaseBackoffSeconds"] = OVER_BACKOFF_S
    values["server"]["priorityClassName"] = server_priority
    path = write_values(tmp_path, OVER, values)
    helm("install", OVER, str(CHART), "-n", ns, "-f", str(VALUES / "local.yaml"), "-f", str(path), *image_args(),
         timeout=300)
    server = f"{OVER}-arkouda-server-0"
    locales = f"{release_pods(OVER)},app.kubernetes.io/component=locale"

    def one_pending(pods: list[Any]) -> bool:
        unscheduled = [p.metadata.name for p in pods if p.spec.node_name is None]
        return len(pods) == n and len(unscheduled) == 1 and unscheduled[0] != server

    placed = kube.watch_pods_until(ns, release_pods(OVER), one_pending, timeout=OVER_WAIT_S + 120,
                                   what="every pod but one locale scheduled")
    pending = next(p.metadata.name for p in placed if p.spec.node_name is None)
    log.info("placement: %s", {p.metadata.name: p.spec.node_name for p in placed})

    def reason(name: str) -> Callable[[], list[Any]]:
        return lambda: [e for e in kube.events_for(ns, server) if e.reason == name]

    describe = functools.partial(kube.describe_pods, ns, release_pods(OVER))
    events = wait_for("a WaitTimeout Event on the server pod", reason("WaitTimeout"), timeout=OVER_WAIT_S + 240,
                      interval=3, describe=describe)
    message = str(events[0].message)
    log.info("WaitTimeout: %s", message)
    line = re.compile(rf"waiting for [^\n]*{re.escape(pending)} \(Pending: [^\n]*anti-affinity")
    logs = _server_logs(kube, ns, server)
    assert line.search(logs), f"no progress line naming {pending} and the scheduler's reason:\n{logs[-3000:]}"
    assert pending in message and "anti-affinity" in message, message
    released = wait_for("a LocalesReleased Event", reason("LocalesReleased"), timeout=60, interval=2,
                        describe=describe)
    log.info("LocalesReleased: %s", released[0].message)
    t0 = time.monotonic()
    kube.watch_pods_until(ns, locales, lambda pods: not pods, timeout=120, what=f"no locale pod of {OVER} left")
    log.info("no locale pod of %s holds a node %.1f s after LocalesReleased was seen", OVER, time.monotonic() - t0)
    requested = wait_for("a LocalesRequested Event after the back-off", reason("LocalesRequested"),
                         timeout=2 * OVER_BACKOFF_S + 60, interval=2, describe=describe)
    log.info("LocalesRequested: %s", requested[0].message)
    kube.watch_pods_until(ns, locales, lambda pods: len(pods) == n - 1, timeout=120,
                          what=f"{n - 1} locale pods of {OVER} again")
    helm("uninstall", OVER, "-n", ns, "--wait", "--timeout", "3m", timeout=300)


def _server_logs(kube: Kube, ns: str, pod: str) -> str:
    """The server container's log, including the previous run's when it has restarted since the timeout."""
    text = ""
    try:
        text = kube.logs(ns, pod, "server", previous=True)
    except client.ApiException as exc:
        if exc.status != 400:  # 400: no previous container
            raise
    return text + kube.logs(ns, pod, "server")
