{{- /*
The command line of the program the server's bootstrap launches.
*/}}

{{- /*
arkouda-server.programArgs: what the bootstrap runs after `--`, as a YAML list. arkouda mode: arkouda_server with
the flags from values, memMax derived or checked, the metrics daemon when enabled (the bootstrap appends
-nl <numLocales>). mpi mode: the chart's run-mpi.sh (files/) wrapped around mpirun -np numLocales*slotsPerLocale.
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
