"""Arkouda mode with `server.authenticate=true` and the chart's other defaults (metrics on, the gate in front),
as a user runs it: the token reaches the server through the work dir's .arkouda/tokens.txt (what a real
arkouda_server reads first), NOTES.txt's lines work as pasted, a wrong token and a stale token after a rotation
are each answered by the gate with its reason (Arkouda itself would end its request loop without a reply) and
the next correct client is served at once, and key rotation is one-shot across `helm upgrade --reuse-values`."""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kubehelpers import (
    CHART,
    REPO_ROOT,
    VALUES,
    Kube,
    all_ready,
    helm,
    image_args,
    port_forward,
    release_pods,
)

log = logging.getLogger(__name__)

RELEASE = "aka"
RELEASE_SEL = release_pods(RELEASE)
SERVER_POD = f"{RELEASE}-arkouda-server-0"
SECRET = f"{RELEASE}-arkouda-ssh"
STANDIN_LIB = REPO_ROOT / "docker" / "arkouda" / "standin" / "lib"
CLIENT_DOUBLE = Path(__file__).resolve().parent / "clientdouble"
sys.path.insert(0, str(STANDIN_LIB))

from arkouda_standin.client import HandshakeError, handshake  # noqa: E402


@pytest.fixture(scope="module")
def ns(make_namespace: Any) -> str:
    name: str = make_namespace("aka-e2e")
    return name


def secret_field(kube: Kube, ns: str, field: str) -> bytes:
    return base64.b64decode(kube.core.read_namespaced_secret(SECRET, ns).data[field])


def client_port(ns: str) -> contextlib.AbstractContextManager[int]:
    return port_forward(ns, f"{RELEASE}-arkouda-server", 5555)


def server_ready(kube: Kube, ns: str, *, timeout: float = 180) -> None:
    kube.watch_pods_until(ns, RELEASE_SEL, all_ready(2), timeout=timeout, what="the release's 2 pods Ready")


def test_install_with_authentication(kube: Kube, ns: str) -> None:
    t0 = time.monotonic()
    # The chart's defaults otherwise: with the METRICS daemon a wrong token would leave Arkouda's client port
    # silent for good while the process lives on (docker/README.md); the gate keeps such requests away from it.
    helm("install", RELEASE, str(CHART), "-n", ns, "-f", str(VALUES / "local.yaml"), *image_args(),
         "--set", "global.numLocales=2", "--set", "server.authenticate=true",
         "--wait", "--timeout", "8m", timeout=600)
    log.info("helm install --wait (authenticate) took %.1fs", time.monotonic() - t0)
    token = secret_field(kube, ns, "token")
    assert token == token.strip() and len(token) >= 32, "the keygen token has no line end or padding"
    server = kube.core.read_namespaced_pod(SERVER_POD, ns)
    assert [c.name for c in server.spec.containers] == ["sshd", "server", "metrics"]
    args = next(c.args for c in server.spec.containers if c.name == "server")
    assert any("ServerDaemonType.METRICS" in a for a in args), args
    # the client Service is the gate's, on the client port only; the gate mounts the token and nothing else
    svc = kube.core.read_namespaced_service(f"{RELEASE}-arkouda-server", ns)
    assert svc.spec.selector["app.kubernetes.io/component"] == "gate"
    assert [p.name for p in svc.spec.ports] == ["arkouda"]
    gate = kube.apps.read_namespaced_deployment(f"{RELEASE}-arkouda-gate", ns).spec.template.spec
    assert [(v.secret.secret_name, [(i.key, i.path) for i in v.secret.items]) for v in gate.volumes] == [
        (SECRET, [("token", "token")])]
    logs = kube.logs(ns, SERVER_POD, "server")
    assert "wrote this launch's Arkouda token to /var/lib/arkouda/.arkouda/tokens.txt" in logs, logs[-3000:]


def test_helm_test_passes_with_authentication(ns: str) -> None:
    proc = helm("test", RELEASE, "-n", ns, "--timeout", "5m", timeout=400)
    assert re.search(r"Phase:\s+Succeeded", proc.stdout), proc.stdout


def test_notes_lines_work_as_pasted(kube: Kube, ns: str, tmp_path: Path) -> None:
    """Every kubectl/helm/TOKEN/python line NOTES.txt prints for this release, run as a user pastes it."""
    notes = helm("get", "notes", RELEASE, "-n", ns).stdout
    lines = [ln.strip() for ln in notes.splitlines()
             if ln.strip().startswith(("kubectl ", "helm ", "TOKEN=", "python3 ", "curl "))]
    assert lines, notes
    for ln in lines:
        if ln.startswith(("kubectl ", "helm ")):
            assert f"-n {ns}" in ln, f"pasted without a namespace it would act on another one: {ln}"
    script = ["set -euo pipefail", "pids=()"]
    for ln in lines:
        if " logs -f " in ln:
            # follows forever when pasted; run it bounded and require that it printed the server's log
            script.append(f"timeout 5 {ln.replace(' logs -f ', ' logs ')} | tail -n 3")
        elif ln.endswith("&"):
            script.append(ln)
            script.append("pids+=($!)")
            script.append("for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/5555) 2>/dev/null && break; "
                          "sleep 0.2; done")
        else:
            script.append(ln)
    script.append('kill "${pids[@]}" 2>/dev/null || true')
    path = tmp_path / "notes.sh"
    path.write_text("\n".join(script) + "\n")
    log.info("pasting NOTES.txt:\n%s", path.read_text())
    env = {**os.environ, "PYTHONPATH": f"{CLIENT_DOUBLE}:{STANDIN_LIB}"}
    proc = subprocess.run(["bash", str(path)], capture_output=True, text=True, timeout=300, env=env, check=False)
    assert proc.returncode == 0, f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    # the python line prints numLocales: the pasted token was accepted by the server
    assert proc.stdout.strip().splitlines()[-1] == "2", proc.stdout
    assert "arkouda TEST DOUBLE" in proc.stderr


def server_restarts(kube: Kube, ns: str) -> int:
    pod = kube.core.read_namespaced_pod(SERVER_POD, ns)
    return sum(c.restart_count for c in pod.status.container_statuses)


def refused_then_served(ns: str, *, wrong: str, right: str) -> float:
    """A client with `wrong` gets the gate's error naming the token; the next one, with `right`, is served;
    returns how long that second handshake took."""
    with client_port(ns) as port:
        with pytest.raises(HandshakeError, match=r"connect: server error: .*not the release's current token"):
            handshake(host="127.0.0.1", port=port, token=wrong, user="e2e", timeout=30)
        began = time.monotonic()
        assert handshake(host="127.0.0.1", port=port, token=right, user="e2e", timeout=30).config["numLocales"] == 2
        return time.monotonic() - began


def test_a_wrong_token_gets_the_gates_error_and_the_next_client_is_served_at_once(kube: Kube, ns: str) -> None:
    """Arkouda v2025.01.13 does not answer a wrong token: the error escapes its request loop, which ends for
    good (with the metrics daemon the process lives on). The gate checks the token first and answers itself."""
    restarts = server_restarts(kube, ns)
    uid = kube.core.read_namespaced_pod(SERVER_POD, ns).metadata.uid
    took = refused_then_served(ns, wrong="not-the-token", right=secret_field(kube, ns, "token").decode())
    print(f"\nwrong token: the gate's error, then the right token's handshake in {took:.2f} s")
    assert took < 5
    assert server_restarts(kube, ns) == restarts
    assert kube.core.read_namespaced_pod(SERVER_POD, ns).metadata.uid == uid
    assert "does not match server token" not in kube.logs(ns, SERVER_POD, "server")


def test_rotation_is_one_shot_across_reuse_values_upgrades(kube: Kube, ns: str) -> None:
    before = {f: secret_field(kube, ns, f) for f in ("token", "ssh_host_ed25519_key", "id_ed25519")}
    t0 = time.monotonic()
    helm("upgrade", RELEASE, str(CHART), "-n", ns, "--reuse-values", "--set", "global.keyRotationId=e2e-1",
         "--wait", "--timeout", "8m", timeout=600)
    server_ready(kube, ns)
    log.info("rotation: release Ready again with the new keys after %.1fs", time.monotonic() - t0)
    rotated = {f: secret_field(kube, ns, f) for f in before}
    assert all(rotated[f] != before[f] for f in before), "rotation replaces host key, client key and token"
    assert secret_field(kube, ns, "rotation-id") == b"e2e-1"
    uids = {p.metadata.name: p.metadata.uid for p in kube.pods(ns, RELEASE_SEL)}
    with client_port(ns) as port:
        result = handshake(host="127.0.0.1", port=port, token=rotated["token"].decode(), user="e2e", timeout=30)
    assert result.config["numLocales"] == 2
    # a notebook that kept the token from before the rotation: the gate's error, the next client served at once
    took = refused_then_served(ns, wrong=before["token"].decode(), right=rotated["token"].decode())
    print(f"\nstale token after a rotation: the gate's error, then the new token's handshake in {took:.2f} s")
    assert took < 5
    assert "does not match server token" not in kube.logs(ns, SERVER_POD, "server")
    # `--reuse-values` replays global.keyRotationId=e2e-1: it must not rotate again, nor roll the pods
    for _ in range(2):
        helm("upgrade", RELEASE, str(CHART), "-n", ns, "--reuse-values", "--wait", "--timeout", "5m", timeout=400)
        assert {f: secret_field(kube, ns, f) for f in before} == rotated
        server_ready(kube, ns)
        assert {p.metadata.name: p.metadata.uid for p in kube.pods(ns, RELEASE_SEL)} == uids


def test_uninstall(ns: str) -> None:
    helm("uninstall", RELEASE, "-n", ns, "--wait", "--timeout", "3m", timeout=300)
