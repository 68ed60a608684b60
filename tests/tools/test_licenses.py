"""hack/tools/licenses.py against a fake site directory: dist-info test doubles written to a temp dir, found by
importlib.metadata like installed distributions, and a temp pyproject.toml naming the runtime roots."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

import licenses

SCRIPT = Path(licenses.__file__)


class FakeSite:
    """A test double of site-packages: one `<name>-<version>.dist-info/METADATA` per distribution."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir()

    def add(
        self,
        name: str,
        version: str = "1.0",
        *,
        expression: str | None = None,
        license_field: str | None = None,
        classifiers: tuple[str, ...] = (),
        requires: tuple[str, ...] = (),
    ) -> None:
        lines = ["Metadata-Version: 2.4", f"Name: {name}", f"Version: {version}"]
        lines += [f"License-Expression: {expression}"] if expression else []
        lines += [f"License: {license_field}"] if license_field else []
        lines += [f"Classifier: {c}" for c in classifiers]
        lines += [f"Requires-Dist: {r}" for r in requires]
        info = self.root / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def site(tmp_path: Path) -> FakeSite:
    return FakeSite(tmp_path / "fake-site")


def _pyproject(tmp_path: Path, *deps: str) -> Path:
    path = tmp_path / "pyproject.toml"
    listed = ", ".join(f'"{d}"' for d in deps)
    path.write_text(f'[project]\nname = "fake-root"\ndependencies = [{listed}]\n', encoding="utf-8")
    return path


def _table(tmp_path: Path, rows: list[str]) -> Path:
    path = tmp_path / "licenses.md"
    header = ["| Package | Version | License | Declared in | Required by |", "| --- | --- | --- | --- | --- |"]
    path.write_text("\n".join(["# Licenses", "", licenses.TABLE_HEADING, "", *header, *rows, ""]), encoding="utf-8")
    return path


def _good_site(site: FakeSite) -> list[str]:
    """Two roots, one transitive dependency; returns the table rows that match them."""
    site.add("fake-client", "2.0", expression="Apache-2.0", requires=("fake-helper>=1",))
    site.add("fake-helper", "1.5", license_field="MIT")
    site.add("fake-ssh", "3.1", expression="LGPL-2.1", requires=("fake-helper",))
    return [
        "| fake-client | 2.0 | Apache-2.0 | License-Expression | arkouda-bootstrap |",
        "| fake-helper | 1.5 | MIT | License | fake-client, fake-ssh |",
        "| fake-ssh | 3.1 | LGPL-2.1 | License-Expression | arkouda-bootstrap |",
    ]


def test_matching_table_passes_and_lgpl_is_allowed(site: FakeSite, tmp_path: Path) -> None:
    rows = _good_site(site)
    pyproject = _pyproject(tmp_path, "fake-client>=2", "fake-ssh")
    assert licenses.check(pyproject, _table(tmp_path, rows), path=[str(site.root)]) == []


def test_gpl_dependency_fails_naming_it(site: FakeSite, tmp_path: Path) -> None:
    rows = _good_site(site)
    site.add("fake-gpl", "0.9", license_field="GPL-3.0", requires=())
    site.add("fake-wrapper", "1.0", expression="MIT", requires=("fake-gpl",))
    rows += [
        "| fake-gpl | 0.9 | GPL-3.0 | License | fake-wrapper |",
        "| fake-wrapper | 1.0 | MIT | License-Expression | arkouda-bootstrap |",
    ]
    pyproject = _pyproject(tmp_path, "fake-client", "fake-ssh", "fake-wrapper")
    problems = licenses.check(pyproject, _table(tmp_path, rows), path=[str(site.root)])
    assert len(problems) == 1
    assert problems[0].startswith("fake-gpl 0.9 (required by fake-wrapper) is GPL (License: GPL-3.0)")


def test_gpl_fails_the_command_with_one_line(site: FakeSite, tmp_path: Path) -> None:
    """The script as make runs it: the fake site on PYTHONPATH, as installed distributions are on sys.path."""
    site.add("fake-gpl", "0.9", classifiers=("License :: OSI Approved :: GNU General Public License v3 (GPLv3)",))
    pyproject = _pyproject(tmp_path, "fake-gpl")
    table = _table(
        tmp_path, ["| fake-gpl | 0.9 | GNU General Public License v3 (GPLv3) | classifier | arkouda-bootstrap |"]
    )
    env = {**os.environ, "PYTHONPATH": str(site.root)}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--pyproject", str(pyproject), "--table", str(table)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("licenses: fake-gpl 0.9 (required by arkouda-bootstrap) is GPL (classifier:")


def test_table_missing_an_entry_fails_with_the_row_to_add(site: FakeSite, tmp_path: Path) -> None:
    rows = _good_site(site)
    pyproject = _pyproject(tmp_path, "fake-client", "fake-ssh")
    problems = licenses.check(pyproject, _table(tmp_path, rows[:1] + rows[2:]), path=[str(site.root)])
    assert problems == [f"{tmp_path / 'licenses.md'} has no row for fake-helper 1.5; add: {rows[1]}"]


def test_table_with_another_version_or_license_fails(site: FakeSite, tmp_path: Path) -> None:
    rows = _good_site(site)
    pyproject = _pyproject(tmp_path, "fake-client", "fake-ssh")
    stale = [rows[0].replace("| 2.0 |", "| 1.9 |"), rows[1].replace("| MIT |", "| BSD-3-Clause |"), rows[2]]
    problems = licenses.check(pyproject, _table(tmp_path, stale), path=[str(site.root)])
    assert [p.split(" row for ")[1].split(" ")[0] for p in problems] == ["fake-client", "fake-helper"]
    assert problems[0].endswith(f"installed: {rows[0]}")


def test_row_for_a_package_outside_the_closure_fails(site: FakeSite, tmp_path: Path) -> None:
    rows = _good_site(site)
    pyproject = _pyproject(tmp_path, "fake-client", "fake-ssh")
    extra = [*rows, "| fake-gone | 1.0 | MIT | License | arkouda-bootstrap |"]
    problems = licenses.check(pyproject, _table(tmp_path, extra), path=[str(site.root)])
    assert len(problems) == 1
    assert "lists fake-gone, which is not in the bootstrap's runtime dependencies" in problems[0]


def test_missing_distribution_and_missing_license_fail(site: FakeSite, tmp_path: Path) -> None:
    site.add("fake-silent", "1.0")
    pyproject = _pyproject(tmp_path, "fake-silent", "fake-absent")
    table = _table(tmp_path, ["| fake-silent | 1.0 |  | nothing | arkouda-bootstrap |"])
    problems = licenses.check(pyproject, table, path=[str(site.root)])
    assert len(problems) == 2
    assert problems[0].startswith("fake-absent, required by arkouda-bootstrap (fake-absent), is not installed")
    assert problems[1].startswith("fake-silent 1.0 (required by arkouda-bootstrap) declares no license")


def test_markers_and_extras_decide_what_is_followed(site: FakeSite, tmp_path: Path) -> None:
    site.add(
        "fake-client",
        expression="MIT",
        requires=('fake-old; python_version < "3"', 'fake-extra; extra == "speedups"', "fake-lib[full]"),
    )
    site.add("fake-lib", expression="MIT", requires=('fake-full; extra == "full"', 'fake-rare; extra == "rare"'))
    site.add("fake-full", expression="MIT")
    for unused in ("fake-old", "fake-extra", "fake-rare"):
        site.add(unused, license_field="GPL-2.0")  # would fail the check if followed
    required_by, problems = licenses.closure(
        licenses.runtime_roots(_pyproject(tmp_path, "fake-client")), licenses.installed([str(site.root)])
    )
    assert problems == []
    assert required_by == {"fake-client": {"arkouda-bootstrap"}, "fake-lib": {"fake-client"}, "fake-full": {"fake-lib"}}


@pytest.mark.parametrize(
    ("declared", "gpl"),
    [
        ("GPL-3.0-or-later", True),
        ("AGPL-3.0-only", True),
        ("GPL-2.0+", True),
        ("MIT AND GPL-2.0-only", True),
        ("GPL-2.0-only WITH Classpath-exception-2.0", True),
        ("GNU General Public License v2 or later (GPLv2+)", True),
        ("GPLv3", True),
        ("LGPL-2.1", False),
        ("LGPL-3.0-or-later", False),
        ("GNU Lesser General Public License v2 or later (LGPLv2+)", False),
        ("MIT OR GPL-2.0-only", False),
        ("(MIT OR GPL-2.0-only) AND Apache-2.0", False),
        ("Apache 2.0", False),
        ("Apache-2.0 OR BSD-3-Clause", False),
    ],
)
def test_is_gpl(declared: str, gpl: bool) -> None:
    assert licenses.is_gpl(declared) is gpl


def test_license_field_holding_the_full_text_falls_back_to_classifiers(site: FakeSite) -> None:
    site.add(
        "fake-verbose",
        license_field="Permission is hereby granted " + "x" * 200,
        classifiers=(
            "Programming Language :: Python",
            "License :: OSI Approved :: MIT License",
        ),
    )
    dist = licenses.installed([str(site.root)])[canonicalize_name("fake-verbose")]
    assert licenses.declared_license(dist) == ("MIT License", "classifier")
