#!/usr/bin/env bash
# Lints the arkouda chart (make lint-charts): `helm lint --strict` (subcharts included), `helm template` and
# psscheck (Pod Security "restricted" by Kubernetes' admission library) with the default values and with every
# override file given, plus two consistency checks helm cannot do:
# the appVersion of all three Chart.yaml equals IMAGE_TAG (hack/versions.env; the image tag the chart defaults
# to), and the `global` section of the three values.schema.json and values.yaml is identical (Helm hands the
# umbrella's global values to each subchart, whose strict schema must accept exactly the same keys).
# Usage: lint-charts.sh CHART_DIR [VALUES_FILE...]
set -euo pipefail
chart=$1; shift
repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=/dev/null
. "$repo/hack/versions.env"
fail=0

for c in "$chart" "$chart"/charts/*/; do
  v=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$c/Chart.yaml")
  if [ "$v" != "$IMAGE_TAG" ]; then
    echo "lint-charts: ${c%/}/Chart.yaml appVersion is '$v', expected IMAGE_TAG=$IMAGE_TAG (hack/versions.env)" >&2
    fail=1
  fi
done
# The Artifact Hub image list names the images at that same tag.
while read -r ref; do
  if [ "${ref##*:}" != "$IMAGE_TAG" ]; then
    echo "lint-charts: $chart/Chart.yaml artifacthub.io/images lists $ref, expected the tag IMAGE_TAG=$IMAGE_TAG" >&2
    fail=1
  fi
done < <(sed -n 's/^ *image: *\([^ ]*\) *$/\1/p' "$chart/Chart.yaml")

python3 - "$chart" <<'PY' || fail=1
import json, sys, pathlib
root = pathlib.Path(sys.argv[1])
files = [root / "values.schema.json", *sorted(root.glob("charts/*/values.schema.json"))]
ref = json.loads(files[0].read_text())["properties"]["global"]
for f in files[1:]:
    if json.loads(f.read_text())["properties"]["global"] != ref:
        sys.exit(f"lint-charts: properties.global of {f} differs from {files[0]}; keep them identical")
# The `global:` block of each values.yaml (up to the next top-level key) must be the same text too: the
# subcharts' copy is what they render with alone (their helm-unittest suites), the umbrella's wins in a release.
def global_block(path):
    lines, out, inside = path.read_text().splitlines(), [], False
    for line in lines:
        if line.startswith("global:"):
            inside = True
        elif inside and line and not line.startswith(" "):
            break
        if inside:
            out.append(line)
    return "\n".join(out).rstrip()
values = [root / "values.yaml", *sorted(root.glob("charts/*/values.yaml"))]
for f in values[1:]:
    if global_block(f) != global_block(values[0]):
        sys.exit(f"lint-charts: the global: block of {f} differs from {values[0]}; keep them identical")
PY

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run() { # run LABEL CMD...: quiet on success, full output on failure
  local label=$1; shift
  if "$@" >"$tmp/out" 2>&1; then echo "lint-charts: ok   $label"; else cat "$tmp/out" >&2; echo "lint-charts: FAIL $label" >&2; fail=1; fi
}
run "helm lint --strict --with-subcharts (defaults)" helm lint --strict --with-subcharts "$chart"
run "helm template (defaults)" helm template lint "$chart" --namespace lint
# Strict decoding of every object into its Kubernetes type, and Pod Security "restricted" for every pod template
# checked by Kubernetes' admission library (psscheck), in both
# modes and with authentication on (which adds the token volume to the test pod).
for set in "" "--set server.authenticate=true" "--set global.mode=mpi"; do
  # shellcheck disable=SC2086
  run "psscheck restricted (defaults${set:+ $set})" bash -o pipefail -c "helm template lint '$chart' --namespace lint $set | psscheck -min-pods 5"
done
for f in "$@"; do
  name=${f#"$repo"/}
  # (no --with-subcharts here: helm would hand the umbrella's values file to the subcharts as their own)
  run "helm lint --strict -f $name" helm lint --strict "$chart" -f "$f"
  run "helm template -f $name" helm template lint "$chart" --namespace lint -f "$f"
  run "psscheck restricted -f $name" bash -o pipefail -c "helm template lint '$chart' --namespace lint -f '$f' | psscheck -min-pods 5"
done
exit $fail
