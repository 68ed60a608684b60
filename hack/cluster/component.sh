#!/usr/bin/env bash
# Stop or start one component of the running local cluster, for the disruption tests (an API server outage, a
# kubelet away), the way up.sh and node.sh start it (lib.sh start_apiserver, start_kubelet: same flags, same PID
# files and logs), so cluster-up/down and node.sh keep managing it afterwards:
#   component.sh stop kube-apiserver     SIGTERM (SIGKILL after 15 s): clients get "connection refused" meanwhile
#   component.sh start kube-apiserver    started again, until /readyz answers
#   component.sh stop kubelet NODE       that node's kubelet only: its containers keep running, its lease goes stale
#   component.sh start kubelet NODE      started again, until its Node is Ready
# NODE is arkouda-node (node 0) or arkouda-node-<i> (an extra node of node.sh). Nothing else is touched: etcd, the
# controllers, the scheduler and every other node go on (the controller-manager marks the nodes NotReady once their
# leases are older than its grace period, as in a real control-plane outage).
unset CLUSTER_NODE   # node_ctx below selects the node
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

usage() { die "usage: component.sh stop|start kube-apiserver | stop|start kubelet arkouda-node[-<i>]"; }
action="${1:-}" what="${2:-}" node="${3:-}"
[[ "$action" =~ ^(stop|start)$ ]] || usage
[[ $EUID -eq 0 ]] || die "component.sh needs root (it signals and starts cluster processes)"
cluster_lock
case "$what" in
  kube-apiserver)
    [[ -z "$node" ]] || usage
    node_ctx 0
    if [[ "$action" == stop ]]; then
      RUN="$CP_RUN" stop kube-apiserver
    else
      start_apiserver
      log "kube-apiserver answers /readyz"
    fi ;;
  kubelet)
    if [[ "$node" == "$NODE_NAME" ]]; then node_ctx 0
    elif [[ "$node" =~ ^arkouda-node-([1-9][0-9]?)$ ]]; then node_ctx "${BASH_REMATCH[1]}"
    else usage
    fi
    [[ -d "$NODE_DIR" ]] || die "node $node does not exist"
    if [[ "$action" == stop ]]; then stop kubelet; exit 0; fi
    cp_alive kube-apiserver || die "the API server is not running (component.sh start kube-apiserver)"
    start_kubelet
    log "node $THIS_NAME Ready" ;;
  *) usage ;;
esac
