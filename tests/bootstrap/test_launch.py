"""Launcher environment, argv and hostfile rendering (pure)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from arkouda_bootstrap.config import Launcher
from arkouda_bootstrap.errors import UsageError
from arkouda_bootstrap.server.launch import build_plan, render_gasnet_ssh, render_hostfile, write_files

HOSTS = ["10.0.0.9", "10.0.0.3", "10.0.0.4"]
STATE = Path("/run/arkouda")
CFG = STATE / "ssh_config"
WRAP = STATE / "bin/ssh"


def plan(launcher: Launcher, command: list[str], **kw: object) -> tuple[list[str], dict[str, str], dict[Path, str]]:
    p = build_plan(
        launcher=launcher,
        command=command,
        hosts=HOSTS,
        own_ip="10.0.0.9",
        num_locales=3,
        state_dir=STATE,
        ssh_config=CFG,
        ssh_wrapper=WRAP,
        **kw,  # type: ignore[arg-type]
    )
    return p.argv, p.env, p.files


def test_arkouda_env_and_argv() -> None:
    argv, env, files = plan(Launcher.ARKOUDA, ["/opt/arkouda/bin/arkouda_server", "--ServerPort=5555"])
    assert argv == ["/opt/arkouda/bin/arkouda_server", "--ServerPort=5555", "-nl", "3"]
    assert env["SSH_SERVERS"] == "10.0.0.9 10.0.0.3 10.0.0.4"  # host-list order, own IP first
    assert env["GASNET_SSH_SERVERS"] == env["SSH_SERVERS"]
    assert env["GASNET_SPAWNFN"] == "S"
    assert env["GASNET_MASTERIP"] == "10.0.0.9"
    assert env["GASNET_SSH_CMD"] == "/bin/sh /run/arkouda/gasnet-ssh"
    assert "exec /run/arkouda/bin/ssh" in files[STATE / "gasnet-ssh"]  # then the pinned-key wrapper
    assert env["GASNET_SSH_OPTIONS"] == "-F /run/arkouda/ssh_config"
    # no work dir given: the spawner's own default (the launcher's cwd), never the binary's directory
    assert "GASNET_SSH_REMOTE_PATH" not in env
    assert files[STATE / "hostfile"] == "10.0.0.9 slots=1\n10.0.0.3 slots=1\n10.0.0.4 slots=1\n"


def test_arkouda_remote_path_override_and_nl_conflict() -> None:
    _, env, _ = plan(Launcher.ARKOUDA, ["arkouda_server"], remote_path="/srv")
    assert env["GASNET_SSH_REMOTE_PATH"] == "/srv"
    _, env, _ = plan(Launcher.ARKOUDA, ["arkouda_server"])
    assert "GASNET_SSH_REMOTE_PATH" not in env
    with pytest.raises(UsageError, match="already has -nl"):
        plan(Launcher.ARKOUDA, ["arkouda_server", "-nl", "4"])
    with pytest.raises(UsageError, match="no command given"):
        plan(Launcher.ARKOUDA, [])


def test_gasnet_ssh_forces_each_locales_rank_to_its_host_position(tmp_path: Path) -> None:
    # amudprun's calls as GASNet's amudp_spawn.cpp makes them, through the script, to a test double of the
    # ssh wrapper that prints its arguments one per line.
    fake = tmp_path / "fake ssh"
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    fake.chmod(0o755)
    script = tmp_path / "gasnet-ssh"
    script.write_text(render_gasnet_ssh(fake))
    env = {**os.environ, "GASNET_SSH_SERVERS": "10.0.0.9 10.0.0.3,10.0.0.9", "TMPDIR": str(tmp_path)}

    def call(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["/bin/sh", str(script), *args], env=env, capture_output=True, text=True, check=False)

    assert call("-V").stdout == "-V\n"  # amudprun's OpenSSH check passes through untouched
    remote = "cd '/w' ; env 'AMUDP_WORKER_ARGS=1,10.0.0.9:4000,' '/opt/arkouda/bin/arkouda_server_real' 'a b' "
    opts = ["-o", "StrictHostKeyChecking no", "-o", "FallBackToRsh no", "-F", "/run/arkouda/ssh_config"]
    out = call(*opts, "10.0.0.3", remote).stdout.splitlines()
    assert out == [*opts, "10.0.0.3", f"GASNET_WORKER_RANK=1; export GASNET_WORKER_RANK; {remote}"]
    # a host listed twice gets each of its positions once, then none
    ranks = sorted(call(*opts, "10.0.0.9", remote).stdout.splitlines()[-1].split(";")[0] for _ in range(2))
    assert ranks == ["GASNET_WORKER_RANK=0", "GASNET_WORKER_RANK=2"]
    third = call(*opts, "10.0.0.9", remote)
    assert third.returncode == 255
    assert "host 10.0.0.9 has no unclaimed position in GASNET_SSH_SERVERS" in third.stderr
    # a new launch (another master address) starts with every position free
    assert "GASNET_WORKER_RANK=0;" in call(*opts, "10.0.0.9", remote.replace("4000", "4001")).stdout


def test_mpi_sets_openmpi4_and_5_names() -> None:
    argv, env, files = plan(Launcher.MPI, ["mpirun", "-x", "OMP_NUM_THREADS", "hybrid-hello"], slots=2, omp_threads=4)
    assert argv == ["mpirun", "-x", "OMP_NUM_THREADS", "hybrid-hello"]
    assert files[STATE / "hostfile"] == "10.0.0.9 slots=2\n10.0.0.3 slots=2\n10.0.0.4 slots=2\n"
    assert env["OMPI_MCA_orte_default_hostfile"] == "/run/arkouda/hostfile"
    assert env["PRTE_MCA_prte_default_hostfile"] == "/run/arkouda/hostfile"
    assert env["OMPI_MCA_plm_rsh_agent"] == env["PRTE_MCA_plm_ssh_agent"] == "/run/arkouda/bin/ssh"
    assert env["OMPI_MCA_plm_rsh_args"] == env["PRTE_MCA_plm_ssh_args"] == "-F /run/arkouda/ssh_config"
    assert env["OMPI_MCA_orte_startup_timeout"] == "120"
    assert env["OMP_NUM_THREADS"] == "4"
    assert "GASNET_SPAWNFN" not in env


def test_none_only_environment_and_files() -> None:
    argv, env, files = plan(Launcher.NONE, [])
    assert argv == []
    assert env["SSH_SERVERS"] == "10.0.0.9 10.0.0.3 10.0.0.4"
    assert env["ARKOUDA_SSH_CONFIG"] == "/run/arkouda/ssh_config"
    assert not any(k.startswith(("GASNET_", "OMPI_", "PRTE_")) for k in env)
    assert STATE / "hostfile" in files


def test_render_and_write_hostfile(tmp_path: Path) -> None:
    assert render_hostfile(["a", "b"], slots=3) == "a slots=3\nb slots=3\n"
    p = build_plan(
        launcher=Launcher.NONE,
        command=[],
        hosts=["h"],
        own_ip="h",
        num_locales=1,
        state_dir=tmp_path,
        ssh_config=tmp_path / "c",
        ssh_wrapper=tmp_path / "w",
    )
    write_files(p)
    assert (tmp_path / "hostfile").read_text() == "h slots=1\n"


def test_hostfile_slots_per_host_follow_a_task_layout() -> None:
    assert render_hostfile(["n1", "n2", "n3"], slots=[2, 2, 1]) == "n1 slots=2\nn2 slots=2\nn3 slots=1\n"
    with pytest.raises(UsageError, match="2 slot counts for 3 hosts"):
        render_hostfile(["n1", "n2", "n3"], slots=[2, 1])
