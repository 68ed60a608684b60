"""Checks the licenses of the bootstrap's runtime dependencies: walks the closure of [project].dependencies in
bootstrap/pyproject.toml through the metadata of the installed distributions (the project's venv), fails when
one of them is GPL, and fails when the table in docs/licenses.md disagrees with the closure (a package missing,
a row too many, a version or license that differs). Run by `make lint-licenses`, part of `make lint`;
`--print-table` prints the rows the table should hold."""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import astuple, dataclass
from importlib import metadata
from pathlib import Path

from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name

REPO_ROOT = Path(__file__).resolve().parents[2]
TABLE_HEADING = "## Python runtime dependencies of the bootstrap"
HEADER = ("Package", "Version", "License", "Declared in", "Required by")
ROOT_NAME = "arkouda-bootstrap"
# A free-text License field longer than this is the license's full text, not its name; classifiers say more then.
MAX_LICENSE_NAME = 100
# GPL and AGPL identifiers (GPL-2.0-only, GPL-3.0-or-later, AGPL-3.0, the deprecated GPL-2.0+); LGPL starts with L.
GPL_ID = re.compile(r"A?GPL-.*")
# The same family in free text and classifiers: "GPLv3", "GNU General Public License v2", "GNU Affero ...".
GPL_TEXT = re.compile(r"\bA?GPL|GNU (Affero )?General Public License", re.IGNORECASE)
SPDX_TOKEN = re.compile(r"\(|\)|[^\s()]+")


@dataclass(frozen=True)
class Row:
    """One runtime dependency as the table shows it."""

    name: str
    version: str
    license: str
    declared_in: str
    required_by: str

    def markdown(self) -> str:
        return "| " + " | ".join(astuple(self)) + " |"


def installed(path: Sequence[str] | None = None) -> dict[NormalizedName, metadata.Distribution]:
    """The distributions on `path` (default sys.path) by normalized name; the first on the path wins, as at import."""
    found = metadata.distributions(path=list(path)) if path is not None else metadata.distributions()
    dists: dict[NormalizedName, metadata.Distribution] = {}
    for dist in found:
        dists.setdefault(canonicalize_name(dist.name), dist)
    return dists


def runtime_roots(pyproject: Path) -> list[Requirement]:
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    return [Requirement(spec) for spec in data["project"]["dependencies"]]


def _applies(req: Requirement, extras: Iterable[str]) -> bool:
    """Whether `req` is needed here: its marker holds on this interpreter for the base install or one of the extras
    the requirer was installed with."""
    if req.marker is None:
        return True
    return any(req.marker.evaluate({"extra": extra}) for extra in ("", *extras))


def closure(
    roots: Sequence[Requirement], dists: Mapping[NormalizedName, metadata.Distribution]
) -> tuple[dict[NormalizedName, set[str]], list[str]]:
    """Every distribution the roots need, transitively, with the names of what requires it; and one problem line
    per requirement that is not installed."""
    required_by: dict[NormalizedName, set[str]] = {}
    walked: dict[NormalizedName, frozenset[str]] = {}  # the extras each one's requirements were followed with
    problems: list[str] = []
    todo: list[tuple[Requirement, str, frozenset[str]]] = [(r, ROOT_NAME, frozenset()) for r in roots]
    while todo:
        req, parent, parent_extras = todo.pop()
        if not _applies(req, parent_extras):
            continue
        name = canonicalize_name(req.name)
        if name not in dists:
            problems.append(f"{name}, required by {parent} ({req}), is not installed here; run `make venv`")
            continue
        required_by.setdefault(name, set()).add(parent)
        extras = walked.get(name, frozenset()) | frozenset(req.extras)
        if walked.get(name) == extras:
            continue
        walked[name] = extras
        todo += [(Requirement(spec), name, extras) for spec in dists[name].requires or []]
    return required_by, list(dict.fromkeys(problems))


def declared_license(dist: metadata.Distribution) -> tuple[str, str]:
    """The license a distribution declares and the metadata field it comes from, in the order PEP 639 gives them
    weight: License-Expression (canonical SPDX), a License field that names a license (not its full text), the
    License :: classifiers. ("", "nothing") when it declares none."""
    expression = _field(dist, "License-Expression")
    if expression:
        try:
            return canonicalize_license_expression(expression), "License-Expression"
        except InvalidLicenseExpression:
            return expression, "License-Expression (not valid SPDX)"
    text = _field(dist, "License")
    if text and "\n" not in text and len(text) <= MAX_LICENSE_NAME:
        return text, "License"
    classifiers = [c.split(" :: ")[-1] for c in _fields(dist, "Classifier") if c.startswith("License ::")]
    if classifiers:
        return "; ".join(classifiers), "classifier"
    return "", "nothing"


def _fields(dist: metadata.Distribution, name: str) -> list[str]:
    return [str(value).strip() for value in dist.metadata.get_all(name) or []]


def _field(dist: metadata.Distribution, name: str) -> str:
    values = _fields(dist, name)
    return values[0] if values else ""


class _SpdxChoice:
    """Whether an SPDX expression can be taken without GPL: OR offers a choice, AND needs both sides, and an
    exception (WITH) still leaves the license GPL (such a case is for a person to judge, so it fails)."""

    def __init__(self, expression: str) -> None:
        self.tokens = SPDX_TOKEN.findall(expression)
        self.pos = 0

    def free_of_gpl(self) -> bool:
        ok = self._and()
        while self._take("OR"):
            ok = self._and() or ok
        return ok

    def _and(self) -> bool:
        ok = self._one()
        while self._take("AND"):
            ok = self._one() and ok
        return ok

    def _one(self) -> bool:
        if self._take("("):
            ok = self.free_of_gpl()
            self._take(")")
            return ok
        ident = self.tokens[self.pos]
        self.pos += 1
        if self._take("WITH"):
            self.pos += 1
        return not GPL_ID.fullmatch(ident)

    def _take(self, token: str) -> bool:
        if self.pos < len(self.tokens) and self.tokens[self.pos] == token:
            self.pos += 1
            return True
        return False


def is_gpl(license_text: str) -> bool:
    """True for GPL or AGPL without a non-GPL alternative; LGPL is not GPL here (docs/licenses.md says why)."""
    try:
        expression = canonicalize_license_expression(license_text)
    except InvalidLicenseExpression:
        return bool(GPL_TEXT.search(license_text))
    return not _SpdxChoice(expression).free_of_gpl()


def expected_rows(
    pyproject: Path, dists: Mapping[NormalizedName, metadata.Distribution]
) -> tuple[list[Row], list[str]]:
    """The table rows the closure of the bootstrap's runtime dependencies gives, and the problems found on the way
    (not installed, no license, GPL), one line each."""
    required_by, problems = closure(runtime_roots(pyproject), dists)
    rows: list[Row] = []
    for name in sorted(required_by):
        dist = dists[name]
        license_text, declared_in = declared_license(dist)
        parents = ", ".join(sorted(required_by[name], key=lambda p: (p != ROOT_NAME, p)))
        rows.append(Row(name, dist.version, license_text, declared_in, parents))
        if not license_text:
            problems.append(
                f"{name} {dist.version} (required by {parents}) declares no license (License-Expression, License, "
                "classifiers): find its license by hand and replace or drop the dependency"
            )
        elif is_gpl(license_text):
            problems.append(
                f"{name} {dist.version} (required by {parents}) is GPL ({declared_in}: {license_text}): "
                "the bootstrap must not depend on it; pin a release under another license or drop it"
            )
    return rows, problems


def table_rows(table: Path) -> dict[str, Row]:
    """The rows of the table under TABLE_HEADING in `table`, by package name (header and rule rows skipped)."""
    lines = table.read_text(encoding="utf-8").splitlines()
    if TABLE_HEADING not in lines:
        return {}
    rows: dict[str, Row] = {}
    for line in lines[lines.index(TABLE_HEADING) + 1 :]:
        if line.startswith("#"):
            break
        if not line.startswith("|"):
            continue
        cells = [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
        if len(cells) != len(HEADER) or tuple(cells) == HEADER or set(cells[0]) <= set("-: "):
            continue
        row = Row(*cells)
        rows[str(canonicalize_name(row.name))] = row
    return rows


def compare(expected: Sequence[Row], documented: Mapping[str, Row], table_name: str) -> list[str]:
    """One problem line per package where the table and the closure disagree."""
    problems: list[str] = []
    for row in expected:
        have = documented.get(row.name)
        if have is None:
            problems.append(f"{table_name} has no row for {row.name} {row.version}; add: {row.markdown()}")
        elif have != row:
            problems.append(f"{table_name} row for {row.name} is {have.markdown()}; installed: {row.markdown()}")
    names = {row.name for row in expected}
    problems += [
        f"{table_name} lists {name}, which is not in the bootstrap's runtime dependencies; remove its row"
        for name in sorted(set(documented) - names)
    ]
    return problems


def check(pyproject: Path, table: Path, *, path: Sequence[str] | None = None) -> list[str]:
    """Every problem with the licenses of the runtime closure and with `table`, one line each (none: all good)."""
    expected, problems = expected_rows(pyproject, installed(path))
    if not table.is_file():
        return [*problems, f"{_shown(table)}: not found (it holds the table under {TABLE_HEADING!r})"]
    documented = table_rows(table)
    if not documented:
        return [*problems, f"{_shown(table)}: no table under {TABLE_HEADING!r}"]
    return problems + compare(expected, documented, _shown(table))


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pyproject", type=Path, default=REPO_ROOT / "bootstrap" / "pyproject.toml")
    parser.add_argument("--table", type=Path, default=REPO_ROOT / "docs" / "licenses.md")
    parser.add_argument("--print-table", action="store_true", help="print the table the closure gives and exit")
    args = parser.parse_args(argv)
    if args.print_table:
        rows, _ = expected_rows(args.pyproject, installed())
        print(
            "\n".join(["| " + " | ".join(HEADER) + " |", "|" + " --- |" * len(HEADER)] + [r.markdown() for r in rows])
        )
        return 0
    problems = check(args.pyproject, args.table)
    for problem in problems:
        print(f"licenses: {problem}", file=sys.stderr)
    if problems:
        return 1
    count = len(table_rows(args.table))
    print(f"licenses: ok   {count} runtime distributions of the bootstrap, none GPL, {_shown(args.table)} matches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
