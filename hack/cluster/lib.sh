# shellcheck shell=bash disable=SC2034  # settings used by the scripts that source this file
# Shared settings of the local cluster and the lifecycle of one node, the same for node 0 and the extra nodes
# (sourced by up.sh, down.sh, node.sh, load-images.sh, smoke.sh, multus.sh). Everything the cluster writes lives
# under CLUSTER_DIR; the binaries live in the version-named tool cache dirs.
set -euo pipefail
log() { printf '[cluster] %s\n' "$*"; }
die() { printf 'cluster: %s\n' "$*" >&2; exit 1; }
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
# The neighbour (ARP) table's garbage-collection thresholds (gc_thresh1 2 3). The table is one per kernel, shared by
# every network namespace, so all nodes' pods count against it here; a bridge pod network gives each pod an entry
# per peer on its node. Past gc_thresh3 (Linux: 1024) no entry is created and sends fail with ENOBUFS, which
# GASNet's udp conduit counts as a drop and resends only after its doubling timeout (docs/launch-at-scale.md).
# 16384 holds a full mesh of 128 pods on one kernel. `kernel` leaves the kernel's values as they are.
CLUSTER_NEIGH_GC_THRESH="${CLUSTER_NEIGH_GC_THRESH:-4096 8192 16384}"
NEIGH_KERNEL_DEFAULTS="128 512 1024"                    # Linux's gc_thresh1 2 3 (net/ipv4/arp.c)
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

# shellcheck source=hack/cluster/pki.sh
. "$CLUSTER_HACK/pki.sh"

# node_ctx I: point the per-node variables at node I (0 = the host's node, 1..99 = extra node I of node.sh): its
# state directory, PID files, logs, containerd socket, network namespace, addresses and certificates. Every step
# of the node lifecycle below (and load-images.sh, smoke.sh) works on the node node_ctx last selected.
node_ctx() {
  local i="$1"
  [[ "$i" =~ ^(0|[1-9][0-9]?)$ ]] || die "node index '$i' is not 0..99"
  NODE_IDX="$i"
  if (( i == 0 )); then
    NODE_DIR="$CLUSTER_DIR" THIS_NAME="$NODE_NAME" THIS_IP="$NODE_IP" THIS_POD_CIDR="$POD_CIDR" THIS_POD_GW="$NODE_IP"
    START_NETNS="" THIS_CGROUP_ROOT="" THIS_RUNC_ROOT="" THIS_PROXY_CIDR="$POD_CIDR"
    THIS_KUBELET_CERT="kubelet" THIS_KUBELET_KCFG="kubelet"
  else
    NODE_DIR="$NODES_DIR/$i" THIS_NAME="$(node_name "$i")" THIS_IP="$(node_ip "$i")"
    THIS_POD_CIDR="$(node_pod_cidr "$i")" THIS_POD_GW="$(node_pod_gw "$i")" START_NETNS="$(node_netns "$i")"
    THIS_CGROUP_ROOT="/arkouda-node-$i" THIS_RUNC_ROOT="$NODES_DIR/$i/runc" THIS_PROXY_CIDR="$ALL_POD_CIDRS"
    THIS_KUBELET_CERT="kubelet-$THIS_NAME" THIS_KUBELET_KCFG="kubelet-$THIS_NAME"
  fi
  RUN="$NODE_DIR/run"
  LOGS="$NODE_DIR/logs"
  CONTAINERD_SOCK="$RUN/containerd.sock"
}
CP_RUN="$CLUSTER_DIR/run"                                # PID files of the control plane (beside node 0's)
# CLUSTER_NODE=i points a script at node i from the start (load-images.sh for one extra node).
node_ctx "${CLUSTER_NODE:-0}"

# cluster_lock: serialize up/down/load-images of the same cluster (several make targets may call cluster-up at once).
cluster_lock() {
  [[ -z "${CLUSTER_LOCKED:-}" ]] || return 0   # already held by the script that called us
  export CLUSTER_LOCKED=1
  mkdir -p "$CACHE_DIR"
  exec 9>"$CACHE_DIR/cluster.lock"
  flock -n 9 || { printf '[cluster] waiting for another cluster-up/down to finish (%s)\n' "$CACHE_DIR/cluster.lock"; flock 9; }
}


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

# Daemons started under supervise.sh (started again when they exit, as a real cluster's kubelet restarts its static
# control-plane pods): the two that exit by design on conditions they expect a restart to cure.
SUPERVISED="kube-scheduler kube-controller-manager"
supervised() { [[ " $SUPERVISED " == *" $1 "* ]]; }

# start NAME BINARY ARGS...: start a daemon in its own session, log to $LOGS/NAME.log, record "PID BINARY" (a
# supervised one: supervise.sh records its current process, and its own PID in $RUN/NAME.supervisor).
start() {
  local name="$1" exe="$2"; shift 2
  if pid_alive "$name"; then log "$name already running (pid $(cut -d' ' -f1 "$RUN/$name.pid"))"; return 0; fi
  [[ -x "$exe" ]] || die "$exe is missing: run 'make cluster-tools'"
  if supervised "$name"; then
    stop_supervisor "$name"
    rm -f "$RUN/$name.pid"
    set -- "$exe" "$@"
    exe="$CLUSTER_HACK/supervise.sh"
    set -- "$RUN/$name.pid" "$@"
  fi
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
  if supervised "$name"; then
    echo "$!" >"$RUN/$name.supervisor"
    for _ in $(seq 1 50); do pid_alive "$name" && break; sleep 0.1; done
    pid_alive "$name" || die "$name did not start under supervise.sh (see $LOGS/$name.log)"
    log "$name started under supervise.sh (pid $(cut -d' ' -f1 "$RUN/$name.pid"), log $LOGS/$name.log)"
    return 0
  fi
  echo "$! $exe" >"$RUN/$name.pid"
  log "$name started (pid $!, log $LOGS/$name.log)"
}

# stop_supervisor NAME: end supervise.sh of NAME (no restart after this), whatever its daemon's state.
stop_supervisor() {
  local name="$1" sup
  [[ -f "$RUN/$name.supervisor" ]] || return 0
  read -r sup <"$RUN/$name.supervisor"
  if [[ -n "$sup" && -e "/proc/$sup" ]]; then
    touch "$RUN/$name.pid.stop"
    kill -TERM "$sup" 2>/dev/null || true
    for _ in $(seq 1 40); do [[ -e /proc/$sup ]] || break; sleep 0.5; done
    [[ -e /proc/$sup ]] && kill -KILL "$sup" 2>/dev/null || true
  fi
  rm -f "$RUN/$name.supervisor" "$RUN/$name.pid.stop"
}

# stop NAME: SIGTERM the process recorded in $RUN/NAME.pid, SIGKILL after 15 s (a supervised one: its
# supervisor is told first that this exit is the last).
stop() {
  local name="$1" pid
  [[ -f "$RUN/$name.supervisor" ]] && touch "$RUN/$name.pid.stop"
  pid_alive "$name" || { stop_supervisor "$name"; rm -f "$RUN/$name.pid"; return 0; }
  read -r pid _ <"$RUN/$name.pid"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 30); do [[ -e /proc/$pid ]] || break; sleep 0.5; done
  [[ -e /proc/$pid ]] && kill -KILL "$pid" 2>/dev/null || true
  stop_supervisor "$name"
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

# neigh_gc_thresh: the kernel's gc_thresh1 2 3 on one line; set_neigh_gc_thresh T1 T2 T3: set them (host-wide).
neigh_gc_thresh() {
  printf '%s %s %s\n' "$(sysctl -n net.ipv4.neigh.default.gc_thresh1)" "$(sysctl -n net.ipv4.neigh.default.gc_thresh2)" \
    "$(sysctl -n net.ipv4.neigh.default.gc_thresh3)"
}
set_neigh_gc_thresh() {
  [[ $# -eq 3 && "$1$2$3" =~ ^[0-9]+$ && $1 -le $2 && $2 -le $3 ]] ||
    die "neighbour table thresholds must be three numbers T1 <= T2 <= T3 (CLUSTER_NEIGH_GC_THRESH), got: $*"
  # gc_thresh3 first when growing, last when shrinking, so the three never cross on the way
  if (( $3 >= $(sysctl -n net.ipv4.neigh.default.gc_thresh3) )); then
    sysctl -qw net.ipv4.neigh.default.gc_thresh3="$3" net.ipv4.neigh.default.gc_thresh2="$2" net.ipv4.neigh.default.gc_thresh1="$1"
  else
    sysctl -qw net.ipv4.neigh.default.gc_thresh1="$1" net.ipv4.neigh.default.gc_thresh2="$2" net.ipv4.neigh.default.gc_thresh3="$3"
  fi
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

# start_apiserver: node 0's kube-apiserver (up.sh, and component.sh after a test stopped it), until /readyz.
start_apiserver() {
  mkdir -p "$(dirname "$AUDIT_LOG")"
  [[ -f "$AUDIT_POLICY" ]] || die "audit policy $AUDIT_POLICY not found (CLUSTER_AUDIT_POLICY)"
  RUN="$CP_RUN" start kube-apiserver "$K8S_BIN/kube-apiserver" \
    --advertise-address "$NODE_IP" --bind-address "$NODE_IP" --secure-port "$APISERVER_PORT" \
    --etcd-servers https://127.0.0.1:2379 --etcd-cafile "$PKI/ca.crt" \
    --etcd-certfile "$PKI/etcd-client.crt" --etcd-keyfile "$PKI/etcd-client.key" \
    --client-ca-file "$PKI/ca.crt" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$PKI/apiserver-kubelet-client.key" --kubelet-certificate-authority "$PKI/ca.crt" \
    --kubelet-preferred-address-types InternalIP \
    --service-account-issuer "https://kubernetes.default.svc.${CLUSTER_DOMAIN}" \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" --authorization-mode Node,RBAC \
    --enable-admission-plugins NodeRestriction --allow-privileged=true --profiling=false \
    --audit-policy-file "$AUDIT_POLICY" --audit-log-path "$AUDIT_LOG" --audit-log-maxsize 200 --audit-log-maxbackup 2
  wait_for kube-apiserver 120 kubectl_ get --raw /readyz
}

# wait_default_sa NS: wait (watch) until the namespace's "default" ServiceAccount exists. The controller-manager
# creates it shortly after the namespace; until then the ServiceAccount admission plugin refuses every pod of the
# namespace ('serviceaccount "default" not found'), which a fresh API server / controller-manager makes likely.
wait_default_sa() {
  kubectl_ -n "$1" wait --for=create serviceaccount/default --timeout=60s >/dev/null ||
    die "namespace $1 has no default ServiceAccount after 60 s (see $CLUSTER_DIR/logs/kube-controller-manager.log)"
}

# --- The node lifecycle: the same steps for node 0 (up.sh/down.sh) and every extra node (node.sh) ---
#
# Up:   node_network  the node's network (node 0: bridge akk8s0 on the host; node i: netns, underlay, routes)
#       node_runtime  state dirs, CNI config, containerd and the node's own images (pause, smoke)
#       node_join     kubelet (the node registers and gets Ready), kube-proxy, kube-router
# Down: node_leave    its pods deleted through the API, agents, containers, containerd and shims stopped
#       node_teardown network, mounts, cgroups and log links removed (node i: also its Node object and state)
# node_up I [HOOK] runs the up steps in that order; HOOK (node 0: the control plane, which listens on node 0's
# bridge address) runs after the runtime, before the kubelet. Each step works on the node node_ctx selected.

node_phase() { phase "node-$NODE_IDX $1"; }
# in_node CMD...: CMD in the selected node's network namespace (node 0: the host's)
in_node() { if [[ -n "$START_NETNS" ]]; then nsenter "--net=/run/netns/$START_NETNS" -- "$@"; else "$@"; fi; }
# node_cgroup_dirs: where the node's pod cgroups live in every mounted hierarchy (cgroup v1 controllers + the
# unified one): node 0's kubelet uses the default root (/kubepods), node i's its own cgroupRoot.
node_cgroup_dirs() {
  local d
  for d in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
    [[ -f "$d/cgroup.procs" ]] || continue
    printf '%s\n' "${d%/}${THIS_CGROUP_ROOT:-/kubepods}"
  done
}
cp_alive() { RUN="$CP_RUN" pid_alive "$1"; }   # cp_alive NAME: a control-plane process of node 0 runs

node_up() {
  local hook="${1:-}" t0
  t0=$(date +%s.%N)
  [[ -x "$KUBE_ROUTER_BIN/kube-router" ]] || die "$KUBE_ROUTER_BIN/kube-router is missing: run 'make cluster-tools'"
  command -v ipset >/dev/null || die "ipset not found (kube-router needs it): run 'make deps'"
  if (( NODE_IDX > 0 )); then
    cp_alive kube-apiserver || die "node 0's API server is not running: run 'make cluster-up' first"
  fi
  node_network
  node_runtime
  [[ -z "$hook" ]] || "$hook"
  node_join
  phase_end
  log "node $THIS_NAME up in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s (node IP $THIS_IP, pods $THIS_POD_CIDR${START_NETNS:+, netns $START_NETNS})"
}

node_network() {
  node_phase network
  mkdir -p "$RUN" "$LOGS" "$NODE_DIR/cni/net.d" "$NODE_DIR/cni/networks" "$NODE_DIR/config"
  if (( NODE_IDX == 0 )); then _host_network_up; else _netns_network_up; fi
  # forwarding and bridge netfilter are per network namespace (Service DNAT between pods, kube-proxy, kube-router)
  in_node sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
  write_file "$NODE_DIR/cni/net.d/10-arkouda.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "arkouda-local",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "${BRIDGE}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "${NODE_DIR}/cni/networks",
        "ranges": [[{"subnet": "${THIS_POD_CIDR}", "gateway": "${THIS_POD_GW}"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
  printf 'nameserver %s\nsearch %s\noptions ndots:5\n' "$NODE_IP" "$CLUSTER_DOMAIN" | write_file "$CLUSTER_DIR/resolv.conf"
}

# Node 0: the pod bridge on the host, its address the node IP (= API server = DNS address).
_host_network_up() {
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
    touch "$RUN/bridge.created"
  fi
  # replace, not "show | grep || add": an address dump that pod churn interrupts fails (pipefail), and the add
  # that followed then failed with "Address already assigned"; replace is idempotent without a dump
  ip addr replace "${NODE_IP}/${POD_CIDR#*/}" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  # The host's values are restored by cluster-down. br_netfilter makes bridged traffic visit iptables (kube-proxy).
  [[ -f "$RUN/sysctl.saved" ]] || {
    printf 'net.ipv4.ip_forward=%s\n' "$(sysctl -n net.ipv4.ip_forward)" >"$RUN/sysctl.saved"
    [[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] &&
      printf 'net.bridge.bridge-nf-call-iptables=%s\n' "$(sysctl -n net.bridge.bridge-nf-call-iptables)" >>"$RUN/sysctl.saved"
  }
  [[ -f "$RUN/neigh.saved" ]] || neigh_gc_thresh >"$RUN/neigh.saved"
  if [[ "$CLUSTER_NEIGH_GC_THRESH" != kernel ]]; then
    local -a thresholds
    read -r -a thresholds <<<"$CLUSTER_NEIGH_GC_THRESH"
    set_neigh_gc_thresh "${thresholds[@]}"
  fi
  [[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] || modprobe br_netfilter 2>/dev/null ||
    die "br_netfilter is not available (modprobe br_netfilter failed): kube-proxy Services need it"
  # Pods talk to each other and to the node only: forwarded pod traffic leaving by any other interface is dropped.
  if ! iptables -w -S "$FW_CHAIN" >/dev/null 2>&1; then
    iptables -w -N "$FW_CHAIN"
    iptables -w -A "$FW_CHAIN" -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT
    iptables -w -A "$FW_CHAIN" -s "$POD_CIDR" ! -o "$BRIDGE" -j DROP
    iptables -w -A "$FW_CHAIN" -d "$POD_CIDR" ! -i "$BRIDGE" -j DROP
  fi
  iptables -w -C FORWARD -j "$FW_CHAIN" 2>/dev/null || iptables -w -I FORWARD 1 -j "$FW_CHAIN"
  iptables -w -t nat -S CNI-HOSTPORT-DNAT >/dev/null 2>&1 || touch "$RUN/cni-hostport.ours"
}

# Node i: its netns joined to the host by a veth on the underlay bridge, its pod bridge (the same name as node
# 0's, inside the netns) created before the first pod so the routes to it work at once (CNI reuses it).
_netns_network_up() {
  local veth="akv$NODE_IDX" j
  _underlay_up
  ip netns list | grep -qw "$START_NETNS" || ip netns add "$START_NETNS"
  if ! ip link show "$veth" >/dev/null 2>&1; then
    ip link add "$veth" type veth peer name "$veth-n"
    ip link set "$veth-n" netns "$START_NETNS"
    ip -n "$START_NETNS" link set "$veth-n" name eth0
  fi
  ip link set "$veth" master "$UNDERLAY_BRIDGE" up
  ip -n "$START_NETNS" link set lo up
  ip -n "$START_NETNS" addr replace "${THIS_IP}/${UNDERLAY_CIDR#*/}" dev eth0  # idempotent (_host_network_up)
  ip -n "$START_NETNS" link set eth0 up
  ip -n "$START_NETNS" route replace default via "$UNDERLAY_HOST_IP" dev eth0
  ip -n "$START_NETNS" link show "$BRIDGE" >/dev/null 2>&1 || ip -n "$START_NETNS" link add "$BRIDGE" type bridge
  ip -n "$START_NETNS" addr replace "${THIS_POD_GW}/24" dev "$BRIDGE"
  ip -n "$START_NETNS" link set "$BRIDGE" up
  ip route replace "$THIS_POD_CIDR" via "$THIS_IP" dev "$UNDERLAY_BRIDGE"
  # this node <-> every other extra node directly over the underlay (not through the host)
  for j in $(extra_nodes); do
    [[ "$j" == "$NODE_IDX" ]] && continue
    ip netns list | grep -qw "$(node_netns "$j")" || continue
    ip -n "$START_NETNS" route replace "$(node_pod_cidr "$j")" via "$(node_ip "$j")" dev eth0
    ip -n "$(node_netns "$j")" route replace "$THIS_POD_CIDR" via "$THIS_IP" dev eth0
  done
}

# The host side of the extra nodes: the underlay bridge and the FORWARD rules for their traffic. Created once and
# shared by all extra nodes; node 0's own rules (FW_CHAIN) are not changed, these are put before them.
_underlay_up() {
  ip link show "$UNDERLAY_BRIDGE" >/dev/null 2>&1 || ip link add "$UNDERLAY_BRIDGE" type bridge
  ip addr replace "${UNDERLAY_HOST_IP}/${UNDERLAY_CIDR#*/}" dev "$UNDERLAY_BRIDGE"
  ip link set "$UNDERLAY_BRIDGE" up
  # NODES_NO_HOST_FORWARD=1: leave the host's FORWARD chain alone (node 0's pods then cannot reach the extra
  # nodes' pods; node <-> node and the control plane still work). For adding nodes while others test on node 0.
  [[ -z "${NODES_NO_HOST_FORWARD:-}" ]] || return 0
  if ! iptables -w -S "$NODES_FW_CHAIN" >/dev/null 2>&1; then
    iptables -w -N "$NODES_FW_CHAIN"
    # node <-> node (bridged on the underlay), node 0's pods <-> the other nodes: routed, no NAT
    iptables -w -A "$NODES_FW_CHAIN" -i "$UNDERLAY_BRIDGE" -o "$UNDERLAY_BRIDGE" -j ACCEPT
    iptables -w -A "$NODES_FW_CHAIN" -i "$BRIDGE" -o "$UNDERLAY_BRIDGE" -j ACCEPT
    iptables -w -A "$NODES_FW_CHAIN" -i "$UNDERLAY_BRIDGE" -o "$BRIDGE" -j ACCEPT
    # like node 0's pods, the extra nodes reach nothing but the cluster
    iptables -w -A "$NODES_FW_CHAIN" -i "$UNDERLAY_BRIDGE" -j DROP
    iptables -w -A "$NODES_FW_CHAIN" -o "$UNDERLAY_BRIDGE" -j DROP
  fi
  if ! iptables -w -C FORWARD -j "$NODES_FW_CHAIN" 2>/dev/null; then
    # just before node 0's chain, so its DROPs (pod traffic leaving by another interface) do not apply here
    local pos
    pos="$(iptables -w -S FORWARD | grep -v '^-P' | grep -n -m1 -- "-j ${FW_CHAIN}\$" | cut -d: -f1 || true)"
    iptables -w -I FORWARD "${pos:-1}" -j "$NODES_FW_CHAIN"
  fi
}

node_runtime() {
  node_phase certificates
  make_pki   # the cluster's CA and shared certificates (kept when they exist), then this node's kubelet pair
  (( NODE_IDX == 0 )) || make_node_pki "$THIS_NAME" "$THIS_IP"
  node_phase containerd
  mkdir -p "$NODE_DIR/kubelet" "$NODE_DIR/pod-logs"
  containerd_toml "$NODE_DIR/containerd" "$CONTAINERD_SOCK" "$NODE_DIR/cni/net.d" "$THIS_RUNC_ROOT" |
    write_file "$NODE_DIR/config/containerd.toml"
  start containerd "$(command -v containerd)" --config "$NODE_DIR/config/containerd.toml"
  wait_for "containerd of $THIS_NAME" 30 ctr_ version
  node_phase node-images
  CLUSTER_NODE="$NODE_IDX" "$CLUSTER_HACK/load-images.sh" --node-images
}

node_join() {
  node_phase kubelet
  local d t taints_yaml=""
  if [[ -n "$THIS_CGROUP_ROOT" ]]; then
    while read -r d; do
      mkdir -p "$d"
      # a new cpuset cgroup starts empty: give it the parent's CPUs and memory nodes, or no task may join it
      if [[ -f "$d/cpuset.cpus" && -z "$(cat "$d/cpuset.cpus")" ]]; then
        cat "$(dirname "$d")/cpuset.cpus" >"$d/cpuset.cpus"
        cat "$(dirname "$d")/cpuset.mems" >"$d/cpuset.mems"
      fi
    done < <(node_cgroup_dirs)
  fi
  # NODE_TAINTS="key=value:Effect,...": an extra node registers with those taints (while it is tried out)
  if (( NODE_IDX > 0 )) && [[ -n "${NODE_TAINTS:-}" ]]; then
    taints_yaml="registerWithTaints:"
    IFS=',' read -ra ts <<<"$NODE_TAINTS"
    for t in "${ts[@]}"; do
      [[ "$t" =~ ^([^=]+)=([^:]*):(NoSchedule|PreferNoSchedule|NoExecute)$ ]] || die "bad taint '$t' in NODE_TAINTS (key=value:Effect)"
      taints_yaml+=$'\n'"  - {key: ${BASH_REMATCH[1]}, value: \"${BASH_REMATCH[2]}\", effect: ${BASH_REMATCH[3]}}"
    done
  fi
  kubelet_yaml "$THIS_IP" "$PKI/$THIS_KUBELET_CERT.crt" "$PKI/$THIS_KUBELET_CERT.key" "$NODE_DIR" \
    "$THIS_CGROUP_ROOT" "$taints_yaml" | write_file "$NODE_DIR/config/kubelet.yaml"
  start_kubelet

  node_phase kube-proxy
  write_file "$NODE_DIR/config/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: ${KCFG}/kube-proxy.kubeconfig}
hostnameOverride: ${THIS_NAME}
mode: iptables
clusterCIDR: ${THIS_PROXY_CIDR}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["${THIS_IP}/32"]
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML
  start kube-proxy "$K8S_BIN/kube-proxy" --config "$NODE_DIR/config/kube-proxy.yaml"
  wait_for "kube-proxy of $THIS_NAME" 60 in_node curl -fsS http://127.0.0.1:10256/healthz

  # kube-router (firewall only) enforces the NetworkPolicies of this node's pods; every node runs its own.
  node_phase kube-router
  kubectl_ apply -f "$CLUSTER_HACK/config/kube-router-rbac.yaml" >/dev/null
  start_kube_router "$THIS_NAME"
  wait_for "kube-router of $THIS_NAME" 60 in_node curl -fsS "http://127.0.0.1:${KUBE_ROUTER_HEALTH_PORT}/healthz"
}

# start_kubelet: the selected node's kubelet with the config node_join wrote, until its Node is Ready (node_join,
# and component.sh after a test stopped it).
start_kubelet() {
  [[ -f "$NODE_DIR/config/kubelet.yaml" ]] || die "node $THIS_NAME has no kubelet config (make cluster-up / node.sh add)"
  start kubelet "$K8S_BIN/kubelet" --config "$NODE_DIR/config/kubelet.yaml" \
    --kubeconfig "$KCFG/$THIS_KUBELET_KCFG.kubeconfig" --root-dir "$NODE_DIR/kubelet" \
    --cert-dir "$NODE_DIR/kubelet/pki" --hostname-override "$THIS_NAME" --node-ip "$THIS_IP" \
    --node-labels "topology.kubernetes.io/zone=zone-$NODE_IDX"
  wait_for "node $THIS_NAME Ready" 180 bash -c \
    "$(declare -f kubectl_); K8S_BIN='$K8S_BIN' ADMIN_KUBECONFIG='$ADMIN_KUBECONFIG';
     kubectl_ get node '$THIS_NAME' -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
}

# node_leave: the node's pods deleted through the API while its kubelet runs (so it tears the sandboxes down
# itself: CNI DEL, netns), then its agents, whatever containers are left, containerd and its shims stopped.
# Network namespaces of containers the kubelet did not tear down are collected in LEFT_NETNS for node_teardown.
LEFT_NETNS=()
node_leave() {
  node_phase delete-pods
  if cp_alive kube-apiserver && pid_alive kubelet; then
    kubectl_ delete pods --all-namespaces --field-selector "spec.nodeName=$THIS_NAME" --force --grace-period=0 \
      --wait=false >/dev/null 2>&1 || true
    for _ in $(seq 1 60); do
      ctr_ -n k8s.io tasks ls 2>/dev/null | grep -q RUNNING || break
      sleep 0.5
    done
  fi
  node_phase stop
  local name c ns_path pid sock_re
  for name in kube-router kube-proxy kubelet; do stop "$name"; done
  if ! pid_alive containerd && [[ -f "$NODE_DIR/config/containerd.toml" && -d "$NODE_DIR/containerd" ]] &&
     [[ -z "$START_NETNS" || -e "/run/netns/$START_NETNS" ]]; then
    # Stale state (processes gone): start the node's containerd once more so it can name and remove its containers.
    start containerd "$(command -v containerd)" --config "$NODE_DIR/config/containerd.toml"
    for _ in $(seq 1 40); do ctr_ version >/dev/null 2>&1 && break; sleep 0.5; done
  fi
  if pid_alive containerd; then
    for c in $(ctr_ -n k8s.io containers ls -q 2>/dev/null); do
      ns_path="$(ctr_ -n k8s.io containers info "$c" 2>/dev/null |
        sed -n '/"type": "network"/{n;s/.*"path": "\(.*\)".*/\1/p}' | head -1)"
      [[ -n "$ns_path" ]] && LEFT_NETNS+=("$ns_path")
      ctr_ -n k8s.io tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true
    done
    sleep 1
    for c in $(ctr_ -n k8s.io containers ls -q 2>/dev/null); do
      ctr_ -n k8s.io tasks delete -f "$c" >/dev/null 2>&1 || true
      ctr_ -n k8s.io containers delete "$c" >/dev/null 2>&1 || true
    done
  fi
  stop containerd
  # Shims of our containerd outlive it by design; they carry our socket path on their command line.
  sock_re="$(printf '%s' "$CONTAINERD_SOCK" | sed 's/[.[\*^$]/\\&/g')"
  for pid in $(pgrep -f -- "-address ${sock_re}( |$)" || true); do
    [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == */containerd-shim* ]] || continue
    kill -KILL "$pid" 2>/dev/null && log "killed leftover shim $pid"
  done
  # Any process still in an extra node's netns was started by us for it (a daemon whose PID file was lost).
  if [[ -n "$START_NETNS" ]] && ip netns list | grep -qw "$START_NETNS"; then
    for pid in $(ip netns pids "$START_NETNS" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  fi
}

# node_teardown: what node_leave's processes leave behind. Node 0's state directory is the cluster's (control
# plane beside it): down.sh deletes it; an extra node's is deleted here, with its Node object.
node_teardown() {
  node_phase mounts
  local n m d l mnts
  for n in "${LEFT_NETNS[@]}"; do
    [[ -e "$n" ]] || continue
    umount "$n" 2>/dev/null || umount -l "$n" 2>/dev/null || true
    rm -f "$n" && log "removed netns $n"
  done
  LEFT_NETNS=()
  # overlay rootfs, shm, volumes, ... under the node's directory, deepest first
  for _ in 1 2 3; do
    mapfile -t mnts < <(awk -v d="$NODE_DIR/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
    (( ${#mnts[@]} )) || break
    for m in "${mnts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  done
  node_phase network
  if (( NODE_IDX == 0 )); then _host_network_down; else _netns_network_down; fi
  node_phase cgroups
  while read -r d; do
    [[ -d "$d" ]] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done < <(node_cgroup_dirs)
  if [[ -d /var/log/containers ]]; then
    for l in /var/log/containers/*.log; do
      [[ -L "$l" && "$(readlink "$l")" == "$NODE_DIR/"* ]] && rm -f "$l"
    done
  fi
  (( NODE_IDX > 0 )) || return 0
  if cp_alive kube-apiserver; then
    kubectl_ delete node "$THIS_NAME" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  fi
  remove_state "$NODE_DIR"
}

# remove_state DIR: delete a node's (or the cluster's) state directory, never while anything is mounted below it.
remove_state() {
  if awk -v d="$1/" 'index($5, d) == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; then
    die "mounts remain under $1 (see /proc/self/mountinfo); not deleting it"
  fi
  rm -rf "$1"
}

# drop_chains IPTABLES TABLE CHAIN...: delete the jumps to each CHAIN, then the chain.
drop_chains() {
  local ipt="$1" table="$2" chain rule; shift 2
  for chain in "$@"; do
    "$ipt" -w -t "$table" -S "$chain" >/dev/null 2>&1 || continue
    while rule="$("$ipt" -w -t "$table" -S | grep -m1 -E "^-A [^ ]+ .*-j $chain( |$)")"; do
      eval "$ipt -w -t $table ${rule/#-A /-D }" || break
    done
    "$ipt" -w -t "$table" -F "$chain" && "$ipt" -w -t "$table" -X "$chain" || true
  done
}

# Node 0 shares the host's netfilter: kube-proxy's, kube-router's and the kubelet's chains and our own go by name
# (an extra node's go with its netns). Then the bridge, its leftover veths, the underlay once no extra node is
# left, and the sysctls.
_host_network_down() {
  local chain set ipt table rule v
  # kube-proxy knows its own chains
  if [[ -f "$NODE_DIR/config/kube-proxy.yaml" && -x "$K8S_BIN/kube-proxy" ]]; then
    "$K8S_BIN/kube-proxy" --cleanup >"$LOGS/kube-proxy-cleanup.log" 2>&1 || log "kube-proxy --cleanup failed (see $LOGS/kube-proxy-cleanup.log)"
  fi
  # kube-router's chains (its own --cleanup-config also resets the router and proxy parts, which we never ran) and
  # its ipsets; names from pkg/controllers/netpol of the pinned release.
  for chain in KUBE-ROUTER-INPUT KUBE-ROUTER-FORWARD KUBE-ROUTER-OUTPUT; do drop_chains iptables filter "$chain"; done
  for chain in $(iptables -w -S | sed -n 's/^-N \(KUBE-\(POD-FW\|NWPLCY\)-[A-Za-z0-9-]*\)$/\1/p'); do
    iptables -w -F "$chain" 2>/dev/null || true
  done
  for chain in $(iptables -w -S | sed -n 's/^-N \(KUBE-\(POD-FW\|NWPLCY\)-[A-Za-z0-9-]*\)$/\1/p'); do
    iptables -w -X "$chain" 2>/dev/null || true
  done
  if command -v ipset >/dev/null; then
    for set in $(ipset list -n 2>/dev/null | grep -E '^(KUBE-(SRC|DST)-|kube-router-)' || true); do
      ipset destroy "$set" 2>/dev/null || true
    done
  fi
  # the kubelet's own chains (KUBE-FIREWALL guards 127.0.0.0/8, canaries, hint), which --cleanup leaves
  if [[ -f "$NODE_DIR/config/kubelet.yaml" ]]; then
    for ipt in iptables ip6tables; do
      command -v "$ipt" >/dev/null || continue
      for table in filter nat mangle; do
        drop_chains "$ipt" "$table" KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT
      done
    done
  fi
  iptables -w -D FORWARD -j "$FW_CHAIN" 2>/dev/null || true
  iptables -w -F "$FW_CHAIN" 2>/dev/null && iptables -w -X "$FW_CHAIN" 2>/dev/null || true
  if [[ -f "$RUN/cni-hostport.ours" ]]; then
    for chain in PREROUTING OUTPUT; do
      while iptables -w -t nat -S "$chain" | grep -q 'CNI-HOSTPORT-DNAT'; do
        rule="$(iptables -w -t nat -S "$chain" | grep -m1 'CNI-HOSTPORT-DNAT' | sed 's/^-A /-D /')"
        eval "iptables -w -t nat $rule" || break
      done
    done
    while iptables -w -t nat -S POSTROUTING | grep -q 'CNI-HOSTPORT-MASQ'; do
      rule="$(iptables -w -t nat -S POSTROUTING | grep -m1 'CNI-HOSTPORT-MASQ' | sed 's/^-A /-D /')"
      eval "iptables -w -t nat $rule" || break
    done
    for chain in $(iptables -w -t nat -S | sed -n 's/^-N \(CNI-\(HOSTPORT\|DN\)-[A-Za-z0-9-]*\)$/\1/p'); do
      iptables -w -t nat -F "$chain" 2>/dev/null || true
    done
    for chain in $(iptables -w -t nat -S | sed -n 's/^-N \(CNI-\(HOSTPORT\|DN\)-[A-Za-z0-9-]*\)$/\1/p'); do
      iptables -w -t nat -X "$chain" 2>/dev/null || true
    done
  fi
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    for v in $(ip -o link show master "$BRIDGE" | awk -F': ' '{print $2}' | cut -d@ -f1); do ip link del "$v" 2>/dev/null || true; done
    [[ -f "$RUN/bridge.created" ]] && ip link del "$BRIDGE" && log "removed bridge $BRIDGE"
  fi
  if [[ -z "$(extra_nodes)" ]]; then
    iptables -w -D FORWARD -j "$NODES_FW_CHAIN" 2>/dev/null || true
    iptables -w -F "$NODES_FW_CHAIN" 2>/dev/null && iptables -w -X "$NODES_FW_CHAIN" 2>/dev/null || true
    ip link show "$UNDERLAY_BRIDGE" >/dev/null 2>&1 && ip link del "$UNDERLAY_BRIDGE" && log "removed bridge $UNDERLAY_BRIDGE"
  fi
  if [[ -f "$RUN/sysctl.saved" ]]; then
    while IFS= read -r kv; do sysctl -qw "$kv" || true; done <"$RUN/sysctl.saved"
  fi
  if [[ -f "$RUN/neigh.saved" ]]; then
    local -a saved
    read -r -a saved <"$RUN/neigh.saved" || true  # a file without its final newline still holds the values
    (set_neigh_gc_thresh "${saved[@]}") || true
  fi
}

# Node i: the routes to it (host and the other extra nodes), its veth and netns (its iptables rules and ipsets
# go with the netns).
_netns_network_down() {
  local j
  for j in $(extra_nodes); do
    [[ "$j" == "$NODE_IDX" ]] && continue
    ip -n "$(node_netns "$j")" route del "$THIS_POD_CIDR" 2>/dev/null || true
  done
  ip route del "$THIS_POD_CIDR" 2>/dev/null || true
  ip link del "akv$NODE_IDX" 2>/dev/null || true
  ip netns del "$START_NETNS" 2>/dev/null || true
}

# buildah_image NAME ARCHIVE ROOTFS_DIR ENTRYPOINT_JSON: a one-layer image from a host directory, no base image.
buildah_image() {
  local name="$1" out="$2" rootfs="$3" entry="$4" tmp c
  tmp="$(mktemp -d)"
  local b=(buildah --root "$tmp/root" --runroot "$tmp/runroot" --storage-driver vfs)
  c="$("${b[@]}" from scratch)"
  "${b[@]}" copy "$c" "$rootfs/" / >/dev/null
  "${b[@]}" config --entrypoint "$entry" --user 65534:65534 --workingdir / "$c"
  "${b[@]}" commit -q "$c" "$name" >/dev/null
  "${b[@]}" push -q "$name" "docker-archive:$out.tmp:$name"
  "${b[@]}" rm "$c" >/dev/null
  rm -rf "$tmp"; mv "$out.tmp" "$out"
}
