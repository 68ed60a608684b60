"""The launcher's ssh fan-out (GASNet SSH spawner / mpirun rsh agent) against one real sshd.

For each N, N `ssh -F <cfg> <host> true` run in parallel, one per distinct loopback address, as locale 0's
spawner does, through the `ssh` wrapper the bootstrap writes for them. Client CPU is the reaped children's
rusage delta (plus, for the pre-warm variant, the CPU the background ControlMasters spend serving the fan-out,
read from /proc); server CPU is the sshd's own plus its per-connection children's. Variants run back to
back inside each repeat so a ratio compares measurements taken under the same machine load. The server's
pre-launch probe of the same N hosts (`probe.py`) runs in each repeat too, so its client CPU per host is set
against `ours`, the launcher's own OpenSSH cost, from the same run.
"""

from __future__ import annotations

import logging
import re
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from arkouda_bench import probe
from arkouda_bench.proc import children_cpu, pid_cpu
from arkouda_bench.results import Row
from arkouda_bench.sshconfig import DEFAULT, OURS, PREWARM, VARIANTS, ClientConfig, write_client_configs
from arkouda_bench.sshd import BenchSetupError, SshServer, loopback_hosts
from arkouda_bootstrap.ssh import client as bootstrap_ssh
from arkouda_bootstrap.ssh.client import Host

log = logging.getLogger(__name__)

GROUP = "ssh fan-out"


@dataclass(frozen=True)
class Sample:
    """One fan-out of N hosts with one variant."""

    wall_s: float
    client_cpu_s: float
    server_cpu_s: float
    prewarm_wall_s: float = 0.0
    prewarm_cpu_s: float = 0.0


def _run_parallel(argvs: Sequence[list[str]], *, what: str) -> None:
    """Start every command at once (spawner style), wait for all; a failure names the host and ssh's error.

    Each argv is `[ssh-wrapper, host, ...]`."""
    procs = [
        (
            argv,
            subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            ),
        )
        for argv in argvs
    ]
    failures: list[str] = []
    for argv, p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            msg = err.decode(errors="replace").strip().splitlines()
            failures.append(f"host {argv[1]}: exit {p.returncode}: {msg[-1] if msg else ''}")
    if failures:
        raise BenchSetupError(f"{what}: {len(failures)} of {len(argvs)} ssh failed, first: {failures[0]}")


_MASTER_PID = re.compile(r"Master running \(pid=(\d+)\)")


def _master_pids(cfg: ClientConfig, hosts: Sequence[str]) -> list[int]:
    """The background ControlMaster of each host (`ssh -O check` names its pid)."""
    pids = []
    for h in hosts:
        out = subprocess.run(
            [str(cfg.wrapper), "-O", "check", h], capture_output=True, text=True, check=False
        )
        m = _MASTER_PID.search(out.stderr + out.stdout)
        if m is None:
            raise BenchSetupError(f"pre-warm: no ControlMaster for host {h}: {out.stderr.strip()}")
        pids.append(int(m.group(1)))
    return pids


def fan_out(server: SshServer, cfg: ClientConfig, hosts: Sequence[str]) -> Sample:
    """One timed fan-out through the bootstrap's ssh wrapper, as amudprun/mpirun would run it.

    For the pre-warm variant the bootstrap's `prewarm` opens the masters first (timed apart) and its
    `close_masters` closes them after."""
    targets = [Host(address=h, pod=f"host-{h}") for h in hosts]
    master_pids: list[int] = []
    prewarm_wall = prewarm_cpu = 0.0
    try:
        if cfg.control_dir is not None:
            cpu0 = children_cpu()
            t0 = time.perf_counter()
            bootstrap_ssh.prewarm(targets, wrapper=cfg.wrapper)
            prewarm_wall = time.perf_counter() - t0
            prewarm_cpu = children_cpu() - cpu0
            master_pids = _master_pids(cfg, hosts)
            prewarm_cpu += sum(pid_cpu(p) for p in master_pids)
        master_cpu0 = sum(pid_cpu(p) for p in master_pids)
        server0 = server.server_cpu(expected_live=len(master_pids))
        cpu0 = children_cpu()
        t0 = time.perf_counter()
        _run_parallel([[str(cfg.wrapper), h, "true"] for h in hosts], what=f"fan-out {cfg.variant}")
        wall = time.perf_counter() - t0
        client = children_cpu() - cpu0 + sum(pid_cpu(p) for p in master_pids) - master_cpu0
        server_cpu_s = server.server_cpu(expected_live=len(master_pids)) - server0
    finally:
        if cfg.control_dir is not None:
            bootstrap_ssh.close_masters(targets, wrapper=cfg.wrapper)
    return Sample(
        wall_s=wall,
        client_cpu_s=client,
        server_cpu_s=server_cpu_s,
        prewarm_wall_s=prewarm_wall,
        prewarm_cpu_s=prewarm_cpu,
    )


def run(
    *, host_counts: Sequence[int], repeats: int, command: str, keep_configs: Path | None = None
) -> list[Row]:
    """Measure every variant for every N, `repeats` times, variants interleaved within each repeat.

    `keep_configs`: a directory to copy the compared client configs into, for readers of the results.
    """
    rows: list[Row] = []
    with SshServer(max_startups=max(host_counts) * 2) as server:
        assert server.client is not None
        configs = write_client_configs(server.client)
        if keep_configs is not None:
            keep_configs.mkdir(parents=True, exist_ok=True)
            for variant, cfg in configs.items():
                (keep_configs / f"ssh_config.{variant}").write_text(cfg.path.read_text())
        _run_parallel([[str(configs[OURS].wrapper), "127.0.0.1", "true"]], what="warm-up")
        probe.probe_hosts(server.client, ["127.0.0.1"])  # imports paramiko outside the measurement
        for n in host_counts:
            hosts = loopback_hosts(n)
            samples: dict[str, list[Sample]] = {v: [] for v in (*VARIANTS, probe.PROBE)}
            for rep in range(repeats):
                wall, client, server_cpu = probe.measure(server, hosts)
                samples[probe.PROBE].append(Sample(wall_s=wall, client_cpu_s=client, server_cpu_s=server_cpu))
                log.info(
                    "N=%d rep %d/%d %-15s wall %.2f s, client CPU %.1f ms/host, server CPU %.1f ms/host",
                    n,
                    rep + 1,
                    repeats,
                    probe.PROBE,
                    wall,
                    1000 * client / n,
                    1000 * server_cpu / n,
                )
                for variant in VARIANTS:
                    s = fan_out(server, configs[variant], hosts)
                    samples[variant].append(s)
                    log.info(
                        "N=%d rep %d/%d %-15s wall %.2f s, client CPU %.1f ms/host, server CPU %.1f ms/host",
                        n,
                        rep + 1,
                        repeats,
                        variant,
                        s.wall_s,
                        1000 * s.client_cpu_s / n,
                        1000 * s.server_cpu_s / n,
                    )
            rows += _rows_for(n, samples, command=command)
    return rows


def _rows_for(n: int, samples: dict[str, list[Sample]], *, command: str) -> list[Row]:
    rows: list[Row] = []
    for variant in (*VARIANTS, probe.PROBE):
        ss = samples[variant]
        case = f"N={n} {variant}"
        if variant == PREWARM:
            rows.append(
                Row.measured(
                    group=GROUP,
                    case=case,
                    metric="pre-warm wall (masters up)",
                    unit="s",
                    command=command,
                    values=[s.prewarm_wall_s for s in ss],
                    note="opened before the fan-out, not in its wall",
                )
            )
            rows.append(
                Row.measured(
                    group=GROUP,
                    case=case,
                    metric="pre-warm client CPU/host",
                    unit="ms",
                    command=command,
                    values=[1000 * s.prewarm_cpu_s / n for s in ss],
                )
            )
        rows.append(
            Row.measured(
                group=GROUP,
                case=case,
                metric="fan-out wall",
                unit="s",
                command=command,
                values=[s.wall_s for s in ss],
            )
        )
        rows.append(
            Row.measured(
                group=GROUP,
                case=case,
                metric="client CPU/host",
                unit="ms",
                command=command,
                values=[1000 * s.client_cpu_s / n for s in ss],
            )
        )
        rows.append(
            Row.measured(
                group=GROUP,
                case=case,
                metric="server CPU/host",
                unit="ms",
                command=command,
                values=[1000 * s.server_cpu_s / n for s in ss],
                note="one sshd serves all hosts",
            )
        )

    def ratio(num: str, den: str, metric: str, attr: str, note: str) -> Row:
        """num ÷ den of one measured field, per repeat of the same run."""
        pairs = zip(samples[num], samples[den], strict=True)
        return Row.measured(
            group=GROUP,
            case=f"N={n} {num} / {den}",
            metric=metric,
            unit="x",
            command=command,
            values=[getattr(a, attr) / max(getattr(b, attr), 1e-9) for a, b in pairs],
            note=note,
        )

    same_run = "per repeat, same run"
    rows += [
        ratio(DEFAULT, other, "client CPU/host ratio", "client_cpu_s", same_run) for other in (OURS, PREWARM)
    ]
    rows.append(ratio(DEFAULT, OURS, "fan-out wall ratio", "wall_s", same_run))
    rows.append(ratio(probe.PROBE, OURS, "client CPU/host ratio", "client_cpu_s", same_run + "; goal <= 0.5"))
    return rows
