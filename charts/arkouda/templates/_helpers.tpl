{{- /*
Helpers of this chart's own objects (keygen hooks, helm test) only. The names (of these objects too), labels,
image, security contexts and ssh settings that the umbrella chart and both subcharts share live in the
arkouda-common library chart (charts/arkouda-common).
*/}}

{{- /*
arkouda.keygenHooks: the hook events of the keygen RBAC objects: the keygen Job runs pre-install, pre-upgrade and
pre-rollback and needs them, and so does the post-delete Job when keygen.deleteOnUninstall. post-delete also
without that Job: when the keygen Job failed or timed out, Helm skipped the hook-succeeded clean-up of these
objects, and at uninstall their post-delete run (before-hook-creation, then hook-succeeded) removes them.
*/}}
{{- define "arkouda.keygenHooks" -}}
pre-install,pre-upgrade,pre-rollback,post-delete
{{- end -}}

{{- /*
arkouda.authenticate: whether the server runs with --authenticate (server.authenticate), which makes keygen add
a token and the test pod use it.
*/}}
{{- define "arkouda.authenticate" -}}
{{- if and (.Values.server).enabled (.Values.server).authenticate }}true{{ end -}}
{{- end -}}

{{- /*
arkouda.keygenPodSpec: the pod spec of the keygen Jobs; $.args is the bootstrap argument list.
Called as (dict "ctx" $ "args" (list "keygen")).
*/}}
{{- define "arkouda.keygenPodSpec" -}}
{{- $ := .ctx -}}
restartPolicy: Never
serviceAccountName: {{ include "arkouda-common.keygenName" $ }}
# keygen reads and writes the Secret through the API.
automountServiceAccountToken: true
enableServiceLinks: false
{{- with include "arkouda-common.imagePullSecrets" $ }}
imagePullSecrets:
  {{- . | nindent 2 }}
{{- end }}
securityContext:
  {{- include "arkouda-common.podSecurityContext" $ | nindent 2 }}
{{- with $.Values.keygen.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $.Values.keygen.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
containers:
  - name: keygen
    image: {{ include "arkouda-common.image" $ | quote }}
    imagePullPolicy: {{ include "arkouda-common.pullPolicy" $ }}
    args:
      {{- toYaml .args | nindent 6 }}
    env:
      - name: ARKOUDA_LOG_LEVEL
        value: {{ $.Values.global.logLevel | quote }}
      - name: POD_NAMESPACE
        valueFrom:
          fieldRef:
            fieldPath: metadata.namespace
      - name: ARKOUDA_SSH_SECRET
        value: {{ include "arkouda-common.sshSecretName" $ | quote }}
      - name: ARKOUDA_RELEASE
        value: {{ $.Release.Name | quote }}
      - name: ARKOUDA_WITH_TOKEN
        value: {{ include "arkouda.authenticate" $ | eq "true" | quote }}
    resources:
      {{- toYaml $.Values.keygen.resources | nindent 6 }}
    securityContext:
      {{- include "arkouda-common.securityContext" $ | nindent 6 }}
    volumeMounts:
      - name: tmp
        mountPath: /tmp
volumes:
  - name: tmp
    emptyDir:
      sizeLimit: 64Mi
{{- end -}}

{{- /*
arkouda.checkpointSizeChange: at a helm upgrade that changes global.numLocales while the gate saves checkpoints
(global.idle.checkpoint), the numLocales the running gate saves at (read from its Deployment with lookup), else
"". A checkpoint made at that size cannot load at the new one: NOTES.txt says so before the next wake does.
*/}}
{{- define "arkouda.checkpointSizeChange" -}}
{{- if and .Release.IsUpgrade .Values.global.idle.checkpoint.enabled -}}
{{- $old := lookup "apps/v1" "Deployment" .Release.Namespace (include "arkouda-common.gateName" .) -}}
{{- $env := dict -}}
{{- range (((($old.spec).template).spec).containers | default list) -}}
{{- range (.env | default list) -}}
{{- $_ := set $env .name (.value | default "") -}}
{{- end -}}
{{- end -}}
{{- $was := get $env "ARKOUDA_NUM_LOCALES" -}}
{{- if and (get $env "ARKOUDA_GATE_CHECKPOINT_PATH") $was (ne $was (toString (.Values.global.numLocales | int))) -}}
{{- $was -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- /*
arkouda.kueueJobMode: "true" in mpi job mode (server.mpi.runMode job) with global.scheduling.queueName: the Job's
launcher and the locales are one Kueue pod group that finishes with each run (keygen deletes the finished
Workload before the next run; nodewatch deletes none).
*/}}
{{- define "arkouda.kueueJobMode" -}}
{{- $serverJob := and (eq .Values.global.mode "mpi") (eq (default "" ((.Values.server).mpi).runMode) "job") -}}
{{- if and .Values.global.scheduling.queueName $serverJob }}true{{ end -}}
{{- end -}}
