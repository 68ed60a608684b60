"""The bootstrap's documentation names what the code and the chart have: its subcommands, its Event reasons and
the chart values it points users at."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from arkouda_bootstrap.cli import exporter as exporter_cli
from arkouda_bootstrap.cli import gate as gate_cli
from arkouda_bootstrap.cli import keygen as keygen_cli
from arkouda_bootstrap.cli import locale as locale_cli
from arkouda_bootstrap.cli import main as cli
from arkouda_bootstrap.cli import nodewatch as nodewatch_cli
from arkouda_bootstrap.cli import server as server_cli
from arkouda_bootstrap.cli.options import Values
from arkouda_bootstrap.errors import UsageError
from arkouda_bootstrap.kube.events import Reason

REPO = Path(__file__).resolve().parents[2]
README = REPO / "bootstrap" / "README.md"
INTERFACES = REPO / "docs" / "interfaces.md"
VALUES = REPO / "charts" / "arkouda" / "values.yaml"


@pytest.mark.parametrize("doc", [README, INTERFACES], ids=lambda p: p.name)
def test_every_event_reason_is_documented(doc: Path) -> None:
    text = doc.read_text()
    assert [r.value for r in Reason if f"`{r.value}`" not in text] == []


def test_the_readme_documents_exactly_the_subcommands() -> None:
    documented = set(re.findall(r"^## `([a-z]+)`", README.read_text(), flags=re.M))
    assert documented == set(cli.SUBCOMMANDS)


def test_chart_values_named_in_the_readme_exist() -> None:
    named = re.findall(r"chart values?\s+`([A-Za-z0-9.]+)`", README.read_text())
    assert named, "the README points at no chart value: this test reads nothing"
    values: Any = yaml.safe_load(VALUES.read_text())
    missing = []
    for key in named:
        node = values
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                missing.append(key)
                break
            node = node[part]
    assert missing == []


# -- the flag tables: what the README says a flag defaults to is what the program uses ----------------------------

SERVER_ENV = {
    "ARKOUDA_NUM_LOCALES": "3",
    "ARKOUDA_LOCALE_SELECTOR": "app.kubernetes.io/instance=rel,app.kubernetes.io/component=locale",
    "POD_NAME": "rel-arkouda-server-0",
    "POD_IP": "10.1.0.5",
}


def _server_and_job(v: Values) -> object:
    server = server_cli.server_settings(v, namespace="ns", command=["prog"])
    return server, server_cli.job_settings(v, server)


# README table id -> (subcommand, the least environment it runs with, the settings built from its options).
# The server table runs with --scale-down-when-done (so --termination-log counts), the Slurm one with its source.
CONTEXTS: dict[str, tuple[str, dict[str, str], Callable[[Values], object]]] = {
    "common": ("locale", {}, lambda v: (v.raw("log_level"), v.raw("namespace"))),
    "keygen": (
        "keygen",
        {"ARKOUDA_SSH_SECRET": "rel-arkouda-ssh"},
        lambda v: keygen_cli.keygen_settings(v, namespace="ns"),
    ),
    "locale": ("locale", {}, locale_cli.locale_settings),
    "server": ("server", {**SERVER_ENV, "ARKOUDA_SCALE_DOWN_WHEN_DONE": "rel-arkouda-locale"}, _server_and_job),
    "server-slurm": ("server", {**SERVER_ENV, "ARKOUDA_HOSTS_FROM": "slurm"}, _server_and_job),
    "exporter": ("exporter", {}, exporter_cli.exporter_settings),
    "nodewatch": (
        "nodewatch",
        {"ARKOUDA_NODEWATCH_STATEFULSETS": "rel-arkouda-locale", "ARKOUDA_NODEWATCH_SELECTOR": "app=arkouda"},
        lambda v: nodewatch_cli.nodewatch_settings(v, namespace="ns"),
    ),
    "gate": (
        "gate",
        {
            "POD_NAME": "rel-arkouda-gate-0",
            "ARKOUDA_RELEASE_SELECTOR": "app.kubernetes.io/instance=rel",
            "ARKOUDA_SERVER_STATEFULSET": "rel-arkouda-server",
            "ARKOUDA_LOCALE_STATEFULSET": "rel-arkouda-locale",
            "ARKOUDA_NUM_LOCALES": "3",
        },
        lambda v: gate_cli.gate_settings(v, namespace="ns"),
    ),
}


def readme_rows() -> list[tuple[str, str, str, str]]:
    """(table id, flag, env, default cell) of every row of the README's flag tables, read from the README; a row
    "as for `TABLE`" stands for those flags' rows of that earlier table."""
    rows: list[tuple[str, str, str, str]] = []
    tables = re.findall(r"<!-- options:([a-z-]+) -->\n(.*?)<!-- /options:\1 -->", README.read_text(), re.S)
    for table, body in tables:
        for line in filter(lambda line: line.startswith("| `"), body.splitlines()):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            flags, env = re.findall(r"`(--[a-z-]+)`", cells[0]), re.fullmatch(r"`([A-Z_]+)`", cells[1])
            if env:
                rows.append((table, flags[0], env.group(1), cells[2]))
            elif earlier := re.fullmatch(r"as for `([a-z-]+)`", cells[1]):
                rows += [(table, *r[1:]) for r in rows if r[0] == earlier.group(1) and r[1] in flags]
            else:
                raise AssertionError(f"bootstrap/README.md: table {table}: cannot read the row {line!r}")
    return rows


ROWS = readme_rows()


def effective(table: str, environ: dict[str, str]) -> object:
    subcommand, _, build = CONTEXTS[table]
    ns = cli.build_parser().parse_args([subcommand])
    return build(Values(ns, cli.SUBCOMMANDS[subcommand].options, environ))


def test_the_flag_tables_are_read_for_every_subcommand() -> None:
    assert {table for table, *_ in ROWS} == set(CONTEXTS)
    assert {subcommand for subcommand, _, _ in CONTEXTS.values()} == set(cli.SUBCOMMANDS)


@pytest.mark.parametrize(
    ("table", "flag", "env", "default"),
    [pytest.param(*r, id=f"{r[0]}:{r[1]}") for r in ROWS if re.fullmatch(r"`[^`]+`|false", r[3])],
)
def test_a_documented_default_is_the_real_default(table: str, flag: str, env: str, default: str) -> None:
    """Setting a flag to its documented default changes nothing: the settings are those of leaving it unset."""
    base = {k: v for k, v in CONTEXTS[table][1].items() if k != env}
    documented = effective(table, {**base, env: default.strip("`")})
    assert documented == effective(table, base), f"bootstrap/README.md: {flag} ({env}) does not default to {default}"


@pytest.mark.parametrize(
    ("table", "flag", "env"),
    [pytest.param(*r[:3], id=f"{r[0]}:{r[1]}") for r in ROWS if r[3] == "(required)"],
)
def test_a_documented_required_flag_is_required(table: str, flag: str, env: str) -> None:
    base = {k: v for k, v in CONTEXTS[table][1].items() if k != env}
    with pytest.raises(UsageError, match=f"^missing {re.escape(flag)} "):
        effective(table, base)
