"""Key lifecycle on a real cluster, as a user meets it: a rotation on `helm upgrade` and a deleted Secret that the
next upgrade regenerates are picked up by the running sshds (no pod restarted by hand), so the next server pod
start finds its peers on the new keys; an inconsistent Secret is an Event on the server pod naming the field.

Each scenario prints how long the release took to be Ready again."""

from __future__ import annotations

import base64
import logging
import shlex
import time
from typing import Any

import pytest
from kubernetes import client

from kubehelpers import CHART, VALUES, Kube, all_ready, helm, image_args, release_pods, run, wait_for

log = logging.getLogger(__name__)

RELEASE = "akk"
RELEASE_SEL = release_pods(RELEASE)
SERVER_POD = f"{RELEASE}-arkouda-server-0"
LOCALE_POD = f"{RELEASE}-arkouda-locale-0"  # numLocales 2: the server pod and one locale pod
SECRET = f"{RELEASE}-arkouda-ssh"
SSH_PORT = 2222
RELOADED = "installed its keys and reloaded sshd"
# what the ready-again waits allow: the kubelet delivers a changed Secret within its sync period (about a
# minute), then the server's probe passes and the program starts
READY_TIMEOUT = 300


@pytest.fixture(scope="module")
def ns(make_namespace: Any) -> str:
    name: str = make_namespace("akk-e2e")
    return name


def secret_data(kube: Kube, ns: str) -> dict[str, bytes]:
    raw = kube.core.read_namespaced_secret(SECRET, ns).data or {}
    return {k: base64.b64decode(v) for k, v in raw.items()}


def pod_uid(kube: Kube, ns: str, name: str) -> str:
    return str(kube.core.read_namespaced_pod(name, ns).metadata.uid)


def restarts(kube: Kube, ns: str, name: str) -> int:
    pod = kube.core.read_namespaced_pod(name, ns)
    return sum(c.restart_count for c in pod.status.container_statuses or [])


def event_lines(kube: Kube, ns: str, pod: str) -> list[str]:
    return [f"{e.reason}: {e.message}" for e in kube.events_for(ns, pod)]


def restart_server_and_wait(kube: Kube, ns: str, what: str, t0: float) -> float:
    """Delete the server pod (a crash, a node drain, an eviction) and wait for its replacement and the locale to
    be Ready; returns the seconds since t0 and prints them."""
    old = pod_uid(kube, ns, SERVER_POD)
    kube.core.delete_namespaced_pod(SERVER_POD, ns)

    def replaced_and_ready() -> bool:
        pods = kube.pods(ns, RELEASE_SEL)
        server = [p for p in pods if p.metadata.name == SERVER_POD]
        return bool(server) and server[0].metadata.uid != old and all_ready(2)(pods)

    wait_for(
        f"the replaced server pod and the locale Ready ({what})",
        replaced_and_ready,
        timeout=READY_TIMEOUT,
        interval=0.5,
        describe=lambda: kube.describe_pods(ns, RELEASE_SEL) + "\nserver Events:\n"
        + "\n".join(event_lines(kube, ns, SERVER_POD)),
    )
    elapsed = time.monotonic() - t0
    print(f"\n{what}: release Ready again {elapsed:.1f}s after the change (server pod deleted and replaced)")
    waited = [line for line in event_lines(kube, ns, SERVER_POD) if line.startswith("KeysPending")]
    if waited:
        print(f"  the new server pod waited for a pod still on other keys: {waited[0]}")
    return elapsed


def ssh_logins_from_server_pod(kube: Kube, ns: str, old_client_key: bytes) -> dict[str, tuple[int, int, str]]:
    """From the server pod's `server` container, log in to every locale's sshd (locale 0 in this pod included)
    with the current client key and with `old_client_key` (written to /tmp there, removed after), checking the
    host key against the pinned known_hosts. Returns {ip: (status with the current key, status with the old key,
    output of the old key's attempt)}."""
    ips = [p.status.pod_ip for p in kube.pods(ns, RELEASE_SEL)]
    old_b64 = base64.b64encode(old_client_key).decode()
    options = (
        "-F /dev/null -o IdentitiesOnly=yes -o IdentityAgent=none -o BatchMode=yes -o StrictHostKeyChecking=yes "
        "-o UserKnownHostsFile=/run/arkouda/ssh/known_hosts -o GlobalKnownHostsFile=/dev/null "
        f"-o ConnectTimeout=10 -p {SSH_PORT}"
    )
    script = f"""
set -u
# the identity the bootstrap set up for its own ssh (an nss_wrapper passwd when the uid has no entry)
eval "$(grep '^export ' /run/arkouda/bin/ssh)"
user=$(sed -n 's/^  User //p' /run/arkouda/ssh_config)
umask 077
printf '%s' {shlex.quote(old_b64)} | base64 -d > /tmp/old_client_key
for ip in {" ".join(shlex.quote(ip) for ip in ips)}; do
  ssh {options} -i /run/arkouda/ssh/id_ed25519 -l "$user" "$ip" true >/dev/null 2>&1; new=$?
  out=$(ssh {options} -i /tmp/old_client_key -l "$user" "$ip" true 2>&1); old=$?
  echo "LOGIN $ip $new $old $(printf '%s' "$out" | tr '\\n' ' ')"
done
rm -f /tmp/old_client_key
"""
    proc = run(["kubectl", "-n", ns, "exec", SERVER_POD, "-c", "server", "--", "sh", "-c", script], timeout=120)
    results: dict[str, tuple[int, int, str]] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("LOGIN "):
            _, ip, new, old, *rest = line.split(" ")
            results[ip] = (int(new), int(old), " ".join(rest))
    assert sorted(results) == sorted(ips), proc.stdout + proc.stderr
    return results


def assert_old_client_key_refused_everywhere(kube: Kube, ns: str, old_client_key: bytes) -> None:
    logins = ssh_logins_from_server_pod(kube, ns, old_client_key)
    for ip, (new, old, output) in logins.items():
        # the current key logs in (so every sshd serves the pinned, new host key), the old one is refused
        assert new == 0, f"{ip}: login with the current client key failed ({new})"
        assert old != 0, f"{ip}: the old client key was accepted"
        assert "Permission denied (publickey)" in output, f"{ip}: not refused for the key: {output}"
    print(f"  old client key refused by every locale: {', '.join(sorted(logins))}")


def test_install(kube: Kube, ns: str) -> None:
    t0 = time.monotonic()
    helm("install", RELEASE, str(CHART), "-n", ns, "-f", str(VALUES / "local.yaml"), *image_args(),
         "--set", "global.numLocales=2", "--wait", "--timeout", "8m", timeout=600)
    log.info("helm install --wait took %.1fs", time.monotonic() - t0)
    kube.watch_pods_until(ns, RELEASE_SEL, all_ready(2), timeout=READY_TIMEOUT, what="the release's 2 pods Ready")
    assert keys_release_id(secret_data(kube, ns))


def keys_release_id(data: dict[str, bytes]) -> str:
    return data.get("release-id", b"").decode()


def test_rotation_on_upgrade_then_server_pod_restart(kube: Kube, ns: str) -> None:
    """Scenario 1: rotate on upgrade; the locales reload the keys in place (not restarted), the next server pod
    comes up on the new keys, and the old client key is refused by every locale."""
    before = secret_data(kube, ns)
    locale_uid, locale_restarts = pod_uid(kube, ns, LOCALE_POD), restarts(kube, ns, LOCALE_POD)
    t0 = time.monotonic()
    helm("upgrade", RELEASE, str(CHART), "-n", ns, "--reuse-values", "--set", "global.keyRotationId=e2e-rot-1",
         "--wait", "--timeout", "8m", timeout=600)
    after = secret_data(kube, ns)
    for field in ("ssh_host_ed25519_key", "id_ed25519", "authorized_keys"):
        assert after[field] != before[field], f"the rotation did not replace {field}"
    assert after["rotation-id"] == b"e2e-rot-1"
    assert after["release-id"] == before["release-id"]
    assert before["ssh_host_ed25519_key.pub"].split()[1] in after["retired_host_keys"]
    restart_server_and_wait(kube, ns, "rotation", t0)
    # the locale was not restarted: its sshd reloaded the rotated Secret
    assert pod_uid(kube, ns, LOCALE_POD) == locale_uid
    assert restarts(kube, ns, LOCALE_POD) == locale_restarts
    wait_for("the locale's sshd to reload the rotated keys",
             lambda: RELOADED in kube.logs(ns, LOCALE_POD, "locale"), timeout=READY_TIMEOUT, interval=2)
    assert_old_client_key_refused_everywhere(kube, ns, before["id_ed25519"])


def test_deleted_secret_regenerated_by_upgrade_then_server_pod_restart(kube: Kube, ns: str) -> None:
    """Scenario 2: the Secret is deleted (a cleanup job, a mistaken kubectl delete) and the next helm upgrade
    regenerates it; the locales still serve the lost Secret's keys until the kubelet delivers the new one, and the
    new server pod waits for them instead of crash-looping."""
    lost = secret_data(kube, ns)
    locale_uid = pod_uid(kube, ns, LOCALE_POD)
    reloads = kube.logs(ns, LOCALE_POD, "locale").count(RELOADED)
    kube.core.delete_namespaced_secret(SECRET, ns)
    t0 = time.monotonic()
    helm("upgrade", RELEASE, str(CHART), "-n", ns, "--reuse-values", "--wait", "--timeout", "8m", timeout=600)
    regenerated = secret_data(kube, ns)
    assert regenerated["ssh_host_ed25519_key"] != lost["ssh_host_ed25519_key"], "keygen did not regenerate"
    assert "retired_host_keys" not in regenerated, "a regenerated Secret cannot know the lost one's keys"
    assert regenerated["release-id"] == lost["release-id"], "the release id names the release, not the Secret"
    restart_server_and_wait(kube, ns, "regenerated Secret", t0)
    assert pod_uid(kube, ns, LOCALE_POD) == locale_uid
    wait_for("the locale's sshd to reload the regenerated Secret",
             lambda: kube.logs(ns, LOCALE_POD, "locale").count(RELOADED) > reloads, timeout=READY_TIMEOUT,
             interval=2)
    assert_old_client_key_refused_everywhere(kube, ns, lost["id_ed25519"])


def test_inconsistent_secret_is_an_event_naming_the_field(kube: Kube, ns: str) -> None:
    """Scenario 3: a Secret whose host public key does not belong to its host key. The server pod refuses it with
    the SecretInvalid Event naming the field; the running locale keeps its keys and says why; repaired, the
    release is Ready again."""
    good = secret_data(kube, ns)
    bad = dict(good)
    bad["ssh_host_ed25519_key.pub"] = good["id_ed25519.pub"]  # a valid key, but not the host key's
    body = {"data": {k: base64.b64encode(v).decode() for k, v in bad.items()}}
    kube.core.patch_namespaced_secret(SECRET, ns, body)
    t0 = time.monotonic()
    old = pod_uid(kube, ns, SERVER_POD)
    kube.core.delete_namespaced_pod(SERVER_POD, ns)
    # the server container holds the host public key but not the private one: it sees the public key disagree
    # with the pinned one; the locale's sshd sees it disagree with the private key
    expected = "field ssh_host_ed25519_key.pub: does not match"

    def refusal() -> str | None:
        try:
            server = kube.core.read_namespaced_pod(SERVER_POD, ns)
        except client.ApiException as exc:
            if exc.status == 404:  # not re-created yet
                return None
            raise
        if server.metadata.uid == old:
            return None
        lines = [f"{e.reason}: {e.message}" for e in kube.events_for(ns, SERVER_POD)
                 if e.involved_object.uid == server.metadata.uid]
        return next((line for line in lines if line.startswith("SecretInvalid") and expected in line), None)

    event = wait_for("the SecretInvalid Event on the new server pod", refusal, timeout=180, interval=1,
                     describe=lambda: "\n".join(event_lines(kube, ns, SERVER_POD)))
    print(f"\ninconsistent Secret: Event after {time.monotonic() - t0:.1f}s: {event}")
    # the running locale does not take the bad update: it keeps serving the keys it has and says why, once
    wait_for("the locale's refusal of the changed Secret",
             lambda: "the changed Secret is unusable" in kube.logs(ns, LOCALE_POD, "locale"),
             timeout=READY_TIMEOUT, interval=2)
    assert expected in kube.logs(ns, LOCALE_POD, "locale")
    # repaired: the original data back, then a fresh server pod (a crash-looping container would wait out
    # the kubelet's back-off)
    labels = kube.core.read_namespaced_secret(SECRET, ns).metadata.labels
    data = {k: base64.b64encode(v).decode() for k, v in good.items()}
    kube.core.replace_namespaced_secret(SECRET, ns, {"metadata": {"name": SECRET, "labels": labels}, "data": data})
    restart_server_and_wait(kube, ns, "inconsistent Secret repaired", time.monotonic())


def test_uninstall(ns: str) -> None:
    helm("uninstall", RELEASE, "-n", ns, "--wait", "--timeout", "3m", timeout=300)
