"""Writes (or, with --check, verifies) the flag tables of bootstrap/README.md from the option tables, so the
README cannot drift from the command line: `python -m arkouda_bootstrap.cli.docs [--check] bootstrap/README.md`
(`make bootstrap-docs`; `make lint-bootstrap` runs the check).

Each table sits between `<!-- options:ID -->` and `<!-- /options:ID -->`; ID is `common` or a table id of a
subcommand (cli/options.py Subcommand.tables). An option already shown in an earlier table (the ssh options of
`server`) becomes one "as for" row."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from arkouda_bootstrap.cli.main import SUBCOMMANDS
from arkouda_bootstrap.cli.options import COMMON, COMMON_TABLE, Opt

HEADER = ["| flag | env | default | meaning |", "| --- | --- | --- | --- |"]
# the blank lines keep the comments separate blocks from the table in every Markdown renderer
_BLOCK = re.compile(r"(<!-- options:([a-z-]+) -->\n\n).*?(\n<!-- /options:\2 -->)", flags=re.S)


def tables() -> dict[str, Sequence[Opt]]:
    """Every README table, in README order: the common options, then each subcommand's."""
    out: dict[str, Sequence[Opt]] = {COMMON_TABLE: COMMON}
    for command in SUBCOMMANDS.values():
        out.update(command.tables)
    return out


def default_cell(opt: Opt) -> str:
    if opt.boolean:
        return "false"
    if opt.default_text:
        return f"`{opt.default_text}`"
    if not opt.unset:
        raise ValueError(f"{opt.flag}: an option without a default needs `unset` (what it means when not given)")
    return opt.unset


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_table(opts: Sequence[Opt], *, shown: dict[int, str]) -> str:
    """The table of `opts`; `shown` maps an option already in an earlier table to that table's id (updated)."""
    rows = [*HEADER]
    i = 0
    while i < len(opts):
        if id(opts[i]) in shown:
            first = shown[id(opts[i])]
            run = [opts[i]]
            while i + len(run) < len(opts) and shown.get(id(opts[i + len(run)])) == first:
                run.append(opts[i + len(run)])
            rows.append(f"| {', '.join(f'`{o.flag}`' for o in run)} | as for `{first}` | | |")
            i += len(run)
            continue
        opt = opts[i]
        rows.append(f"| `{opt.flag}` | `{opt.env}` | {_cell(default_cell(opt))} | {_cell(opt.doc or opt.help)} |")
        i += 1
    return "\n".join(rows) + "\n"


def render(readme: str) -> str:
    """`readme` with every generated table rewritten; an unknown or missing table id is an error."""
    shown: dict[int, str] = {}
    rendered: dict[str, str] = {}
    for table_id, opts in tables().items():
        rendered[table_id] = render_table(opts, shown=shown)
        for opt in opts:
            shown.setdefault(id(opt), table_id)
    found = [m.group(2) for m in _BLOCK.finditer(readme)]
    if sorted(found) != sorted(rendered):
        raise ValueError(f"option tables in the README: {found}; expected each of {list(rendered)} once")
    return _BLOCK.sub(lambda m: m.group(1) + rendered[m.group(2)] + m.group(3), readme)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m arkouda_bootstrap.cli.docs", description=__doc__)
    parser.add_argument("readme", type=Path)
    parser.add_argument("--check", action="store_true", help="fail when the README's flag tables are out of date")
    args = parser.parse_args(argv)
    text = args.readme.read_text(encoding="utf-8")
    try:
        new = render(text)
    except ValueError as exc:
        print(f"bootstrap-docs: {args.readme}: {exc}", file=sys.stderr)
        return 1
    if args.check:
        if new != text:
            print(
                f"bootstrap-docs: {args.readme}: the flag tables are out of date; run: make bootstrap-docs",
                file=sys.stderr,
            )
            return 1
        return 0
    args.readme.write_text(new, encoding="utf-8")
    print(f"bootstrap-docs: wrote the flag tables of {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
