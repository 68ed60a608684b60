# shellcheck shell=bash disable=SC2034  # settings used by the scripts that source this file
# Shared settings of the local node (sourced by up.sh, down.sh, load-images.sh, smoke.sh).
# Everything the node writes lives under CLUSTER_DIR; the binaries live in the version-named tool cache dirs.
set -euo pipefail
CLUSTER_HACK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="${REPO_ROOT:-$(cd "$CLUSTER_HACK/../.." && pwd)}"
# shellcheck source=/dev/null
. "$REPO_ROOT/hack/versions.env"
CACHE_DIR="${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/arkouda-k8s}"
BIN="${BIN:-$CACHE_DIR/bin}"

CLUSTER_DIR="${CLUSTER_DIR:-$CACHE_DIR/cluster}"
K8S_BIN="$CACHE_DIR/k8s-${KUBERNETES_VERSION}"
ETCD_BIN="$CACHE_DIR/etcd-${ETCD_VERSION}"
COREDNS_BIN="$CACHE_DIR/coredns-${COREDNS_VERSION}"
IMAGES_DIR="${IMAGES_DIR:-$CACHE_DIR/images}"          # archives from `make images`
CLUSTER_IMAGES_DIR="$CACHE_DIR/cluster-images"          # pause + smoke images built by up.sh (cached)

NODE_NAME="${CLUSTER_NODE_NAME:-arkouda-node}"
BRIDGE="akk8s0"                                          # the pod bridge we create (and delete)
POD_CIDR="10.244.0.0/16"                                 # not podman's 10.88/16, so buildah's CNI can't clash
NODE_IP="10.244.0.1"                                     # bridge address = node IP = API server = DNS
SERVICE_CIDR="10.96.0.0/16"
KUBERNETES_SVC_IP="10.96.0.1"
CLUSTER_DOMAIN="cluster.local"
APISERVER_PORT=6443
FW_CHAIN="ARKOUDA-K8S-FWD"                               # our filter/FORWARD rules (pods stay on this host)
PAUSE_IMAGE="localhost/arkouda-k8s/pause:3.10"
SMOKE_IMAGE="localhost/arkouda-k8s/cluster-smoke:1"

PKI="$CLUSTER_DIR/pki"
KCFG="$CLUSTER_DIR/kubeconfig"
ADMIN_KUBECONFIG="$KCFG/admin.kubeconfig"
RUN="$CLUSTER_DIR/run"
LOGS="$CLUSTER_DIR/logs"
CONTAINERD_SOCK="$RUN/containerd.sock"
AUDIT_LOG="${CLUSTER_AUDIT_LOG:-$LOGS/audit.log}"
AUDIT_POLICY="${CLUSTER_AUDIT_POLICY:-$CLUSTER_HACK/config/audit-policy.yaml}"

# cluster_lock: serialize up/down/load-images of the same cluster (several make targets may call cluster-up at once).
cluster_lock() {
  [[ -z "${CLUSTER_LOCKED:-}" ]] || return 0   # already held by the script that called us
  export CLUSTER_LOCKED=1
  mkdir -p "$CACHE_DIR"
  exec 9>"$CACHE_DIR/cluster.lock"
  flock -n 9 || { printf '[cluster] waiting for another cluster-up/down to finish (%s)\n' "$CACHE_DIR/cluster.lock"; flock 9; }
}

log() { printf '[cluster] %s\n' "$*"; }
die() { printf 'cluster: %s\n' "$*" >&2; exit 1; }

_phase_name="" _phase_start=0
phase() {  # phase NAME: ends the previous phase (printing its duration) and starts NAME
  phase_end
  _phase_name="$1"; _phase_start=$(date +%s.%N)
  log "phase $_phase_name ..."
}
phase_end() {
  [[ -n "$_phase_name" ]] || return 0
  log "phase $_phase_name done in $(awk -v a="$_phase_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s"
  _phase_name=""
}

# write_file FILE < content: replace FILE only when the content differs (kube-proxy exits when its config file
# is rewritten, and an unchanged file keeps re-runs of cluster-up from disturbing running components).
write_file() {
  local f="$1" tmp
  tmp="$(mktemp "$f.XXXXXX")"
  cat >"$tmp"
  if cmp -s "$tmp" "$f"; then rm -f "$tmp"; else mv "$tmp" "$f"; fi
}

ctr_() { ctr --address "$CONTAINERD_SOCK" "$@"; }
kubectl_() { "$K8S_BIN/kubectl" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }

# pid_alive NAME: the process recorded in $RUN/NAME.pid is running and is still the binary we started.
pid_alive() {
  local pidf="$RUN/$1.pid" pid exe
  [[ -f "$pidf" ]] || return 1
  read -r pid exe <"$pidf" || return 1
  [[ -n "$pid" && -e "/proc/$pid" ]] || return 1
  [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$(readlink -f "$exe")" ]]
}

# start NAME BINARY ARGS...: start a daemon in its own session, log to $LOGS/NAME.log, record "PID BINARY".
start() {
  local name="$1" exe="$2"; shift 2
  if pid_alive "$name"; then log "$name already running (pid $(cut -d' ' -f1 "$RUN/$name.pid"))"; return 0; fi
  [[ -x "$exe" ]] || die "$exe is missing: run 'make cluster-tools'"
  # 9>&-: the daemon must not inherit cluster_lock's fd, or it holds the lock for its whole life and every later
  # cluster-up/down waits forever.
  setsid "$exe" "$@" >>"$LOGS/$name.log" 2>&1 </dev/null 9>&- &
  echo "$! $exe" >"$RUN/$name.pid"
  log "$name started (pid $!, log $LOGS/$name.log)"
}

# wait_for WHAT TIMEOUT_S CMD...: poll CMD every 0.5 s; on timeout name the log to read.
wait_for() {
  local what="$1" timeout="$2" deadline; shift 2
  deadline=$(( $(date +%s) + timeout ))
  until "$@" >/dev/null 2>&1; do
    if (( $(date +%s) > deadline )); then die "$what not ready after ${timeout}s (see $LOGS/)"; fi
    sleep 0.5
  done
}
