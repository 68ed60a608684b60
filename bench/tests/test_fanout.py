"""The fan-out bench against a real sshd: configs are valid, kex is what we claim, pinning holds.

Runs Debian's sshd as the unprivileged bench user (needs root, as `make bench` does). Nothing here asserts a
timing: only that every variant was measured and that the compared configs differ as documented.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from arkouda_bench import fanout
from arkouda_bench.sshconfig import DEFAULT, OUR_TUNING, OURS, PREWARM, VARIANTS, write_client_configs
from arkouda_bench.sshd import SshServer, loopback_hosts

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the bench sshd user is created by root")


@pytest.fixture(scope="module")
def server() -> Iterator[SshServer]:
    with SshServer(max_startups=64) as s:
        yield s


def test_loopback_hosts_are_distinct_and_loopback() -> None:
    hosts = loopback_hosts(600)
    assert len(set(hosts)) == 600
    assert all(h.startswith("127.") and not h.endswith((".0", ".255")) for h in hosts)


def _ssh_g(cfg: Path, key: str) -> str:
    out = subprocess.run(
        ["ssh", "-G", "-F", str(cfg), "127.0.1.1"], check=True, capture_output=True, text=True
    )
    values = [line.split(" ", 1)[1] for line in out.stdout.splitlines() if line.startswith(key + " ")]
    return values[0]


def test_configs_differ_only_in_kex_cipher_and_control(server: SshServer) -> None:
    assert server.client is not None
    configs = write_client_configs(server.client)
    assert _ssh_g(configs[OURS].path, "kexalgorithms") == OUR_TUNING.kex_algorithms
    assert _ssh_g(configs[OURS].path, "ciphers") == OUR_TUNING.ciphers
    assert _ssh_g(configs[DEFAULT].path, "kexalgorithms").startswith("sntrup761x25519-sha512")
    for variant in VARIANTS:
        assert _ssh_g(configs[variant].path, "stricthostkeychecking") == "true"
    assert _ssh_g(configs[PREWARM].path, "controlpath").startswith(f"{configs[PREWARM].control_dir}/")
    default_lines = set(configs[DEFAULT].path.read_text().splitlines())
    ours_lines = set(configs[OURS].path.read_text().splitlines())
    assert {ln.split()[0] for ln in ours_lines - default_lines} == {"KexAlgorithms", "Ciphers"}
    assert default_lines <= ours_lines


def test_real_connection_uses_configured_kex(server: SshServer) -> None:
    assert server.client is not None
    cfg = write_client_configs(server.client)[OURS].path
    out = subprocess.run(
        ["ssh", "-v", "-F", str(cfg), "-o", "LogLevel=DEBUG1", "127.0.2.3", "true"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"kex: algorithm: {OUR_TUNING.kex_algorithms.split(',')[0]}" in out.stderr


def test_wrong_host_key_is_rejected(server: SshServer, tmp_path: Path) -> None:
    assert server.client is not None
    cfg = write_client_configs(server.client)[OURS].path
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    wrong = tmp_path / "known_hosts"
    wrong.write_text("* " + other.with_suffix(".pub").read_text())
    out = subprocess.run(
        [
            "ssh",
            "-F",
            str(cfg),
            "-o",
            f"UserKnownHostsFile={wrong}",
            "-o",
            "LogLevel=ERROR",
            "127.0.2.4",
            "true",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 255
    assert "host key" in out.stderr.lower()


def test_every_variant_is_measured(tmp_path: Path) -> None:
    rows = fanout.run(host_counts=[2], repeats=1, command="test", keep_configs=tmp_path)
    cases = {(r.case, r.metric) for r in rows}
    for variant in VARIANTS:
        assert (f"N=2 {variant}", "client CPU/host") in cases
        assert (f"N=2 {variant}", "fan-out wall") in cases
    assert ("N=2 ours+prewarm", "pre-warm wall (masters up)") in cases
    assert ("N=2 openssh-default / ours", "client CPU/host ratio") in cases
    assert all(r.summary is not None and r.summary.repeats == 1 for r in rows)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"ssh_config.{v}" for v in VARIANTS)
