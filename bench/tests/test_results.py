"""The result model: summaries, JSON round trip, CSV/table output, `not run` rows carry no number."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from arkouda_bench.results import Row, Summary, read_parts, render_table, write_merged, write_part


def test_summary_is_min_median_max() -> None:
    s = Summary.of([3.0, 1.0, 2.0, 10.0])
    assert (s.min, s.median, s.max, s.repeats) == (1.0, 2.5, 10.0, 4)


def test_summary_needs_values() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Summary.of([])


def test_parts_round_trip_and_merge(tmp_path: Path) -> None:
    measured = Row.measured(
        group="g", case="N=8", metric="wall", unit="s", command="python -m arkouda_bench x", values=[1.0, 2.0]
    )
    missing = Row.not_run(group="g", case="N=8", metric="install", command="make bench", reason="no cluster")
    write_part(tmp_path, "p1", [measured, missing], facts={"date": "d", "cores": 2, "memory_gib": 24})
    rows, facts = read_parts(tmp_path)
    assert rows == [measured, missing]
    assert facts == [{"part": "p1", "date": "d", "cores": 2, "memory_gib": 24}]
    json_path, csv_path = write_merged(tmp_path, rows, facts)
    assert json.loads(json_path.read_text())["rows"][1]["summary"] is None
    lines = list(csv.DictReader(csv_path.open()))
    assert lines[0]["median"] == "1.5"
    assert lines[1]["median"] == ""
    assert lines[1]["status"] == "not run: no cluster"


def test_table_shows_status_and_command() -> None:
    rows = [
        Row.measured(group="g", case="c", metric="m", unit="ms", command="cmd one", values=[0.5]),
        Row.not_run(group="g", case="c2", metric="m2", command="cmd two", reason="kube-apiserver missing"),
    ]
    text = render_table(rows)
    assert "not run: kube-apiserver missing" in text
    assert "cmd one" in text
    md = render_table(rows, markdown=True)
    assert md.splitlines()[0].startswith("| group |")
    assert len(md.splitlines()) == 4
