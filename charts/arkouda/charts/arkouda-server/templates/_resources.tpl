{{- /*
Resource arithmetic: memMax and the worker threads every locale runs with, derived from or checked against
server.resources. The umbrella chart's resources-check.yaml calls memMax, threads, bytes and threadsFor on the
server values too, so the locale pods are held to the same rule.
*/}}

{{- /*
arkouda-server.bytes: a memory quantity (dict "value" V "key" "name.of.key") as whole bytes; plain numbers and
the suffixes k M G T P E (powers of 1000) and Ki Mi Gi Ti Pi Ei (powers of 1024). Anything else fails naming the
key, since the chart cannot compare it with memMax.
*/}}
{{- define "arkouda-server.bytes" -}}
{{- $s := toString .value | trim -}}
{{- if not (regexMatch "^[0-9]+([.][0-9]+)?([kMGTPE]|[KMGTPE]i)?$" $s) -}}
{{- fail (printf "%s: %q is not a memory quantity the chart can compare with memMax (a number, optionally with k, M, G, T, Ki, Mi, Gi or Ti, e.g. 4Gi)" .key $s) -}}
{{- end -}}
{{- $num := regexFind "^[0-9]+([.][0-9]+)?" $s -}}
{{- $units := dict "" 1.0 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 -}}
{{- mulf (float64 $num) (get $units (trimPrefix $num $s)) | floor | int64 -}}
{{- end -}}

{{- /*
arkouda-server.threadsFor: the worker threads a CPU quantity (dict "value" V "key" "name.of.key") allows: whole
CPUs rounded down, at least 1 ("500m" → 1, "2.5" → 2). Fails naming the key on a format it cannot read.
*/}}
{{- define "arkouda-server.threadsFor" -}}
{{- $s := toString .value | trim -}}
{{- if not (regexMatch "^[0-9]+([.][0-9]+)?m?$" $s) -}}
{{- fail (printf "%s: %q is not a CPU quantity the chart can compare with threadsPerLocale (e.g. 2, 1.5 or 500m)" .key $s) -}}
{{- end -}}
{{- $cpus := ternary (divf (float64 (trimSuffix "m" $s)) 1000) (float64 $s) (hasSuffix "m" $s) -}}
{{- max 1 (floor $cpus | int64) -}}
{{- end -}}

{{- /*
arkouda-server.limit: server.resources.limits.<.name> as bytes (memory) or threads (cpu), "" without that limit.
Called as (dict "ctx" $ "name" "memory").
*/}}
{{- define "arkouda-server.limit" -}}
{{- $limits := (.ctx.Values.resources | default dict).limits | default dict -}}
{{- $v := get $limits .name -}}
{{- if and (hasKey $limits .name) (not (kindIs "invalid" $v)) -}}
{{- $arg := dict "value" $v "key" (printf "server.resources.limits.%s" .name) -}}
{{- if eq .name "memory" }}{{ include "arkouda-server.bytes" $arg }}{{ else }}{{ include "arkouda-server.threadsFor" $arg }}{{ end -}}
{{- end -}}
{{- end -}}

{{- /*
arkouda-server.memMax: the --memMax of every locale, "" for Arkouda's default. server.memMax when set (refused
above server.resources.limits.memory: an OOM kill instead of Arkouda's own error), else 80% of that limit (the
rest for the Chapel/GASNet runtime and sshd), else "". The umbrella chart checks the locale pods' limit too.
*/}}
{{- define "arkouda-server.memMax" -}}
{{- $limit := include "arkouda-server.limit" (dict "ctx" . "name" "memory") -}}
{{- if not (kindIs "invalid" .Values.memMax) -}}
{{- $m := .Values.memMax | int64 -}}
{{- if and $limit (gt $m ($limit | int64)) -}}
{{- fail (printf "server.memMax (%d bytes) is above server.resources.limits.memory (%v = %s bytes), the container locale 0 runs in: the kernel would OOM-kill it before Arkouda reports its memory limit; lower server.memMax or raise the limit" $m .Values.resources.limits.memory $limit) -}}
{{- end -}}
{{- $m -}}
{{- else if $limit -}}
{{- divf (mulf ($limit | float64) 4) 5 | floor | int64 -}}
{{- end -}}
{{- end -}}

{{- /*
arkouda-server.threads: CHPL_RT_NUM_THREADS_PER_LOCALE of every locale, "" for Chapel's default (one per node
core). server.threadsPerLocale when set (refused above server.resources.limits.cpu), else that limit rounded
down (at least 1), else "".
*/}}
{{- define "arkouda-server.threads" -}}
{{- range .Values.extraEnv }}{{ if eq .name "CHPL_RT_NUM_THREADS_PER_LOCALE" }}{{ fail "server.extraEnv sets CHPL_RT_NUM_THREADS_PER_LOCALE, which would silently win over the chart's; use server.threadsPerLocale" }}{{ end }}{{ end -}}
{{- $limit := include "arkouda-server.limit" (dict "ctx" . "name" "cpu") -}}
{{- if not (kindIs "invalid" .Values.threadsPerLocale) -}}
{{- $t := .Values.threadsPerLocale | int64 -}}
{{- if and $limit (gt $t ($limit | int64)) -}}
{{- fail (printf "server.threadsPerLocale (%d) is above server.resources.limits.cpu (%v), the container locale 0 runs in: Chapel would run %d worker threads under a limit of %v CPUs; lower server.threadsPerLocale or raise the limit" $t .Values.resources.limits.cpu $t .Values.resources.limits.cpu) -}}
{{- end -}}
{{- $t -}}
{{- else if $limit -}}
{{- $limit -}}
{{- end -}}
{{- end -}}
