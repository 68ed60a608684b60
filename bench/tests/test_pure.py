"""Pure parts of the harness: manifests, status patches, pins, output parsing, config stripping."""

from __future__ import annotations

import json
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from arkouda_bench.apiserver import AUDIT_POLICY, BOOTSTRAP_USER
from arkouda_bench.checkpointcluster import event_seconds
from arkouda_bench.cluster import (
    HOSTNAME_KEY,
    check_placement,
    parse_himeno,
    placement_args,
    release_ready,
    why_not_two_nodes,
)
from arkouda_bench.nodeloss import NODE0, install_args, why_not
from arkouda_bench.queue import quantity, quota_for, usage
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


@pytest.mark.parametrize(("same_node", "kind"), [(True, "podAffinity"), (False, "podAntiAffinity")])
def test_placement_ties_the_server_pod_to_the_locale_pods_node_or_keeps_it_off(
    same_node: bool, kind: str
) -> None:
    flag, value = placement_args("hx", same_node=same_node)
    assert flag == "--set-json"
    key, _, text = value.partition("=")
    assert key == "server.affinity"
    affinity = json.loads(text)
    assert list(affinity) == [kind]
    (term,) = affinity[kind]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == HOSTNAME_KEY
    wanted = term["labelSelector"]["matchLabels"].items()
    assert wanted <= labels("hx", "locale").items()
    assert not wanted <= labels("hx", "server").items()
    assert not wanted <= labels("other", "locale").items()


@pytest.mark.skipif(shutil.which("helm") is None, reason="helm not on PATH (make tools)")
def test_the_chart_renders_the_placement_into_the_server_pod() -> None:
    chart = Path(__file__).resolve().parents[2] / "charts" / "arkouda"
    for same_node in (True, False):
        args = placement_args("hx", same_node=same_node)
        out = subprocess.run(
            ["helm", "template", "hx", str(chart), "-f", str(chart.parents[1] / "values" / "mpi-hybrid.yaml"),
             *args, "--show-only", "charts/server/templates/statefulset.yaml"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        spec = yaml.safe_load(out)["spec"]["template"]["spec"]
        assert spec["affinity"] == json.loads(args[1].partition("=")[2])


def test_check_placement_names_where_the_pods_ran() -> None:
    check_placement({"s": "n0", "l": "n0"}, same_node=True)
    check_placement({"s": "n0", "l": "n1"}, same_node=False)
    with pytest.raises(BenchSetupError, match="to run on one node: l on n1, s on n0"):
        check_placement({"s": "n0", "l": "n1"}, same_node=True)
    with pytest.raises(BenchSetupError, match="to run on two nodes: l on n0, s on n0"):
        check_placement({"s": "n0", "l": "n0"}, same_node=False)
    with pytest.raises(BenchSetupError, match=r"s on \(none\)"):
        check_placement({"s": "", "l": "n0"}, same_node=True)


def test_the_two_node_rows_say_why_they_cannot_run_on_one_node() -> None:
    assert why_not_two_nodes(["arkouda-node", "arkouda-node-1"]) == ""
    assert why_not_two_nodes(["arkouda-node"]).startswith(
        "1 schedulable node (arkouda-node): ranks on two nodes"
    )
    assert "NODES=3" in why_not_two_nodes(["arkouda-node"])
    assert why_not_two_nodes([]).startswith("0 schedulable node (none)")


def _bench_pod(component: str, *, ready: bool, node: str = "n0") -> SimpleNamespace:
    """A test double of a V1Pod: the fields release_ready reads."""
    return SimpleNamespace(
        metadata=SimpleNamespace(labels={"app.kubernetes.io/component": component}, deletion_timestamp=None),
        spec=SimpleNamespace(node_name=node),
        status=SimpleNamespace(
            pod_ip="10.0.0.1", conditions=[SimpleNamespace(type="Ready", status=str(ready))]
        ),
    )


def test_release_ready_counts_the_server_and_locale_pods_not_the_gate_or_nodewatch() -> None:
    launch = [_bench_pod("server", ready=True)] + [_bench_pod("locale", ready=True) for _ in range(3)]
    others = [_bench_pod("gate", ready=True), _bench_pod("nodewatch", ready=True)]
    assert release_ready(launch + others, locales=4)
    assert not release_ready(launch[:3] + others, locales=4)  # a locale pod still missing
    assert not release_ready([*launch[:3], _bench_pod("locale", ready=False), *others], locales=4)


def test_the_gate_events_give_their_seconds() -> None:
    saved = "saved 4 array(s), 512.0 MiB in 3.4 s to /shared/.arkouda/checkpoints/ckpt-arkouda-gate-nl3"
    assert event_seconds(saved) == 3.4
    assert event_seconds("loaded the checkpoint /shared/x (64.0 MiB) in 12 s") == 12.0


def test_a_gate_event_without_seconds_is_an_error_not_a_zero() -> None:
    with pytest.raises(BenchSetupError, match="no 'in <seconds> s'"):
        event_seconds("saved 4 array(s), 64.0 MiB to /shared/x")


def test_the_node_loss_rows_say_why_a_cluster_cannot_run_them() -> None:
    three = ["arkouda-node", "arkouda-node-1", "arkouda-node-2"]
    assert why_not(three, three[1:]) == ""
    assert "2 extra nodes" in why_not(three[:2], three[1:2])
    assert "this cluster has ['other-0', 'other-1', 'other-2']" in why_not(
        ["other-0", "other-1", "other-2"], []
    )


@pytest.mark.skipif(shutil.which("helm") is None, reason="helm not on PATH (make tools)")
def test_the_node_loss_release_keeps_its_server_on_node_0_and_its_locales_apart() -> None:
    root = Path(__file__).resolve().parents[2]
    args = install_args(
        chart=root / "charts" / "arkouda", values=root / "values" / "local.yaml", namespace="ns"
    )
    assert args[0] == "install"
    out = subprocess.run(["helm", "template", *args[1:]], capture_output=True, text=True, check=True).stdout
    sets = {d["metadata"]["name"]: d for d in yaml.safe_load_all(out) if d and d["kind"] == "StatefulSet"}
    server = sets["nl-arkouda-server"]["spec"]["template"]["spec"]["affinity"]
    (term,) = server["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": HOSTNAME_KEY, "operator": "In", "values": [NODE0]}]
    locale = sets["nl-arkouda-locale"]["spec"]["template"]["spec"]["affinity"]
    (apart,) = locale["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert apart["topologyKey"] == HOSTNAME_KEY


def test_release_ready_after_a_node_loss_counts_no_pod_on_the_lost_node() -> None:
    pods = [_bench_pod("server", ready=True, node="n0"), _bench_pod("locale", ready=True, node="n1")]
    assert release_ready(pods, locales=2)
    assert release_ready(pods, locales=2, off_node="n2")
    assert not release_ready(pods, locales=2, off_node="n1")  # Ready to the API, yet on the dead node


def test_queue_reads_kueues_quantities_and_sizes_the_quota() -> None:
    assert quantity("105m") == Decimal("0.105")
    assert quantity("168Mi") == 168 * 2**20
    assert quantity("2") == 2
    admitted = {"status": {"admission": {"podSetAssignments": [
        {"resourceUsage": {"cpu": "100m", "memory": "128Mi"}},
        {"resourceUsage": {"cpu": "200m", "memory": "256Mi", "pods": "2"}},
    ]}}}  # fmt: skip
    used = usage(admitted)
    assert used == {"cpu": Decimal("0.3"), "memory": Decimal(384 * 2**20)}
    assert quota_for(used, releases=Decimal("1.5")) == [
        {"name": "cpu", "nominalQuota": "0.450"},
        {"name": "memory", "nominalQuota": str(Decimal(576 * 2**20).quantize(Decimal("0.001")))},
    ]
