"""Pure parts of the harness: manifests, status patches, pins, output parsing, config stripping."""

from __future__ import annotations

from pathlib import Path

import pytest

from arkouda_bench.apiserver import AUDIT_POLICY, BOOTSTRAP_USER
from arkouda_bench.cluster import parse_himeno
from arkouda_bench.runtime import RUNTIME_PACKAGES, runtime_pins
from arkouda_bench.scale import labels, pod_manifest, ready_status, selector
from arkouda_bench.sshconfig import strip_tuning
from arkouda_bench.sshd import BenchSetupError


def test_locale_pods_match_the_bootstrap_selector() -> None:
    pod = pod_manifest("r-arkouda-locale-3", labels("r", "locale"))
    wanted = dict(kv.split("=") for kv in selector("r").split(","))
    assert wanted.items() <= pod["metadata"]["labels"].items()
    assert pod["spec"]["nodeName"]
    assert (
        pod_manifest("s", labels("r", "server"))["metadata"]["labels"]["app.kubernetes.io/component"]
        == "server"
    )


def test_ready_status_is_what_the_bootstrap_counts_as_ready() -> None:
    status = ready_status("127.0.3.4")["status"]
    assert status["podIP"] == "127.0.3.4"
    assert status["podIPs"] == [{"ip": "127.0.3.4"}]
    assert {"type": "Ready", "status": "True"}.items() <= next(
        c for c in status["conditions"] if c["type"] == "Ready"
    ).items()


def test_audit_policy_logs_only_the_bootstrap_user() -> None:
    assert f'users: ["{BOOTSTRAP_USER}"]' in AUDIT_POLICY
    assert AUDIT_POLICY.rstrip().endswith("- level: None")


def test_runtime_pins_come_from_the_requirements(tmp_path: Path) -> None:
    req = tmp_path / "r.txt"
    req.write_text(
        "# c\nKubernetes==1.0\ncryptography==2.0  # x\ntenacity==3\nparamiko==5\npyinstrument==4\nruff==9\n"
    )
    assert runtime_pins(req) == [
        "Kubernetes==1.0",
        "tenacity==3",
        "cryptography==2.0",
        "paramiko==5",
        "pyinstrument==4",
    ]
    req.write_text("cryptography==2.0\n")
    with pytest.raises(BenchSetupError, match="does not pin"):
        runtime_pins(req)
    assert len(RUNTIME_PACKAGES) == 5


def test_parse_himeno_reads_mflops_and_checks_the_shape() -> None:
    line = "himeno: size=S grid=64x64x128 ranks=2 threads=1 iterations=50 seconds=3.3 gosa=1e-04 MFLOPS=244.3"
    assert parse_himeno("noise\n" + line + "\n", iterations=50) == pytest.approx(244.3)
    with pytest.raises(BenchSetupError, match="ran 50 iterations, expected 500"):
        parse_himeno(line, iterations=500)
    with pytest.raises(BenchSetupError, match="expected 2 x 1"):
        parse_himeno(line.replace("threads=1", "threads=2"), iterations=50)
    with pytest.raises(BenchSetupError, match="no 'himeno"):
        parse_himeno("mpirun: error")


def test_strip_tuning_drops_exactly_kex_and_ciphers() -> None:
    text = "Host *\n  User a\n  KexAlgorithms x\n  Ciphers y\n  Port 1\n"
    assert strip_tuning(text) == "Host *\n  User a\n  Port 1\n"
    with pytest.raises(ValueError, match="expected one line each"):
        strip_tuning("Host *\n  Ciphers y\n")
