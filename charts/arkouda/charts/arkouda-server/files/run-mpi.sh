#!/bin/bash
set -euo pipefail
results=/run/arkouda-results
rm -f "$results/output.txt" "$results/output.partial"
echo "run-mpi: $*"
"$@" 2>&1 | tee "$results/output.partial"
mv "$results/output.partial" "$results/output.txt"
echo "run-mpi: mpirun succeeded"
if [ "${ARKOUDA_MPI_KEEP_ALIVE:-true}" != "true" ]; then
  exit 0
fi
echo "run-mpi: serving $results/output.txt on port ${ARKOUDA_RESULTS_PORT}"
exec python3 -m http.server --bind 0.0.0.0 --directory "$results" "${ARKOUDA_RESULTS_PORT}"
