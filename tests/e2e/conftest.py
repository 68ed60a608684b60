"""Fixtures of the end-to-end suite: a real cluster (KUBECONFIG, set by `make e2e`), helm, fresh namespaces
that enforce Pod Security "restricted"; and the per-module times printed at the end of a run.

The suite runs in two phases (tests/e2e/run.sh): the modules concurrently, one module per pytest-xdist worker at a
time (each module's tests in file order, in its own namespaces), then the modules marked `disruptive` alone."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client

from kubehelpers import REPO_ROOT, Kube, helm, wait_for_default_service_account

log = logging.getLogger(__name__)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "order: tests in a module run top to bottom against one release")
    config.addinivalue_line(
        "markers",
        "disruptive: the module changes the cluster under every other module (stops nodes): it runs alone, after "
        "the concurrent phase (tests/e2e/run.sh)",
    )


# The local cluster's daemons (hack/cluster): a failed test shows which of them are gone, so a run whose only record
# is its output says whether the product or the test host failed.
CLUSTER_STATUS = REPO_ROOT / "hack" / "cluster" / "status.sh"
FAILED_ANY: list[str] = []


def cluster_status(*args: str) -> str | None:
    """status.sh's report, or None where there is no local cluster to ask (another cluster such as kind, not
    root)."""
    if not CLUSTER_STATUS.is_file() or os.geteuid() != 0:
        return None
    try:
        proc = subprocess.run([str(CLUSTER_STATUS), *args], capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        return f"{CLUSTER_STATUS.name} did not answer in 60 s"
    return None if proc.returncode == 2 else (proc.stdout + proc.stderr).rstrip()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome: Any = yield
    report: pytest.TestReport = outcome.get_result()
    if report.failed:
        status = cluster_status()
        if status is not None:
            report.sections.append(("local cluster at the failure", status))


@dataclass
class ModuleTime:
    """What one module's test reports say: when its first phase started and its last ended, where it ran."""

    start: float = float("inf")
    stop: float = 0.0
    busy: float = 0.0
    worker: str = "-"
    outcomes: dict[str, int] = field(default_factory=dict)


MODULE_TIMES: dict[str, ModuleTime] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # With pytest-xdist the controller sees every worker's reports here (report.node is that worker).
    t = MODULE_TIMES.setdefault(report.nodeid.split("::", 1)[0], ModuleTime())
    t.start, t.stop = min(t.start, report.start), max(t.stop, report.stop)
    t.busy += report.duration
    node: Any = getattr(report, "node", None)
    if node is not None:
        t.worker = str(node.gateway.id)
    if report.when == "call" or report.outcome != "passed":
        t.outcomes[report.outcome] = t.outcomes.get(report.outcome, 0) + 1
    if report.failed:
        FAILED_ANY.append(report.nodeid)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if MODULE_TIMES:
        terminalreporter.section("per-module times (wall: first setup to last teardown)")
        begin = min(t.start for t in MODULE_TIMES.values())
        for module, t in sorted(MODULE_TIMES.items(), key=lambda kv: -(kv[1].stop - kv[1].start)):
            outcomes = ", ".join(f"{n} {o}" for o, n in sorted(t.outcomes.items()))
            terminalreporter.write_line(
                f"{t.stop - t.start:7.1f} s  {module:<36} worker {t.worker:<4} "
                f"from +{t.start - begin:6.1f} s to +{t.stop - begin:6.1f} s  ({outcomes})")
    if FAILED_ANY:
        # last, where a CI log cut to its end still shows it
        status = cluster_status("--brief")
        if status is not None:
            terminalreporter.write_line(f"after {len(FAILED_ANY)} failed test report(s): {status}")


@pytest.fixture(scope="session")
def kube() -> Kube:
    if not os.environ.get("KUBECONFIG"):
        pytest.fail("KUBECONFIG is not set: run the suite through `make e2e`, which brings up the local node")
    if shutil.which("helm") is None:
        pytest.fail("helm is not on PATH: run the suite through `make e2e` (make tools installs it)")
    return Kube.from_env()


@pytest.fixture(scope="session")
def make_namespace(kube: Kube) -> Iterator[Callable[[str], str]]:
    """Create namespaces labelled to enforce Pod Security "restricted"; delete them at the end of the session
    (of the worker, under pytest-xdist)."""
    created: list[str] = []

    def make(prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        labels = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")}
        labels["pod-security.kubernetes.io/enforce-version"] = "latest"
        kube.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels)))
        created.append(name)
        wait_for_default_service_account(kube, name)
        return name

    yield make
    if os.environ.get("E2E_KEEP_NAMESPACES"):
        log.warning("keeping namespaces %s (E2E_KEEP_NAMESPACES)", created)
        return
    for name in created:
        releases = helm("list", "-q", "-n", name, check=False).stdout.split()
        for rel in releases:
            helm("uninstall", rel, "-n", name, "--wait", "--timeout", "2m", check=False)
        try:
            kube.core.delete_namespace(name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
