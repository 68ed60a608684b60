"""Command line of the bench: one subcommand per part, plus `report` that merges and prints the table."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import shutil
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arkouda_bench import results
from arkouda_bench.sshd import BenchSetupError

log = logging.getLogger(__name__)


def _ints(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


# The row groups of the cluster part (cluster.run): install to ready + recovery, and the Himeno compute rows.
CLUSTER_GROUPS = ("install", "compute")


def _groups(text: str) -> list[str]:
    values = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [v for v in values if v not in CLUSTER_GROUPS]
    if not values or unknown:
        raise argparse.ArgumentTypeError(f"expected some of {','.join(CLUSTER_GROUPS)}, got {text!r}")
    return values


def _positive(text: str) -> int:
    value = _ints(text)
    if len(value) != 1:
        raise argparse.ArgumentTypeError(f"expected one positive integer, got {text!r}")
    return value[0]


def _cluster_part_options(part: argparse.ArgumentParser) -> None:
    """--repeats, --kubeconfig and --not-run of a part that runs on the local cluster."""
    part.add_argument("--repeats", type=_positive, default=3)
    part.add_argument(
        "--kubeconfig", type=Path, default=None, help="the cluster's admin kubeconfig (env KUBECONFIG)"
    )
    part.add_argument(
        "--not-run",
        metavar="REASON",
        default="",
        help="record the rows as 'not run: REASON' (a prerequisite failed before the bench)",
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m arkouda_bench", description=__doc__)
    p.add_argument(
        "--results-dir",
        type=Path,
        default=Path(os.environ.get("RESULTS_DIR", "results")),
        help="where parts, bench.csv and bench.json go (env RESULTS_DIR)",
    )
    p.add_argument(
        "--repo-root",
        type=Path,
        default=Path(os.environ.get("REPO_ROOT", ".")),
        help="the checkout (for the commit in the results; env REPO_ROOT)",
    )
    p.add_argument("--log-level", default=os.environ.get("ARKBENCH_LOG_LEVEL", "INFO"))
    sub = p.add_subparsers(dest="part", required=True)

    f = sub.add_parser("fanout", help="parallel ssh fan-out, OpenSSH default vs ours vs ours+pre-warm")
    f.add_argument("--hosts", type=_ints, default=[16, 64, 256], help="host counts N (default 16,64,256)")
    f.add_argument("--repeats", type=_positive, default=3)

    s = sub.add_parser("scale", help="the bootstrap's server against a real kube-apiserver at N")
    s.add_argument("--locales", type=_ints, default=[8, 64, 256, 1024], help="locale pod counts N")
    s.add_argument("--repeats", type=_positive, default=3)
    s.add_argument(
        "--profile-n", type=_positive, default=1024, help="profile one cold and one rolling run at this N"
    )
    s.add_argument("--no-profile", action="store_true", help="skip the profiled runs")
    s.add_argument("--modes", default="cold,rolling", help="which runs per repeat (cold, rolling or both)")

    c = sub.add_parser("cluster", help="on the local node: install, recovery, Himeno")
    c.add_argument(
        "--kubeconfig", type=Path, default=None, help="the cluster's admin kubeconfig (env KUBECONFIG)"
    )
    c.add_argument("--repeats", type=_positive, default=3)
    c.add_argument(
        "--groups",
        type=_groups,
        default=list(CLUSTER_GROUPS),
        help="row groups to run, comma-separated: install (install to ready + recovery), compute (Himeno)",
    )
    c.add_argument(
        "--himeno-host",
        type=Path,
        default=None,
        help="the host build of himeno (default $CACHE_DIR/mpi-demo/bin/himeno, make mpi-demo-host)",
    )
    c.add_argument(
        "--not-run",
        metavar="REASON",
        default="",
        help="record the rows as 'not run: REASON' (a prerequisite failed before the bench)",
    )

    la = sub.add_parser(
        "launch",
        help="the real launcher on the local node: amudprun start → all locales past the GASNet barrier",
    )
    la.add_argument(
        "--kubeconfig", type=Path, default=None, help="the cluster's admin kubeconfig (env KUBECONFIG)"
    )
    la.add_argument("--locales", type=_ints, default=[2, 8, 32, 64], help="numLocales N (default 2,8,32,64)")
    la.add_argument(
        "--layouts",
        default="one node,three nodes",
        help="comma-separated: 'one node' (every pod on node 0), 'three nodes' (spread); default both",
    )
    la.add_argument(
        "--before",
        type=_ints,
        default=[],
        help="N that are also launched with Linux's neighbour table thresholds (the before of the fix)",
    )
    la.add_argument("--repeats", type=_positive, default=3)
    la.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra helm --set for every release (e.g. lower locale.resources.requests.cpu to fit N)",
    )
    la.add_argument(
        "--not-run",
        metavar="REASON",
        default="",
        help="record the rows as 'not run: REASON' (a prerequisite failed before the bench)",
    )

    g = sub.add_parser(
        "gate",
        help="the gate vs a direct connection (round trip, 256 MiB request and reply), on loopback",
    )
    g.add_argument("--repeats", type=_positive, default=5)
    g.add_argument("--round-trips", type=_positive, default=2000, help="requests per repeat")
    g.add_argument(
        "--cluster",
        action="store_true",
        help="also the local node's rows: wake → first reply, idle → pods gone (KUBECONFIG, images loaded)",
    )
    g.add_argument(
        "--kubeconfig", type=Path, default=None, help="the cluster's admin kubeconfig (env KUBECONFIG)"
    )
    g.add_argument("--not-run", metavar="REASON", default="", help=argparse.SUPPRESS)

    c = sub.add_parser(
        "checkpoint",
        help="lossless sleep on the local 3-node cluster: the gate's save and load of 64 and 512 MiB, "
        "wake with and without the load",
    )
    _cluster_part_options(c)

    n = sub.add_parser(
        "nodeloss",
        help="node loss on the local 3-node cluster: a locale's node killed → LocaleLost, NodeLost, "
        "relaunch, Ready",
    )
    _cluster_part_options(n)

    q = sub.add_parser(
        "queue",
        help="queueing through Kueue on the local cluster: quota freed → queued release Ready, beside "
        "the same install on an empty queue",
    )
    _cluster_part_options(q)

    r = sub.add_parser("report", help="merge the parts into bench.csv/bench.json and print the table")
    r.add_argument(
        "--markdown", action="store_true", help="print the table as Markdown (for bench/README.md)"
    )
    return p


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    # SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so the sshd, etcd and kube-apiserver this bench
    # started are stopped by their context managers instead of being left running.
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(name)s %(message)s", stream=sys.stderr
    )
    results_dir: Path = args.results_dir.resolve()
    command = results.this_command()
    facts = results.machine_facts(args.repo_root)
    try:
        if args.part == "fanout":
            from arkouda_bench import fanout  # noqa: PLC0415 - each part imports only what it needs

            rows = fanout.run(
                host_counts=args.hosts,
                repeats=args.repeats,
                command=command,
                keep_configs=results_dir / "ssh-configs",
            )
            results.write_part(results_dir, "fanout", rows, facts=facts)
            print(results.render_table(rows))
            return 0
        if args.part == "scale":
            from arkouda_bench import apiserver, scale  # noqa: PLC0415

            missing = apiserver.missing_binaries()
            if missing:
                rows = [
                    results.Row.not_run(
                        group=scale.GROUP, case=f"N={n} locales", metric="bootstrap server stages",
                        command=command, reason=f"{', '.join(missing)} not built (make cluster-tools)",
                    )
                    for n in args.locales
                ]  # fmt: skip
            else:
                rows = scale.run(
                    locale_counts=args.locales, repeats=args.repeats, command=command,
                    repo_root=args.repo_root.resolve(), profile_n=None if args.no_profile else args.profile_n,
                    modes=[m for m in args.modes.split(",") if m],
                    profile_dir=results_dir,
                )  # fmt: skip
            results.write_part(results_dir, "scale", rows, facts=facts)
            print(results.render_table(rows))
            return 0
        if args.part in ("cluster", "launch", "gate", "checkpoint", "nodeloss", "queue"):
            part_rows = {
                "cluster": _cluster_rows,
                "launch": _launch_rows,
                "gate": _gate_rows,
                "checkpoint": _checkpoint_rows,
                "nodeloss": _nodeloss_rows,
                "queue": _queue_rows,
            }[args.part]
            rows = part_rows(args, command)
            results.write_part(results_dir, args.part, rows, facts=facts)
            print(results.render_table(rows))
            return 0
        if args.part == "report":
            rows, part_facts = results.read_parts(results_dir)
            if not rows:
                print(
                    f"bench: no results under {results_dir / 'parts'}: run 'make bench' first",
                    file=sys.stderr,
                )
                return 1
            json_path, csv_path = results.write_merged(results_dir, rows, part_facts)
            head = part_facts[0]
            print(f"# Arkouda on Kubernetes bench — {head['cores']} cores, {head['memory_gib']} GiB")
            for f in part_facts:
                print(f"# part {f['part']}: {f['date']}, commit {f['commit']}")
            print(results.render_table(rows, markdown=args.markdown))
            print(f"# written: {csv_path} {json_path}")
            return 0
    except BenchSetupError as exc:
        print(f"bench {args.part}: {exc}", file=sys.stderr)
        return 1
    raise AssertionError(f"unhandled part {args.part}")


def _gate_rows(args: argparse.Namespace, command: str) -> list[results.Row]:
    from arkouda_bench import gate  # noqa: PLC0415

    rows = gate.run(repeats=args.repeats, command=command, round_trips=args.round_trips)
    if args.cluster:
        from arkouda_bench import gatecluster  # noqa: PLC0415

        kubeconfig, reason = _kubeconfig_reason(args)
        if kubeconfig is None:
            raise BenchSetupError(f"--cluster: {reason}")
        rows += gatecluster.run(
            kubeconfig=kubeconfig, repo_root=args.repo_root.resolve(), repeats=args.repeats, command=command
        )
    return rows


def _cluster_module_rows(
    name: str, args: argparse.Namespace, command: str, *, unable: str = ""
) -> list[results.Row]:
    """The rows of cluster part module `name` (its `run`, or its `not_run_rows` with why: no kubeconfig, or
    `unable`). Imported here: only these parts need the kubernetes client."""
    module: Any = importlib.import_module(f"arkouda_bench.{name}")
    kubeconfig, reason = _kubeconfig_reason(args)
    reason = reason or unable
    if reason or kubeconfig is None:
        rows: list[results.Row] = module.not_run_rows(reason, command)
        return rows
    measured: list[results.Row] = module.run(
        kubeconfig=kubeconfig, repo_root=args.repo_root.resolve(), repeats=args.repeats, command=command
    )
    return measured


def _checkpoint_rows(args: argparse.Namespace, command: str) -> list[results.Row]:
    return _cluster_module_rows("checkpointcluster", args, command)


def _nodeloss_rows(args: argparse.Namespace, command: str) -> list[results.Row]:
    unable = "killing a node of the local cluster needs root" if os.geteuid() != 0 else ""
    return _cluster_module_rows("nodeloss", args, command, unable=unable)


def _queue_rows(args: argparse.Namespace, command: str) -> list[results.Row]:
    return _cluster_module_rows("queue", args, command)


def _kubeconfig_reason(args: argparse.Namespace) -> tuple[Path | None, str]:
    """The kubeconfig to use, or why the cluster rows cannot run (empty when they can)."""
    kubeconfig: Path | None = args.kubeconfig or (
        Path(os.environ["KUBECONFIG"]) if os.environ.get("KUBECONFIG") else None
    )
    reason: str = args.not_run
    if not reason and kubeconfig is None:
        reason = "no kubeconfig (set KUBECONFIG or --kubeconfig; make cluster-up)"
    if not reason and kubeconfig is not None and not kubeconfig.is_file():
        reason = f"kubeconfig {kubeconfig} missing (make cluster-up)"
    for tool in ("helm", "kubectl"):
        if not reason and shutil.which(tool) is None:
            reason = f"{tool} not on PATH (make tools)"
    return kubeconfig, reason


def _launch_rows(args: argparse.Namespace, command: str) -> list[results.Row]:
    from arkouda_bench import launch  # noqa: PLC0415 - needs the kubernetes client only here

    layouts = [x.strip() for x in args.layouts.split(",") if x.strip()]
    unknown = [x for x in layouts if x not in launch.LAYOUTS]
    if unknown:
        raise BenchSetupError(f"--layouts: unknown {unknown}; known: {', '.join(launch.LAYOUTS)}")
    kubeconfig, reason = _kubeconfig_reason(args)
    if reason or kubeconfig is None:
        return [
            launch.not_run_row(n, reason, command, case=launch.case_name(n, layout, launch.CLUSTER_TABLE))
            for layout in layouts
            for n in args.locales
        ]
    try:
        return launch.run(
            kubeconfig=kubeconfig, repo_root=args.repo_root.resolve(), locale_counts=args.locales,
            repeats=args.repeats, sets=[x for kv in args.sets for x in ("--set", kv)], command=command,
            layouts=layouts, before=args.before,
        )  # fmt: skip
    except BenchSetupError:
        raise
    except Exception as exc:  # an unreachable cluster is a missing prerequisite, said in one line
        why = f"cluster not reachable: {type(exc).__name__}: {str(exc)[:200]}"
        return [launch.not_run_row(n, why, command) for n in args.locales]


def _cluster_rows(args: argparse.Namespace, command: str) -> list[results.Row]:
    from arkouda_bench import cluster  # noqa: PLC0415 - needs the kubernetes client only here

    kubeconfig: Path | None = args.kubeconfig or (
        Path(os.environ["KUBECONFIG"]) if os.environ.get("KUBECONFIG") else None
    )
    cache = Path(os.environ.get("CACHE_DIR", str(Path.home() / ".cache" / "arkouda-k8s")))
    himeno: Path = args.himeno_host or cache / "mpi-demo" / "bin" / "himeno"
    reason: str = args.not_run
    if not reason and kubeconfig is None:
        reason = "no kubeconfig (set KUBECONFIG or --kubeconfig; make cluster-up)"
    if not reason and kubeconfig is not None and not kubeconfig.is_file():
        reason = f"kubeconfig {kubeconfig} missing (make cluster-up)"
    if not reason and shutil.which("helm") is None:
        reason = "helm not on PATH (make tools)"
    if reason or kubeconfig is None:
        return cluster.not_run_rows(reason, command)
    try:
        return cluster.run(
            kubeconfig=kubeconfig, repo_root=args.repo_root.resolve(), repeats=args.repeats,
            himeno_host_binary=himeno, command=command, groups=args.groups,
        )  # fmt: skip
    except BenchSetupError:
        raise
    except Exception as exc:  # an unreachable cluster is a missing prerequisite, said in one line
        return cluster.not_run_rows(f"cluster not reachable: {type(exc).__name__}: {str(exc)[:200]}", command)
