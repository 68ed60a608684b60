{{- /*
Helpers of the nodewatch Deployment (global.nodeLoss.enabled; docs/node-loss.md); its name is
arkouda-common.nodewatchName.
*/}}

{{- /*
arkouda.nodewatchStatefulSets: the StatefulSets whose pods nodewatch may force-delete, comma-separated: the
server's (unless it runs as a Job: mode mpi with server.mpi.runMode job, whose pods a Job replaces by itself) and
the locales' (when there is a locale pod). Empty → no nodewatch.
*/}}
{{- define "arkouda.nodewatchStatefulSets" -}}
{{- $names := list -}}
{{- $serverJob := and (eq .Values.global.mode "mpi") (eq (default "" ((.Values.server).mpi).runMode) "job") -}}
{{- if and (.Values.server).enabled (not $serverJob) -}}
{{- $names = append $names (include "arkouda-common.serverName" .) -}}
{{- end -}}
{{- if and (.Values.locale).enabled (gt (.Values.global.numLocales | int) 1) -}}
{{- $names = append $names (include "arkouda-common.localeName" .) -}}
{{- end -}}
{{- join "," $names -}}
{{- end -}}

{{- /*
arkouda.nodewatchPods: the names of those StatefulSets' pods (their Role's resourceNames), as a YAML flow list.
*/}}
{{- define "arkouda.nodewatchPods" -}}
{{- $pods := list -}}
{{- $locale := include "arkouda-common.localeName" . -}}
{{- range $sts := splitList "," (include "arkouda.nodewatchStatefulSets" .) -}}
{{- $count := ternary (sub ($.Values.global.numLocales | int) 1) 1 (eq $sts $locale) | int -}}
{{- range $i := until $count -}}
{{- $pods = append $pods (include "arkouda-common.podName" (dict "statefulSet" $sts "ordinal" $i) | quote) -}}
{{- end -}}
{{- end -}}
[{{ join ", " $pods }}]
{{- end -}}

{{- /*
arkouda.nodewatchKueueWorkload: the Kueue Workload nodewatch deletes when Kueue's finalizer holds an ended pod of
the group (global.scheduling.queueName), or empty. Not in mpi job mode: a Job never relaunches, its group ends as
a whole once the launcher ended and the locales were scaled to 0 (kueue.x-k8s.io/retriable-in-group "false" on
the launcher), and a Workload deleted before that would make Kueue delete the finished launcher pod and its log.
*/}}
{{- define "arkouda.nodewatchKueueWorkload" -}}
{{- if and .Values.global.scheduling.queueName (not (include "arkouda.kueueJobMode" .)) -}}
{{- include "arkouda-common.podGroupName" . -}}
{{- end -}}
{{- end -}}
