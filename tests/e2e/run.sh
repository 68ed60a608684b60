#!/usr/bin/env bash
# The end-to-end suite in two phases, against the cluster KUBECONFIG names (make e2e-suite / make e2e):
#   1. concurrent: every module not marked `disruptive` on E2E_WORKERS pytest-xdist workers, one module per worker
#      at a time (--dist loadfile: a module's tests run top to bottom in one process, against its own namespaces
#      and releases, as they do alone). With --with-ct, `make ct-install` runs beside it (its own namespaces).
#   2. alone: the `disruptive` modules (they stop nodes, which would take every other module's pods with them).
# What the concurrent modules share is the cluster, not its state: release names, namespaces (random suffixes;
# jhub only in test_notebooks) and local ports (kubectl port-forward on free ports; NOTES.txt's 5555 only in
# test_arkouda_auth) differ. test_idle_gate labels every node with a label only its own release selects and
# removes it again; test_multinode's PriorityClass is named for and used by its own release: neither changes what
# another module sees, so both stay concurrent. A new module that stops, taints or drains nodes, or restarts
# cluster components, is marked `disruptive` (pytestmark).
# Each phase ends with pytest's --durations and the per-module times (conftest.py); the phases' own times last.
# Usage: run.sh PYTHON [--with-ct] [-- PYTEST_ARGS...]   (E2E_WORKERS, default 3)
set -euo pipefail
py="$1"; shift
with_ct=0
if [[ "${1:-}" == --with-ct ]]; then with_ct=1; shift; fi
[[ "${1:-}" != -- ]] || shift
cd "$(dirname "$0")/../.."
workers="${E2E_WORKERS:-3}"
[[ "$workers" =~ ^[1-9][0-9]?$ ]] || { echo "run.sh: E2E_WORKERS=$workers is not a worker count" >&2; exit 2; }
common=(-m pytest -c tests/e2e/pytest.ini tests/e2e -v -p no:cacheprovider --timeout=1800 --durations=0)

suite_t0=$SECONDS
ct_pid=""
if (( with_ct )); then
  echo "e2e: ct install beside phase 1 (its lines start with [ct]; its last one says how long it took)"
  # process substitution: $! is make's PID, so `wait` returns make's status (a pipe would report sed's)
  make -s --no-print-directory ct-install > >(sed -u 's/^/[ct] /') 2>&1 &
  ct_pid=$!
fi

# pytest's status: 5 = no test selected (E2E_PYTEST_ARGS chose only modules of the other phase)
pytest_phase() {
  local rc=0
  "$py" "${common[@]}" "$@" || rc=$?
  if (( rc == 5 )); then echo "e2e: no test of this phase selected"; rc=0; fi
  return "$rc"
}

echo "e2e: phase 1: the modules concurrently on $workers workers"
p1_t0=$SECONDS
rc1=0
# No live log under xdist (the workers' output is not forwarded): -rP prints each passed test's output and
# INFO log (timings, placements) after the run, failures show theirs as usual.
pytest_phase -m "not disruptive" -n "$workers" --dist loadfile -rfEsP -o log_level=INFO "$@" || rc1=$?
p1=$((SECONDS - p1_t0))
rc_ct=0
if [[ -n "$ct_pid" ]]; then
  wait "$ct_pid" || rc_ct=$?
fi

echo "e2e: phase 2: the disruptive modules, alone"
p2_t0=$SECONDS
rc2=0
pytest_phase -m disruptive -s -o log_cli=true -o log_cli_level=INFO "$@" || rc2=$?
p2=$((SECONDS - p2_t0))

echo "e2e: phase 1 (concurrent, $workers workers) ${p1}s, exit $rc1${ct_pid:+; ct install beside it: exit $rc_ct}"
echo "e2e: phase 2 (disruptive, alone) ${p2}s, exit $rc2"
echo "e2e: suite$( (( with_ct )) && echo " and ct install") $((SECONDS - suite_t0))s"
(( rc1 == 0 && rc2 == 0 && rc_ct == 0 ))
