{{- /*
The server pod (locale 0 and the launcher): one template for both ways it runs, so an edit to the pod reaches both.
*/}}

{{- /*
arkouda-server.podTemplate: the pod template (metadata and spec) of the server StatefulSet (statefulset.yaml) or,
with .job, of the mpi job mode Job (job.yaml). Called as (dict "ctx" $ "job" BOOL). The Job's pod differs at
these points only, each marked `if $job`: restartPolicy Never; sshd is a native sidecar (initContainers,
restartPolicy Always) so the pod completes when the launcher exits; the launcher has no port or readiness probe
and exits with mpirun's status (ARKOUDA_MPI_KEEP_ALIVE false instead of serving the output, no
ARKOUDA_RESULTS_PORT), scales the locales to 0 when done (ARKOUDA_SCALE_DOWN_WHEN_DONE) and reports through its
termination message. Fails when two of the pod's ports are equal, or the gate pod's (global.idle.enabled).
*/}}
{{- define "arkouda-server.podTemplate" -}}
{{- $job := .job }}
{{- with .ctx }}
{{- $mode := .Values.global.mode }}
{{- $sshPort := include "arkouda-common.sshPort" . | int }}
{{- $ports := dict "global.sshPort" $sshPort }}
{{- if eq $mode "mpi" }}{{ $_ := set $ports "server.mpi.resultsPort" (.Values.mpi.resultsPort | int) }}
{{- else }}{{ $_ := set $ports "server.port" (.Values.port | int) }}{{ end }}
{{- $metrics := include "arkouda-server.metricsEnabled" . }}
{{- if $metrics }}{{ $_ := set $ports "server.metrics.socketPort" (.Values.metrics.socketPort | int) }}{{ $_ := set $ports "server.metrics.port" (.Values.metrics.port | int) }}{{ end }}
{{- range $a, $pa := $ports }}{{ range $b, $pb := $ports }}{{ if and (lt $a $b) (eq $pa $pb) }}
{{- fail (printf "%s and %s are both %d: the server pod needs distinct ports" $a $b $pa) }}
{{- end }}{{ end }}{{ end }}
{{- /* the gate pod listens on the client port and its own metrics port (gate-deployment.yaml) */}}
{{- if and (include "arkouda-server.gate" .) (eq (.Values.port | int) (.Values.gate.metricsPort | int)) }}
{{- fail (printf "server.port and server.gate.metricsPort are both %d: the gate pod needs distinct ports" (.Values.port | int)) }}
{{- end }}
{{- /* the pod template itself, at column 0 (the callers indent it) */ -}}
metadata:
  labels:
    {{- include "arkouda-common.labels" (dict "ctx" . "component" "server") | nindent 4 }}
    {{- with include "arkouda-common.kueueLabels" . }}
    {{- . | nindent 4 }}
    {{- end }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- $annotations := deepCopy .Values.podAnnotations }}
  {{- /* SSH keys are reloaded in place when the mounted Secret changes; Arkouda reads its token only at start,
  so with a token a rotation rolls this pod and the old token is refused from then on */}}
  {{- if .Values.authenticate }}
  {{- with .Values.global.keyRotationId }}{{ $_ := set $annotations "arkouda-k8s.io/key-rotation-id" . }}{{ end }}
  {{- end }}
  {{- if eq $mode "mpi" }}
  {{- $_ := set $annotations "checksum/scripts" (include "arkouda-server.scripts" . | sha256sum) }}
  {{- end }}
  {{- include "arkouda-common.networkAnnotation" (dict "ctx" . "annotations" $annotations) }}
  {{- include "arkouda-common.kueueAnnotation" (dict "ctx" . "annotations" $annotations "job" $job) }}
  {{- with $annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  {{- if $job }}
  # The Job's pod runs once: a failed run ends the Job (job.yaml), it is never restarted in place.
  restartPolicy: Never
  {{- end }}
  serviceAccountName: {{ include "arkouda-server.serviceAccountName" . }}
  # The API token is projected into the `server` container only (volume kube-api-access below): the
  # `sshd` container, which the launcher's ssh logs into, never sees it.
  automountServiceAccountToken: false
  enableServiceLinks: false
  terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
  {{- with include "arkouda-common.imagePullSecrets" . }}
  imagePullSecrets:
    {{- . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- include "arkouda-common.podSecurityContext" . | nindent 4 }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- /* the user's tolerations, plus the short node-loss ones (docs/node-loss.md) */}}
  {{- with include "arkouda-common.tolerations" . }}
  {{- . | nindent 2 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if $job }}
  initContainers:
  {{- else }}
  containers:
  {{- end }}
    # Locale 0's sshd: amudprun / mpirun ssh into every host of the list, this pod's own IP (first) included,
    # and start arkouda_server_real (or the MPI ranks) here, like on every locale pod.
    - name: sshd
      {{- if $job }}
      # A native sidecar (an init container that keeps running): the kubelet stops it once the launcher has
      # exited, so the pod, and with it the Job, completes.
      restartPolicy: Always
      {{- end }}
      image: {{ include "arkouda-common.image" . | quote }}
      imagePullPolicy: {{ include "arkouda-common.pullPolicy" . }}
      args: [locale]
      env:
        {{- include "arkouda-common.sshEnv" . | nindent 8 }}
      ports:
        - name: ssh
          containerPort: {{ $sshPort }}
          protocol: TCP
      readinessProbe:
        tcpSocket:
          port: ssh
        periodSeconds: {{ .Values.readinessProbe.periodSeconds }}
        failureThreshold: {{ .Values.readinessProbe.failureThreshold }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        {{- include "arkouda-common.securityContext" . | nindent 8 }}
      volumeMounts:
        {{- include "arkouda-server.commonMounts" (dict "ctx" . "keys" "ssh-secret") | nindent 8 }}
        - name: sshd-run
          mountPath: /run/arkouda
        - name: sshd-tmp
          mountPath: /tmp
        {{- if eq $mode "arkouda" }}
        - name: work
          mountPath: /var/lib/arkouda
        {{- end }}
  {{- if $job }}
  containers:
  {{- end }}
    # The bootstrap: waits for the locale pods, probes them over ssh (pinned host key), then launches and
    # supervises the program given after `--`.
    - name: server
      image: {{ include "arkouda-common.image" . | quote }}
      imagePullPolicy: {{ include "arkouda-common.pullPolicy" . }}
      args:
        - server
        - --
        {{- include "arkouda-server.programArgs" . | nindent 8 }}
      env:
        {{- include "arkouda-common.sshEnv" . | nindent 8 }}
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        - name: POD_IP
          valueFrom:
            fieldRef:
              fieldPath: status.podIP
        {{- with .Values.global.network.attachment }}
        # the hosts (this one included) are reached at their addresses on this secondary network
        - name: ARKOUDA_NETWORK_ATTACHMENT
          value: {{ . | quote }}
        {{- end }}
        - name: ARKOUDA_NUM_LOCALES
          value: {{ .Values.global.numLocales | int | quote }}
        - name: ARKOUDA_LOCALE_SELECTOR
          value: {{ include "arkouda-server.localeSelector" . | quote }}
        {{- if gt (.Values.global.numLocales | int) 1 }}
        # only this StatefulSet's pods are locales (by owner UID: labels can be worn by any pod); its
        # FailedCreate Events name why a locale is not created
        - name: ARKOUDA_LOCALE_STATEFULSET
          value: {{ include "arkouda-common.localeName" . | quote }}
        {{- end }}
        - name: ARKOUDA_WAIT_TIMEOUT
          value: {{ .Values.waitTimeoutSeconds | quote }}
        - name: ARKOUDA_SSH_PREWARM
          value: {{ .Values.sshPrewarm | quote }}
        - name: ARKOUDA_MAX_RELAUNCHES
          value: {{ .Values.maxRelaunches | quote }}
        {{- if and (gt (.Values.global.numLocales | int) 1) (not (include "arkouda-server.mpiJob" .)) }}
        - name: ARKOUDA_RELEASE_BACKOFF
          value: {{ ternary (.Values.releaseBackoffSeconds | toString) "0" (include "arkouda-server.giveBack" . | empty | not) | quote }}
        {{- end }}
        {{- if eq $mode "mpi" }}
        - name: ARKOUDA_LAUNCHER
          value: mpi
        - name: ARKOUDA_MPI_SLOTS
          value: {{ .Values.mpi.slotsPerLocale | quote }}
        - name: OMP_NUM_THREADS
          value: {{ .Values.mpi.ompThreads | quote }}
        # mpirun starts one daemon per host itself (no tree spawn), so only the server pod ssh-es; the
        # locales' sshd accepts the server pod only (networkpolicy.yaml). OpenMPI 4 and 5 names.
        - name: OMPI_MCA_plm_rsh_no_tree_spawn
          value: "1"
        - name: PRTE_MCA_plm_ssh_no_tree_spawn
          value: "1"
        {{- if not $job }}
        # Read by the chart's run-mpi.sh (configmap.yaml).
        - name: ARKOUDA_MPI_KEEP_ALIVE
          value: {{ .Values.mpi.keepAlive | quote }}
        - name: ARKOUDA_RESULTS_PORT
          value: {{ .Values.mpi.resultsPort | quote }}
        {{- end }}
        {{- else }}
        - name: ARKOUDA_LAUNCHER
          value: arkouda
        # Every locale's working directory (GASNET_SSH_REMOTE_PATH): the `work` emptyDir, at the same path
        # in every pod; the bootstrap writes this launch's .arkouda/tokens.txt there before each launch.
        - name: ARKOUDA_WORK_DIR
          value: /var/lib/arkouda
        {{- if $metrics }}
        # Read by arkouda_server (locale 0 gets the launcher's environment) for its metrics socket.
        - name: METRICS_SERVER_PORT
          value: {{ .Values.metrics.socketPort | quote }}
        {{- end }}
        {{- with include "arkouda-server.threads" . }}
        - name: CHPL_RT_NUM_THREADS_PER_LOCALE
          value: {{ . | quote }}
        {{- end }}
        {{- end }}
        {{- with .Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- if $job }}
        # Last, so that they hold whatever extraEnv says: run-mpi.sh exits with mpirun's status instead of
        # serving the output, and the bootstrap then scales the locale StatefulSet to 0 and writes its one-line
        # outcome as the termination message.
        - name: ARKOUDA_MPI_KEEP_ALIVE
          value: "false"
        - name: ARKOUDA_SCALE_DOWN_WHEN_DONE
          value: {{ include "arkouda-common.localeName" . | quote }}
        {{- end }}
      {{- if $job }}
      # No port and no readiness: the Job's launcher serves nothing; its outcome is its exit code and message.
      terminationMessagePolicy: FallbackToLogsOnError
      {{- else }}
      ports:
        {{- if eq $mode "mpi" }}
        - name: results
          containerPort: {{ .Values.mpi.resultsPort }}
          protocol: TCP
        {{- else }}
        - name: arkouda
          containerPort: {{ .Values.port }}
          protocol: TCP
        {{- end }}
      # Ready once the program serves: arkouda_server_real (locale 0, started over ssh into the sshd
      # container of this pod) listens on the client port; in mpi mode run-mpi.sh serves the results after
      # a successful run.
      readinessProbe:
        tcpSocket:
          port: {{ if eq $mode "mpi" }}results{{ else }}arkouda{{ end }}
        periodSeconds: {{ .Values.readinessProbe.periodSeconds }}
        failureThreshold: {{ .Values.readinessProbe.failureThreshold }}
      {{- end }}
      resources:
        {{- toYaml .Values.launcherResources | nindent 8 }}
      securityContext:
        {{- include "arkouda-common.securityContext" . | nindent 8 }}
      volumeMounts:
        {{- include "arkouda-server.commonMounts" (dict "ctx" . "keys" "ssh-launcher") | nindent 8 }}
        - name: run
          mountPath: /run/arkouda
        {{- if $metrics }}
        # The last launch's network check (datagrams dropped at start-up), for the metrics sidecar: its own
        # volume, so the sidecar never sees the rest of /run/arkouda (the copies of the ssh keys).
        - name: launch-report
          mountPath: /run/arkouda/launch
        {{- end }}
        - name: tmp
          mountPath: /tmp
        - name: kube-api-access
          mountPath: /var/run/secrets/kubernetes.io/serviceaccount
          readOnly: true
        {{- if eq $mode "arkouda" }}
        - name: work
          mountPath: /var/lib/arkouda
        {{- end }}
        {{- if eq $mode "mpi" }}
        - name: scripts
          mountPath: /etc/arkouda/scripts
          readOnly: true
        - name: results
          mountPath: /run/arkouda-results
        {{- end }}
    {{- if $metrics }}
    # The exporter: polls Arkouda's metrics socket (ZeroMQ, 127.0.0.1 in this pod's network namespace, where
    # locale 0 runs in `sshd`) at every scrape and serves the Prometheus text format on the `metrics` port.
    - name: metrics
      image: {{ include "arkouda-common.image" . | quote }}
      imagePullPolicy: {{ include "arkouda-common.pullPolicy" . }}
      args: [exporter]
      env:
        - name: ARKOUDA_LOG_LEVEL
          value: {{ .Values.global.logLevel | quote }}
        - name: METRICS_SERVER_PORT
          value: {{ .Values.metrics.socketPort | quote }}
        - name: ARKOUDA_EXPORTER_PORT
          value: {{ .Values.metrics.port | quote }}
        - name: ARKOUDA_EXPORTER_TIMEOUT
          value: {{ .Values.metrics.pollTimeoutSeconds | quote }}
        # written by the server (its state dir), served as the arkouda_launch_* gauges
        - name: ARKOUDA_LAUNCH_NETWORK_FILE
          value: /run/arkouda/launch/network.json
      ports:
        - name: metrics
          containerPort: {{ .Values.metrics.port }}
          protocol: TCP
      resources:
        {{- toYaml .Values.metrics.resources | nindent 8 }}
      securityContext:
        {{- include "arkouda-common.securityContext" . | nindent 8 }}
      volumeMounts:
        - name: launch-report
          mountPath: /run/arkouda/launch
          readOnly: true
    {{- end }}
  volumes:
    {{- include "arkouda-common.sshSecretVolume" (dict "ctx" . "name" "ssh-secret" "role" "sshd") | nindent 4 }}
    {{- include "arkouda-common.sshSecretVolume" (dict "ctx" . "name" "ssh-launcher" "role" "launcher" "token" .Values.authenticate) | nindent 4 }}
    - name: run
      emptyDir:
        medium: Memory
        sizeLimit: 16Mi
    - name: sshd-run
      emptyDir:
        medium: Memory
        sizeLimit: 16Mi
    {{- if $metrics }}
    - name: launch-report
      emptyDir:
        medium: Memory
        sizeLimit: 1Mi
    {{- end }}
    - name: tmp
      emptyDir:
        sizeLimit: {{ .Values.tmpSizeLimit }}
    - name: sshd-tmp
      emptyDir:
        sizeLimit: {{ .Values.tmpSizeLimit }}
    {{- if eq $mode "arkouda" }}
    # Locale 0's working directory, shared by both containers: arkouda_server_real runs there in `sshd`
    # (started over ssh like on every locale), and the bootstrap in `server` writes .arkouda/tokens.txt.
    - name: work
      emptyDir:
        sizeLimit: 256Mi
    {{- end }}
    # What automountServiceAccountToken would mount, but for the `server` container only.
    - name: kube-api-access
      projected:
        defaultMode: 292
        sources:
          - serviceAccountToken:
              path: token
              expirationSeconds: 3607
          - configMap:
              name: kube-root-ca.crt
              items:
                - key: ca.crt
                  path: ca.crt
          - downwardAPI:
              items:
                - path: namespace
                  fieldRef:
                    fieldPath: metadata.namespace
    {{- if eq $mode "mpi" }}
    - name: scripts
      configMap:
        name: {{ include "arkouda-common.serverScriptsName" . }}
        defaultMode: 365
    - name: results
      emptyDir:
        sizeLimit: 64Mi
    {{- end }}
    {{- if .Values.global.sharedVolume.enabled }}
    {{- include "arkouda-common.sharedVolume" . | nindent 4 }}
    {{- end }}
{{- end }}
{{- end -}}

{{- /*
arkouda-server.commonMounts: the volume mounts both containers have: the keys read-only (.keys: the sshd's volume
ssh-secret, the launcher's ssh-launcher, each with only the fields that container uses), the shared volume. Each
container gets its own /run/arkouda and /tmp so the sshd and the launcher never share state files. Called as
(dict "ctx" $ "keys" VOLUME).
*/}}
{{- define "arkouda-server.commonMounts" -}}
- name: {{ .keys }}
  mountPath: /etc/arkouda/ssh
  readOnly: true
{{- with .ctx }}
{{- if .Values.global.sharedVolume.enabled }}
- name: shared
  mountPath: {{ .Values.global.sharedVolume.mountPath }}
  readOnly: {{ .Values.global.sharedVolume.readOnly }}
{{- end }}
{{- end }}
{{- end -}}
