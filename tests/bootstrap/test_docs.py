"""The bootstrap's documentation names what the code and the chart have: its subcommands, its Event reasons and
the chart values it points users at."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from arkouda_bootstrap.cli import main as cli
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
