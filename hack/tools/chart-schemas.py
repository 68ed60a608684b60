"""Writes (or, with --check, verifies) the parts the arkouda umbrella chart and its subcharts must share, from their
one source in the arkouda-common library chart (charts/arkouda/charts/arkouda-common/global/):

- schema.json: its "properties" (`global`, and `arkouda-common`, the key Helm gives every dependency) go into
  the properties of the three values.schema.json, its "definitions" (the typed Kubernetes security contexts,
  which the component keys reference too) become their "definitions";
- values.yaml: everything from its `global:` line on replaces the `global:` block of the three values.yaml.

Helm hands the umbrella's global values to each subchart, whose strict schema must accept exactly the same keys,
and a subchart rendered alone (its helm-unittest suites) needs the same defaults. Helm's schema validator cannot
follow a $ref into another file (it resolves them against file:///, and a packaged chart has no files), hence
copies. Run by `make chart-schemas`; `make lint-charts` runs it with --check."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

SOURCE = Path("charts/arkouda-common/global")
COPY_NOTE = (
    "properties.global, properties.arkouda-common and definitions are copies of"
    " charts/arkouda/charts/arkouda-common/global/schema.json: edit that file, then run make chart-schemas."
)


def _charts(umbrella: Path) -> list[Path]:
    return [umbrella, *sorted(p.parent for p in umbrella.glob("charts/*/values.schema.json"))]


def _dump(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def _global_block(lines: list[str]) -> tuple[int, int]:
    """The [start, end) line range of the top-level `global:` block (trailing blank lines excluded)."""
    start = next((i for i, line in enumerate(lines) if line.startswith("global:")), None)
    if start is None:
        raise ValueError("no top-level `global:` key")
    end = start + 1
    while end < len(lines) and (not lines[end] or lines[end].startswith(" ")):
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return start, end


def render_schema(target: str, source: dict[str, Any]) -> str:
    schema = json.loads(target)
    schema["$comment"] = COPY_NOTE
    schema["properties"].update(source["properties"])
    schema["definitions"] = source["definitions"]
    return _dump(schema)


def render_values(target: str, source: str) -> str:
    src = source.splitlines()
    start, end = _global_block(src)
    lines = target.splitlines()
    t_start, t_end = _global_block(lines)
    return "\n".join([*lines[:t_start], *src[start:end], *lines[t_end:]]) + "\n"


def main() -> int:
    logging.basicConfig(format="chart-schemas: %(message)s", level=logging.INFO)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chart", type=Path, help="the umbrella chart directory (charts/arkouda)")
    parser.add_argument("--check", action="store_true", help="fail when a copy differs from the source")
    args = parser.parse_args()
    source_dir: Path = args.chart / SOURCE
    schema_src = json.loads((source_dir / "schema.json").read_text(encoding="utf-8"))
    values_src = (source_dir / "values.yaml").read_text(encoding="utf-8")
    renderers: dict[str, Callable[[str], str]] = {
        "values.schema.json": lambda text: render_schema(text, schema_src),
        "values.yaml": lambda text: render_values(text, values_src),
    }
    stale: list[Path] = []
    for chart in _charts(args.chart):
        for name, render in renderers.items():
            path = chart / name
            text = path.read_text(encoding="utf-8")
            try:
                new = render(text)
            except (ValueError, KeyError) as exc:
                logger.error("%s: cannot place the shared global section: %s", path, exc)
                return 1
            if new == text:
                continue
            stale.append(path)
            if not args.check:
                path.write_text(new, encoding="utf-8")
                logger.info("wrote %s", path)
    if args.check and stale:
        names = ", ".join(str(p) for p in stale)
        logger.error("%s differ from %s; run: make chart-schemas", names, source_dir)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
