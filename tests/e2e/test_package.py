"""The packaged chart as users install it from a chart repository or an OCI registry: `helm package` (what
`make package` runs), then `helm install` from the archive, `helm test`, `helm uninstall`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kubehelpers import CHART, VALUES, Kube, all_ready, helm, image_args, release_pods

RELEASE = "akp"


@pytest.fixture(scope="module")
def ns(make_namespace: Any) -> str:
    name: str = make_namespace("akp-e2e")
    return name


def test_the_packaged_chart_installs_and_passes_its_test(kube: Kube, ns: str, tmp_path: Path) -> None:
    out = helm("package", str(CHART), "-d", str(tmp_path)).stdout
    archives = list(tmp_path.glob("arkouda-*.tgz"))
    assert len(archives) == 1, out
    helm("install", RELEASE, str(archives[0]), "-n", ns, "-f", str(VALUES / "local.yaml"), *image_args(),
         "--set", "global.numLocales=1", "--wait", "--timeout", "5m", timeout=400)
    kube.watch_pods_until(ns, release_pods(RELEASE), all_ready(1), timeout=60, what="the server pod Ready")
    proc = helm("test", RELEASE, "-n", ns, "--logs", "--timeout", "5m", timeout=400)
    assert re.search(r"Phase:\s+Succeeded", proc.stdout), proc.stdout
    assert "PASS: numLocales == 1" in proc.stdout
    helm("uninstall", RELEASE, "-n", ns, "--wait", "--timeout", "3m", timeout=300)
