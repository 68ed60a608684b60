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
arkouda-common.sshSecretVolume: a volume of the SSH Secret with only the fields one container uses (mounted
read-only at /etc/arkouda/ssh; docs/interfaces.md lists them per container). Called as
(dict "ctx" $ "name" VOLUME "role" "sshd"|"launcher" ["token" true]):
- sshd (the locale pods, the server pod's sshd container): authorized_keys and the host key pair. In mpi mode also
  the client key pair and known_hosts: an orted may start further orteds over ssh (OpenMPI's tree spawn). In
  arkouda mode a locale never ssh-es out, so it holds no client key; no sshd ever gets the token.
- launcher (the server pod's server container): the client key pair, known_hosts, the host public key (to tell a
  Secret whose halves disagree) and, with .token (server.authenticate), the token; never the host private key or
  authorized_keys.
release-id, rotation-id, retired_host_keys (launcher) and token are optional sources of their own, so a Secret
without them still mounts and the bootstrap names a field it needs itself. A projected volume is updated in place
like a secret volume, which is how a rotated Secret reaches running pods (never mounted with subPath).
*/}}
{{- define "arkouda-common.sshSecretVolume" -}}
{{- $ := .ctx -}}
{{- $secret := include "arkouda-common.sshSecretName" $ -}}
{{- $client := list "id_ed25519" "id_ed25519.pub" "known_hosts" -}}
{{- $required := list "authorized_keys" "ssh_host_ed25519_key" "ssh_host_ed25519_key.pub" -}}
{{- $optional := list "release-id" "rotation-id" -}}
{{- if eq .role "launcher" -}}
{{- $required = append $client "ssh_host_ed25519_key.pub" -}}
{{- $optional = concat $optional (list "retired_host_keys") (ternary (list "token") list (.token | default false)) -}}
{{- else if eq $.Values.global.mode "mpi" -}}
{{- $required = concat $required $client -}}
{{- end -}}
- name: {{ .name }}
  projected:
    defaultMode: {{ include "arkouda-common.secretMode" $ }}
    sources:
      - secret:
          name: {{ $secret }}
          items:
            {{- range $required }}
            - {key: {{ . }}, path: {{ . }}}
            {{- end }}
      {{- range $optional }}
      - secret:
          name: {{ $secret }}
          optional: true
          items:
            - {key: {{ . }}, path: {{ . }}}
      {{- end }}
{{- end -}}

{{- /*
arkouda-common.sharedVolume: the `shared` volume (global.sharedVolume's PVC, arkouda-common.sharedClaimName), for
global.sharedVolume.enabled.
*/}}
{{- define "arkouda-common.sharedVolume" -}}
- name: shared
  persistentVolumeClaim:
    claimName: {{ include "arkouda-common.sharedClaimName" . }}
    readOnly: {{ .Values.global.sharedVolume.readOnly }}
{{- end -}}
