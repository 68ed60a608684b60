"""The notebook recipe (values/notebooks.yaml, charts/arkouda/README.md "Notebooks"): a pod labelled like a
JupyterHub (z2jh) user pod, in the hub's namespace `jhub`, with only the release's token copied into a Secret
there, reaches the server through its Service DNS name and reads numLocales.

The client in the pod is the replay of the pinned client's ak.connect() requests (the stand-in image has no Arkouda
client). The NetworkPolicy peer the values file sets is rendered and unit-tested, but this node has no policy
engine, so whether it admits only such pods is not shown here."""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from kubehelpers import (
    CHART,
    VALUES,
    Kube,
    all_ready,
    helm,
    image_args,
    release_pods,
    wait_for,
    wait_for_default_service_account,
)

log = logging.getLogger(__name__)

RELEASE = "akn"
HUB_NS = "jhub"  # the namespace values/notebooks.yaml admits
USER_POD = "jupyter-e2e"


@pytest.fixture(scope="module")
def ns(make_namespace: Any) -> str:
    name: str = make_namespace("akn-e2e")
    return name


@pytest.fixture(scope="module")
def hub(kube: Kube) -> Iterator[str]:
    labels = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")}
    kube.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=HUB_NS, labels=labels)))
    wait_for_default_service_account(kube, HUB_NS)
    yield HUB_NS
    kube.core.delete_namespace(HUB_NS)


def test_install_the_notebook_values(kube: Kube, ns: str) -> None:
    helm("install", RELEASE, str(CHART), "-n", ns, "-f", str(VALUES / "local.yaml"), "-f",
         str(VALUES / "notebooks.yaml"), *image_args(), "--set", "global.numLocales=2", "--wait", "--timeout", "8m",
         timeout=600)
    kube.watch_pods_until(ns, release_pods(RELEASE), all_ready(2), timeout=60, what="the release's 2 pods Ready")


def test_a_jupyterhub_user_pod_connects_with_the_copied_token(kube: Kube, ns: str, hub: str) -> None:
    # the README's recipe: copy only the token into the hub's namespace (never printed)
    token = kube.core.read_namespaced_secret(f"{RELEASE}-arkouda-ssh", ns).data["token"]
    kube.core.create_namespaced_secret(hub, client.V1Secret(
        metadata=client.V1ObjectMeta(name="arkouda-token"), data={"token": token}))
    assert base64.b64decode(token).strip() == base64.b64decode(token)
    server = f"{RELEASE}-arkouda-server.{ns}.svc"
    restricted = client.V1SecurityContext(
        run_as_non_root=True, run_as_user=1000, allow_privilege_escalation=False,
        capabilities=client.V1Capabilities(drop=["ALL"]),
        seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"))
    image = next(c.image for c in kube.core.read_namespaced_pod(f"{RELEASE}-arkouda-server-0", ns).spec.containers)
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name=USER_POD, labels={"component": "singleuser-server", "app": "jupyterhub"}),
        spec=client.V1PodSpec(
            restart_policy="Never",
            automount_service_account_token=False,
            containers=[client.V1Container(
                name="notebook", image=image, image_pull_policy="IfNotPresent",
                command=["python3", "-m", "arkouda_standin.client", "--host", server, "--port", "5555",
                         "--token-file", "/etc/arkouda/token/token", "--expect-locales", "2", "--timeout", "30"],
                env=[client.V1EnvVar(name="PYTHONPATH", value="/opt/arkouda/lib")],
                security_context=restricted,
                volume_mounts=[client.V1VolumeMount(name="token", mount_path="/etc/arkouda/token", read_only=True)])],
            volumes=[client.V1Volume(name="token", secret=client.V1SecretVolumeSource(secret_name="arkouda-token"))],
        ),
    )
    kube.core.create_namespaced_pod(hub, pod)
    t0 = time.monotonic()

    def finished() -> str | None:
        phase = kube.core.read_namespaced_pod(USER_POD, hub).status.phase
        return phase if phase in ("Succeeded", "Failed") else None

    phase = wait_for("the notebook pod to finish", finished, timeout=180, interval=2)
    out = kube.logs(hub, USER_POD, "notebook")
    log.info("notebook pod %s after %.1fs:\n%s", phase, time.monotonic() - t0, out)
    assert phase == "Succeeded", out
    assert out.strip().splitlines()[-1] == "numLocales=2", out


def test_uninstall(ns: str) -> None:
    helm("uninstall", RELEASE, "-n", ns, "--wait", "--timeout", "3m", timeout=300)
