"""Arkouda under Slurm, reachable from the cluster: the documented batch script (docs/slurm/arkouda.sbatch) on the
project's real Slurm (hack/slurm/: two slurmd nodes on this host) registers the running stand-in server with
--register-service into a namespace of the local cluster, with a ServiceAccount token kubeconfig that has exactly
the permissions of docs/slurm/rbac.yaml; a pod connects through the registered Service (selector-less, its
EndpointSlice pointing at the host's bridge address 10.244.0.1, which pods reach) and reads numLocales; after
scancel the Service and the EndpointSlice are gone.

Slurm, its job runtime, the job user's sshd and the job itself come from tests/slurm/slurmjob.py (shared with the
Slurm suite, tests/slurm)."""

from __future__ import annotations

import base64
import json
import logging
import os
import pwd
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from kubehelpers import REPO_ROOT, Kube, run, wait_for

sys.path.insert(0, str(REPO_ROOT / "tests" / "slurm"))
from slurmjob import (
    arkouda_job,
    shared_dir,  # noqa: F401 - fixture
    slurm_site,
    test_user,  # noqa: F401 - fixture
)

log = logging.getLogger(__name__)

SERVICE = "arkouda"
REGISTRAR = "arkouda-slurm-registrar"
NODE_IP = "10.244.0.1"  # the host on the cluster's bridge (hack/cluster/README.md): pods reach it there
CLIENT_POD = "notebook"


@pytest.fixture(scope="module")
def site(host_node: str) -> Iterator[Any]:
    with slurm_site() as running:
        yield running


@pytest.fixture(scope="module")
def ns(make_namespace: Any) -> str:
    name: str = make_namespace("slurm-e2e")
    return name


def apply_rbac(ns: str) -> None:
    """docs/slurm/rbac.yaml as a site admin applies it: its namespace and Service name replaced, nothing else."""
    text = (REPO_ROOT / "docs" / "slurm" / "rbac.yaml").read_text()
    text = text.replace("namespace: arkouda-analytics", f"namespace: {ns}")
    text = text.replace('resourceNames: ["arkouda"]', f'resourceNames: ["{SERVICE}"]')
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"rbac-{ns}.yaml"
    path.write_text(text)
    try:
        run(["kubectl", "apply", "-f", str(path)])
    finally:
        path.unlink()


def token_kubeconfig(ns: str, path: Path, owner: pwd.struct_passwd) -> Path:
    """A kubeconfig for the registrar ServiceAccount (a bound token), the cluster's address and CA from ours."""
    token = run(["kubectl", "create", "token", REGISTRAR, "-n", ns, "--duration=1h"]).stdout.strip()
    admin = json.loads(run(["kubectl", "config", "view", "--raw", "--minify", "-o", "json"]).stdout)
    cluster = admin["clusters"][0]["cluster"]
    ca = cluster.get("certificate-authority-data") or base64.b64encode(
        Path(cluster["certificate-authority"]).read_bytes()).decode()
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "registrar",
        "clusters": [{"name": "local", "cluster": {"server": cluster["server"], "certificate-authority-data": ca}}],
        "users": [{"name": REGISTRAR, "user": {"token": token}}],
        "contexts": [{"name": "registrar", "context": {"cluster": "local", "user": REGISTRAR, "namespace": ns}}],
    }
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    os.chown(path, owner.pw_uid, owner.pw_gid)
    return path


def registered(kube: Kube, ns: str) -> tuple[Any, Any] | None:
    try:
        svc = kube.core.read_namespaced_service(SERVICE, ns)
        eps = client.DiscoveryV1Api(kube.core.api_client).read_namespaced_endpoint_slice(SERVICE, ns)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return svc, eps


@pytest.fixture(scope="module")
def host_node(kube: Kube) -> str:
    """The node whose address is the host's bridge address: its pods reach the host (where Slurm runs) directly on
    the bridge; an extra node of a multi-node local cluster routes through its own network namespace and may be
    powered off by node-loss tests. A cluster without it (kind in the fork CI) cannot reach this machine's Slurm."""
    addresses = []
    for node in kube.core.list_node().items:
        for a in node.status.addresses or []:
            if a.type == "InternalIP":
                addresses.append(a.address)
                if a.address == NODE_IP:
                    name: str = node.metadata.name
                    return name
    pytest.skip(f"needs the project's local cluster (make cluster-up), whose node 0 is this host at {NODE_IP}, so "
                f"that pods reach a Slurm job here; this cluster's nodes are at {', '.join(addresses)}")


def client_pod(ns: str, port: int, locales: int, node: str) -> client.V1Pod:
    image = f"{os.environ.get('IMAGE_PREFIX', 'localhost/arkouda-k8s')}/arkouda:{os.environ.get('IMAGE_TAG', '0.1.0')}"
    restricted = client.V1SecurityContext(
        run_as_non_root=True, run_as_user=1000, allow_privilege_escalation=False,
        capabilities=client.V1Capabilities(drop=["ALL"]),
        seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"))
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=CLIENT_POD),
        spec=client.V1PodSpec(
            restart_policy="Never",
            automount_service_account_token=False,
            node_selector={"kubernetes.io/hostname": node},
            containers=[client.V1Container(
                name="notebook", image=image, image_pull_policy="IfNotPresent",
                command=["python3", "-m", "arkouda_standin.client", "--host", f"{SERVICE}.{ns}.svc",
                         "--port", str(port), "--expect-locales", str(locales), "--timeout", "30"],
                env=[client.V1EnvVar(name="PYTHONPATH", value="/opt/arkouda/lib")],
                security_context=restricted)],
        ),
    )


def test_a_pod_reaches_the_slurm_job_through_the_registered_service(
    kube: Kube, ns: str, host_node: str, site: Any, test_user: pwd.struct_passwd, shared_dir: Path,  # noqa: F811
) -> None:
    apply_rbac(ns)
    kubeconfig = token_kubeconfig(ns, shared_dir / "registrar.kubeconfig", test_user)
    # least privilege: the registrar identity can create Services here, and read nothing else
    as_registrar = {"KUBECONFIG": str(kubeconfig)}
    assert run(["kubectl", "auth", "can-i", "create", "services", "-n", ns], env=as_registrar).stdout.strip() == "yes"
    for verb, what in (("list", "pods"), ("get", "secrets"), ("list", "services")):
        denied = run(["kubectl", "auth", "can-i", verb, what, "-n", ns], env=as_registrar, check=False)
        assert denied.stdout.strip() == "no", f"the registrar may {verb} {what}: {denied.stdout}{denied.stderr}"

    extra = {"ARKOUDA_REGISTER_SERVICE": SERVICE, "ARKOUDA_KUBE_NAMESPACE": ns, "KUBECONFIG": str(kubeconfig),
             "ARKOUDA_HOST_IP": NODE_IP}
    with arkouda_job(site, user=test_user, base=shared_dir, env_extra=extra) as job:
        nodes = len(site.nodes)  # every node of the project's Slurm: one locale each
        job.submit(nodes=nodes, tasks=1)
        job.wait_output(rf"Service {SERVICE} in namespace {ns} is ready: {NODE_IP}", timeout=120)
        found = registered(kube, ns)
        assert found is not None, job.text()
        svc, eps = found
        assert svc.spec.selector is None
        assert [(p.port, p.target_port) for p in svc.spec.ports] == [(job.server_port, job.server_port)]
        assert [e.addresses for e in eps.endpoints] == [[NODE_IP]]
        assert eps.endpoints[0].conditions.ready is True
        assert svc.metadata.annotations["arkouda-bootstrap/slurm-job-id"] == job.job_id

        kube.core.create_namespaced_pod(ns, client_pod(ns, job.server_port, nodes, host_node))
        t0 = time.monotonic()

        def finished() -> str | None:
            # the container's own end, not the pod phase: a busy kubelet was seen reporting Running for minutes
            # after the container had terminated
            pod = kube.core.read_namespaced_pod(CLIENT_POD, ns)
            for c in pod.status.container_statuses or []:
                if c.state.terminated is not None:
                    return f"exit {c.state.terminated.exit_code}"
            phase: str = pod.status.phase
            return phase if phase in ("Succeeded", "Failed") else None

        ended = wait_for("the client pod to finish", finished, timeout=180, interval=2,
                         describe=lambda: kube.describe_pods(ns) + "\n--- job output\n" + job.text())
        out = kube.logs(ns, CLIENT_POD, "notebook")
        log.info("client pod: %s after %.1fs:\n%s", ended, time.monotonic() - t0, out)
        assert ended in ("exit 0", "Succeeded"), f"{ended}\n{out}\n--- job output\n{job.text()}"
        assert out.strip().splitlines()[-1] == f"numLocales={nodes}", out
        job.wait_output(r"<<< getconfig took")  # asked from the pod, answered by the server under Slurm

        job.scancel()
        state = job.wait_finished()
        assert state == "CANCELLED", job.text()
        wait_for("the Service and EndpointSlice to be deleted", lambda: registered(kube, ns) is None, timeout=30,
                 describe=job.text)
        assert "Traceback" not in job.text(), job.text()
