"""Writes (or, with --check, verifies) the "## Values" reference at the end of charts/arkouda/README.md from the
three values.schema.json files (types, enums, ranges, descriptions) and values.yaml files (defaults), so the
reference cannot drift from the chart. Run by `make chart-docs`; `make lint-charts` runs it with --check."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

MARKER = "## Values\n"
SUBCHARTS = {"arkouda-locale": "locale", "arkouda-server": "server"}
# The library chart's key, which Helm adds to the values of every chart depending on it; it takes no values.
LIBRARY = "arkouda-common"


def _type(sub: dict[str, Any]) -> str:
    if "$ref" in sub:  # the typed Kubernetes objects of the definitions section, e.g. #/definitions/securityContext
        name = sub["$ref"].rsplit("/", 1)[-1]
        return f"object (Kubernetes {name[0].upper()}{name[1:]}, typed)"
    if "enum" in sub:
        return " \\| ".join(f"`{e}`" if e else '`""`' for e in sub["enum"])
    if "oneOf" in sub:
        return 'integer or `""`'
    t = sub.get("type", "")
    return " or ".join(t) if isinstance(t, list) else str(t)


def _rows(schema: dict[str, Any], values: Any, prefix: str) -> list[str]:
    out: list[str] = []
    for key, sub in schema.get("properties", {}).items():
        path = f"{prefix}{key}"
        value = values.get(key) if isinstance(values, dict) else None
        if sub.get("properties") and sub.get("additionalProperties") is False:
            out += _rows(sub, value or {}, path + ".")
            continue
        default = json.dumps(value, ensure_ascii=False)
        default = "see values.yaml" if len(default) > 60 else f"`{default}`"
        desc = sub.get("description", "").replace("|", "\\|")
        if "minimum" in sub or "maximum" in sub:
            desc += f" Range {sub.get('minimum', '')}\N{EN DASH}{sub.get('maximum', '')}."
        out.append(f"| `{path}` | {_type(sub)} | {default} | {desc} |")
    return out


def _table(chart: Path, prefix: str, keep: set[str] | None, skip: set[str]) -> str:
    schema = json.loads((chart / "values.schema.json").read_text(encoding="utf-8"))
    values = yaml.safe_load((chart / "values.yaml").read_text(encoding="utf-8"))
    props = {k: v for k, v in schema["properties"].items() if (keep is None or k in keep) and k not in skip}
    rows = _rows({"properties": props}, values, prefix)
    return "\n".join(["| Key | Type | Default | Description |", "| --- | --- | --- | --- |", *rows])


def render(chart: Path) -> str:
    parts = [
        MARKER,
        "Generated from values.schema.json and values.yaml by `make chart-docs` (checked by `make lint-charts`).\n",
        "### global (umbrella `global:`, shared by every component)\n",
        _table(chart, "", {"global"}, set()) + "\n",
        "### the umbrella's own components (keygen hooks, nodewatch, helm test)\n",
        _table(chart, "", None, {"global", LIBRARY, *SUBCHARTS.values()}) + "\n",
    ]
    for name, alias in SUBCHARTS.items():
        parts += [
            f"### {alias} (subchart {name}, under `{alias}:`)\n",
            _table(chart / "charts" / name, f"{alias}.", None, {"global", LIBRARY}) + "\n",
        ]
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("chart", type=Path)
    parser.add_argument("--check", action="store_true", help="fail when the README's reference is out of date")
    args = parser.parse_args()
    readme = args.chart / "README.md"
    text = readme.read_text(encoding="utf-8")
    if MARKER not in text:
        print(f"chart-docs: {readme} has no '{MARKER.strip()}' section", file=sys.stderr)
        return 1
    new = text[: text.index(MARKER)] + render(args.chart)
    if args.check:
        if new != text:
            print(f"chart-docs: the values reference in {readme} is out of date; run: make chart-docs", file=sys.stderr)
            return 1
        return 0
    readme.write_text(new, encoding="utf-8")
    print(f"chart-docs: wrote the values reference of {readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
