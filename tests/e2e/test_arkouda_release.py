"""Arkouda mode on the real local node: install, contract, security, recovery, upgrade, uninstall.

The tests of this module run top to bottom against one release (pytest keeps file order); each asserts one
claim the README makes. The launch path is the real one: GASNet-EX's amudprun spawns every locale over our
pinned ssh into the pods' sshd, and each joins a real GASNet udp job (active messages, a barrier). Only what
Arkouda's Chapel code does after that is a stand-in (docker/arkouda/standin/, named in every reply).
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time
import urllib.request
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
    port_forward,
    release_pods,
    release_records,
    wait_for,
)

log = logging.getLogger(__name__)

RELEASE = "ak"
LOCALE_SEL = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=locale"
SERVER_SEL = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=server"
RELEASE_SEL = release_pods(RELEASE)
SERVER_POD = f"{RELEASE}-arkouda-server-0"
SECRET = f"{RELEASE}-arkouda-ssh"
REPORT_PREFIX = "ARKOUDA-STANDIN-GASNET-LOCALES "
# GASNet's output of every locale (routed by amudprun into the server container's log), docker/README.md
BARRIER = re.compile(
    r"arkouda_server_real STAND-IN: locale (\d+) of (\d+) passed the GASNet barrier after exchanging active "
    r"messages with (\d+) locale\(s\): host=(\S+) pid=(\d+) uid=(\d+) ssh=(\S+)")


@pytest.fixture(scope="module")
def ns(make_namespace: Any) -> str:
    name: str = make_namespace("ak-e2e")
    return name


def server_restarts(kube: Kube, ns: str) -> int:
    pod = kube.core.read_namespaced_pod(SERVER_POD, ns)
    return sum(c.restart_count for c in (pod.status.container_statuses or []) if c.name == "server")


def test_install_with_wait(kube: Kube, ns: str) -> None:
    t0 = time.monotonic()
    helm("install", RELEASE, str(CHART), "-n", ns, "-f", str(VALUES / "local.yaml"), *image_args(),
         "--wait", "--timeout", "8m", timeout=600)
    log.info("helm install --wait took %.1fs", time.monotonic() - t0)
    pods = kube.watch_pods_until(ns, RELEASE_SEL, all_ready(3), timeout=60, what="3 Ready pods of the release")
    assert sorted(p.metadata.name for p in pods) == sorted(
        [SERVER_POD, f"{RELEASE}-arkouda-locale-0", f"{RELEASE}-arkouda-locale-1"])


def test_keygen_hook_succeeded_and_was_cleaned_up(kube: Kube, ns: str) -> None:
    jobs = kube.batch.list_namespaced_job(ns).items
    assert [j.metadata.name for j in jobs] == [], "hook Jobs must be deleted after they succeeded"
    secret = kube.core.read_namespaced_secret(SECRET, ns)
    assert {"id_ed25519", "id_ed25519.pub", "authorized_keys", "ssh_host_ed25519_key",
            "ssh_host_ed25519_key.pub", "known_hosts"} <= set(secret.data)
    assert secret.metadata.labels.get("app.kubernetes.io/managed-by") == "arkouda-bootstrap"


def test_server_found_and_probed_every_locale(kube: Kube, ns: str) -> None:
    logs = kube.logs(ns, SERVER_POD, "server")
    locales = kube.pods(ns, LOCALE_SEL)
    assert len(locales) == 2
    for pod in locales:
        assert pod.status.pod_ip in logs, f"server log never mentions {pod.metadata.name} ({pod.status.pod_ip})"
    # the server probes every host of the launch, its own pod first: one `probe <ip> (<pod>): attempt n/N` line each
    server_ip = kube.core.read_namespaced_pod(SERVER_POD, ns).status.pod_ip
    hosts = [(server_ip, SERVER_POD)] + [(p.status.pod_ip, p.metadata.name) for p in locales]
    for ip, name in hosts:
        line = rf"probe {re.escape(ip)} \({re.escape(name)}\): attempt 1/\d+"
        assert re.search(line, logs), f"server log has no probe line for {name} ({ip})"
    assert f"ssh probe: all {len(hosts)} hosts answered" in logs, "server log does not say every host answered"
    reasons = {e.reason for e in kube.events_for(ns, SERVER_POD)}
    assert {"LocalesReady", "Launched"} <= reasons, f"server pod Events: {sorted(reasons)}"


def launch_report(logs: str) -> dict[str, Any]:
    """The last GASNet job's locale table, printed by the stand-in's arkouda_server_real on locale 0 after the
    GASNet barrier (docker/README.md), checked against every locale's own barrier line in the same log."""
    reports = [ln.split(REPORT_PREFIX, 1)[1] for ln in logs.splitlines() if REPORT_PREFIX in ln]
    assert reports, f"no {REPORT_PREFIX.strip()} line in the server log:\n{logs[-3000:]}"
    report: dict[str, Any] = json.loads(reports[-1])
    passed = {(int(m.group(1)), int(m.group(5))): m for m in BARRIER.finditer(logs)}
    for loc in report["locales"]:
        m = passed.get((loc["id"], loc["pid"]))
        assert m, f"locale {loc['id']} (pid {loc['pid']}) has no 'passed the GASNet barrier' line:\n{logs[-3000:]}"
        assert int(m.group(2)) == report["numLocales"], m.group(0)
        assert int(m.group(3)) == report["numLocales"] - 1, m.group(0)  # active messages with every other locale
    return report


def test_arkouda_launch_contract(kube: Kube, ns: str) -> None:
    """The real amudprun's ssh spawner started every locale, each joined the GASNet job and passed its barrier:
    locale i on host i of the bootstrap's list (own pod IP first, then StatefulSet ordinals; GASNET_WORKER_RANK
    forced by the bootstrap's GASNET_SSH_CMD script), reached through sshd, as uid 1000, with the bootstrap's
    pinned ssh config, GASNET_MASTERIP = server pod IP and -nl N."""
    server = kube.core.read_namespaced_pod(SERVER_POD, ns)
    locales = {p.metadata.name: p for p in kube.pods(ns, LOCALE_SEL)}
    expected_hosts = [server.status.pod_ip] + [locales[f"{RELEASE}-arkouda-locale-{i}"].status.pod_ip
                                               for i in range(2)]
    expected_names = [SERVER_POD] + [f"{RELEASE}-arkouda-locale-{i}" for i in range(2)]
    report = launch_report(kube.logs(ns, SERVER_POD, "server"))
    assert report["numLocales"] == 3, "the bootstrap must append -nl <global.numLocales>"
    spawner = report["spawner"]
    assert spawner["GASNET_SPAWNFN"] == "S"
    assert spawner["GASNET_SSH_SERVERS"].split()[:3] == expected_hosts, "own pod IP first, then ordinals"
    assert spawner["GASNET_MASTERIP"] == server.status.pod_ip
    assert re.fullmatch(r"/bin/sh \S+/gasnet-ssh", spawner["GASNET_SSH_CMD"]), spawner["GASNET_SSH_CMD"]
    assert re.fullmatch(r"-F \S+/ssh_config", spawner["GASNET_SSH_OPTIONS"]), spawner["GASNET_SSH_OPTIONS"]
    # every locale's working directory is the writable emptyDir, where Arkouda creates .arkouda/ at start (a
    # read-only directory would have halted the program before it listened)
    assert spawner["GASNET_SSH_REMOTE_PATH"] == "/var/lib/arkouda"
    for i, loc in enumerate(report["locales"]):
        assert loc["id"] == i
        where = loc["sshAddress"]
        assert where == expected_hosts[i], f"locale {i} ran on {where}, expected {expected_hosts[i]}"
        assert loc["name"] == expected_names[i]
        assert loc["uid"] == 1000, f"locale {i} runs as uid {loc['uid']}"


def test_helm_test_passes(ns: str) -> None:
    proc = helm("test", RELEASE, "-n", ns, "--timeout", "5m", timeout=400)
    print(proc.stdout)
    assert re.search(r"Phase:\s+Succeeded", proc.stdout), proc.stdout
    # the hook output-log policy: helm prints the test Pod's log (on stderr)
    assert "PASS: numLocales == 3" in proc.stderr, proc.stderr


def test_helm_test_logs_works_as_most_users_run_it(ns: str) -> None:
    """`helm test --logs` reads the Pod's log after Helm's hook clean-up: the passed Pod must still be there."""
    proc = helm("test", RELEASE, "-n", ns, "--logs", "--timeout", "5m", timeout=400)
    assert re.search(r"Phase:\s+Succeeded", proc.stdout), proc.stdout
    assert f"POD LOGS: {RELEASE}-arkouda-test" in proc.stdout, proc.stdout
    assert "PASS: numLocales == 3" in proc.stdout


def scrape(ns: str) -> str:
    """GET /metrics of the exporter through the Service that reaches the server pod (kubectl port-forward on a
    free local port); the client Service is the gate's."""
    with (
        port_forward(ns, f"{RELEASE}-arkouda-server-direct", 9556) as port,
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp,
    ):
        return str(resp.read().decode())


def sample(text: str, name: str) -> float:
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert m, f"no sample {name} in /metrics:\n{text[:3000]}"
    return float(m.group(1))


def test_metrics_reach_prometheus_through_the_service(kube: Kube, ns: str) -> None:
    """The exporter sidecar serves Arkouda's metrics in the Prometheus format on the server pod's Service's metrics
    port, and a counter moves with client requests through the gate; the ZeroMQ metrics socket itself is on no
    Service, and the client Service (the gate's) has the client port only."""
    direct = kube.core.read_namespaced_service(f"{RELEASE}-arkouda-server-direct", ns)
    assert {(p.name, p.port) for p in direct.spec.ports} == {("arkouda", 5555), ("metrics", 9556)}
    svc = kube.core.read_namespaced_service(f"{RELEASE}-arkouda-server", ns)
    assert {(p.name, p.port) for p in svc.spec.ports} == {("arkouda", 5555)}
    before = scrape(ns)
    assert sample(before, "arkouda_exporter_last_poll_ok") == 1.0, before[:3000]
    assert sample(before, "arkouda_locales") == 3.0
    requests_before = sample(before, "arkouda_requests_total")
    proc = helm("test", RELEASE, "-n", ns, "--timeout", "5m", timeout=400)  # a client's handshake: 3 requests
    assert re.search(r"Phase:\s+Succeeded", proc.stdout), proc.stdout
    after = scrape(ns)
    assert sample(after, "arkouda_requests_total") >= requests_before + 3, "the request counter did not move"


def test_release_records_hold_no_private_key(kube: Kube, ns: str) -> None:
    records = release_records(kube, ns, RELEASE)
    assert records, "no Helm release records found"
    secret = kube.core.read_namespaced_secret(SECRET, ns)
    private = base64.b64decode(secret.data["id_ed25519"]).decode()
    host_private = base64.b64decode(secret.data["ssh_host_ed25519_key"]).decode()
    body_lines = [ln for ln in (private + host_private).splitlines() if ln and "PRIVATE KEY" not in ln]
    for text in records:
        assert "PRIVATE KEY" not in text
        for ln in body_lines:
            assert ln not in text, "a line of the generated private keys appears in Helm's release records"


def test_bootstrap_kube_code_runs_with_the_charts_own_rbac(kube: Kube, ns: str, tmp_path: Any) -> None:
    """The bootstrap's seam (list+watch pods, pod Events, create Event) against the real API server, with a
    token of the chart's server ServiceAccount: its Role must allow exactly what the bootstrap needs."""
    from arkouda_bootstrap.errors import BootstrapError
    from arkouda_bootstrap.kube.api import KubernetesApi, PodRef
    from arkouda_bootstrap.server.discovery import wait_for_locales

    sa = f"{RELEASE}-arkouda-server"
    kubeconfig = tmp_path / "sa.kubeconfig"
    write_sa_kubeconfig(kube, ns, sa, kubeconfig)
    api = KubernetesApi.from_kubeconfig(kubeconfig)
    lines: list[str] = []
    pods = wait_for_locales(api, namespace=ns, selector=LOCALE_SEL, expected=2, timeout=30, report=lines.append)
    assert [p.name for p in pods] == [f"{RELEASE}-arkouda-locale-0", f"{RELEASE}-arkouda-locale-1"]
    server = kube.core.read_namespaced_pod(SERVER_POD, ns)
    api.create_event(pod=PodRef(name=SERVER_POD, namespace=ns, uid=server.metadata.uid),
                     reason="E2EProbe", message="event written with the server ServiceAccount")
    assert "E2EProbe" in {e.reason for e in kube.events_for(ns, SERVER_POD)}
    # least privilege: the same identity may not read the key Secret, and the error names the RBAC verb
    with pytest.raises(BootstrapError, match=r"missing RBAC: get secrets"):
        api.get_secret(namespace=ns, name=SECRET)


def write_sa_kubeconfig(kube: Kube, ns: str, sa: str, path: Any) -> None:
    req = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[],
                                                                             expiration_seconds=600))
    token = kube.core.create_namespaced_service_account_token(sa, ns, req).status.token
    cfg = kube.api.configuration
    ca = cfg.ssl_ca_cert
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": cfg.host, "certificate-authority": ca}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": ns}}],
        "current-context": "x",
    }))


def reasons_of(kube: Kube, ns: str, pod: str) -> list[str]:
    return [e.reason for e in kube.events_for(ns, pod)]


def test_locale_loss_relaunches_in_place_and_the_release_recovers(kube: Kube, ns: str) -> None:
    """A lost locale stops the program; the server waits for the replacement and relaunches in place (no
    container restart, so no kubelet back-off), on the replacement's address."""
    restarts_before = server_restarts(kube, ns)
    launched_before = reasons_of(kube, ns, SERVER_POD).count("Launched")
    victim = f"{RELEASE}-arkouda-locale-1"
    old_uid = kube.core.read_namespaced_pod(victim, ns).metadata.uid
    t0 = time.monotonic()
    kube.core.delete_namespaced_pod(victim, ns, grace_period_seconds=0)

    def relaunched() -> bool:
        # Events carry no sub-second order, so count them: one more Launched than before the loss
        return (reasons_of(kube, ns, SERVER_POD).count("Launched") > launched_before
                and all_ready(3)(kube.pods(ns, RELEASE_SEL)))

    wait_for("the server to relaunch and all 3 pods to be Ready again", relaunched, timeout=300, interval=0.5,
             describe=lambda: f"server Events: {reasons_of(kube, ns, SERVER_POD)}")
    elapsed = time.monotonic() - t0
    print(f"\nrecovery: locale pod deleted -> program relaunched, release Ready in {elapsed:.1f}s")
    reasons = reasons_of(kube, ns, SERVER_POD)
    assert "LocaleLost" in reasons and "Relaunching" in reasons, f"server pod Events: {reasons}"
    assert server_restarts(kube, ns) == restarts_before, "the server container restarted instead of relaunching"
    replacement = kube.core.read_namespaced_pod(victim, ns)
    assert replacement.metadata.uid != old_uid
    logs = kube.logs(ns, SERVER_POD, "server")
    # the first thing the monitor sees is "is terminating" or "was deleted", depending on the watch timing
    assert re.search(rf"locale pod {victim} (is terminating|was deleted|was replaced)[^\n]*; relaunching when all "
                     "locales are Ready again", logs), logs[-3000:]
    # GASNet itself ended the job: amudprun aborts it when a node's connection drops (exit 255), or the
    # locale's ssh failing kills amudprun (SIGTERM)
    wait_for("the relaunched GASNet job's locale table", lambda: logs_have_reports(kube, ns, 2), timeout=60)
    report = launch_report(kube.logs(ns, SERVER_POD, "server"))
    assert report["locales"][2]["sshAddress"] == replacement.status.pod_ip, "relaunched on the replacement's IP"
    assert report["locales"][2]["name"] == victim


def logs_have_reports(kube: Kube, ns: str, count: int) -> bool:
    return kube.logs(ns, SERVER_POD, "server").count(REPORT_PREFIX) >= count


def test_upgrade_from_3_to_4_locales(kube: Kube, ns: str) -> None:
    helm("upgrade", RELEASE, str(CHART), "-n", ns, "-f", str(VALUES / "local.yaml"), *image_args(),
         "--set", "global.numLocales=4", "--wait", "--timeout", "8m", timeout=600)
    pods = kube.watch_pods_until(ns, RELEASE_SEL, all_ready(4), timeout=300, what="4 Ready pods after upgrade")
    assert len([p for p in pods if p.metadata.labels["app.kubernetes.io/component"] == "locale"]) == 3

    def launched_with_4() -> bool:
        logs = kube.logs(ns, SERVER_POD, "server")
        return REPORT_PREFIX in logs and launch_report(logs)["numLocales"] == 4

    wait_for("the server to launch 4 locales", launched_with_4, timeout=180, interval=3,
             describe=lambda: kube.logs(ns, SERVER_POD, "server")[-3000:])
    helm("test", RELEASE, "-n", ns, "--timeout", "5m", timeout=400)


def test_uninstall_leaves_nothing(kube: Kube, ns: str) -> None:
    helm("uninstall", RELEASE, "-n", ns, "--wait", "--timeout", "5m", timeout=400)

    def leftovers() -> list[str]:
        left = [f"pod/{p.metadata.name}" for p in kube.core.list_namespaced_pod(ns).items]
        left += [f"service/{s.metadata.name}" for s in kube.core.list_namespaced_service(ns).items]
        left += [f"secret/{s.metadata.name}" for s in kube.core.list_namespaced_secret(ns).items]
        left += [f"job/{j.metadata.name}" for j in kube.batch.list_namespaced_job(ns).items]
        left += [f"configmap/{c.metadata.name}" for c in kube.core.list_namespaced_config_map(ns).items
                 if c.metadata.name != "kube-root-ca.crt"]
        left += [f"serviceaccount/{s.metadata.name}" for s in kube.core.list_namespaced_service_account(ns).items
                 if s.metadata.name != "default"]
        left += [f"role/{r.metadata.name}" for r in kube.rbac.list_namespaced_role(ns).items]
        return left

    wait_for("uninstall to remove every object of the release", lambda: not leftovers() or None, timeout=120,
             describe=lambda: "left: " + ", ".join(leftovers()))
