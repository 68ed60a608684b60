{{- /*
Which parts of the server chart render: the switches its templates (and the umbrella's resources check) test.
Each renders "true" or "".
*/}}

{{- /*
arkouda-server.mpiJob: "true" when the launcher runs as a Kubernetes Job (mode mpi, server.mpi.runMode job), else "".
*/}}
{{- define "arkouda-server.mpiJob" -}}
{{- if and (eq .Values.global.mode "mpi") (eq .Values.mpi.runMode "job") }}true{{ end -}}
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
arkouda-server.gate: "true" when the gate is rendered: arkouda mode and server.gate.enabled (default). An MPI
run has no Arkouda client, so no gate.
*/}}
{{- define "arkouda-server.gate" -}}
{{- if and .Values.gate.enabled (eq .Values.global.mode "arkouda") -}}
true
{{- end -}}
{{- end -}}

{{- /*
arkouda-server.idle: "true" when the gate owns the replica counts and scales the release to 0 when idle
(global.idle.enabled); refused without the gate (arkouda mode and server.gate.enabled), whose feature it is.
*/}}
{{- define "arkouda-server.idle" -}}
{{- if .Values.global.idle.enabled -}}
{{- if ne .Values.global.mode "arkouda" -}}
{{- fail "global.idle.enabled needs global.mode arkouda: the gate forwards Arkouda clients; an MPI run has no client to wake it" -}}
{{- end -}}
{{- if not .Values.gate.enabled -}}
{{- fail "global.idle.enabled needs server.gate.enabled: sleeping when idle is a feature of the gate, which holds requests while the release sleeps" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{- /*
arkouda-server.checkpoint: "true" when the gate saves before the sleep and loads after the wake
(global.idle.checkpoint.enabled); refused, naming what to set, without idle sleep or a writable shared volume.
*/}}
{{- define "arkouda-server.checkpoint" -}}
{{- if .Values.global.idle.checkpoint.enabled -}}
{{- if not .Values.global.idle.enabled -}}
{{- fail "global.idle.checkpoint.enabled needs global.idle.enabled: the gate saves before the release sleeps" -}}
{{- end -}}
{{- if not .Values.global.sharedVolume.enabled -}}
{{- fail "global.idle.checkpoint.enabled needs global.sharedVolume: every locale writes its own part of the checkpoint, so it must be one filesystem mounted in every pod" -}}
{{- end -}}
{{- if .Values.global.sharedVolume.readOnly -}}
{{- fail "global.idle.checkpoint.enabled needs a writable global.sharedVolume (readOnly is true)" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{- /*
arkouda-server.giveBack: "true" when the server gives its locale pods back after a wait timeout (more than one
locale, server.releaseBackoffSeconds > 0, not mpi job mode, and no Kueue: an admitted Kueue pod group is
admitted and evicted whole, and a locale StatefulSet scaled to 0 would leave the group short), else "".
*/}}
{{- define "arkouda-server.giveBack" -}}
{{- if and (gt (.Values.global.numLocales | int) 1) (gt (.Values.releaseBackoffSeconds | int) 0) (not (include "arkouda-server.mpiJob" .)) (not .Values.global.scheduling.queueName) }}true{{ end -}}
{{- end -}}
