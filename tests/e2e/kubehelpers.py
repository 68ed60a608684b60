"""Helpers the end-to-end suite shares: helm and kubectl runners, waits with deadlines, release records.

Every wait here has a deadline and, on expiry, fails with what it was waiting for and what it saw last, so a
red e2e run says what to look at.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import gzip
import json
import logging
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client, config, watch

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "charts" / "arkouda"
VALUES = REPO_ROOT / "values"

T = TypeVar("T")


def run(argv: Sequence[str], *, timeout: float = 300, check: bool = True, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    """Run a command, log it, and fail with its output when it fails."""
    log.info("$ %s", " ".join(argv))
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"command failed ({proc.returncode}): {' '.join(argv)}\n"
            f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )
    return proc


def helm(*args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run(["helm", *args], timeout=timeout, check=check)


def image_args() -> list[str]:
    """--set flags that point the chart at the images `make images` built (tags live in hack/versions.env)."""
    tag = os.environ.get("IMAGE_TAG", "")
    return ["--set", f"global.image.tag={tag}"] if tag else []


def wait_for(what: str, probe: Callable[[], T | None], *, timeout: float, interval: float = 1.0,
             describe: Callable[[], str] | None = None) -> T:
    """Wait until probe() returns a truthy value; fail with `what` and a description of the state on expiry.

    Used only where the API offers no watch for the condition (exec output, helm state); pod and object
    state use watch_until().
    """
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            state = describe() if describe else ""
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{state}")
        time.sleep(interval)


@dataclass
class Kube:
    """The generated API classes, typed Any on purpose: the suite reads fields the API server always sets
    (metadata.name, status.podIP of Ready pods) and a failed lookup is a failed test anyway."""

    core: Any
    apps: Any
    batch: Any
    rbac: Any
    api: Any

    @classmethod
    def from_env(cls) -> Kube:
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))  # type: ignore[no-untyped-call]
        api = client.ApiClient()
        return cls(core=client.CoreV1Api(api), apps=client.AppsV1Api(api), batch=client.BatchV1Api(api),
                   rbac=client.RbacAuthorizationV1Api(api), api=api)

    def pods(self, namespace: str, selector: str) -> list[Any]:
        return list(self.core.list_namespaced_pod(namespace, label_selector=selector).items)

    def describe_pods(self, namespace: str, selector: str = "") -> str:
        lines = []
        for p in self.core.list_namespaced_pod(namespace, label_selector=selector).items:
            statuses = p.status.container_statuses or []
            states = ", ".join(f"{c.name}: ready={c.ready} restarts={c.restart_count} state={_state(c)}"
                               for c in statuses)
            lines.append(f"{p.metadata.name} phase={p.status.phase} ip={p.status.pod_ip} {states}")
        return "\n".join(lines) or "(no pods)"

    def watch_pods_until(self, namespace: str, selector: str, done: Callable[[list[Any]], bool], *,
                         timeout: float, what: str) -> list[Any]:
        """List, then watch from the list's resourceVersion, until done(pods) holds or the deadline passes."""
        deadline = time.monotonic() + timeout
        while True:
            listing: Any = self.core.list_namespaced_pod(namespace, label_selector=selector)
            pods = {p.metadata.name: p for p in listing.items}
            if done(list(pods.values())):
                return list(pods.values())
            w: Any = watch.Watch()  # type: ignore[no-untyped-call]
            try:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                for event in w.stream(self.core.list_namespaced_pod, namespace, label_selector=selector,
                                      resource_version=listing.metadata.resource_version,
                                      timeout_seconds=max(1, int(remaining))):
                    obj = event["object"]
                    if event["type"] == "DELETED":
                        pods.pop(obj.metadata.name, None)
                    else:
                        pods[obj.metadata.name] = obj
                    if done(list(pods.values())):
                        return list(pods.values())
                    if time.monotonic() > deadline:
                        break
            except client.ApiException as exc:
                if exc.status != 410:
                    raise
                continue  # resourceVersion too old: relist
            finally:
                w.stop()
            if time.monotonic() > deadline:
                break
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n"
                             f"{self.describe_pods(namespace, selector)}")

    def logs(self, namespace: str, pod: str, container: str, *, previous: bool = False,
             timestamps: bool = False) -> str:
        return str(self.core.read_namespaced_pod_log(pod, namespace, container=container, previous=previous,
                                                     timestamps=timestamps))

    def events_for(self, namespace: str, name: str) -> list[Any]:
        evs = self.core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
        return list(evs)


def wait_for_default_service_account(kube: Kube, namespace: str, *, timeout: float = 60) -> None:
    """Wait until the namespace's "default" ServiceAccount exists (list, then watch from the list's
    resourceVersion). The controller-manager creates it shortly after the namespace; until then the ServiceAccount
    admission refuses every pod of the namespace (`serviceaccount "default" not found`), which a busy
    controller-manager makes likely for a test that creates a pod right after its namespace."""
    selector = "metadata.name=default"
    deadline = time.monotonic() + timeout
    while (remaining := deadline - time.monotonic()) > 0:
        listing: Any = kube.core.list_namespaced_service_account(namespace, field_selector=selector)
        if listing.items:
            return
        w: Any = watch.Watch()  # type: ignore[no-untyped-call]
        try:
            for event in w.stream(kube.core.list_namespaced_service_account, namespace, field_selector=selector,
                                  resource_version=listing.metadata.resource_version,
                                  timeout_seconds=max(1, int(remaining))):
                if event["type"] in ("ADDED", "MODIFIED"):
                    return
        except client.ApiException as exc:
            if exc.status != 410:
                raise
        finally:
            w.stop()
    raise AssertionError(f"namespace {namespace} has no default ServiceAccount after {timeout:.0f}s: is the "
                         "controller-manager running?")


def _state(c: Any) -> str:
    s = c.state
    if s.running:
        return "running"
    if s.waiting:
        return f"waiting({s.waiting.reason})"
    if s.terminated:
        return f"terminated({s.terminated.reason},{s.terminated.exit_code})"
    return "?"


@contextlib.contextmanager
def port_forward(namespace: str, service: str, port: int, *, kind: str = "svc") -> Iterator[int]:
    """`kubectl port-forward <kind>/<service> :<port>` on a free local port; yields that local port. Through the
    API server and the pod's kubelet, so it reaches a pod on any node whatever the pod's NetworkPolicy (a fetch
    of the pod IP from the host does not: see hack/cluster/README.md, "The host is node 0")."""
    proc = subprocess.Popen(["kubectl", "-n", namespace, "port-forward", f"{kind}/{service}", f":{port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"127\.0\.0\.1:(\d+)", line)
        assert m, f"kubectl port-forward said: {line!r}"
        yield int(m.group(1))
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def gate_selector(release: str) -> str:
    """Label selector of a release's gate pod."""
    return f"app.kubernetes.io/instance={release},app.kubernetes.io/component=gate"


def ready_gate_pod(kube: Kube, namespace: str, release: str, *, timeout: float) -> str:
    """The name of the release's gate pod, once it is Ready (within `timeout` seconds)."""
    pods = kube.watch_pods_until(namespace, gate_selector(release), all_ready(1), timeout=timeout,
                                 what="the gate pod Ready")
    return str(pods[0].metadata.name)


def release_pods(release: str) -> str:
    """Label selector of a release's locale and server pods: not its helm test Pod, which stays (Completed)
    after a test until the next one replaces it."""
    return f"app.kubernetes.io/instance={release},app.kubernetes.io/component in (server,locale)"


def all_ready(expected: int) -> Callable[[list[Any]], bool]:
    def done(pods: list[Any]) -> bool:
        ready = [p for p in pods if p.metadata.deletion_timestamp is None and p.status.pod_ip
                 and any(c.type == "Ready" and c.status == "True" for c in (p.status.conditions or []))]
        return len(ready) == expected and len(pods) == expected
    return done


# a line of the hybrid MPI+OpenMP hello: thread t of n, rank r of m, on host
HELLO = re.compile(r"^Hello from thread (\d+) out of (\d+) from process (\d+) out of (\d+) on (\S+)$")


def hello_lines(text: str) -> tuple[collections.Counter[tuple[int, int]], set[str]]:
    """The hello lines in `text` (printed for the log), each checked for 2 threads x 2 ranks: how often each
    (rank, thread) said hello, and the hosts the ranks ran on."""
    seen: collections.Counter[tuple[int, int]] = collections.Counter()
    hosts = set()
    for line in text.splitlines():
        if m := HELLO.match(line.strip()):
            thread, threads, rank, ranks, host = m.groups()
            assert (int(threads), int(ranks)) == (2, 2), line
            seen[(int(rank), int(thread))] += 1
            hosts.add(host)
    print("\n" + "\n".join(ln for ln in text.splitlines() if HELLO.match(ln.strip())))
    return seen, hosts


def release_records(kube: Kube, namespace: str, release: str) -> list[str]:
    """Decode Helm's release records (Secrets sh.helm.release.v1.<release>.vN) to their JSON text."""
    out = []
    secrets = kube.core.list_namespaced_secret(namespace, label_selector=f"owner=helm,name={release}").items
    for s in secrets:
        raw = base64.b64decode(s.data["release"])  # Secret data encoding
        payload = base64.b64decode(raw)  # Helm's own base64
        if payload[:2] == b"\x1f\x8b":
            payload = gzip.decompress(payload)
        text = payload.decode()
        json.loads(text)  # a record that is not JSON means the decoding above is wrong: fail here, not later
        out.append(text)
    return out
