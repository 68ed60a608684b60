{{- /*
The ssh settings every sshd and launcher of a release shares, and the volumes every locale mounts. Called with
the root context of the calling chart.
*/}}

{{- /*
arkouda-common.sshPort: global.sshPort (global only: the launcher reaches locale 0 and every locale pod on one
port; the subchart schemas refuse a per-component sshPort).
*/}}
{{- define "arkouda-common.sshPort" -}}
{{- .Values.global.sshPort | int -}}
{{- end -}}

{{- /*
arkouda-common.sshEnv: the environment of every container that runs sshd or the launcher (bootstrap log level,
namespace, key and state dirs, sshd port and algorithms), as EnvVar list items.
*/}}
{{- define "arkouda-common.sshEnv" -}}
- name: ARKOUDA_LOG_LEVEL
  value: {{ .Values.global.logLevel | quote }}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: ARKOUDA_SSH_DIR
  value: /etc/arkouda/ssh
- name: ARKOUDA_STATE_DIR
  value: /run/arkouda
- name: ARKOUDA_SSH_PORT
  value: {{ include "arkouda-common.sshPort" . | quote }}
{{- with .Values.global.sshKexAlgorithms }}
- name: ARKOUDA_SSH_KEX
  value: {{ . | quote }}
{{- end }}
{{- with .Values.global.sshCiphers }}
- name: ARKOUDA_SSH_CIPHERS
  value: {{ . | quote }}
{{- end }}
{{- end -}}

{{- /*
arkouda-common.sshSecretVolume: the `ssh-secret` volume (the keys, mounted read-only at /etc/arkouda/ssh).
*/}}
{{- define "arkouda-common.sshSecretVolume" -}}
- name: ssh-secret
  secret:
    secretName: {{ include "arkouda-common.sshSecretName" . }}
    defaultMode: {{ include "arkouda-common.secretMode" . }}
{{- end -}}

{{- /*
arkouda-common.sharedVolume: the `shared` volume (global.sharedVolume's PVC), for global.sharedVolume.enabled.
*/}}
{{- define "arkouda-common.sharedVolume" -}}
- name: shared
  persistentVolumeClaim:
    claimName: {{ required "global.sharedVolume.claimName must name an existing ReadWriteMany PVC when global.sharedVolume.enabled" .Values.global.sharedVolume.claimName }}
    readOnly: {{ .Values.global.sharedVolume.readOnly }}
{{- end -}}
