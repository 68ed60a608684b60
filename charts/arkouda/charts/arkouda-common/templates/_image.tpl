{{- /*
The image of a component. Called with the root context of the calling chart: a subchart's own image.* and
imagePullSecrets, when set, win over global.*; the umbrella chart has no such keys and gets the global ones.
*/}}

{{- /*
arkouda-common.image: registry/repository:tag, each part from image.* when non-empty, else global.image.*, the
tag finally from the chart's appVersion (global.image.repository is never empty: the schema says minLength 1).
*/}}
{{- define "arkouda-common.image" -}}
{{- $g := .Values.global.image -}}
{{- $l := .Values.image | default dict -}}
{{- $registry := coalesce $l.registry $g.registry "" -}}
{{- $repository := coalesce $l.repository $g.repository -}}
{{- $tag := coalesce $l.tag $g.tag .Chart.AppVersion | toString -}}
{{- if $registry }}{{ printf "%s/%s:%s" $registry $repository $tag }}{{ else }}{{ printf "%s:%s" $repository $tag }}{{ end -}}
{{- end -}}

{{- /*
arkouda-common.pullPolicy: image.pullPolicy when non-empty, else global.image.pullPolicy.
*/}}
{{- define "arkouda-common.pullPolicy" -}}
{{- coalesce (.Values.image | default dict).pullPolicy .Values.global.image.pullPolicy -}}
{{- end -}}

{{- /*
arkouda-common.imagePullSecrets: imagePullSecrets when non-empty, else global.imagePullSecrets, as YAML; "" for
none.
*/}}
{{- define "arkouda-common.imagePullSecrets" -}}
{{- with (.Values.imagePullSecrets | default .Values.global.imagePullSecrets) }}{{ toYaml . }}{{ end -}}
{{- end -}}
