{{- /*
The idle gate (global.idle.enabled): names and the switch every gate template and the Service/StatefulSet share.
*/}}

{{- /*
arkouda-server.gate: "true" when the gate is rendered; refused outside arkouda mode (an MPI run has no client to
wait for).
*/}}
{{- define "arkouda-server.gate" -}}
{{- if .Values.global.idle.enabled -}}
{{- if ne .Values.global.mode "arkouda" -}}
{{- fail "global.idle.enabled needs global.mode arkouda: the gate forwards Arkouda clients; an MPI run has no client to wake it" -}}
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
