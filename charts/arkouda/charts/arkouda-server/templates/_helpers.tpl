{{- /*
Helpers of the server pod only. The names (of this chart's objects too), labels, image, security contexts and ssh
settings that the umbrella chart and both subcharts share live in the arkouda-common library chart
(charts/arkouda-common).
*/}}

{{- /*
arkouda-server.localeSelector: the label selector the bootstrap lists the locale pods with (docs/interfaces.md).
*/}}
{{- define "arkouda-server.localeSelector" -}}
{{- printf "app.kubernetes.io/instance=%s,app.kubernetes.io/component=locale" .Release.Name -}}
{{- end -}}

{{- /*
arkouda-server.serviceAccountName: the ServiceAccount of the server pod: with serviceAccount.create the chart's
(serviceAccount.name, else arkouda-common.serverName), else the user's existing serviceAccount.name.
*/}}
{{- define "arkouda-server.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "arkouda-common.serverName" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "server.serviceAccount.name must be set when server.serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- /*
arkouda-server.mpiJob: "true" when the launcher runs as a Kubernetes Job (mode mpi, server.mpi.runMode job), else "".
*/}}
{{- define "arkouda-server.mpiJob" -}}
{{- if and (eq .Values.global.mode "mpi") (eq .Values.mpi.runMode "job") }}true{{ end -}}
{{- end -}}

{{- /*
arkouda-server.programArgs: what the bootstrap runs after `--`, as a YAML list. arkouda mode: arkouda_server with
the flags from values, memMax derived or checked, the metrics daemon when enabled (the bootstrap appends
-nl <numLocales>). mpi mode: the chart's run-mpi.sh wrapper around
mpirun -np numLocales*slotsPerLocale.
*/}}
{{- define "arkouda-server.programArgs" -}}
{{- if eq .Values.global.mode "mpi" -}}
{{- $ranks := mul (.Values.global.numLocales | int) (.Values.mpi.slotsPerLocale | int) -}}
{{- $args := list "/bin/bash" "/etc/arkouda/scripts/run-mpi.sh" "mpirun" "-np" (toString $ranks) -}}
{{- $args = concat $args .Values.mpi.mpirunArgs (list .Values.mpi.command) .Values.mpi.args -}}
{{- toYaml $args -}}
{{- else -}}
{{- $args := list .Values.command (printf "--ServerPort=%d" (.Values.port | int)) (printf "--logLevel=LogLevel.%s" .Values.logLevel) (printf "--memTrack=%t" .Values.memTrack) -}}
{{- if .Values.authenticate }}{{ $args = append $args "--authenticate=true" }}{{ end -}}
{{- with include "arkouda-server.memMax" . }}{{ $args = append $args (printf "--memMax=%s" .) }}{{ end -}}
{{- if include "arkouda-server.metricsEnabled" . -}}
{{- $args = concat $args (list "--ServerDaemon.daemonTypes=ServerDaemonType.DEFAULT,ServerDaemonType.METRICS" "--trace=true") -}}
{{- end -}}
{{- $args = concat $args .Values.extraArgs -}}
{{- toYaml $args -}}
{{- end -}}
{{- end -}}

{{- /*
arkouda-server.commonMounts: the volume mounts both containers have (the keys read-only, the shared volume);
each container gets its own /run/arkouda and /tmp so the sshd and the launcher never share state files.
*/}}
{{- define "arkouda-server.commonMounts" -}}
- name: ssh-secret
  mountPath: /etc/arkouda/ssh
  readOnly: true
{{- if .Values.global.sharedVolume.enabled }}
- name: shared
  mountPath: {{ .Values.global.sharedVolume.mountPath }}
  readOnly: {{ .Values.global.sharedVolume.readOnly }}
{{- end }}
{{- end -}}

{{- /*
arkouda-server.scripts: the data of the mpi-mode scripts ConfigMap; also hashed into the pod's
checksum/scripts annotation so a changed script rolls the server pod.
*/}}
{{- define "arkouda-server.scripts" -}}
# mpi mode: the program the bootstrap launches after `--` (after it waited for and probed every locale and
# wrote the hostfile and ssh config mpirun uses). Runs `mpirun ...` once; the output goes to the log and to
# /run/arkouda-results/output.txt. Then, with ARKOUDA_MPI_KEEP_ALIVE=true, it serves that directory over
# HTTP on ARKOUDA_RESULTS_PORT (the `helm test` pod reads output.txt; the readiness probe turns Ready) and
# the container stays Running: a one-shot job that succeeded is not restarted. A failed mpirun exits
# non-zero, so Kubernetes restarts the pod and the job is retried.
run-mpi.sh: |
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
{{- end -}}

{{- /*
arkouda-server.metricsEnabled: "true" when Arkouda's metrics daemon and the exporter sidecar run (arkouda mode and
metrics.enabled), else "". Arkouda records per-command metrics only with --trace and --memTrack, so a
memTrack of false is refused rather than overridden.
*/}}
{{- define "arkouda-server.metricsEnabled" -}}
{{- if and (eq .Values.global.mode "arkouda") .Values.metrics.enabled -}}
{{- if not .Values.memTrack }}{{ fail "server.memTrack is false but server.metrics.enabled is true: Arkouda records per-command metrics only with --memTrack; set server.memTrack=true or server.metrics.enabled=false" }}{{ end -}}
true
{{- end -}}
{{- end -}}

{{- /*
arkouda-server.serviceMonitor: "true" when the ServiceMonitor is rendered: metrics on and serviceMonitor.create
always, or auto and the cluster serves monitoring.coreos.com/v1 ServiceMonitor.
*/}}
{{- define "arkouda-server.serviceMonitor" -}}
{{- $c := .Values.metrics.serviceMonitor.create -}}
{{- if and (include "arkouda-server.metricsEnabled" .) (or (eq $c "always") (and (eq $c "auto") (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor"))) }}true{{ end -}}
{{- end -}}

{{- /*
arkouda-server.bytes: a memory quantity (dict "value" V "key" "name.of.key") as whole bytes; plain numbers and
the suffixes k M G T P E (powers of 1000) and Ki Mi Gi Ti Pi Ei (powers of 1024). Anything else fails naming the
key, since the chart cannot compare it with memMax.
*/}}
{{- define "arkouda-server.bytes" -}}
{{- $s := toString .value | trim -}}
{{- if not (regexMatch "^[0-9]+([.][0-9]+)?([kMGTPE]|[KMGTPE]i)?$" $s) -}}
{{- fail (printf "%s: %q is not a memory quantity the chart can compare with memMax (a number, optionally with k, M, G, T, Ki, Mi, Gi or Ti, e.g. 4Gi)" .key $s) -}}
{{- end -}}
{{- $num := regexFind "^[0-9]+([.][0-9]+)?" $s -}}
{{- $units := dict "" 1.0 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 -}}
{{- mulf (float64 $num) (get $units (trimPrefix $num $s)) | floor | int64 -}}
{{- end -}}

{{- /*
arkouda-server.threadsFor: the worker threads a CPU quantity (dict "value" V "key" "name.of.key") allows: whole
CPUs rounded down, at least 1 ("500m" → 1, "2.5" → 2). Fails naming the key on a format it cannot read.
*/}}
{{- define "arkouda-server.threadsFor" -}}
{{- $s := toString .value | trim -}}
{{- if not (regexMatch "^[0-9]+([.][0-9]+)?m?$" $s) -}}
{{- fail (printf "%s: %q is not a CPU quantity the chart can compare with threadsPerLocale (e.g. 2, 1.5 or 500m)" .key $s) -}}
{{- end -}}
{{- $cpus := ternary (divf (float64 (trimSuffix "m" $s)) 1000) (float64 $s) (hasSuffix "m" $s) -}}
{{- max 1 (floor $cpus | int64) -}}
{{- end -}}

{{- /*
arkouda-server.limit: server.resources.limits.<.name> as bytes (memory) or threads (cpu), "" without that limit.
Called as (dict "ctx" $ "name" "memory").
*/}}
{{- define "arkouda-server.limit" -}}
{{- $limits := (.ctx.Values.resources | default dict).limits | default dict -}}
{{- $v := get $limits .name -}}
{{- if and (hasKey $limits .name) (not (kindIs "invalid" $v)) -}}
{{- $arg := dict "value" $v "key" (printf "server.resources.limits.%s" .name) -}}
{{- if eq .name "memory" }}{{ include "arkouda-server.bytes" $arg }}{{ else }}{{ include "arkouda-server.threadsFor" $arg }}{{ end -}}
{{- end -}}
{{- end -}}

{{- /*
arkouda-server.memMax: the --memMax of every locale, "" for Arkouda's default. server.memMax when set (refused
above server.resources.limits.memory: an OOM kill instead of Arkouda's own error), else 80% of that limit (the
rest for the Chapel/GASNet runtime and sshd), else "". The umbrella chart checks the locale pods' limit too.
*/}}
{{- define "arkouda-server.memMax" -}}
{{- $limit := include "arkouda-server.limit" (dict "ctx" . "name" "memory") -}}
{{- if not (kindIs "invalid" .Values.memMax) -}}
{{- $m := .Values.memMax | int64 -}}
{{- if and $limit (gt $m ($limit | int64)) -}}
{{- fail (printf "server.memMax (%d bytes) is above server.resources.limits.memory (%v = %s bytes), the container locale 0 runs in: the kernel would OOM-kill it before Arkouda reports its memory limit; lower server.memMax or raise the limit" $m .Values.resources.limits.memory $limit) -}}
{{- end -}}
{{- $m -}}
{{- else if $limit -}}
{{- divf (mulf ($limit | float64) 4) 5 | floor | int64 -}}
{{- end -}}
{{- end -}}

{{- /*
arkouda-server.threads: CHPL_RT_NUM_THREADS_PER_LOCALE of every locale, "" for Chapel's default (one per node
core). server.threadsPerLocale when set (refused above server.resources.limits.cpu), else that limit rounded
down (at least 1), else "".
*/}}
{{- define "arkouda-server.threads" -}}
{{- range .Values.extraEnv }}{{ if eq .name "CHPL_RT_NUM_THREADS_PER_LOCALE" }}{{ fail "server.extraEnv sets CHPL_RT_NUM_THREADS_PER_LOCALE, which would silently win over the chart's; use server.threadsPerLocale" }}{{ end }}{{ end -}}
{{- $limit := include "arkouda-server.limit" (dict "ctx" . "name" "cpu") -}}
{{- if not (kindIs "invalid" .Values.threadsPerLocale) -}}
{{- $t := .Values.threadsPerLocale | int64 -}}
{{- if and $limit (gt $t ($limit | int64)) -}}
{{- fail (printf "server.threadsPerLocale (%d) is above server.resources.limits.cpu (%v), the container locale 0 runs in: Chapel would run %d worker threads under a limit of %v CPUs; lower server.threadsPerLocale or raise the limit" $t .Values.resources.limits.cpu $t .Values.resources.limits.cpu) -}}
{{- end -}}
{{- $t -}}
{{- else if $limit -}}
{{- $limit -}}
{{- end -}}
{{- end -}}
