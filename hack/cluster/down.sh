#!/usr/bin/env bash
# Tear down the local cluster: every extra node (node.sh remove), then node 0 with lib.sh's node lifecycle (the
# same steps as an extra node's: its pods, agents, containers, containerd, mounts, network, cgroups), the control
# plane in between, then $CLUSTER_DIR. Stops only the processes up.sh and node.sh recorded (by PID + binary).
# Safe to run when nothing (or only part) is up.
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "$0")/lib.sh"
[[ $EUID -eq 0 ]] || die "cluster-down needs root"
cluster_lock
start_s=$(date +%s)
if [[ ! -d "$CLUSTER_DIR" ]]; then log "nothing to do: $CLUSTER_DIR does not exist"; exit 0; fi
[[ "$(cat "$CLUSTER_DIR/.arkouda-k8s-cluster" 2>/dev/null)" == "$CLUSTER_DIR" ]] ||
  die "$CLUSTER_DIR has no marker of ours (.arkouda-k8s-cluster): refusing to delete it"

phase multus
# Multus' link in the CNI bin dir, its bridges, veths and chains (while the API and the nodes' netns exist)
"$CLUSTER_HACK/multus.sh" down || log "multus.sh down failed: continuing the teardown"

phase extra-nodes
for i in $(extra_nodes); do "$CLUSTER_HACK/node.sh" remove "$i"; done

# Node 0 leaves while the API server runs (its kubelet tears the pods down), then the control plane stops, then
# what is left of node 0 goes (its bridge carries the address the control plane listens on).
node_leave
phase stop-control-plane
for name in coredns kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$name"; done
node_teardown

phase state
remove_state "$CLUSTER_DIR"
phase_end
log "cluster down in $(( $(date +%s) - start_s ))s"
