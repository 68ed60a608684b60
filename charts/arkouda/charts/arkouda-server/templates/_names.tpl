{{- /*
The server pod's ServiceAccount (the chart's or the user's) and the label selector its bootstrap lists the locale
pods with. The names of the release's objects are made in one place, the arkouda-common library chart
(charts/arkouda-common/templates/_names.tpl).
*/}}

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
arkouda-server.localeSelector: the label selector the bootstrap lists the locale pods with (docs/interfaces.md).
*/}}
{{- define "arkouda-server.localeSelector" -}}
{{- printf "app.kubernetes.io/instance=%s,app.kubernetes.io/component=locale" .Release.Name -}}
{{- end -}}
