{{- /*
Admission through Kueue (global.scheduling.queueName; chart README, "Queueing with Kueue"): the server pod and the
locale pods are one Kueue pod group, so Kueue admits the release whole or not at all. Both subcharts put the same
labels and annotation on their pod template through these helpers, so the group's name and size cannot differ
between them (Kueue refuses a group whose pods disagree on either).
*/}}

{{- /*
arkouda-common.podGroupName: the Kueue pod group (and Workload) name of the release, <release>-arkouda-group,
within a label value's 63 characters.
*/}}
{{- define "arkouda-common.podGroupName" -}}
{{- include "arkouda-common.fullname" (dict "ctx" . "component" "group" "maxLength" 63) -}}
{{- end -}}

{{- /*
arkouda-common.kueueLabels: with global.scheduling.queueName, the pod labels kueue.x-k8s.io/queue-name and
kueue.x-k8s.io/pod-group-name (one line each, for the pod template's labels); nothing otherwise. Fails when
podLabels sets a kueue.x-k8s.io/ key.
*/}}
{{- define "arkouda-common.kueueLabels" -}}
{{- with .Values.global.scheduling.queueName }}
{{- range $k, $_ := $.Values.podLabels }}{{ if hasPrefix "kueue.x-k8s.io/" $k }}
{{- fail (printf "podLabels (of locale or server) sets %s and global.scheduling.queueName is set: the chart sets the Kueue labels itself" $k) }}
{{- end }}{{- end -}}
kueue.x-k8s.io/queue-name: {{ . | quote }}
kueue.x-k8s.io/pod-group-name: {{ include "arkouda-common.podGroupName" $ }}
{{- end }}
{{- end -}}

{{- /*
arkouda-common.kueueAnnotation: with global.scheduling.queueName, puts kueue.x-k8s.io/pod-group-total-count
(numLocales: the server pod and every locale pod) into the pod annotations dict given as .annotations (called as
(dict "ctx" $ "annotations" $annotations "job" BOOL); renders nothing); with .job (the mpi job mode launcher) also
kueue.x-k8s.io/retriable-in-group "false". podAnnotations with a kueue.x-k8s.io/ key would
change the group behind the chart's back, so it fails instead.
*/}}
{{- define "arkouda-common.kueueAnnotation" -}}
{{- if .ctx.Values.global.scheduling.queueName }}
{{- range $k, $_ := $.annotations }}{{ if hasPrefix "kueue.x-k8s.io/" $k }}
{{- fail (printf "podAnnotations (of locale or server) sets %s and global.scheduling.queueName is set: the chart sets the Kueue pod group itself" $k) }}
{{- end }}{{- end }}
{{- $_ := set .annotations "kueue.x-k8s.io/pod-group-total-count" (.ctx.Values.global.numLocales | toString) }}
{{- if .job }}
{{- /* the Job's launcher runs once: with it ended and the locales scaled to 0, the group is finished (Kueue then
drops its finalizers and frees the quota, the launcher pod and its log stay) instead of waiting for replacements */}}
{{- $_ := set .annotations "kueue.x-k8s.io/retriable-in-group" "false" }}
{{- end }}
{{- end }}
{{- end -}}

{{- /*
arkouda-common.kueueUpgradeCheck: on `helm upgrade`, fails when a StatefulSet of the release (server or locales)
has pods and its pod template's Kueue group (queue name, group size) differs from this render's: the rolled pods
would belong to another group than the running ones (Kueue refuses a group whose pods disagree, and keeps its
finalizer on the old ones), so the release would stop and not come back. A sleeping release (no pod) may change
both, and so may mpi job mode between runs (its locales at 0; no server StatefulSet). lookup is empty under `helm
template` and --dry-run, so the check only runs against a cluster. Renders nothing.
*/}}
{{- define "arkouda-common.kueueUpgradeCheck" -}}
{{- $queue := .Values.global.scheduling.queueName }}
{{- $size := ternary (.Values.global.numLocales | toString) "" (ne $queue "") }}
{{- range $name := list (include "arkouda-common.serverName" $) (include "arkouda-common.localeName" $) }}
{{- $live := lookup "apps/v1" "StatefulSet" $.Release.Namespace $name }}
{{- if and $live (gt (int ((($live).status).replicas | default 0)) 0) }}
{{- $meta := (($live.spec).template).metadata | default dict }}
{{- $was := index ($meta.labels | default dict) "kueue.x-k8s.io/queue-name" | default "" }}
{{- $wasSize := index ($meta.annotations | default dict) "kueue.x-k8s.io/pod-group-total-count" | default "" }}
{{- if or (ne $was $queue) (ne $wasSize $size) }}
{{- fail (printf "helm upgrade changes the Kueue pod group of release %s while its pods run (global.scheduling.queueName %q -> %q, group size %q -> %q): the new pods would belong to another group than the running ones and Kueue would admit neither; uninstall and install again, or upgrade while the release sleeps (global.idle)" $.Release.Name $was $queue $wasSize $size) }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}
