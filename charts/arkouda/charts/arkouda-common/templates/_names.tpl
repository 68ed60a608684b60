{{- /*
Names and labels of every object of a release: the one place a name is made. The umbrella chart (its objects,
NOTES.txt, the helm test templates) and both subcharts call the per-object helpers below and never assemble a
name themselves, so a change to the rule (arkouda-common.fullname) reaches every object and every reference to
it. Each per-object helper is called with the root context of the calling chart ($: its Release and Values;
global.* is the same in all three charts).
*/}}

{{- /*
arkouda-common.fullname: the naming rule. <release>-arkouda-<component> when it fits in .maxLength characters
(default 52, so a StatefulSet's pod names and its controller-revision-hash label stay within 63); when it does not,
the release part is cut and the first 8 hex digits of the SHA-256 of the uncut name go before the kept
"-arkouda-<component>": <release cut>-<hash>-arkouda-<component>. So every component keeps its own name (the
server's and the locales' objects never collide) and two releases that share a long prefix differ. Every name of
the release derives from this one, so a release name Kubernetes would refuse in any of them is refused here,
while Helm renders, before any hook runs: it must be a DNS-1035 label (Service names are; Helm itself also
accepts dots and a leading digit). docs/interfaces.md fixes these names. Called as
(dict "ctx" $ "component" "locale" ["maxLength" N]) by the per-object helpers below only.
*/}}
{{- define "arkouda-common.fullname" -}}
{{- $release := .ctx.Release.Name -}}
{{- if not (regexMatch "^[a-z]([-a-z0-9]*[a-z0-9])?$" $release) -}}
{{- fail (printf "release name %q: the Services of the release are named after it, and a Service name must be a DNS-1035 label: lowercase letters, digits and '-', starting with a letter (no dots, no leading digit)" $release) -}}
{{- end -}}
{{- $max := .maxLength | default 52 | int -}}
{{- $full := printf "%s-arkouda-%s" $release .component -}}
{{- if le (len $full) $max -}}
{{- $full -}}
{{- else -}}
{{- $tail := printf "-%s-arkouda-%s" (sha256sum $full | trunc 8) .component -}}
{{- printf "%s%s" (regexReplaceAll "-+$" ($release | trunc (sub $max (len $tail) | int)) "") $tail -}}
{{- end -}}
{{- end -}}

{{- /*
arkouda-common.podName: the name the StatefulSet controller gives pod .ordinal of StatefulSet .statefulSet,
<statefulSet>-<ordinal>. Called as (dict "statefulSet" NAME "ordinal" N); NOTES.txt passes "<n>" as a placeholder.
*/}}
{{- define "arkouda-common.podName" -}}
{{- printf "%s-%v" .statefulSet .ordinal -}}
{{- end -}}

{{- /*
arkouda-common.localeName: the locale StatefulSet, its headless Service, PodDisruptionBudget and NetworkPolicy.
*/}}
{{- define "arkouda-common.localeName" -}}
{{- include "arkouda-common.fullname" (dict "ctx" . "component" "locale") -}}
{{- end -}}

{{- /*
arkouda-common.serverName: the server StatefulSet and its Service (the clients' one and the StatefulSet's
serviceName), Role, RoleBinding, NetworkPolicy, ServiceMonitor and (by default) ServiceAccount.
*/}}
{{- define "arkouda-common.serverName" -}}
{{- include "arkouda-common.fullname" (dict "ctx" . "component" "server") -}}
{{- end -}}

{{- /*
arkouda-common.serverPodName: the server StatefulSet's one pod (locale 0; the only pod the gate may delete, when its
request loop stopped answering).
*/}}
{{- define "arkouda-common.serverPodName" -}}
{{- include "arkouda-common.podName" (dict "statefulSet" (include "arkouda-common.serverName" .) "ordinal" 0) -}}
{{- end -}}

{{- /*
arkouda-common.serverJobName: the Job of this release revision in mpi job mode (a Job's pod template is
immutable, so each revision runs its own Job; Helm deletes the previous one). Short enough for the job-name
label of its pods.
*/}}
{{- define "arkouda-common.serverJobName" -}}
{{- printf "%s-r%d" (include "arkouda-common.serverName" .) (.Release.Revision | int) -}}
{{- end -}}

{{- /*
arkouda-common.serverScriptsName: the ConfigMap of the mpi-mode scripts (run-mpi.sh).
*/}}
{{- define "arkouda-common.serverScriptsName" -}}
{{- printf "%s-scripts" (include "arkouda-common.serverName" .) -}}
{{- end -}}

{{- /*
arkouda-common.serverDirectName: the Service that reaches the server pod itself while the gate owns the
client one (server.gate.enabled).
*/}}
{{- define "arkouda-common.serverDirectName" -}}
{{- printf "%s-direct" (include "arkouda-common.serverName" .) -}}
{{- end -}}

{{- /*
arkouda-common.gateName: the gate's Deployment, ServiceAccount, Role, RoleBinding and NetworkPolicy.
*/}}
{{- define "arkouda-common.gateName" -}}
{{- include "arkouda-common.fullname" (dict "ctx" . "component" "gate") -}}
{{- end -}}

{{- /*
arkouda-common.keygenName: the keygen hook Job and its ServiceAccount, Role and RoleBinding.
*/}}
{{- define "arkouda-common.keygenName" -}}
{{- include "arkouda-common.fullname" (dict "ctx" . "component" "keygen") -}}
{{- end -}}

{{- /*
arkouda-common.keygenDeleteName: the post-delete keygen Job (deletes the Secret and the helm test objects).
*/}}
{{- define "arkouda-common.keygenDeleteName" -}}
{{- printf "%s-delete" (include "arkouda-common.keygenName" .) -}}
{{- end -}}

{{- /*
arkouda-common.nodewatchName: the nodewatch Deployment and its ServiceAccount, Role and RoleBinding.
*/}}
{{- define "arkouda-common.nodewatchName" -}}
{{- include "arkouda-common.fullname" (dict "ctx" . "component" "nodewatch") -}}
{{- end -}}

{{- /*
arkouda-common.testName: the helm test Pod and ConfigMap (and the ServiceAccount, Role and RoleBinding of the
mpi job mode test); the post-delete keygen Job deletes the Pod and ConfigMap by this name. Not cut below 253, the
limit of those kinds: no StatefulSet pod name derives from it.
*/}}
{{- define "arkouda-common.testName" -}}
{{- include "arkouda-common.fullname" (dict "ctx" . "component" "test" "maxLength" 253) -}}
{{- end -}}

{{- /*
arkouda-common.sharedClaimName: the PVC mounted as global.sharedVolume: global.sharedVolume.claimName (an existing
claim), or the one the umbrella chart creates from global.sharedVolume.storageClassName (not cut below 253, a
PVC's limit). Fails with one line when neither or both are set (the schema cannot say which key to fix).
*/}}
{{- define "arkouda-common.sharedClaimName" -}}
{{- $v := .Values.global.sharedVolume -}}
{{- if and $v.claimName $v.storageClassName -}}
{{- fail "global.sharedVolume: set claimName (an existing ReadWriteMany PVC) or storageClassName (the chart creates one), not both" -}}
{{- else if $v.claimName -}}
{{- $v.claimName -}}
{{- else if $v.storageClassName -}}
{{- include "arkouda-common.fullname" (dict "ctx" . "component" "shared" "maxLength" 253) -}}
{{- else -}}
{{- fail "global.sharedVolume.enabled needs global.sharedVolume.claimName (an existing ReadWriteMany PVC) or global.sharedVolume.storageClassName (the chart creates one)" -}}
{{- end -}}
{{- end -}}

{{- /*
arkouda-common.sshSecretName: the SSH key Secret, global.sshSecretName or the one the keygen hook makes (not cut
below 253, a Secret's limit).
*/}}
{{- define "arkouda-common.sshSecretName" -}}
{{- default (include "arkouda-common.fullname" (dict "ctx" . "component" "ssh" "maxLength" 253)) .Values.global.sshSecretName -}}
{{- end -}}

{{- /*
arkouda-common.releaseSelectorLabels: the labels every pod of the release carries (NetworkPolicy peers "any pod
of this release").
*/}}
{{- define "arkouda-common.releaseSelectorLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: arkouda
{{- end -}}

{{- /*
arkouda-common.selectorLabels: the immutable labels workloads, Services, PDBs and NetworkPolicies select on (the
release's plus the component); the server's bootstrap lists the locale pods by instance + component. Called as
(dict "ctx" $ "component" "locale"), as are the labels below.
*/}}
{{- define "arkouda-common.selectorLabels" -}}
{{ include "arkouda-common.releaseSelectorLabels" .ctx }}
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
