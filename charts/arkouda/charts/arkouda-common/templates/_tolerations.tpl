{{- /*
arkouda-common.tolerations: the pod's `tolerations:` block (or nothing): the component's own .Values.tolerations,
then, with global.nodeLoss.enabled, node.kubernetes.io/unreachable and node.kubernetes.io/not-ready (NoExecute)
for global.nodeLoss.tolerationSeconds, each only when no toleration of the user's already matches that taint
(its key, or an empty key with operator Exists; effect NoExecute or empty): the user's wins, as the taint
manager would otherwise take the shortest of the two. Without ours the DefaultTolerationSeconds admission
plugin adds 300 s (docs/node-loss.md).
*/}}
{{- define "arkouda-common.tolerations" -}}
{{- $own := .Values.tolerations | default list -}}
{{- $all := list -}}
{{- range $own }}{{ $all = append $all . }}{{ end -}}
{{- if .Values.global.nodeLoss.enabled -}}
{{- range $taint := list "node.kubernetes.io/unreachable" "node.kubernetes.io/not-ready" -}}
{{- $covered := false -}}
{{- range $own -}}
{{- $key := default "" .key -}}
{{- $effect := default "" .effect -}}
{{- if and (or (eq $key $taint) (and (eq $key "") (eq (default "" .operator) "Exists"))) (or (eq $effect "") (eq $effect "NoExecute")) -}}
{{- $covered = true -}}
{{- end -}}
{{- end -}}
{{- if not $covered -}}
{{- $all = append $all (dict "key" $taint "operator" "Exists" "effect" "NoExecute" "tolerationSeconds" ($.Values.global.nodeLoss.tolerationSeconds | int)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with $all -}}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}
