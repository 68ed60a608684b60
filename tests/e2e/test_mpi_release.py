"""mode: mpi on the real local node: the hybrid MPI+OpenMP hello over the server pod and a locale pod, started
by mpirun over the bootstrap's ssh setup; then the Himeno-style benchmark through the same path."""

from __future__ import annotations

import logging
import re
import time
import urllib.request
from typing import Any

import pytest

from kubehelpers import (
    CHART,
    VALUES,
    Kube,
    all_ready,
    hello_lines,
    helm,
    image_args,
    port_forward,
    release_pods,
    wait_for,
)

log = logging.getLogger(__name__)

RELEASE = "mpi"
RELEASE_SEL = release_pods(RELEASE)
SERVER_POD = f"{RELEASE}-arkouda-server-0"
RESULTS_PORT = 8080  # server.mpi.resultsPort, the chart's default


@pytest.fixture(scope="module")
def ns(make_namespace: Any) -> str:
    name: str = make_namespace("mpi-e2e")
    return name


def results(kube: Kube, ns: str, timeout: float = 300) -> str:
    """The output the server pod serves after mpirun finished (the same file `helm test` reads), fetched through
    `kubectl port-forward` to the pod: the pod may run on any node, and its NetworkPolicy admits only pods of
    the namespace, so a fetch of its pod IP from the host works only while it happens to run on node 0. One
    port-forward per attempt: kubectl ends it when a connection to the pod fails (nothing served yet)."""
    def fetch() -> str | None:
        if kube.core.read_namespaced_pod(SERVER_POD, ns).status.phase != "Running":
            return None
        with port_forward(ns, SERVER_POD, RESULTS_PORT, kind="pod") as port:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/output.txt", timeout=5) as resp:
                    return str(resp.read().decode())
            except OSError:
                return None

    return wait_for("the MPI output served by the server pod", fetch, timeout=timeout, interval=2,
                    describe=lambda: kube.describe_pods(ns) + "\n" + kube.logs(ns, SERVER_POD, "server")[-3000:])


def test_hybrid_hello_runs_over_the_locale_pods(kube: Kube, ns: str) -> None:
    helm("install", RELEASE, str(CHART), "-n", ns, "-f", str(VALUES / "mpi-hybrid.yaml"), *image_args(),
         "--wait", "--timeout", "8m", timeout=600)
    pods = kube.watch_pods_until(ns, RELEASE_SEL, all_ready(2), timeout=120, what="2 Ready pods")
    hostnames = {p.metadata.name for p in pods}
    print("\n" + ", ".join(sorted(f"{p.metadata.name} on {p.spec.node_name}" for p in pods)))
    text = results(kube, ns)
    seen, hosts = hello_lines(text)
    assert seen == {(r, t): 1 for r in range(2) for t in range(2)}, f"hello lines:\n{text}"
    assert hosts == hostnames, f"ranks ran on {sorted(hosts)}, expected one per pod {sorted(hostnames)}"


def test_helm_test_checks_the_hello_output(ns: str) -> None:
    helm("test", RELEASE, "-n", ns, "--timeout", "5m", timeout=400)


def test_a_failing_helm_test_exits_non_zero_and_shows_why(ns: str) -> None:
    """A check that cannot hold (a hello-line pattern nothing prints) fails `helm test --logs` with the reason in
    its output; the test values change only the test hooks, so the job is not run again."""
    never = r"no such line (?P<thread>\d+) (?P<threads>\d+) (?P<rank>\d+) (?P<size>\d+)"
    helm("upgrade", RELEASE, str(CHART), "-n", ns, "--reuse-values", "--set-string", f"tests.mpiLinePattern={never}",
         "--wait", "--timeout", "5m", timeout=400)
    proc = helm("test", RELEASE, "-n", ns, "--logs", "--timeout", "5m", timeout=400, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "FAIL: rank 0 thread 0 appears 0 times, expected once" in out, out


def test_himeno_benchmark_runs_and_reports_mflops(kube: Kube, ns: str) -> None:
    before = kube.core.read_namespaced_pod(SERVER_POD, ns).metadata.uid
    helm("upgrade", RELEASE, str(CHART), "-n", ns, "-f", str(VALUES / "mpi-hybrid.yaml"), *image_args(),
         "--set", "server.mpi.command=/opt/mpi-demo/bin/himeno", "--set", "server.mpi.args={S}",
         "--set", "tests.enabled=false", "--wait", "--timeout", "8m", timeout=600)

    def new_server(pods: list[Any]) -> bool:
        return all_ready(2)(pods) and any(p.metadata.name == SERVER_POD and p.metadata.uid != before for p in pods)

    kube.watch_pods_until(ns, RELEASE_SEL, new_server, timeout=300, what="the server pod rolled for himeno")
    t0 = time.monotonic()
    text = results(kube, ns, timeout=600)
    m = re.search(r"MFLOPS[^0-9]*([0-9.]+)", text)
    assert m, f"no MFLOPS figure in the benchmark output:\n{text}"
    print(f"\nhimeno over 2 pods: {float(m.group(1)):.1f} MFLOPS (output after {time.monotonic() - t0:.0f}s)")
