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
{{- with include "arkouda-server.autoCheckpointArgs" . }}{{ $args = concat $args (fromYamlArray .) }}{{ end -}}
{{- $args = concat $args .Values.extraArgs -}}
{{- toYaml $args -}}
{{- end -}}
{{- end -}}

{{- /*
arkouda-server.autoCheckpointArgs: Arkouda's automatic checkpoint flags (server.checkpoint) as a YAML list, only
when a trigger is on (idleSeconds or memPct): an Arkouda older than v2025.07.03 would refuse them, and a
relative --checkpointPath would land in each pod's own work directory. The path is global.sharedVolume's.
*/}}
{{- define "arkouda-server.autoCheckpointArgs" -}}
{{- $c := .Values.checkpoint -}}
{{- if or (gt ($c.idleSeconds | int) 0) (gt ($c.memPct | int) 0) -}}
{{- $v := .Values.global.sharedVolume -}}
{{- if or (not $v.enabled) $v.readOnly -}}
{{- fail "server.checkpoint.idleSeconds or memPct needs a writable global.sharedVolume: every locale writes its own part of the checkpoint, so it must be one filesystem mounted in every pod" -}}
{{- end -}}
{{- $args := list (printf "--checkpointPath=%s" $v.mountPath) (printf "--checkpointName=%s" $c.name) (printf "--checkpointMode=%s" $c.mode) (printf "--checkpointInterval=%d" ($c.intervalSeconds | int)) -}}
{{- if gt ($c.idleSeconds | int) 0 }}{{ $args = append $args (printf "--checkpointIdleTime=%d" ($c.idleSeconds | int)) }}{{ end -}}
{{- if gt ($c.memPct | int) 0 -}}
{{- $args = append $args (printf "--checkpointMemPct=%d" ($c.memPct | int)) -}}
{{- if gt ($c.memPctDelaySeconds | int) 0 }}{{ $args = append $args (printf "--checkpointMemPctDelay=%d" ($c.memPctDelaySeconds | int)) }}{{ end -}}
{{- end -}}
{{- toYaml $args -}}
{{- end -}}
{{- end -}}
