#!/usr/bin/env bash
# Add or remove an extra node of the local cluster, without touching node 0 or its pods:
#   node.sh add I [--no-images]   node arkouda-node-I in network namespace akk8s-node-I: containerd, kubelet
#                                 (cgroup root /arkouda-node-I), kube-proxy and kube-router (firewall only), pod
#                                 CIDR 10.245.I.0/24 on its own bridge, routed to every other node over the underlay
#   node.sh remove I              its pods, processes, mounts, cgroups, netns, veth, routes, Node object, state
#   node.sh kill I                a power loss: the node's link cut (no answer, no RST), then SIGKILL to its
#                                 kubelet, kube-proxy, kube-router, containerd, shims and every container process
#   node.sh restore I             link up and every daemon started again (its state is kept); waits for Ready
#   node.sh list                  the indexes of the extra nodes that have state
# Needs node 0's control plane (up.sh). Layout and reasons: hack/cluster/README.md.
# NODE_TAINTS="key=value:Effect,..." registers the node with those taints (e.g. while it is being tried out).
unset CLUSTER_NODE   # set below, after node 0's paths are known
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=hack/cluster/pki.sh
. "$CLUSTER_HACK/pki.sh"

usage() { die "usage: node.sh add I [--no-images] | remove I | kill I | restore I | list   (I = 1..99)"; }
action="${1:-}"
if [[ "$action" == list ]]; then extra_nodes; exit 0; fi
idx="${2:-}"
[[ "$action" =~ ^(add|remove|kill|restore)$ ]] || usage
[[ "$idx" =~ ^[1-9][0-9]?$ ]] || usage
[[ $EUID -eq 0 ]] || die "node.sh needs root (netns, veth, routes, kubelet)"
cluster_lock

# Node 0's paths, before CLUSTER_NODE re-points RUN/LOGS/CONTAINERD_SOCK at this node.
RUN0="$RUN"
export CLUSTER_NODE="$idx"
# shellcheck source=hack/cluster/lib.sh
. "$CLUSTER_HACK/lib.sh"
NAME="$(node_name "$idx")"
NETNS="$(node_netns "$idx")"
NIP="$(node_ip "$idx")"
PCIDR="$(node_pod_cidr "$idx")"
PGW="$(node_pod_gw "$idx")"
VETH="akv$idx"                 # host side of the node's underlay link (inside: eth0)
PBRIDGE="$BRIDGE"             # the node's pod bridge, inside its netns: the same name as node 0's on the host
CGROUP_ROOT="/arkouda-node-$idx"
in_ns() { nsenter "--net=/run/netns/$NETNS" -- "$@"; }

# cgroup_dirs: this node's cgroup root in every mounted hierarchy (cgroup v1 controllers + the unified one).
cgroup_dirs() {
  local d
  for d in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
    [[ -f "$d/cgroup.procs" ]] || continue
    printf '%s\n' "${d%/}$CGROUP_ROOT"
  done
}

# The host side: the underlay bridge and the FORWARD rules for the extra nodes' traffic. Created once and
# shared by all extra nodes; node 0's own rules (ARKOUDA-K8S-FWD) are not changed, ours are put before them.
ensure_underlay() {
  if ! ip link show "$UNDERLAY_BRIDGE" >/dev/null 2>&1; then
    ip link add "$UNDERLAY_BRIDGE" type bridge
  fi
  ip addr show dev "$UNDERLAY_BRIDGE" | grep -q "inet ${UNDERLAY_HOST_IP}/" ||
    ip addr add "${UNDERLAY_HOST_IP}/${UNDERLAY_CIDR#*/}" dev "$UNDERLAY_BRIDGE"
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

# routes_to_peers: this node <-> every other extra node directly over the underlay (not through the host).
routes_to_peers() {
  local j
  for j in $(extra_nodes); do
    [[ "$j" == "$idx" ]] && continue
    ip netns list | grep -qw "$(node_netns "$j")" || continue
    ip -n "$NETNS" route replace "$(node_pod_cidr "$j")" via "$(node_ip "$j")" dev eth0
    ip -n "$(node_netns "$j")" route replace "$PCIDR" via "$NIP" dev eth0
  done
}

node_add() {
  local t0 no_images="${1:-}"
  t0=$(date +%s.%N)
  phase "node-$idx preflight"
  [[ -x "$KUBE_ROUTER_BIN/kube-router" ]] || die "$KUBE_ROUTER_BIN/kube-router is missing: run 'make cluster-tools'"
  command -v ipset >/dev/null || die "ipset not found (kube-router needs it): run 'make deps'"
  RUN="$RUN0" pid_alive kube-apiserver || die "node 0's API server is not running: run 'make cluster-up' first"
  mkdir -p "$RUN" "$LOGS" "$NODE_DIR/cni/net.d" "$NODE_DIR/cni/networks" "$NODE_DIR/config" "$NODE_DIR/kubelet" \
    "$NODE_DIR/pod-logs"

  phase "node-$idx network"
  ensure_underlay
  ip netns list | grep -qw "$NETNS" || ip netns add "$NETNS"
  if ! ip link show "$VETH" >/dev/null 2>&1; then
    ip link add "$VETH" type veth peer name "$VETH-n"
    ip link set "$VETH-n" netns "$NETNS"
    ip -n "$NETNS" link set "$VETH-n" name eth0
  fi
  ip link set "$VETH" master "$UNDERLAY_BRIDGE" up
  ip -n "$NETNS" link set lo up
  ip -n "$NETNS" addr show dev eth0 | grep -q "inet ${NIP}/" || ip -n "$NETNS" addr add "${NIP}/${UNDERLAY_CIDR#*/}" dev eth0
  ip -n "$NETNS" link set eth0 up
  ip -n "$NETNS" route replace default via "$UNDERLAY_HOST_IP" dev eth0
  # The pod bridge exists before the first pod, so the routes to it work at once (CNI reuses it).
  ip -n "$NETNS" link show "$PBRIDGE" >/dev/null 2>&1 || ip -n "$NETNS" link add "$PBRIDGE" type bridge
  ip -n "$NETNS" addr show dev "$PBRIDGE" | grep -q "inet ${PGW}/" || ip -n "$NETNS" addr add "${PGW}/24" dev "$PBRIDGE"
  ip -n "$NETNS" link set "$PBRIDGE" up
  ip route replace "$PCIDR" via "$NIP" dev "$UNDERLAY_BRIDGE"
  routes_to_peers
  # forwarding and bridge netfilter are per network namespace (kube-proxy, kube-router need both)
  in_ns sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
  write_file "$NODE_DIR/cni/net.d/10-arkouda.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "arkouda-local",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "${PBRIDGE}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "${NODE_DIR}/cni/networks",
        "ranges": [[{"subnet": "${PCIDR}", "gateway": "${PGW}"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON

  phase "node-$idx pki"
  make_pki
  make_node_pki "$NAME" "$NIP"
  kubectl_ apply -f "$CLUSTER_HACK/config/kube-router-rbac.yaml" >/dev/null

  phase "node-$idx containerd"
  containerd_toml "$NODE_DIR/containerd" "$CONTAINERD_SOCK" "$NODE_DIR/cni/net.d" "$NODE_DIR/runc" |
    write_file "$NODE_DIR/config/containerd.toml"
  start containerd "$(command -v containerd)" --config "$NODE_DIR/config/containerd.toml"
  wait_for "containerd of $NAME" 30 ctr_ version
  CLUSTER_NODE="$idx" "$CLUSTER_HACK/load-images.sh" --node-images

  phase "node-$idx kubelet"
  local d
  while read -r d; do
    mkdir -p "$d"
    # a new cpuset cgroup starts empty: give it the parent's CPUs and memory nodes, or no task may join it
    if [[ -f "$d/cpuset.cpus" && -z "$(cat "$d/cpuset.cpus")" ]]; then
      cat "$(dirname "$d")/cpuset.cpus" >"$d/cpuset.cpus"
      cat "$(dirname "$d")/cpuset.mems" >"$d/cpuset.mems"
    fi
  done < <(cgroup_dirs)
  local taints_yaml="" t
  if [[ -n "${NODE_TAINTS:-}" ]]; then
    taints_yaml="registerWithTaints:"
    IFS=',' read -ra ts <<<"$NODE_TAINTS"
    for t in "${ts[@]}"; do
      [[ "$t" =~ ^([^=]+)=([^:]*):(NoSchedule|PreferNoSchedule|NoExecute)$ ]] || die "bad taint '$t' in NODE_TAINTS (key=value:Effect)"
      taints_yaml+=$'\n'"  - {key: ${BASH_REMATCH[1]}, value: \"${BASH_REMATCH[2]}\", effect: ${BASH_REMATCH[3]}}"
    done
  fi
  kubelet_yaml "$NIP" "$PKI/kubelet-$NAME.crt" "$PKI/kubelet-$NAME.key" "$NODE_DIR" "$CGROUP_ROOT" "$taints_yaml" \
    | write_file "$NODE_DIR/config/kubelet.yaml"
  start kubelet "$K8S_BIN/kubelet" --config "$NODE_DIR/config/kubelet.yaml" \
    --kubeconfig "$KCFG/kubelet-$NAME.kubeconfig" --root-dir "$NODE_DIR/kubelet" \
    --cert-dir "$NODE_DIR/kubelet/pki" --hostname-override "$NAME" --node-ip "$NIP" \
    --node-labels "topology.kubernetes.io/zone=zone-$idx"
  wait_for "node $NAME Ready" 180 bash -c \
    "$(declare -f kubectl_); K8S_BIN='$K8S_BIN' ADMIN_KUBECONFIG='$ADMIN_KUBECONFIG';
     kubectl_ get node '$NAME' -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"

  phase "node-$idx kube-proxy"
  write_file "$NODE_DIR/config/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: ${KCFG}/kube-proxy.kubeconfig}
hostnameOverride: ${NAME}
mode: iptables
clusterCIDR: ${ALL_POD_CIDRS}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["${NIP}/32"]
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML
  start kube-proxy "$K8S_BIN/kube-proxy" --config "$NODE_DIR/config/kube-proxy.yaml"
  wait_for "kube-proxy of $NAME" 60 in_ns curl -fsS http://127.0.0.1:10256/healthz

  phase "node-$idx kube-router"
  start_kube_router "$NAME"
  wait_for "kube-router of $NAME" 60 in_ns curl -fsS "http://127.0.0.1:${KUBE_ROUTER_HEALTH_PORT}/healthz"

  if [[ "$no_images" != --no-images ]]; then
    phase "node-$idx images"
    CLUSTER_NODE="$idx" "$CLUSTER_HACK/load-images.sh"
  fi
  phase_end
  log "node $NAME up in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s (netns $NETNS, node IP $NIP, pods $PCIDR)"
}

node_remove() {
  local t0=$SECONDS
  [[ -d "$NODE_DIR" ]] || ip netns list | grep -qw "$NETNS" || { log "node $NAME: nothing to remove"; return 0; }
  phase "node-$idx delete-pods"
  # The kubelet tears its pods down properly (CNI DEL, netns) while it still runs.
  if RUN="$RUN0" pid_alive kube-apiserver && pid_alive kubelet; then
    kubectl_ delete pods --all-namespaces --field-selector "spec.nodeName=$NAME" --force --grace-period=0 \
      --wait=false >/dev/null 2>&1 || true
    for _ in $(seq 1 60); do
      ctr_ -n k8s.io tasks ls 2>/dev/null | grep -q RUNNING || break
      sleep 0.5
    done
  fi
  phase "node-$idx stop"
  for name in kube-router kube-proxy kubelet; do stop "$name"; done
  local netns=() c ns_path
  if pid_alive containerd; then
    for c in $(ctr_ -n k8s.io containers ls -q 2>/dev/null); do
      ns_path="$(ctr_ -n k8s.io containers info "$c" 2>/dev/null |
        sed -n '/"type": "network"/{n;s/.*"path": "\(.*\)".*/\1/p}' | head -1)"
      [[ -n "$ns_path" ]] && netns+=("$ns_path")
      ctr_ -n k8s.io tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true
    done
    sleep 1
    for c in $(ctr_ -n k8s.io containers ls -q 2>/dev/null); do
      ctr_ -n k8s.io tasks delete -f "$c" >/dev/null 2>&1 || true
      ctr_ -n k8s.io containers delete "$c" >/dev/null 2>&1 || true
    done
  fi
  stop containerd
  local sock_re pid
  sock_re="$(printf '%s' "$CONTAINERD_SOCK" | sed 's/[.[\*^$]/\\&/g')"
  for pid in $(pgrep -f -- "-address ${sock_re}( |$)" || true); do
    [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == */containerd-shim* ]] || continue
    kill -KILL "$pid" 2>/dev/null && log "killed leftover shim $pid"
  done
  # Any process still in the node's netns was started by us for it (a daemon whose PID file was lost).
  if ip netns list | grep -qw "$NETNS"; then
    for pid in $(ip netns pids "$NETNS" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  fi

  phase "node-$idx mounts"
  for n in "${netns[@]}"; do
    [[ -e "$n" ]] || continue
    umount "$n" 2>/dev/null || umount -l "$n" 2>/dev/null || true
    rm -f "$n"
  done
  local mnts m
  for _ in 1 2 3; do
    mapfile -t mnts < <(awk -v d="$NODE_DIR/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
    (( ${#mnts[@]} )) || break
    for m in "${mnts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  done

  phase "node-$idx network"
  local j
  for j in $(extra_nodes); do
    [[ "$j" == "$idx" ]] && continue
    ip -n "$(node_netns "$j")" route del "$PCIDR" 2>/dev/null || true
  done
  ip route del "$PCIDR" 2>/dev/null || true
  ip link del "$VETH" 2>/dev/null || true
  ip netns del "$NETNS" 2>/dev/null || true

  phase "node-$idx cgroups"
  local d
  while read -r d; do
    [[ -d "$d" ]] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done < <(cgroup_dirs)
  if [[ -d /var/log/containers ]]; then
    for l in /var/log/containers/*.log; do
      [[ -L "$l" && "$(readlink "$l")" == "$NODE_DIR/"* ]] && rm -f "$l"
    done
  fi
  if RUN="$RUN0" pid_alive kube-apiserver; then
    kubectl_ delete node "$NAME" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  fi
  if awk -v d="$NODE_DIR/" 'index($5, d) == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; then
    die "mounts remain under $NODE_DIR (see /proc/self/mountinfo); not deleting it"
  fi
  rm -rf "$NODE_DIR"
  phase_end
  log "node $NAME removed in $((SECONDS - t0))s"
}

# node_kill: as a power loss would leave it, for the node-loss tests. State, netns and routes stay (restore).
node_kill() {
  [[ -d "$NODE_DIR" ]] || die "node $NAME does not exist"
  local t0=$SECONDS pids pid name d
  ip link set "$VETH" down 2>/dev/null || true
  for name in kubelet kube-proxy kube-router containerd; do
    pid_alive "$name" && { read -r pid _ <"$RUN/$name.pid"; kill -KILL "$pid" 2>/dev/null || true; }
  done
  local sock_re
  sock_re="$(printf '%s' "$CONTAINERD_SOCK" | sed 's/[.[\*^$]/\\&/g')"
  for _ in $(seq 1 40); do
    pids="$(pgrep -f -- "-address ${sock_re}( |$)" || true)"
    # every container process of the node sits below its cgroup root; anything in its netns is its daemon
    while read -r d; do
      [[ -d "$d" ]] && pids+=" $(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null | tr '\n' ' ')"
    done < <(cgroup_dirs)
    pids+=" $(ip netns pids "$NETNS" 2>/dev/null | tr '\n' ' ')"
    for name in kubelet kube-proxy kube-router containerd; do pid_alive "$name" && pids+=" $(cut -d' ' -f1 "$RUN/$name.pid")"; done
    [[ -z "${pids// /}" ]] && break
    for pid in $pids; do kill -KILL "$pid" 2>/dev/null || true; done
    sleep 0.5
  done
  [[ -z "${pids// /}" ]] || die "node $NAME: processes still alive after SIGKILL: $pids"
  log "node $NAME killed in $((SECONDS - t0))s (link $VETH down, every process of the node gone)"
}

case "$action" in
  add) node_add "${3:-}" ;;
  remove) node_remove ;;
  kill) node_kill ;;
  restore)
    [[ -d "$NODE_DIR" ]] || die "node $NAME does not exist (node.sh add $idx)"
    ip link set "$VETH" up 2>/dev/null || true
    node_add --no-images ;;
esac
