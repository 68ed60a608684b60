{{- /*
The scripts the server pod runs besides the bootstrap (mounted from the ConfigMap of configmap.yaml).
*/}}

{{- /*
arkouda-server.scripts: the data of the mpi-mode scripts ConfigMap (configmap.yaml): files/run-mpi.sh under a
comment saying what it does; also hashed into the pod's checksum/scripts annotation so a changed script rolls the
server pod.
*/}}
{{- define "arkouda-server.scripts" -}}
# mpi mode: the program the bootstrap launches after `--` (after it waited for and probed every locale and
# wrote the hostfile and ssh config mpirun uses). Runs `mpirun ...` once; the output goes to the log and to
# /run/arkouda-results/output.txt. Then, with ARKOUDA_MPI_KEEP_ALIVE=true, it serves that directory over
# HTTP on ARKOUDA_RESULTS_PORT (the `helm test` pod reads output.txt; the readiness probe turns Ready) and
# the container stays Running: a one-shot job that succeeded is not restarted. A failed mpirun exits
# non-zero, so Kubernetes restarts the pod and the job is retried.
run-mpi.sh: |
  {{- .Files.Get "files/run-mpi.sh" | trimSuffix "\n" | nindent 2 }}
{{- end -}}
