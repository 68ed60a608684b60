"""Hardening on a real cluster, from a hostile tenant's and a clumsy operator's side:

- a pod that only wears a locale's labels (what `kubectl debug --copy-to --keep-labels` makes) while a locale is
  lost: the release relaunches on the real pod, and the impostor is named in an Event and the server's log;
- the key Secret deleted, then `helm rollback`: the pre-rollback keygen hook re-creates it, and a deleted server
  pod comes back Ready without anyone repairing anything;
- an install interrupted inside the keygen hook (`helm install --timeout` expiring, or the helm client killed):
  `helm uninstall` then leaves nothing of the release in the namespace (Events aside).

The first tests of this module run in order against one release; the interrupted installs have namespaces of
their own."""

from __future__ import annotations

import base64
import logging
import signal
import subprocess
import time
from typing import Any

import pytest
from kubernetes import client

from kubehelpers import CHART, VALUES, Kube, helm, image_args, wait_for

log = logging.getLogger(__name__)

RELEASE = "akh"
SERVER_POD = f"{RELEASE}-arkouda-server-0"
LOCALE_POD = f"{RELEASE}-arkouda-locale-0"  # numLocales 2: the server pod and one locale pod
IMPOSTOR = f"{LOCALE_POD}-copy"
SECRET = f"{RELEASE}-arkouda-ssh"
READY_TIMEOUT = 300


@pytest.fixture(scope="module")
def ns(make_namespace: Any) -> str:
    name: str = make_namespace("akh-e2e")
    return name


def ready(pod: Any) -> bool:
    return bool(
        pod is not None
        and pod.metadata.deletion_timestamp is None
        and pod.status.pod_ip
        and any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))
    )


def read_pod(kube: Kube, ns: str, name: str) -> Any:
    try:
        return kube.core.read_namespaced_pod(name, ns)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def server_events(kube: Kube, ns: str, uid: str | None = None) -> list[Any]:
    events = kube.events_for(ns, SERVER_POD)
    return [e for e in events if uid is None or e.involved_object.uid == uid]


def event_lines(kube: Kube, ns: str) -> str:
    return "\n".join(f"{e.reason}: {e.message}" for e in server_events(kube, ns))


def release_ready(kube: Kube, ns: str) -> bool:
    """The server pod and the real locale pod (by name: the impostor wears the same labels) Ready."""
    return ready(read_pod(kube, ns, SERVER_POD)) and ready(read_pod(kube, ns, LOCALE_POD))


def launches(kube: Kube, ns: str) -> int:
    return sum(e.count or 1 for e in server_events(kube, ns) if e.reason == "Launched")


def test_install(kube: Kube, ns: str) -> None:
    t0 = time.monotonic()
    helm("install", RELEASE, str(CHART), "-n", ns, "-f", str(VALUES / "local.yaml"), *image_args(),
         "--set", "global.numLocales=2", "--wait", "--timeout", "8m", timeout=600)
    log.info("helm install --wait took %.1fs", time.monotonic() - t0)
    wait_for("the first launch", lambda: launches(kube, ns) >= 1, timeout=READY_TIMEOUT, interval=1,
             describe=lambda: kube.describe_pods(ns) + "\n" + event_lines(kube, ns))
    # the release's own pods are no impostors to its gate (nodewatch included; the gate follows it no more)
    wrong = [f"{e.involved_object.name}: {e.message}" for e in kube.core.list_namespaced_event(ns).items
             if e.reason == "ImpostorPod"]
    assert not wrong, wrong


def impostor_pod(real: Any) -> client.V1Pod:
    """A pod with the real locale's labels (pod-index and pod-name included) and image, no owner, that turns Ready
    at once: what `kubectl debug --copy-to --keep-labels` leaves, and what anyone with pod-create can make."""
    container = real.spec.containers[0]
    restricted = client.V1SecurityContext(
        allow_privilege_escalation=False,
        run_as_non_root=True,
        capabilities=client.V1Capabilities(drop=["ALL"]),
        seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"),
    )
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=IMPOSTOR, labels=dict(real.metadata.labels)),
        spec=client.V1PodSpec(
            restart_policy="Never",
            automount_service_account_token=False,
            security_context=real.spec.security_context,
            node_selector=real.spec.node_selector,
            tolerations=real.spec.tolerations,
            containers=[
                client.V1Container(
                    name="copy",
                    image=container.image,
                    image_pull_policy=container.image_pull_policy,
                    command=["sleep", "3600"],
                    security_context=restricted,
                    resources=client.V1ResourceRequirements(requests={"cpu": "10m", "memory": "16Mi"},
                                                            limits={"memory": "64Mi"}),
                )
            ],
        ),
    )


def test_an_impostor_with_a_locales_labels_during_a_locale_loss_is_named_and_ignored(kube: Kube, ns: str) -> None:
    real = kube.core.read_namespaced_pod(LOCALE_POD, ns)
    kube.core.create_namespaced_pod(ns, impostor_pod(real))
    wait_for("the impostor Ready", lambda: ready(read_pod(kube, ns, IMPOSTOR)), timeout=120, interval=1,
             describe=lambda: kube.describe_pods(ns))
    impostor_ip = read_pod(kube, ns, IMPOSTOR).status.pod_ip
    server_uid = str(kube.core.read_namespaced_pod(SERVER_POD, ns).metadata.uid)
    before = launches(kube, ns)
    t0 = time.monotonic()
    kube.core.delete_namespaced_pod(LOCALE_POD, ns)  # the locale is lost; the impostor holds its ordinal meanwhile

    def relaunched() -> bool:
        locale = read_pod(kube, ns, LOCALE_POD)
        return (ready(locale) and locale.metadata.uid != real.metadata.uid and launches(kube, ns) > before
                and ready(read_pod(kube, ns, SERVER_POD)))

    wait_for("the relaunch on the replaced locale pod", relaunched, timeout=READY_TIMEOUT, interval=1,
             describe=lambda: kube.describe_pods(ns) + "\n" + event_lines(kube, ns))
    print(f"\nimpostor: relaunched on the real locale pod {time.monotonic() - t0:.1f}s after the loss")
    # the same server pod relaunched in place: the impostor neither stopped it nor entered the host list
    assert str(kube.core.read_namespaced_pod(SERVER_POD, ns).metadata.uid) == server_uid
    events = server_events(kube, ns, server_uid)
    named = [e.message for e in events if e.reason == "ImpostorPod"]
    assert named and f"ignoring pod {IMPOSTOR}" in named[0], event_lines(kube, ns)
    assert "Relaunching" in [e.reason for e in events]
    new_ip = read_pod(kube, ns, LOCALE_POD).status.pod_ip
    hosts = [e.message for e in events if e.reason == "LocalesReady"]
    assert any(f"{LOCALE_POD}={new_ip}" in h for h in hosts), hosts
    assert not any(impostor_ip in h for h in hosts), hosts
    assert f"ignoring pod {IMPOSTOR}" in kube.logs(ns, SERVER_POD, "server")
    kube.core.delete_namespaced_pod(IMPOSTOR, ns, grace_period_seconds=0)


def test_rollback_recreates_a_deleted_key_secret_and_the_server_comes_back(kube: Kube, ns: str) -> None:
    # a second revision to roll back from
    helm("upgrade", RELEASE, str(CHART), "-n", ns, "--reuse-values", "--wait", "--timeout", "8m", timeout=600)
    lost = kube.core.read_namespaced_secret(SECRET, ns).data
    kube.core.delete_namespaced_secret(SECRET, ns)
    t0 = time.monotonic()
    helm("rollback", RELEASE, "1", "-n", ns, "--wait", "--timeout", "8m", timeout=600)
    regenerated = kube.core.read_namespaced_secret(SECRET, ns).data  # the pre-rollback keygen hook made it
    assert base64.b64decode(regenerated["ssh_host_ed25519_key"]) != base64.b64decode(lost["ssh_host_ed25519_key"])
    old = str(kube.core.read_namespaced_pod(SERVER_POD, ns).metadata.uid)
    kube.core.delete_namespaced_pod(SERVER_POD, ns)

    def replaced_and_ready() -> bool:
        server = read_pod(kube, ns, SERVER_POD)
        return server is not None and server.metadata.uid != old and release_ready(kube, ns)

    wait_for("the replaced server pod and the locale Ready after the rollback", replaced_and_ready,
             timeout=READY_TIMEOUT, interval=1, describe=lambda: kube.describe_pods(ns) + "\n" + event_lines(kube, ns))
    print(f"\nrollback: release Ready again {time.monotonic() - t0:.1f}s after the rollback began")


def test_uninstall_leaves_nothing_of_the_release(kube: Kube, ns: str) -> None:
    helm("uninstall", RELEASE, "-n", ns, "--wait", "--timeout", "3m", timeout=300)
    selector = f"app.kubernetes.io/instance={RELEASE}"
    wait_for("no pod of the release left", lambda: not kube.pods(ns, selector), timeout=120, interval=1,
             describe=lambda: kube.describe_pods(ns, selector))
    assert not kube.batch.list_namespaced_job(ns, label_selector=selector).items
    assert not kube.core.list_namespaced_secret(ns, label_selector=selector).items


# -- interrupted installs ---------------------------------------------------------------------------------------

INTERRUPTED = "aki"
NO_PODS_QUOTA = "no-pods"  # the test's own object: it keeps the keygen hook from ever finishing


def block_pods(kube: Kube, ns: str) -> None:
    """A ResourceQuota of zero pods: the keygen Job exists but can never create its pod (FailedCreate), which is
    what a quota, a LimitRange or an admission webhook does to a real install."""
    quota = client.V1ResourceQuota(metadata=client.V1ObjectMeta(name=NO_PODS_QUOTA),
                                   spec=client.V1ResourceQuotaSpec(hard={"pods": "0"}))
    kube.core.create_namespaced_resource_quota(ns, quota)


def unblock_pods(kube: Kube, ns: str) -> None:
    kube.core.delete_namespaced_resource_quota(NO_PODS_QUOTA, ns)


def leftovers(kube: Kube, ns: str) -> list[str]:
    """Every object of the kinds the chart and its hooks create, except what each namespace has of its own."""
    own = {"ServiceAccount/default", "ConfigMap/kube-root-ca.crt"}
    lists = {
        "Job": kube.batch.list_namespaced_job, "Pod": kube.core.list_namespaced_pod,
        "Secret": kube.core.list_namespaced_secret, "ConfigMap": kube.core.list_namespaced_config_map,
        "ServiceAccount": kube.core.list_namespaced_service_account, "Service": kube.core.list_namespaced_service,
        "Role": kube.rbac.list_namespaced_role, "RoleBinding": kube.rbac.list_namespaced_role_binding,
        "StatefulSet": kube.apps.list_namespaced_stateful_set, "Deployment": kube.apps.list_namespaced_deployment,
        "PodDisruptionBudget": client.PolicyV1Api(kube.api).list_namespaced_pod_disruption_budget,
        "NetworkPolicy": client.NetworkingV1Api(kube.api).list_namespaced_network_policy,
    }
    found = [f"{kind}/{o.metadata.name}" for kind, list_ in lists.items() for o in list_(ns).items]
    return sorted(set(found) - own)


def keygen_job_exists(kube: Kube, ns: str) -> bool:
    name = f"{INTERRUPTED}-arkouda-keygen"
    return bool(kube.batch.list_namespaced_job(ns, field_selector=f"metadata.name={name}").items)


def install_args(ns: str, timeout: str) -> list[str]:
    return ["install", INTERRUPTED, str(CHART), "-n", ns, "-f", str(VALUES / "local.yaml"), *image_args(),
            "--set", "global.numLocales=2", "--wait", "--timeout", timeout]


def uninstall_leaves_nothing(kube: Kube, ns: str) -> None:
    unblock_pods(kube, ns)  # the operator's fix; the post-delete clean-up Job needs a pod too
    t0 = time.monotonic()
    helm("uninstall", INTERRUPTED, "-n", ns, "--wait", "--timeout", "3m", timeout=300)
    # the deleted Jobs' pods go in the background (garbage collection): wait for them, with a deadline
    wait_for("nothing of the release left in the namespace", lambda: not leftovers(kube, ns), timeout=120,
             interval=1, describe=lambda: f"left: {leftovers(kube, ns)}")
    print(f"\nuninstall after the interrupted install: namespace empty {time.monotonic() - t0:.1f}s after it began")


def test_uninstall_after_an_install_timed_out_in_the_keygen_hook_leaves_nothing(
        kube: Kube, make_namespace: Any) -> None:
    ns = make_namespace("aki-e2e")
    block_pods(kube, ns)
    proc = helm(*install_args(ns, "20s"), timeout=120, check=False)
    assert proc.returncode != 0, proc.stdout
    assert "pre-install" in proc.stderr, proc.stderr  # the failure is the hook's, not a later step's
    # Helm applied hook-failed to the Job (and its pods) itself; the keygen RBAC hook objects stay until uninstall
    assert not keygen_job_exists(kube, ns), leftovers(kube, ns)
    uninstall_leaves_nothing(kube, ns)


def test_uninstall_after_the_helm_client_was_killed_in_the_keygen_hook_leaves_nothing(
        kube: Kube, make_namespace: Any) -> None:
    ns = make_namespace("aki-e2e")
    block_pods(kube, ns)
    client_proc = subprocess.Popen(["helm", *install_args(ns, "5m")], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
    try:
        wait_for("the keygen Job of the install", lambda: keygen_job_exists(kube, ns), timeout=60, interval=0.5)
    finally:
        client_proc.send_signal(signal.SIGKILL)  # no delete policy runs in a client that does not live on
        client_proc.wait(timeout=30)
    assert keygen_job_exists(kube, ns), "no Job left behind: the clean-up below would prove nothing"
    uninstall_leaves_nothing(kube, ns)
