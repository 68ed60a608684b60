"""The chart README's RBAC table against the Roles the chart renders: `helm template` of charts/arkouda with the
default values and with each mode that adds rules, every rule one row. A Role changed without its README line (or
the reverse) fails here."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "arkouda"
README = CHART / "README.md"
SECTION = "## RBAC\n"
RELEASE = "ak"
QUEUE_AND_IDLE = ["--set", "global.scheduling.queueName=q", "--set", "global.idle.enabled=true"]
JOB = ["--set", "global.mode=mpi", "--set", "server.mpi.runMode=job"]
QUEUE_AND_JOB = ["--set", "global.scheduling.queueName=q", *JOB]
# what each mode adds to the default render ("defaults")
MODES: dict[str, list[str]] = {
    "defaults": [],
    "`server.mpi.runMode: job`": JOB,
    "`global.idle.enabled`": ["--set", "global.idle.enabled=true"],
    "`global.scheduling.queueName`": ["--set", "global.scheduling.queueName=q"],
    "`global.scheduling.queueName` and `global.idle.enabled`": QUEUE_AND_IDLE,
    "`server.mpi.runMode: job` and `global.scheduling.queueName`": QUEUE_AND_JOB,
}
Row = tuple[str, str, str, str, str, str]  # role, when, API group, resources, names, verbs


def _code(items: list[str]) -> str:
    return ", ".join(f"`{i}`" for i in items)


def _named(name: str) -> str:
    return name.replace(f"{RELEASE}-", "<release>-", 1)


def _roles(args: list[str]) -> list[dict[str, Any]]:
    helm = shutil.which("helm")
    assert helm is not None, "helm is not on PATH (make tools; the make targets put it there)"
    out = subprocess.run(
        [helm, "template", RELEASE, str(CHART), *args], check=True, capture_output=True, text=True
    ).stdout
    return [d for d in yaml.safe_load_all(out) if isinstance(d, dict) and d.get("kind") == "Role"]


def rendered_rows() -> set[Row]:
    """Every rule of the default render, and each rule a mode adds (a role, group, resources and verbs the
    default render does not have; names differ by mode and are compared for the default render only)."""
    rows: set[Row] = set()
    seen: set[tuple[str, str, str, str]] = set()
    for when, args in MODES.items():
        for role in _roles(args):
            name = f"`{_named(role['metadata']['name'])}`"
            for rule in role["rules"]:
                group = ", ".join(g or "core" for g in rule["apiGroups"])
                key = (name, group, _code(rule["resources"]), _code(rule["verbs"]))
                if when != "defaults" and key in seen:
                    continue
                seen.add(key)
                names = _code([_named(n) for n in rule.get("resourceNames", [])]) or "any"
                rows.add((name, when, group, key[2], names, key[3]))
    return rows


def readme_rows() -> set[Row]:
    text = README.read_text(encoding="utf-8")
    assert SECTION in text, f"{README} has no {SECTION.strip()!r} section"
    body = text[text.index(SECTION) + len(SECTION) :].split("\n## ", 1)[0]
    rows: set[Row] = set()
    for line in body.splitlines():
        if not line.startswith("| `"):
            continue
        cells = tuple(c.strip() for c in line.strip().strip("|").split("|"))
        assert len(cells) == 6, f"README RBAC row without 6 cells: {line}"
        rows.add(cells)
    return rows


def test_the_readme_rbac_table_is_the_rendered_roles() -> None:
    rendered, documented = rendered_rows(), readme_rows()
    missing = sorted(rendered - documented)
    extra = sorted(documented - rendered)
    assert not missing and not extra, (
        "charts/arkouda/README.md ## RBAC differs from the rendered Roles\n"
        + "".join(f"  missing: | {' | '.join(r)} |\n" for r in missing)
        + "".join(f"  not rendered: | {' | '.join(r)} |\n" for r in extra)
    )
