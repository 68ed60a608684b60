#!/usr/bin/env bash
# Lints the arkouda chart (make lint-charts): `helm lint --strict` (subcharts included), `helm template` and
# psscheck (Pod Security "restricted" by Kubernetes' admission library) with the default values and with every
# override file given, plus two consistency checks helm cannot do:
# the appVersion of every Chart.yaml (umbrella, subcharts, the arkouda-common library) equals IMAGE_TAG
# (hack/versions.env; the image tag the chart defaults to), and the `global` sections of the three
# values.schema.json and values.yaml are the copies hack/tools/chart-schemas.py makes from their one source.
# The subcharts' own copy of the library (make chart-deps) must be in place for the --with-subcharts lint.
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

# The parts all three charts share, copied from their one source in the arkouda-common library chart.
if python3 "$repo/hack/tools/chart-schemas.py" --check "$chart"; then
  echo "lint-charts: ok   global sections of the three charts = their source (make chart-schemas)"
else
  fail=1
fi

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
