"""Secondary network (global.network.attachment) on the local cluster with Multus (hack/cluster/multus.sh).

The release asks for the NetworkAttachmentDefinition `arkouda-net1` (a second bridge, 10.250.0.0/16, each node
handing out its own /24); Multus attaches it as net1 beside the pod network and writes each pod's
network-status. The real launch must then run entirely on that network: the bootstrap probed and listed every
host at its 10.250.x address, amudprun's ssh spawner reached every locale there (the launch report's
sshAddress, i.e. the address sshd was reached at), GASNET_MASTERIP is the server's 10.250.x address, and every
locale passed the GASNet barrier (workers take their UDP interface from their connection to the master).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import time
from typing import Any

import pytest
from kubernetes import client
from test_arkouda_release import launch_report

from kubehelpers import CHART, VALUES, Kube, all_ready, helm, image_args, release_pods

log = logging.getLogger(__name__)

RELEASE = "aknet"
NAD = "arkouda-net1"  # the network multus.sh writes on every node (its NetworkAttachmentDefinition has no config)
SECONDARY = ipaddress.ip_network("10.250.0.0/16")
SERVER_POD = f"{RELEASE}-arkouda-server-0"
LOCALE_PODS = [f"{RELEASE}-arkouda-locale-{i}" for i in range(2)]
STATUS = "k8s.v1.cni.cncf.io/network-status"


@pytest.fixture(scope="module")
def ns(kube: Kube, make_namespace: Any) -> str:
    try:
        client.ApiextensionsV1Api(kube.api).read_custom_resource_definition(
            "network-attachment-definitions.k8s.cni.cncf.io")
    except client.ApiException as exc:
        if exc.status != 404:
            raise
        # like test_multinode on one node: a cluster without Multus (kind in chart CI) cannot run this module
        reason = ("the cluster has no NetworkAttachmentDefinition CRD, so no Multus: the local cluster installs it "
                  "(hack/cluster/multus.sh up, or CLUSTER_MULTUS=1 make cluster-up)")
        print(f"SKIP test_secondary_network: {reason}")
        pytest.skip(reason)
    name: str = make_namespace("ak-net1")
    client.CustomObjectsApi(kube.api).create_namespaced_custom_object(
        "k8s.cni.cncf.io", "v1", name, "network-attachment-definitions",
        {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition", "metadata": {"name": NAD}})
    return name


def secondary_address(pod: Any, ns: str) -> str:
    """The pod's address on ns/arkouda-net1, from the network-status Multus wrote."""
    raw = (pod.metadata.annotations or {}).get(STATUS)
    assert raw, f"pod {pod.metadata.name} has no {STATUS} annotation: Multus did not handle it"
    entries = [e for e in json.loads(raw) if e.get("name") == f"{ns}/{NAD}"]
    assert entries, f"pod {pod.metadata.name} is not attached to {ns}/{NAD}: {raw}"
    ip = entries[0]["ips"][0]
    assert ipaddress.ip_address(ip) in SECONDARY, f"{pod.metadata.name}: {ip} is not in {SECONDARY}"
    assert ip != pod.status.pod_ip
    return str(ip)


def test_install_on_the_secondary_network(kube: Kube, ns: str) -> None:
    t0 = time.monotonic()
    helm("install", RELEASE, str(CHART), "-n", ns, "-f", str(VALUES / "local.yaml"), *image_args(),
         "--set", f"global.network.attachment={NAD}", "--wait", "--timeout", "8m", timeout=600)
    log.info("helm install --wait took %.1fs", time.monotonic() - t0)
    kube.watch_pods_until(ns, release_pods(RELEASE), all_ready(3), timeout=60, what="3 Ready pods of the release")


def test_every_locale_was_reached_at_its_secondary_address(kube: Kube, ns: str) -> None:
    pods = {name: kube.core.read_namespaced_pod(name, ns) for name in [SERVER_POD, *LOCALE_PODS]}
    for p in pods.values():
        assert p.metadata.annotations.get("k8s.v1.cni.cncf.io/networks") == NAD, p.metadata.name
    addresses = {name: secondary_address(p, ns) for name, p in pods.items()}
    log.info("secondary addresses: %s; pod IPs: %s", addresses,
             {name: p.status.pod_ip for name, p in pods.items()})
    expected = [addresses[SERVER_POD], *(addresses[n] for n in LOCALE_PODS)]

    report = launch_report(kube.logs(ns, SERVER_POD, "server"))
    log.info("launch report: %s", json.dumps(report))
    assert report["numLocales"] == 3
    spawner = report["spawner"]
    assert spawner["GASNET_MASTERIP"] == addresses[SERVER_POD], "GASNET_MASTERIP must be the server's net1 address"
    assert spawner["GASNET_SSH_SERVERS"].split()[:3] == expected, "hosts: the pods' net1 addresses, server first"
    for i, loc in enumerate(report["locales"]):
        assert loc["sshAddress"] == expected[i], (
            f"locale {i} was reached at {loc['sshAddress']}, expected its secondary address {expected[i]}")
        assert loc["name"] == [SERVER_POD, *LOCALE_PODS][i]

    ready = [e for e in kube.events_for(ns, SERVER_POD) if e.reason == "LocalesReady"]
    assert ready, "no LocalesReady Event on the server pod"
    assert ready[-1].message.endswith(
        "hosts: " + " ".join(f"{n}={addresses[n]}" for n in [SERVER_POD, *LOCALE_PODS])), ready[-1].message


def test_server_log_names_the_secondary_addresses_only(kube: Kube, ns: str) -> None:
    """The probe went to the net1 addresses, never to a pod IP (which stays the pod network's)."""
    logs = kube.logs(ns, SERVER_POD, "server")
    for name in [SERVER_POD, *LOCALE_PODS]:
        pod = kube.core.read_namespaced_pod(name, ns)
        assert f"probe {secondary_address(pod, ns)} ({name})" in logs, f"no probe of {name} at its net1 address"
        assert f"probe {pod.status.pod_ip} ({name})" not in logs, f"{name} was probed at its pod IP"
