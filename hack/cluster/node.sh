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
# Needs node 0's control plane (up.sh). The steps are lib.sh's node lifecycle, the same as node 0's; layout and
# reasons: hack/cluster/README.md.
# NODE_TAINTS="key=value:Effect,..." registers the node with those taints (e.g. while it is being tried out).
unset CLUSTER_NODE   # node_ctx below selects the node
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

usage() { die "usage: node.sh add I [--no-images] | remove I | kill I | restore I | list   (I = 1..99)"; }
action="${1:-}"
if [[ "$action" == list ]]; then extra_nodes; exit 0; fi
idx="${2:-}"
[[ "$action" =~ ^(add|remove|kill|restore)$ ]] || usage
[[ "$idx" =~ ^[1-9][0-9]?$ ]] || usage
[[ $EUID -eq 0 ]] || die "node.sh needs root (netns, veth, routes, kubelet)"
cluster_lock
node_ctx "$idx"

# node_kill: as a power loss would leave it, for the node-loss tests. State, netns and routes stay (restore).
node_kill() {
  [[ -d "$NODE_DIR" ]] || die "node $THIS_NAME does not exist"
  local t0=$SECONDS pids pid name d sock_re
  ip link set "akv$idx" down 2>/dev/null || true
  for name in kubelet kube-proxy kube-router containerd; do
    pid_alive "$name" && { read -r pid _ <"$RUN/$name.pid"; kill -KILL "$pid" 2>/dev/null || true; }
  done
  sock_re="$(printf '%s' "$CONTAINERD_SOCK" | sed 's/[.[\*^$]/\\&/g')"
  for _ in $(seq 1 40); do
    pids="$(pgrep -f -- "-address ${sock_re}( |$)" || true)"
    # every container process of the node sits below its cgroup root; anything in its netns is its daemon
    while read -r d; do
      [[ -d "$d" ]] && pids+=" $(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null | tr '\n' ' ')"
    done < <(node_cgroup_dirs)
    pids+=" $(ip netns pids "$START_NETNS" 2>/dev/null | tr '\n' ' ')"
    for name in kubelet kube-proxy kube-router containerd; do pid_alive "$name" && pids+=" $(cut -d' ' -f1 "$RUN/$name.pid")"; done
    [[ -z "${pids// /}" ]] && break
    for pid in $pids; do kill -KILL "$pid" 2>/dev/null || true; done
    sleep 0.5
  done
  [[ -z "${pids// /}" ]] || die "node $THIS_NAME: processes still alive after SIGKILL: $pids"
  log "node $THIS_NAME killed in $((SECONDS - t0))s (link akv$idx down, every process of the node gone)"
}

case "$action" in
  add)
    node_up
    if [[ "${3:-}" != --no-images ]]; then
      phase "node-$idx images"
      CLUSTER_NODE="$idx" "$CLUSTER_HACK/load-images.sh"
      phase_end
    fi ;;
  remove)
    if [[ ! -d "$NODE_DIR" ]] && ! ip netns list | grep -qw "$START_NETNS"; then
      log "node $THIS_NAME: nothing to remove"; exit 0
    fi
    t0=$SECONDS
    node_leave
    node_teardown
    phase_end
    log "node $THIS_NAME removed in $((SECONDS - t0))s" ;;
  kill) node_kill ;;
  restore)
    [[ -d "$NODE_DIR" ]] || die "node $THIS_NAME does not exist (node.sh add $idx)"
    ip link set "akv$idx" up 2>/dev/null || true
    node_up ;;
esac
