{{- /*
The idle gate (global.idle.enabled): the switch every gate template and the Service/StatefulSet test; its names
are arkouda-common.gateName and arkouda-common.serverDirectName.
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
