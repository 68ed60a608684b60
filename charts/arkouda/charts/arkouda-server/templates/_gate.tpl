{{- /*
The gate (arkouda-bootstrap gate, server.gate): the front door of every arkouda-mode release, and its idle sleep
(global.idle.enabled). Names and switches every gate template, the client Service and the StatefulSet share.
*/}}

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

{{- define "arkouda-server.gateName" -}}
{{- include "arkouda-common.fullname" (dict "ctx" . "component" "gate") -}}
{{- end -}}

{{- /* arkouda-server.directName: the Service that reaches the server pod itself while the gate owns the client one */}}
{{- define "arkouda-server.directName" -}}
{{- printf "%s-direct" (include "arkouda-common.fullname" (dict "ctx" . "component" "server")) -}}
{{- end -}}

{{- /* arkouda-server.serverPodName: the StatefulSet's one pod, the only pod the gate may delete (a dead request loop) */}}
{{- define "arkouda-server.serverPodName" -}}
{{- printf "%s-0" (include "arkouda-common.fullname" (dict "ctx" . "component" "server")) -}}
{{- end -}}
