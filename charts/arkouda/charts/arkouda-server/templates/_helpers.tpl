{{- /*
arkouda-server.fullname: name of the 1-replica StatefulSet (pod <release>-arkouda-server-0), its client
Service, ServiceAccount, Role and RoleBinding (<release>-arkouda-server, fixed by docs/interfaces.md).
*/}}
{{- define "arkouda-server.fullname" -}}
{{- printf "%s-arkouda-server" .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{- /*
arkouda-server.selectorLabels: the immutable labels the StatefulSet, Service, PDB and NetworkPolicies select
on; the server's bootstrap selects instance + component.
*/}}
{{- define "arkouda-server.selectorLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: arkouda
app.kubernetes.io/component: server
{{- end -}}

{{- /*
arkouda-server.labels: selector labels plus the descriptive ones and global.commonLabels.
*/}}
{{- define "arkouda-server.labels" -}}
{{ include "arkouda-server.selectorLabels" . }}
app.kubernetes.io/name: arkouda
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.global.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- /*
arkouda-server.image: registry/repository:tag; each part from server.image.* when set, else global.image.*,
the tag finally from the chart's appVersion.
*/}}
{{- define "arkouda-server.image" -}}
{{- $g := .Values.global.image -}}
{{- $l := .Values.image | default dict -}}
{{- $registry := coalesce $l.registry $g.registry "" -}}
{{- $repository := required "global.image.repository must be set (the image with arkouda-bootstrap)" (coalesce $l.repository $g.repository) -}}
{{- $tag := coalesce $l.tag $g.tag .Chart.AppVersion | toString -}}
{{- if $registry }}{{ printf "%s/%s:%s" $registry $repository $tag }}{{ else }}{{ printf "%s:%s" $repository $tag }}{{ end -}}
{{- end -}}

{{- /*
arkouda-server.pullPolicy: server.image.pullPolicy when set, else global.image.pullPolicy.
*/}}
{{- define "arkouda-server.pullPolicy" -}}
{{- coalesce .Values.image.pullPolicy .Values.global.image.pullPolicy "IfNotPresent" -}}
{{- end -}}

{{- /*
arkouda-server.sshPort: global.sshPort (global only: the launcher reaches locale 0 and every locale pod on one
port; the subchart schemas refuse a per-component sshPort).
*/}}
{{- define "arkouda-server.sshPort" -}}
{{- .Values.global.sshPort | int -}}
{{- end -}}

{{- /*
arkouda-server.sshSecretName: global.sshSecretName or <release>-arkouda-ssh (made by the keygen hook).
*/}}
{{- define "arkouda-server.sshSecretName" -}}
{{- default (printf "%s-arkouda-ssh" .Release.Name) .Values.global.sshSecretName -}}
{{- end -}}

{{- /*
arkouda-server.podSecurityContext: the subchart's podSecurityContext when non-empty (it replaces the global one
whole), else global.podSecurityContext; plus global.runAsUser/runAsGroup/fsGroup unless set there or "".
*/}}
{{- define "arkouda-server.podSecurityContext" -}}
{{- $psc := deepCopy (.Values.podSecurityContext | default .Values.global.podSecurityContext) -}}
{{- range $k := list "runAsUser" "runAsGroup" "fsGroup" -}}
{{- $v := get $.Values.global $k -}}
{{- if and (not (hasKey $psc $k)) (ne (toString $v) "") }}{{ $_ := set $psc $k ($v | int64) }}{{ end -}}
{{- end -}}
{{- toYaml $psc -}}
{{- end -}}

{{- /*
arkouda-server.securityContext: the subchart's securityContext when non-empty (replaces the global one whole), else
global.securityContext.
*/}}
{{- define "arkouda-server.securityContext" -}}
{{- toYaml (.Values.securityContext | default .Values.global.securityContext) -}}
{{- end -}}

{{- /*
arkouda-server.numLocales: global.numLocales, validated (>= 1).
*/}}
{{- define "arkouda-server.numLocales" -}}
{{- $n := .Values.global.numLocales | int -}}
{{- if lt $n 1 }}{{ fail "global.numLocales must be >= 1" }}{{ end -}}
{{- $n -}}
{{- end -}}

{{- /*
arkouda-server.localeSelector: the label selector the bootstrap lists the locale pods with (docs/interfaces.md).
*/}}
{{- define "arkouda-server.localeSelector" -}}
{{- printf "app.kubernetes.io/instance=%s,app.kubernetes.io/component=locale" .Release.Name -}}
{{- end -}}

{{- /*
arkouda-server.serviceAccountName: the chart's ServiceAccount, or serviceAccount.name when create is false.
*/}}
{{- define "arkouda-server.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "arkouda-server.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "server.serviceAccount.name must be set when server.serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- /*
arkouda-server.mode: global.mode, validated.
*/}}
{{- define "arkouda-server.mode" -}}
{{- $m := .Values.global.mode -}}
{{- if not (has $m (list "arkouda" "mpi")) }}{{ fail (printf "global.mode must be arkouda or mpi, got %q" $m) }}{{ end -}}
{{- $m -}}
{{- end -}}

{{- /*
arkouda-server.programArgs: what the bootstrap runs after `--`, as a YAML list. arkouda mode: arkouda_server with
the flags from values (the bootstrap appends -nl <numLocales>). mpi mode: the chart's run-mpi.sh wrapper around
mpirun -np numLocales*slotsPerLocale.
*/}}
{{- define "arkouda-server.programArgs" -}}
{{- if eq (include "arkouda-server.mode" .) "mpi" -}}
{{- $ranks := mul (include "arkouda-server.numLocales" . | int) (.Values.mpi.slotsPerLocale | int) -}}
{{- $args := list "/bin/bash" "/etc/arkouda/scripts/run-mpi.sh" "mpirun" "-np" (toString $ranks) -}}
{{- $args = concat $args .Values.mpi.mpirunArgs (list .Values.mpi.command) .Values.mpi.args -}}
{{- toYaml $args -}}
{{- else -}}
{{- $args := list .Values.command (printf "--ServerPort=%d" (.Values.port | int)) (printf "--logLevel=LogLevel.%s" .Values.logLevel) (printf "--memTrack=%t" .Values.memTrack) -}}
{{- if .Values.authenticate }}{{ $args = append $args "--authenticate=true" }}{{ end -}}
{{- if not (kindIs "invalid" .Values.memMax) }}{{ $args = append $args (printf "--memMax=%d" (.Values.memMax | int64)) }}{{ end -}}
{{- $args = concat $args .Values.extraArgs -}}
{{- toYaml $args -}}
{{- end -}}
{{- end -}}

{{- /*
arkouda-server.secretMode: mode of the mounted SSH Secret files: 0440 when an fsGroup makes them group-readable
by the pod's user, else 0444 (OpenShift-style arbitrary uid without a fixed fsGroup). The bootstrap copies the
keys into /run/arkouda with the modes sshd's StrictModes wants.
*/}}
{{- define "arkouda-server.secretMode" -}}
{{- $psc := include "arkouda-server.podSecurityContext" . | fromYaml -}}
{{- if hasKey $psc "fsGroup" }}{{ 288 }}{{ else }}{{ 292 }}{{ end -}}
{{- end -}}

{{- /*
arkouda-server.sshEnv: the environment both containers of the server pod share with the locale pods (bootstrap
log level, namespace, key and state dirs, sshd port and algorithms), as EnvVar list items.
*/}}
{{- define "arkouda-server.sshEnv" -}}
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
  value: {{ include "arkouda-server.sshPort" . | quote }}
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
arkouda-server.commonMounts: the volume mounts both containers have (the keys read-only, the shared volume);
each container gets its own /run/arkouda and /tmp so the sshd and the launcher never share state files.
*/}}
{{- define "arkouda-server.commonMounts" -}}
- name: ssh-secret
  mountPath: /etc/arkouda/ssh
  readOnly: true
{{- if .Values.global.sharedVolume.enabled }}
- name: shared
  mountPath: {{ .Values.global.sharedVolume.mountPath }}
  readOnly: {{ .Values.global.sharedVolume.readOnly }}
{{- end }}
{{- end -}}

{{- /*
arkouda-server.scripts: the data of the mpi-mode scripts ConfigMap; also hashed into the pod's
checksum/scripts annotation so a changed script rolls the server pod.
*/}}
{{- define "arkouda-server.scripts" -}}
# mpi mode: the program the bootstrap launches after `--` (after it waited for and probed every locale and
# wrote the hostfile and ssh config mpirun uses). Runs `mpirun ...` once; the output goes to the log and to
# /run/arkouda-results/output.txt. Then, with ARKOUDA_MPI_KEEP_ALIVE=true, it serves that directory over
# HTTP on ARKOUDA_RESULTS_PORT (the `helm test` pod reads output.txt; the readiness probe turns Ready) and
# the container stays Running: a one-shot job that succeeded is not restarted. A failed mpirun exits
# non-zero, so Kubernetes restarts the pod and the job is retried.
run-mpi.sh: |
  #!/bin/bash
  set -euo pipefail
  results=/run/arkouda-results
  rm -f "$results/output.txt" "$results/output.partial"
  echo "run-mpi: $*"
  "$@" 2>&1 | tee "$results/output.partial"
  mv "$results/output.partial" "$results/output.txt"
  echo "run-mpi: mpirun succeeded"
  if [ "${ARKOUDA_MPI_KEEP_ALIVE:-true}" != "true" ]; then
    exit 0
  fi
  echo "run-mpi: serving $results/output.txt on port ${ARKOUDA_RESULTS_PORT}"
  exec python3 -m http.server --bind 0.0.0.0 --directory "$results" "${ARKOUDA_RESULTS_PORT}"
{{- end -}}
