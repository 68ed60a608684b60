"""Fixtures of the end-to-end suite: a real cluster (KUBECONFIG, set by `make e2e`), helm, fresh namespaces
that enforce Pod Security "restricted"."""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client

from kubehelpers import Kube, helm

log = logging.getLogger(__name__)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "order: tests in a module run top to bottom against one release")


@pytest.fixture(scope="session")
def kube() -> Kube:
    if not os.environ.get("KUBECONFIG"):
        pytest.fail("KUBECONFIG is not set: run the suite through `make e2e`, which brings up the local node")
    if shutil.which("helm") is None:
        pytest.fail("helm is not on PATH: run the suite through `make e2e` (make tools installs it)")
    return Kube.from_env()


@pytest.fixture(scope="session")
def make_namespace(kube: Kube) -> Iterator[Callable[[str], str]]:
    """Create namespaces labelled to enforce Pod Security "restricted"; delete them at the end of the session."""
    created: list[str] = []

    def make(prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        labels = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")}
        labels["pod-security.kubernetes.io/enforce-version"] = "latest"
        kube.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels)))
        created.append(name)
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
