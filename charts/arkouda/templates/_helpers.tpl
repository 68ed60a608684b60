{{- /*
arkouda.labels: labels of the umbrella chart's own objects (keygen hooks, test pods) for component $.component,
called as (dict "ctx" $ "component" "keygen").
*/}}
{{- define "arkouda.labels" -}}
{{ include "arkouda.selectorLabels" . }}
app.kubernetes.io/name: arkouda
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
{{- with .ctx.Values.global.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- /*
arkouda.selectorLabels: instance, part-of and component (same dict argument as arkouda.labels).
*/}}
{{- define "arkouda.selectorLabels" -}}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/part-of: arkouda
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- /*
arkouda.image: registry/repository:tag from global.image, the tag defaulting to the chart's appVersion.
*/}}
{{- define "arkouda.image" -}}
{{- $g := .Values.global.image -}}
{{- $repository := required "global.image.repository must be set (the image with arkouda-bootstrap)" $g.repository -}}
{{- $tag := coalesce $g.tag .Chart.AppVersion | toString -}}
{{- if $g.registry }}{{ printf "%s/%s:%s" $g.registry $repository $tag }}{{ else }}{{ printf "%s:%s" $repository $tag }}{{ end -}}
{{- end -}}

{{- /*
arkouda.sshSecretName: global.sshSecretName or <release>-arkouda-ssh.
*/}}
{{- define "arkouda.sshSecretName" -}}
{{- default (printf "%s-arkouda-ssh" .Release.Name) .Values.global.sshSecretName -}}
{{- end -}}

{{- /*
arkouda.keygenName: name of the keygen ServiceAccount, Role, RoleBinding and Job.
*/}}
{{- define "arkouda.keygenName" -}}
{{- printf "%s-arkouda-keygen" .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{- /*
arkouda.keygenHooks: the hook events of the keygen RBAC objects: the pre-install/pre-upgrade keygen Job needs
them, and so does the post-delete Job when keygen.deleteOnUninstall.
*/}}
{{- define "arkouda.keygenHooks" -}}
{{- if .Values.keygen.deleteOnUninstall }}pre-install,pre-upgrade,post-delete{{ else }}pre-install,pre-upgrade{{ end -}}
{{- end -}}

{{- /*
arkouda.authenticate: whether the server runs with --authenticate (server.authenticate), which makes keygen add
a token and the test pod use it.
*/}}
{{- define "arkouda.authenticate" -}}
{{- if and (.Values.server).enabled (.Values.server).authenticate }}true{{ end -}}
{{- end -}}

{{- /*
arkouda.podSecurityContext: global.podSecurityContext plus global.runAsUser/runAsGroup/fsGroup unless set there
or "". arkouda.securityContext: global.securityContext.
*/}}
{{- define "arkouda.podSecurityContext" -}}
{{- $psc := deepCopy .Values.global.podSecurityContext -}}
{{- range $k := list "runAsUser" "runAsGroup" "fsGroup" -}}
{{- $v := get $.Values.global $k -}}
{{- if and (not (hasKey $psc $k)) (ne (toString $v) "") }}{{ $_ := set $psc $k ($v | int64) }}{{ end -}}
{{- end -}}
{{- toYaml $psc -}}
{{- end -}}
{{- define "arkouda.securityContext" -}}
{{- toYaml .Values.global.securityContext -}}
{{- end -}}

{{- /*
arkouda.mode: global.mode, validated.
*/}}
{{- define "arkouda.mode" -}}
{{- $m := .Values.global.mode -}}
{{- if not (has $m (list "arkouda" "mpi")) }}{{ fail (printf "global.mode must be arkouda or mpi, got %q" $m) }}{{ end -}}
{{- $m -}}
{{- end -}}

{{- /*
arkouda.keygenPodSpec: the pod spec of the keygen Jobs; $.args is the bootstrap argument list.
Called as (dict "ctx" $ "args" (list "keygen")).
*/}}
{{- define "arkouda.keygenPodSpec" -}}
{{- $ := .ctx -}}
restartPolicy: Never
serviceAccountName: {{ include "arkouda.keygenName" $ }}
# keygen reads and writes the Secret through the API.
automountServiceAccountToken: true
enableServiceLinks: false
{{- with $.Values.global.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- include "arkouda.podSecurityContext" $ | nindent 2 }}
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
    image: {{ include "arkouda.image" $ | quote }}
    imagePullPolicy: {{ $.Values.global.image.pullPolicy }}
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
        value: {{ include "arkouda.sshSecretName" $ | quote }}
      - name: ARKOUDA_RELEASE
        value: {{ $.Release.Name | quote }}
      - name: ARKOUDA_WITH_TOKEN
        value: {{ include "arkouda.authenticate" $ | eq "true" | quote }}
    resources:
      {{- toYaml $.Values.keygen.resources | nindent 6 }}
    securityContext:
      {{- include "arkouda.securityContext" $ | nindent 6 }}
    volumeMounts:
      - name: tmp
        mountPath: /tmp
volumes:
  - name: tmp
    emptyDir:
      sizeLimit: 64Mi
{{- end -}}

{{- /*
arkouda.testName: the name of the helm test Pod and its ConfigMap (<release>-arkouda-test); the post-delete
keygen Job deletes both by this name.
*/}}
{{- define "arkouda.testName" -}}
{{- printf "%s-arkouda-test" .Release.Name -}}
{{- end -}}
