"""Bench results: one `Row` per figure, written as JSON parts, merged into CSV/JSON and one printed table.

Every timing is a min/median/max over repeats; a ratio is computed per repeat from two measurements taken
back to back in the same run, and then summarised the same way. A row that could not be measured says
`not run: <reason>` and carries no number.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import logging
import os
import platform
import shlex
import statistics
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

OK = "ok"


@dataclass(frozen=True)
class Summary:
    """min/median/max of one figure over its repeats."""

    min: float
    median: float
    max: float
    repeats: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary:
        if not values:
            raise ValueError("a summary needs at least one value")
        return cls(
            min=min(values), median=float(statistics.median(values)), max=max(values), repeats=len(values)
        )


@dataclass(frozen=True)
class Row:
    """One figure of the table, with the command that produced it."""

    group: str
    case: str
    metric: str
    unit: str
    command: str
    summary: Summary | None = None
    status: str = OK
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def measured(
        cls,
        *,
        group: str,
        case: str,
        metric: str,
        unit: str,
        command: str,
        values: Sequence[float],
        note: str = "",
        extra: dict[str, Any] | None = None,
    ) -> Row:
        return cls(
            group=group,
            case=case,
            metric=metric,
            unit=unit,
            command=command,
            summary=Summary.of(values),
            note=note,
            extra=dict(extra or {}),
        )

    @classmethod
    def not_run(cls, *, group: str, case: str, metric: str, command: str, reason: str) -> Row:
        """A row that names why it has no number (a missing prerequisite), never a fake one."""
        return cls(
            group=group, case=case, metric=metric, unit="", command=command, status=f"not run: {reason}"
        )

    @classmethod
    def failed(cls, *, group: str, case: str, metric: str, command: str, reason: str) -> Row:
        """A row whose measurement was attempted and failed (the reason names what broke)."""
        return cls(
            group=group, case=case, metric=metric, unit="", command=command, status=f"failed: {reason}"
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["summary"] = asdict(self.summary) if self.summary else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Row:
        summary = data.get("summary")
        return cls(
            group=str(data["group"]),
            case=str(data["case"]),
            metric=str(data["metric"]),
            unit=str(data["unit"]),
            command=str(data["command"]),
            summary=Summary(**summary) if summary else None,
            status=str(data.get("status", OK)),
            note=str(data.get("note", "")),
            extra=dict(data.get("extra") or {}),
        )


def this_command() -> str:
    """The command line that is running now, as a user would retype it (PYTHONPATH from mk/bench.mk)."""
    return shlex.join(["python", "-m", "arkouda_bench", *sys.argv[1:]])


# The order of the parts in the table: ssh fan-out, the bootstrap at scale, install/recovery/compute on the
# local node, the real launcher, the idle gate.
PART_ORDER = ("fanout", "scale", "cluster", "launch", "gate")

# The paths whose uncommitted changes make a measurement differ from its commit ("+dirty").
MEASURED_PATHS = ("bench", "bootstrap", "charts", "docker", "hack", "mk", "values")


def machine_facts(repo_root: Path) -> dict[str, Any]:
    """Date, machine size and commit, for the README's performance section."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(repo_root), "rev-parse", "--short=12", "HEAD"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        dirty = subprocess.run(
            [
                "git",
                "-C",
                str(repo_root),
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                *MEASURED_PATHS,
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = "unknown", ""
    mem_kib = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    except OSError:
        pass
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count() or 0,
        "memory_gib": round(mem_kib / 1024 / 1024),
        "commit": commit + ("+dirty" if dirty else ""),
        "kernel": platform.release(),
    }


def write_part(results_dir: Path, part: str, rows: Iterable[Row], *, facts: dict[str, Any]) -> Path:
    """Write one bench part's rows as `<results>/parts/<part>.json` (replacing that part's last result)."""
    path = results_dir / "parts" / f"{part}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"part": part, "facts": facts, "rows": [r.to_json() for r in rows]}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=2) + "\n")
    tmp.replace(path)
    log.info("wrote %s", path)
    return path


def read_parts(results_dir: Path) -> tuple[list[Row], list[dict[str, Any]]]:
    rows: list[Row] = []
    facts: list[dict[str, Any]] = []
    order = {name: i for i, name in enumerate(PART_ORDER)}
    paths = sorted(
        (results_dir / "parts").glob("*.json"), key=lambda p: (order.get(p.stem, len(order)), p.stem)
    )
    for path in paths:
        payload = json.loads(path.read_text())
        facts.append({"part": payload["part"], **payload["facts"]})
        rows.extend(Row.from_json(r) for r in payload["rows"])
    return rows, facts


def fmt_number(value: float) -> str:
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


TABLE_HEADER = ("group", "case", "metric", "unit", "min", "median", "max", "reps", "status/note", "command")


def table_cells(row: Row) -> tuple[str, ...]:
    s = row.summary
    nums = (fmt_number(s.min), fmt_number(s.median), fmt_number(s.max), str(s.repeats)) if s else ("",) * 4
    status = row.status if row.status != OK else row.note
    return (row.group, row.case, row.metric, row.unit, *nums, status, row.command)


def render_table(rows: Sequence[Row], *, markdown: bool = False) -> str:
    """The one printed table (plain aligned text, or a Markdown table for the README)."""
    cells = [TABLE_HEADER, *(table_cells(r) for r in rows)]
    if markdown:
        lines = ["| " + " | ".join(TABLE_HEADER) + " |", "|" + "---|" * len(TABLE_HEADER)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in cells[1:]]
        return "\n".join(lines)
    widths = [max(len(row[i]) for row in cells) for i in range(len(TABLE_HEADER) - 1)]
    numeric = {4, 5, 6, 7}
    out = []
    for row in cells:
        parts = [
            (row[i].rjust(widths[i]) if i in numeric else row[i].ljust(widths[i]))
            for i in range(len(TABLE_HEADER) - 1)
        ]
        out.append("  ".join([*parts, row[-1]]).rstrip())
    return "\n".join(out)


def write_merged(
    results_dir: Path, rows: Sequence[Row], facts: Sequence[dict[str, Any]]
) -> tuple[Path, Path]:
    """Write `bench.json` (rows + facts) and `bench.csv` (one line per row) under the results dir."""
    results_dir.mkdir(parents=True, exist_ok=True)
    json_path = results_dir / "bench.json"
    json_path.write_text(
        json.dumps({"facts": list(facts), "rows": [r.to_json() for r in rows]}, indent=2) + "\n"
    )
    csv_path = results_dir / "bench.csv"
    with csv_path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            [
                "group",
                "case",
                "metric",
                "unit",
                "min",
                "median",
                "max",
                "repeats",
                "status",
                "note",
                "command",
            ]
        )
        for r in rows:
            s = r.summary
            writer.writerow(
                [
                    r.group,
                    r.case,
                    r.metric,
                    r.unit,
                    *((s.min, s.median, s.max, s.repeats) if s else ("", "", "", "")),
                    r.status,
                    r.note,
                    r.command,
                ]
            )
    return json_path, csv_path
