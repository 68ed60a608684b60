"""The launcher's environment, argv and files for `--launcher arkouda|mpi|none` (pure; written by `server`).

arkouda: GASNet udp conduit / amudprun with the ssh spawner (GASNET_SPAWNFN=S): SSH_SERVERS in host-list order,
GASNET_MASTERIP = our pod IP (workers cannot resolve our hostname), GASNET_SSH_CMD = our ssh wrapper,
GASNET_SSH_OPTIONS = `-F <config>`, GASNET_SSH_REMOTE_PATH, and `-nl N` appended to the command.
mpi: a hostfile (`<ip> slots=<k>`) and both OpenMPI 4 (OMPI_MCA_orte_*/plm_rsh_*) and OpenMPI 5 (PRTE_MCA_*)
variables — OpenMPI 5 silently ignores the old names and would run every rank on the launcher.
"""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from arkouda_bootstrap.config import Launcher
from arkouda_bootstrap.errors import UsageError

log = logging.getLogger(__name__)

NL_FLAGS = ("-nl", "--numLocales")


@dataclass(frozen=True)
class LaunchPlan:
    argv: list[str]
    env: dict[str, str]
    files: dict[Path, str] = field(default_factory=dict)  # path -> content, written before launch


MPI_STARTUP_TIMEOUT_SECONDS = 120


def render_hostfile(hosts: Sequence[str], *, slots: int) -> str:
    return "".join(f"{host} slots={slots}\n" for host in hosts)


def _has_nl(command: Sequence[str]) -> bool:
    return any(arg in NL_FLAGS or arg.startswith(("-nl=", "--numLocales=")) for arg in command)


def build_plan(
    *,
    launcher: Launcher,
    command: Sequence[str],
    hosts: Sequence[str],
    own_ip: str,
    num_locales: int,
    state_dir: Path,
    ssh_config: Path,
    ssh_wrapper: Path,
    slots: int = 1,
    omp_threads: int | None = None,
    remote_path: str | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> LaunchPlan:
    """Environment additions (not the whole environment), argv and files for the chosen launcher."""
    if launcher is not Launcher.NONE and not command:
        raise UsageError(f"--launcher {launcher.value}: no command given after `--`")
    hostfile = state_dir / "hostfile"
    env: dict[str, str] = dict(extra_env or {})
    env.update(
        {
            "SSH_SERVERS": " ".join(hosts),
            "ARKOUDA_SSH_CONFIG": str(ssh_config),
            "ARKOUDA_SSH_CMD": str(ssh_wrapper),
            "ARKOUDA_HOSTFILE": str(hostfile),
        }
    )
    files = {hostfile: render_hostfile(hosts, slots=slots)}
    argv = list(command)
    ssh_args = f"-F {shlex.quote(str(ssh_config))}"
    if omp_threads is not None:
        env["OMP_NUM_THREADS"] = str(omp_threads)
    if launcher is Launcher.ARKOUDA:
        if _has_nl(command):
            raise UsageError("the command after `--` already has -nl: the bootstrap appends -nl from --num-locales")
        env.update(
            {
                "GASNET_SSH_SERVERS": env["SSH_SERVERS"],
                "GASNET_SPAWNFN": "S",
                "GASNET_MASTERIP": own_ip,
                "GASNET_SSH_CMD": str(ssh_wrapper),
                "GASNET_SSH_OPTIONS": ssh_args,
            }
        )
        if remote_path:
            env["GASNET_SSH_REMOTE_PATH"] = remote_path
        argv += ["-nl", str(num_locales)]
    elif launcher is Launcher.MPI:
        env.update(
            {
                # OpenMPI 4 (ORTE)
                "OMPI_MCA_orte_default_hostfile": str(hostfile),
                "OMPI_MCA_plm_rsh_agent": str(ssh_wrapper),
                "OMPI_MCA_plm_rsh_args": ssh_args,
                # OpenMPI 5 (PRRTE) ignores the names above
                "PRTE_MCA_prte_default_hostfile": str(hostfile),
                "PRTE_MCA_plm_ssh_agent": str(ssh_wrapper),
                "PRTE_MCA_plm_ssh_args": ssh_args,
            }
        )
        # A remote orted that dies before it calls back (a daemonized one dies silently) leaves ORTE's mpirun
        # waiting forever: bound the launch phase unless the user chose a value (the job itself is not bounded).
        if "OMPI_MCA_orte_startup_timeout" not in os.environ:
            env.setdefault("OMPI_MCA_orte_startup_timeout", str(MPI_STARTUP_TIMEOUT_SECONDS))
    return LaunchPlan(argv=argv, env=env, files=files)


def write_files(plan: LaunchPlan) -> None:
    for path, content in plan.files.items():
        path.write_text(content, encoding="utf-8")
        path.chmod(0o644)
