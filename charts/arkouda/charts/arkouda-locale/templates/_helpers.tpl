{{- /*
arkouda-locale.fullname: name of the StatefulSet, its headless Service and pod name prefix
(<release>-arkouda-locale, fixed by docs/interfaces.md; the server finds the pods by label, not by name).
*/}}
{{- define "arkouda-locale.fullname" -}}
{{- printf "%s-arkouda-locale" .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{- /*
arkouda-locale.selectorLabels: the immutable labels the StatefulSet, Service, PDB and NetworkPolicies select
on; the server's bootstrap selects instance + component.
*/}}
{{- define "arkouda-locale.selectorLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: arkouda
app.kubernetes.io/component: locale
{{- end -}}

{{- /*
arkouda-locale.labels: selector labels plus the descriptive ones and global.commonLabels.
*/}}
{{- define "arkouda-locale.labels" -}}
{{ include "arkouda-locale.selectorLabels" . }}
app.kubernetes.io/name: arkouda
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.global.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- /*
arkouda-locale.image: registry/repository:tag; each part from locale.image.* when set, else global.image.*,
the tag finally from the chart's appVersion.
*/}}
{{- define "arkouda-locale.image" -}}
{{- $g := .Values.global.image -}}
{{- $l := .Values.image | default dict -}}
{{- $registry := coalesce $l.registry $g.registry "" -}}
{{- $repository := required "global.image.repository must be set (the image with arkouda-bootstrap)" (coalesce $l.repository $g.repository) -}}
{{- $tag := coalesce $l.tag $g.tag .Chart.AppVersion | toString -}}
{{- if $registry }}{{ printf "%s/%s:%s" $registry $repository $tag }}{{ else }}{{ printf "%s:%s" $repository $tag }}{{ end -}}
{{- end -}}

{{- /*
arkouda-locale.pullPolicy: locale.image.pullPolicy when set, else global.image.pullPolicy.
*/}}
{{- define "arkouda-locale.pullPolicy" -}}
{{- coalesce .Values.image.pullPolicy .Values.global.image.pullPolicy "IfNotPresent" -}}
{{- end -}}

{{- /*
arkouda-locale.sshPort: global.sshPort (global only: the launcher reaches locale 0 and every locale pod on one
port; the subchart schemas refuse a per-component sshPort).
*/}}
{{- define "arkouda-locale.sshPort" -}}
{{- .Values.global.sshPort | int -}}
{{- end -}}

{{- /*
arkouda-locale.sshSecretName: global.sshSecretName or <release>-arkouda-ssh (made by the keygen hook).
*/}}
{{- define "arkouda-locale.sshSecretName" -}}
{{- default (printf "%s-arkouda-ssh" .Release.Name) .Values.global.sshSecretName -}}
{{- end -}}

{{- /*
arkouda-locale.podSecurityContext: the subchart's podSecurityContext when non-empty (it replaces the global one
whole), else global.podSecurityContext; plus global.runAsUser/runAsGroup/fsGroup unless set there or "".
*/}}
{{- define "arkouda-locale.podSecurityContext" -}}
{{- $psc := deepCopy (.Values.podSecurityContext | default .Values.global.podSecurityContext) -}}
{{- range $k := list "runAsUser" "runAsGroup" "fsGroup" -}}
{{- $v := get $.Values.global $k -}}
{{- if and (not (hasKey $psc $k)) (ne (toString $v) "") }}{{ $_ := set $psc $k ($v | int64) }}{{ end -}}
{{- end -}}
{{- toYaml $psc -}}
{{- end -}}

{{- /*
arkouda-locale.securityContext: the subchart's securityContext when non-empty (replaces the global one whole), else
global.securityContext.
*/}}
{{- define "arkouda-locale.securityContext" -}}
{{- toYaml (.Values.securityContext | default .Values.global.securityContext) -}}
{{- end -}}

{{- /*
arkouda-locale.replicas: numLocales-1 (locale 0 is the server pod).
*/}}
{{- define "arkouda-locale.replicas" -}}
{{- $n := .Values.global.numLocales | int -}}
{{- if lt $n 1 }}{{ fail "global.numLocales must be >= 1" }}{{ end -}}
{{- sub $n 1 -}}
{{- end -}}

{{- /*
arkouda-locale.secretMode: mode of the mounted SSH Secret files: 0440 when an fsGroup makes them group-readable
by the pod's user, else 0444 (OpenShift-style arbitrary uid without a fixed fsGroup). The bootstrap copies the
keys into /run/arkouda with the modes sshd's StrictModes wants.
*/}}
{{- define "arkouda-locale.secretMode" -}}
{{- $psc := include "arkouda-locale.podSecurityContext" . | fromYaml -}}
{{- if hasKey $psc "fsGroup" }}{{ 288 }}{{ else }}{{ 292 }}{{ end -}}
{{- end -}}
