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

{{- /*
arkouda-common.networkAnnotation: with global.network.attachment set, puts the Multus request
k8s.v1.cni.cncf.io/networks: <attachment> into the pod annotations dict given as .annotations (called with
(dict "ctx" $ "annotations" $annotations); renders nothing). A podAnnotations entry of the same key would be
silently replaced, so it fails instead.
*/}}
{{- define "arkouda-common.networkAnnotation" -}}
{{- with .ctx.Values.global.network.attachment }}
{{- if hasKey $.annotations "k8s.v1.cni.cncf.io/networks" }}
{{- fail "podAnnotations (of locale or server) sets k8s.v1.cni.cncf.io/networks and global.network.attachment is set: use only global.network.attachment (the bootstrap reads the addresses of that attachment)" }}
{{- end }}
{{- $_ := set $.annotations "k8s.v1.cni.cncf.io/networks" . }}
{{- end }}
{{- end -}}
