"""global.sharedVolume on the multi-node local cluster: one ReadWriteMany claim, created by the chart from a
storage class, mounted at the same path in the server pod (locale 0) and a locale pod on another node; each
writes a file and reads the other's, and a directory one creates takes the other's file, as Arkouda's
checkpoints and multi-locale HDF5/Parquet reads need (chart README, "Shared volume").

The storage is the local cluster's `arkouda-shared-hostpath` class (hack/cluster/shared-storage.sh: a static
hostPath volume, one filesystem for every node of that cluster because all of them are processes in the host's
mount namespace). The module skips on any other cluster (it cannot know a ReadWriteMany class there), and on a
one-node cluster, where two pods would share a node anyway.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_multinode import spread_values, write_values

from kubehelpers import CHART, REPO_ROOT, VALUES, Kube, all_ready, helm, image_args, release_pods, run

log = logging.getLogger(__name__)

RELEASE = "sv"
CLAIM = f"{RELEASE}-arkouda-shared"  # arkouda-common.sharedClaimName for a chart-created claim
STORAGE_CLASS = "arkouda-shared-hostpath"
MOUNT = "/shared"
SHARED_STORAGE = REPO_ROOT / "hack" / "cluster" / "shared-storage.sh"
SERVER = f"{RELEASE}-arkouda-server-0"
LOCALE = f"{RELEASE}-arkouda-locale-0"


def local_cluster_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "arkouda-k8s"
    return Path(os.environ.get("CLUSTER_DIR", cache / "cluster"))


def local_cluster_kubeconfig() -> Path:
    return local_cluster_dir() / "kubeconfig" / "admin.kubeconfig"


def host_dir(namespace: str) -> Path:
    """Where the volume of `namespace` lives on this host (hack/cluster/shared-storage.sh claim)."""
    return local_cluster_dir() / "shared" / namespace


@contextlib.contextmanager
def shared_namespace(kube: Kube, make_namespace: Any, *, prefix: str, release: str) -> Iterator[str]:
    """A fresh namespace with the local cluster's shared volume for the claim the chart creates for `release`
    (skips on another cluster or on one node); the volume and its directory go again afterwards."""
    kubeconfig = Path(os.environ.get("KUBECONFIG", ""))
    if not kubeconfig.is_file() or kubeconfig.resolve() != local_cluster_kubeconfig().resolve():
        pytest.skip(f"not the project's local cluster ({local_cluster_kubeconfig()}): no known ReadWriteMany class")
    if len(kube.core.list_node().items) < 2:
        pytest.skip("one node: two pods on one node do not show that the volume is shared across nodes")
    name: str = make_namespace(prefix)
    run([str(SHARED_STORAGE), "up"])
    run([str(SHARED_STORAGE), "claim", name, f"{release}-arkouda-shared", "1Gi"])
    try:
        yield name
    finally:
        helm("uninstall", release, "-n", name, "--wait", "--timeout", "2m", check=False)
        run([str(SHARED_STORAGE), "release", name], check=False)


@pytest.fixture(scope="module")
def ns(kube: Kube, make_namespace: Any) -> Iterator[str]:
    with shared_namespace(kube, make_namespace, prefix="sv-e2e", release=RELEASE) as name:
        yield name


def sh(ns: str, pod: str, container: str, script: str) -> str:
    return run(["kubectl", "-n", ns, "exec", pod, "-c", container, "--", "sh", "-ec", script], timeout=60).stdout


def test_locales_on_two_nodes_read_each_others_files(kube: Kube, ns: str, tmp_path: Path) -> None:
    t0 = time.monotonic()
    values = spread_values(RELEASE)
    values["global"] = {"numLocales": 2, "sharedVolume": {
        "enabled": True, "storageClassName": STORAGE_CLASS, "size": "1Gi", "mountPath": MOUNT}}
    path = write_values(tmp_path, RELEASE, values)
    helm("install", RELEASE, str(CHART), "-n", ns, "-f", str(VALUES / "local.yaml"), "-f", str(path),
         *image_args(), "--wait", "--timeout", "5m", timeout=400)
    pods = kube.watch_pods_until(ns, release_pods(RELEASE), all_ready(2), timeout=60, what="2 Ready pods")
    nodes = {p.metadata.name: p.spec.node_name for p in pods}
    log.info("helm install --wait took %.1f s; placement %s", time.monotonic() - t0, nodes)
    assert nodes[SERVER] != nodes[LOCALE], f"the two locales must run on two nodes: {nodes}"
    pvc = kube.core.read_namespaced_persistent_volume_claim(CLAIM, ns)
    assert pvc.status.phase == "Bound" and pvc.spec.access_modes == ["ReadWriteMany"], pvc.status

    # locale 0 (the server pod) makes a directory, as Arkouda's save does; locale 1 writes its part into it
    sh(ns, SERVER, "server", f"mkdir {MOUNT}/ckpt && echo from-{SERVER} > {MOUNT}/ckpt/part_LOCALE0000")
    sh(ns, LOCALE, "locale", f"echo from-{LOCALE} > {MOUNT}/ckpt/part_LOCALE0001")
    # and each reads the other's part from its own node
    assert sh(ns, LOCALE, "locale", f"cat {MOUNT}/ckpt/part_LOCALE0000").strip() == f"from-{SERVER}"
    assert sh(ns, SERVER, "server", f"cat {MOUNT}/ckpt/part_LOCALE0001").strip() == f"from-{LOCALE}"
    listing = sh(ns, SERVER, "sshd", f"ls -n {MOUNT}/ckpt")
    log.info("the directory as the server pod's sshd container sees it:\n%s", listing)
    assert "part_LOCALE0000" in listing and "part_LOCALE0001" in listing
