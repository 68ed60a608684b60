"""--hosts-from slurm: the nodelist expanded by Slurm's own `scontrol show hostnames` (the oracle and the
implementation: a private slurm.conf, so scontrol asks no DNS and no controller), the task layout, the batch host
first, the batch host's address; bad lists, a missing variable and a missing or broken scontrol are one line,
exit 2 for what the job's environment got wrong."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from arkouda_bootstrap.cli import main as cli
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.slurm import hosts as slurm
from arkouda_bootstrap.slurm.hosts import NodelistError

SCONTROL = shutil.which("scontrol")
pytestmark = pytest.mark.skipif(SCONTROL is None, reason="Slurm's scontrol is not installed: run 'make deps'")

# text -> the hosts Slurm 22.05's `scontrol show hostnames` printed for it (measured on this machine)
SLURM_EXPANSIONS = {
    "node[01-03,07],gpu5": ["node01", "node02", "node03", "node07", "gpu5"],
    "n[9-11],d[01-02]": ["n9", "n10", "n11", "d01", "d02"],  # zero padding kept per range; n9 -> n10 grows
    "x[008-010]": ["x008", "x009", "x010"],
    "n[01-010]": ["n01", "n02", "n03", "n04", "n05", "n06", "n07", "n08", "n09", "n10"],  # width from the start
    "rack[1-2]-node[01-02]": ["rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"],  # two groups
    "a[1-2]b[3-4]": ["a1b3", "a1b4", "a2b3", "a2b4"],
    "n[1,3-4]suf[5]": ["n1suf5", "n3suf5", "n4suf5"],
    "127.0.0.[2-3],127.0.0.1": ["127.0.0.2", "127.0.0.3", "127.0.0.1"],  # order kept, never sorted
    "c[1-2],c[2-3]": ["c1", "c2", "c2", "c3"],  # duplicates kept (read_allocation refuses them)
    "node1": ["node1"],
    "n[1-2] m1": ["n1", "n2", "m1"],  # whitespace separates like a comma
    "n1,,n2": ["n1", "n2"],
}


@pytest.fixture(autouse=True)
def slurm_conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        "ClusterName=t\nSlurmctldHost=localhost\nNodeName=localhost CPUs=1 State=UNKNOWN\n"
        "PartitionName=p Nodes=localhost Default=YES\n"
    )
    monkeypatch.setenv("SLURM_CONF", str(conf))
    return conf


@pytest.mark.parametrize(("text", "hosts"), SLURM_EXPANSIONS.items(), ids=list(SLURM_EXPANSIONS))
def test_the_nodelist_is_expanded_as_slurm_does(text: str, hosts: list[str]) -> None:
    assert SCONTROL is not None
    # the table is what scontrol says (so a different Slurm shows here first), and the bootstrap says the same
    by_slurm = subprocess.run([SCONTROL, "show", "hostnames", text], capture_output=True, text=True, check=True)
    assert by_slurm.stdout.split() == hosts
    assert slurm.expand_nodelist(text) == hosts


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("n[010-9]", "'n[010-9]' is not a Slurm hostlist (scontrol: Invalid hostlist: n[010-9])"),
        ("n[2-1]", "'n[2-1]' is not a Slurm hostlist (scontrol: Invalid hostlist: n[2-1])"),
        ("n[a-b]", "'n[a-b]' is not a Slurm hostlist (scontrol: Invalid hostlist: n[a-b])"),
        ("gpu[1-2]-ib", "'gpu[1-2]-ib' is not a Slurm hostlist (scontrol: Invalid hostlist: gpu[1-2]-ib)"),
        ("n[1-2]]", "'n[1-2]]' is not a Slurm hostlist (scontrol: Invalid hostlist: n[1-2]])"),
        ("n[1-2", "'n[1-2' is not a Slurm hostlist: unbalanced brackets"),  # scontrol itself prints `n]`
        (",", "',' names no host"),
        ("   ", "the nodelist is empty"),
    ],
)
def test_a_bad_nodelist_is_one_line(text: str, message: str) -> None:
    with pytest.raises(NodelistError) as err:
        slurm.expand_nodelist(text)
    assert str(err.value) == message
    assert err.value.exit_code == 2


def test_no_scontrol_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BootstrapError, match=r"^scontrol is not on PATH: .*slurm-client") as err:
        slurm.expand_nodelist("n[1-2]")
    assert "\n" not in str(err.value)


def test_scontrol_that_cannot_read_its_configuration_is_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "scontrol"  # test double: what scontrol prints without any configuration source
    broken.write_text("#!/bin/sh\necho 'scontrol: fatal: Could not establish a configuration source' >&2\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(BootstrapError) as err:
        slurm.expand_nodelist("n[1-2]", scontrol=str(broken))
    assert str(err.value) == (
        "scontrol show hostnames failed (scontrol: fatal: Could not establish a configuration source): it needs "
        "this cluster's slurm.conf (SLURM_CONF, set by Slurm inside a job) or a configless controller"
    )


@pytest.mark.parametrize(
    ("text", "counts"),
    [("2(x3),1", [2, 2, 2, 1]), ("1", [1]), ("4(x2)", [4, 4]), ("1,2,3", [1, 2, 3]), (" 3(x1),2 ", [3, 2])],
)
def test_tasks_per_node(text: str, counts: list[int]) -> None:
    assert slurm.parse_tasks_per_node(text) == counts


@pytest.mark.parametrize("text", ["2x3", "(x2)", "0", "a", "2(x0)", "1,,2", "2(3)", "-1"])
def test_a_bad_task_layout_names_the_variable(text: str) -> None:
    with pytest.raises(NodelistError, match=r"^SLURM_TASKS_PER_NODE=") as err:
        slurm.parse_tasks_per_node(text)
    assert err.value.exit_code == 2


def allocation(env: dict[str, str], hostname: str = "elsewhere") -> slurm.Allocation:
    return slurm.read_allocation(env, hostname=lambda: hostname)


def test_the_batch_host_comes_first_with_its_own_task_count() -> None:
    env = {"SLURM_JOB_NODELIST": "node[01-03,07]", "SLURM_TASKS_PER_NODE": "1(x2),3,4", "SLURMD_NODENAME": "node03"}
    got = allocation(env)
    assert got.hosts == ("node03", "node01", "node02", "node07")
    assert got.tasks == (3, 1, 1, 4)
    assert got.expanded_by == "scontrol"


def test_the_batch_host_from_the_host_name_without_its_domain() -> None:
    env = {"SLURM_NODELIST": "n[1-3]"}  # the older name of the variable
    got = allocation(env, hostname="n2.cluster.example")
    assert got.hosts == ("n2", "n1", "n3")
    assert got.tasks == (1, 1, 1)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "SLURM_JOB_NODELIST is not set: run the bootstrap inside a Slurm job"),
        ({"SLURM_JOB_NODELIST": "n[1-2]", "SLURMD_NODENAME": "n9"}, "this node (SLURMD_NODENAME=n9) is not in"),
        ({"SLURM_JOB_NODELIST": "n[1-2],n1", "SLURMD_NODENAME": "n1"}, "names a node more than once"),
        (
            {"SLURM_JOB_NODELIST": "n[1-2]", "SLURMD_NODENAME": "n1", "SLURM_TASKS_PER_NODE": "1(x3)"},
            "SLURM_TASKS_PER_NODE='1(x3)' describes 3 nodes, SLURM_JOB_NODELIST has 2",
        ),
        ({"SLURM_JOB_NODELIST": "n[2-1]"}, "SLURM_JOB_NODELIST: 'n[2-1]' is not a Slurm hostlist"),
        ({"SLURM_JOB_NODELIST": "n1", "SLURMD_NODENAME": "n1", "SLURM_TASKS_PER_NODE": "x"}, "SLURM_TASKS_PER_NODE="),
    ],
)
def test_allocation_errors_are_one_line(env: dict[str, str], message: str) -> None:
    with pytest.raises(BootstrapError) as err:
        allocation(env)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_own_address_of_an_address_and_of_a_loopback_name() -> None:
    assert slurm.own_address("127.0.0.1", []) == "127.0.0.1"  # a single-node job may keep loopback
    # the batch host resolves to loopback (as Debian maps its own name): the route to another node decides
    assert slurm.own_address("localhost", ["127.0.0.3"]) == "127.0.0.1"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "--hosts-from slurm: SLURM_JOB_NODELIST is not set: run the bootstrap inside a Slurm job"),
        ({"SLURM_JOB_NODELIST": "n[2-1]"}, "SLURM_JOB_NODELIST: 'n[2-1]' is not a Slurm hostlist"),
        ({"SLURM_JOB_NODELIST": "n1", "SLURM_TASKS_PER_NODE": "2(3)"}, "SLURM_TASKS_PER_NODE='2(3)': '2(3)' is not"),
    ],
)
def test_the_cli_says_what_is_wrong_with_the_job_in_one_line_and_exits_2(
    env: dict[str, str], message: str, capsys: pytest.CaptureFixture[str], slurm_conf: Path
) -> None:
    environ = {"PATH": "/usr/bin:/bin", "SLURM_CONF": str(slurm_conf), **env}
    code = cli.main(["server", "--hosts-from", "slurm", "--", "/bin/true"], environ=environ)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1
    assert err[0].startswith(f"arkouda-bootstrap: error: {message}")
