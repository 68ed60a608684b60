{{- /*
Security contexts. Called with the root context of the calling chart: a subchart's own podSecurityContext /
securityContext, when non-empty, replaces the global one whole; the umbrella chart has no such keys.
*/}}

{{- /*
arkouda-common.podSecurityContext: podSecurityContext when non-empty, else global.podSecurityContext; plus
global.runAsUser/runAsGroup/fsGroup unless set there or "" (OpenShift: the SCC assigns them).
*/}}
{{- define "arkouda-common.podSecurityContext" -}}
{{- $psc := deepCopy (.Values.podSecurityContext | default .Values.global.podSecurityContext) -}}
{{- range $k := list "runAsUser" "runAsGroup" "fsGroup" -}}
{{- $v := get $.Values.global $k -}}
{{- if and (not (hasKey $psc $k)) (ne (toString $v) "") }}{{ $_ := set $psc $k ($v | int64) }}{{ end -}}
{{- end -}}
{{- toYaml $psc -}}
{{- end -}}

{{- /*
arkouda-common.securityContext: securityContext when non-empty, else global.securityContext.
*/}}
{{- define "arkouda-common.securityContext" -}}
{{- toYaml (.Values.securityContext | default .Values.global.securityContext) -}}
{{- end -}}

{{- /*
arkouda-common.secretMode: mode of the mounted SSH Secret files: 0440 when an fsGroup makes them group-readable
by the pod's user, else 0444 (OpenShift-style arbitrary uid without a fixed fsGroup). The bootstrap copies the
keys into /run/arkouda with the modes sshd's StrictModes wants.
*/}}
{{- define "arkouda-common.secretMode" -}}
{{- $psc := include "arkouda-common.podSecurityContext" . | fromYaml -}}
{{- if hasKey $psc "fsGroup" }}{{ 288 }}{{ else }}{{ 292 }}{{ end -}}
{{- end -}}
