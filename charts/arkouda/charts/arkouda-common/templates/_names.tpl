{{- /*
Names and labels of every object of a release. Called as (dict "ctx" $ "component" "locale"): $ is the root
context of the calling chart (its Release, Chart and Values), component is locale, server, keygen or test.
*/}}

{{- /*
arkouda-common.fullname: <release>-arkouda-<component>, cut to 52 characters so a StatefulSet's pod names and
the controller-revision-hash label stay within 63 (docs/interfaces.md fixes these names).
*/}}
{{- define "arkouda-common.fullname" -}}
{{- printf "%s-arkouda-%s" .ctx.Release.Name .component | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{- /*
arkouda-common.selectorLabels: the immutable labels workloads, Services, PDBs and NetworkPolicies select on; the
server's bootstrap lists the locale pods by instance + component.
*/}}
{{- define "arkouda-common.selectorLabels" -}}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/part-of: arkouda
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- /*
arkouda-common.labels: the selector labels plus the descriptive ones (the calling chart's name and versions)
and global.commonLabels.
*/}}
{{- define "arkouda-common.labels" -}}
{{ include "arkouda-common.selectorLabels" . }}
app.kubernetes.io/name: arkouda
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
{{- with .ctx.Values.global.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}
