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
KUBE_ROUTER_BIN="$CACHE_DIR/kube-router-${KUBE_ROUTER_VERSION}"
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

# Extra nodes 1..N-1 (node.sh): each in its own network namespace, joined to the host by a veth on the underlay
# bridge; node i has node IP 10.243.0.(10+i) and pod CIDR 10.245.i.0/24 (routed, no NAT between pods).
UNDERLAY_BRIDGE="akk8sul0"
UNDERLAY_CIDR="10.243.0.0/24"
UNDERLAY_HOST_IP="10.243.0.1"                            # the host's address on the underlay (default gateway)
EXTRA_POD_CIDRS="10.245.0.0/16"                          # all extra nodes' pod CIDRs
ALL_POD_CIDRS="10.244.0.0/15"                            # node 0's 10.244.0.0/16 + the extra nodes'
NODES_FW_CHAIN="ARKOUDA-K8S-NODES"                       # host FORWARD rules for traffic of the extra nodes
NODES_DIR="$CLUSTER_DIR/nodes"                           # per extra node: $NODES_DIR/<i>/{run,logs,containerd,...}
KUBE_ROUTER_HEALTH_PORT=20244
node_name() { printf 'arkouda-node-%s' "$1"; }
node_netns() { printf 'akk8s-node-%s' "$1"; }
node_ip() { printf '10.243.0.%s' "$((10 + $1))"; }
node_pod_cidr() { printf '10.245.%s.0/24' "$1"; }
node_pod_gw() { printf '10.245.%s.1' "$1"; }
extra_nodes() { [[ -d "$NODES_DIR" ]] && find "$NODES_DIR" -mindepth 1 -maxdepth 1 -type d -regex '.*/[0-9]+' -printf '%f\n' | sort -n; return 0; }

# CLUSTER_NODE=i (i >= 1) points the scripts at extra node i: its containerd socket, PID files and logs
# (load-images.sh, smoke.sh and node.sh use the same variables as for node 0).
if [[ -n "${CLUSTER_NODE:-}" && "${CLUSTER_NODE}" != 0 ]]; then
  [[ "$CLUSTER_NODE" =~ ^[1-9][0-9]?$ ]] || { printf 'cluster: CLUSTER_NODE=%s is not a node index 1..99\n' "$CLUSTER_NODE" >&2; exit 1; }
  NODE_DIR="$NODES_DIR/$CLUSTER_NODE"
  RUN="$NODE_DIR/run"
  LOGS="$NODE_DIR/logs"
  CONTAINERD_SOCK="$RUN/containerd.sock"
  START_NETNS="$(node_netns "$CLUSTER_NODE")"
fi

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

# containerd_toml ROOT_PREFIX SOCK CNI_CONF_DIR [RUNC_ROOT]: the config of one node's containerd (own root,
# state and socket). RUNC_ROOT separates runc's state of an extra node from node 0's default.
containerd_toml() {
  local prefix="$1" sock="$2" cni_conf="$3" runc_root="${4:-}"
  cat <<TOML
# Generated by hack/cluster/up.sh: a containerd of the local node only (own root, state and socket).
version = 2
root = "${prefix}/root"
state = "${prefix}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "${sock}"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "${prefix}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  disable_apparmor = true
  # This machine kind gives root no CAP_SYS_RESOURCE: lowering oom_score_adj (-998 for sandboxes) fails in runc
  # init ("can't get final child's PID from pipe: EOF"); clamp container scores to containerd's own instead.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
TOML
  [[ -z "$runc_root" ]] || printf '        Root = "%s"\n' "$runc_root"
  cat <<TOML
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${cni_conf}"
TOML
}

# kubelet_yaml ADDRESS CERT KEY NODE_STATE_DIR [CGROUP_ROOT] [EXTRA_YAML]: the KubeletConfiguration of one node,
# the same for node 0 (up.sh) and every extra node (node.sh) but for its address, serving certificate, state
# directory (pod logs, volume plugins) and cgroup root. README.md says why each setting.
kubelet_yaml() {
  local address="$1" cert="$2" key="$3" state="$4" cgroup_root="${5:-}" extra="${6:-}"
  cat <<YAML
# Generated by hack/cluster/lib.sh (kubelet_yaml); see hack/cluster/README.md for why each setting.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ${address}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${PKI}/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: ${cert}
tlsPrivateKeyFile: ${key}
containerRuntimeEndpoint: unix://${CONTAINERD_SOCK}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
clusterDomain: ${CLUSTER_DOMAIN}
clusterDNS: [${NODE_IP}]
resolvConf: ${CLUSTER_DIR}/resolv.conf
podLogsDir: ${state}/pod-logs
volumePluginDir: ${state}/kubelet/volume-plugins
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%"}
evictionPressureTransitionPeriod: 30s
maxPods: 250
serializeImagePulls: false
registerNode: true
# A changed Secret reaches a pod's volume at its next sync: 10 s instead of the default minute, so the key
# rotation tests wait for the product, not for the kubelet (README.md, "kubelet").
syncFrequency: 10s
YAML
  [[ -z "$cgroup_root" ]] || printf 'cgroupRoot: %s\n' "$cgroup_root"
  [[ -z "$extra" ]] || printf '%s\n' "$extra"
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
  # The daemon must not inherit any open file beyond stdio: a lock fd of whoever started us (cluster_lock's fd 9,
  # or the fd of a `flock FILE make cluster-up` wrapper) would stay locked for the daemon's whole life, and every
  # later cluster-up/down or lock user would wait forever.
  # START_NETNS: run it in that network namespace (an extra node); nsenter execs the binary, so the recorded PID
  # is the daemon's own. Only the network namespace is entered: mounts (volumes, rootfs) stay shared with the
  # host, as for node 0.
  local pre=()
  [[ -n "${START_NETNS:-}" ]] && pre=(nsenter "--net=/run/netns/$START_NETNS" --)
  (
    for fd in /proc/self/fd/*; do
      fd="${fd##*/}"
      if (( fd > 2 )); then eval "exec ${fd}>&-" 2>/dev/null || true; fi
    done
    exec setsid "${pre[@]}" "$exe" "$@" >>"$LOGS/$name.log" 2>&1 </dev/null
  ) &
  echo "$! $exe" >"$RUN/$name.pid"
  log "$name started (pid $!, log $LOGS/$name.log)"
}

# stop NAME: SIGTERM the process recorded in $RUN/NAME.pid, SIGKILL after 15 s.
stop() {
  local name="$1" pid
  pid_alive "$name" || { rm -f "$RUN/$name.pid"; return 0; }
  read -r pid _ <"$RUN/$name.pid"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 30); do [[ -e /proc/$pid ]] || break; sleep 0.5; done
  [[ -e /proc/$pid ]] && kill -KILL "$pid" 2>/dev/null || true
  rm -f "$RUN/$name.pid"
  log "stopped $name (pid $pid)"
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

# start_kube_router NODE_NAME: the NetworkPolicy enforcer of one node (in START_NETNS for an extra node), in
# firewall-only mode: no BGP routing (its GoBGP gRPC port is what GHSA-v5mh-h5hx-7v92 is about) and no service
# proxy (GHSA-phqm-jgc3-qf8g), kube-proxy stays the service proxy. Pod IPs it finds by the node's InternalIP.
start_kube_router() {
  start kube-router "$KUBE_ROUTER_BIN/kube-router" --run-firewall=true --run-router=false \
    --run-service-proxy=false --run-loadbalancer=false --enable-cni=false --enable-ipv4=true --enable-ipv6=false \
    --kubeconfig "$KCFG/kube-router.kubeconfig" --hostname-override "$1" \
    --service-cluster-ip-range "$SERVICE_CIDR" --health-port "$KUBE_ROUTER_HEALTH_PORT" --metrics-port 0 \
    --iptables-sync-period 1m --v 1
}
