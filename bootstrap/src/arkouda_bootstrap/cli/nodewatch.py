"""`nodewatch`: its options and the NodeWatchSettings built from them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from arkouda_bootstrap import config
from arkouda_bootstrap.cli.options import Opt, Subcommand, Values
from arkouda_bootstrap.kube.api import KubeApi, resolve_namespace
from arkouda_bootstrap.nodewatch import DEFAULT_MARGIN_SECONDS, NodeWatchSettings

NODEWATCH = [
    Opt(
        "statefulsets",
        "--statefulsets",
        "ARKOUDA_NODEWATCH_STATEFULSETS",
        "comma-separated StatefulSets whose pods may be force-deleted when stuck terminating on a lost node",
        unset="(required)",
        doc="comma-separated StatefulSets whose pods it may force-delete",
    ),
    Opt(
        "selector",
        "--selector",
        "ARKOUDA_NODEWATCH_SELECTOR",
        "label selector of the pods to follow",
        unset="(required)",
    ),
    Opt(
        "margin",
        "--margin-seconds",
        "ARKOUDA_NODEWATCH_MARGIN_SECONDS",
        "seconds past a pod's deletion grace period before it is force-deleted",
        DEFAULT_MARGIN_SECONDS,
        doc="seconds past a pod's deletion grace period before it is forced",
    ),
    Opt(
        "ssh_port",
        "--ssh-port",
        "ARKOUDA_NODEWATCH_SSH_PORT",
        "the pods' sshd port, probed for the data-plane evidence of a lost node (a marked pod that misses every "
        "probe for 20 s is force-deleted at once); 0: the control plane's evidence only",
        0,
        doc="the pods' sshd port, probed for the data-plane evidence (0: control plane only)",
    ),
    Opt(
        "kueue_workload",
        "--kueue-workload",
        "ARKOUDA_KUEUE_WORKLOAD",
        "the release's Kueue Workload (pod group): deleted when Kueue's finalizer holds an ended pod of the group, "
        "which its StatefulSet then cannot recreate (Event KueueWorkloadDeleted)",
        unset="(none)",
        doc="the release's Kueue Workload, deleted when Kueue's finalizer holds an ended pod of the group",
    ),
]


def nodewatch_settings(v: Values, *, namespace: str) -> NodeWatchSettings:
    so = v.opt("statefulsets")
    names = tuple(n.strip() for n in v.required("statefulsets").split(",") if n.strip())
    for name in names:
        config.parse_name(name, flag=so.flag, env=so.env)
    return NodeWatchSettings(
        namespace=namespace,
        selector=v.parsed("selector", config.parse_selector),
        statefulsets=names,
        margin_seconds=v.number("margin"),
        ssh_port=v.integer("ssh_port", minimum=0, maximum=65535) or None,
        kueue_workload=v.optional("kueue_workload", config.parse_name),
    )


def run(v: Values, command: Sequence[str], api_factory: Callable[[], KubeApi]) -> int:
    from arkouda_bootstrap.nodewatch import run_nodewatch

    watch = nodewatch_settings(v, namespace="")
    return run_nodewatch(api_factory(), replace(watch, namespace=resolve_namespace(v.raw("namespace"))))


COMMAND = Subcommand(
    name="nodewatch",
    help="force-delete the release's pods stuck terminating on a lost node (docs/node-loss.md)",
    epilog="Runs until stopped; a pod is force-deleted (uid precondition, Event NodeLost) only when it carries the "
    "node controller's or the taint manager's mark and either its sshd missed every probe for 20 s or it is "
    "terminating past its grace period.",
    tables={"nodewatch": NODEWATCH},
    run=run,
)
