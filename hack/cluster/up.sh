#!/usr/bin/env bash
# Bring up (or re-check) the local Kubernetes: node 0 = containerd + runc + CNI bridge, etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy (iptables), kube-router (NetworkPolicy) and CoreDNS,
# all as host processes recorded by PID under $CLUSTER_DIR/run; with NODES=N also extra nodes 1..N-1 (node.sh),
# each in a network namespace of its own. Idempotent: running pieces are kept, missing ones started.
# Design and versions: hack/cluster/README.md.
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "$0")/lib.sh"
total_start=$(date +%s.%N)
cluster_lock

phase preflight
[[ $EUID -eq 0 ]] || die "cluster-up needs root (kubelet, containerd, bridge, iptables)"
[[ -x "$ETCD_BIN/etcd" ]] || die "$ETCD_BIN/etcd is missing: run 'make cluster-tools'"
for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
  [[ -x "$K8S_BIN/$b" ]] || die "$K8S_BIN/$b is missing: run 'make cluster-tools'"
done
[[ -x "$COREDNS_BIN/coredns" ]] || die "$COREDNS_BIN/coredns is missing: run 'make cluster-tools'"
for c in containerd containerd-shim-runc-v2 runc ctr ip iptables openssl buildah gcc; do
  command -v "$c" >/dev/null || die "$c not found: run 'make deps' (hack/apt-packages.txt)"
done
for p in bridge host-local loopback portmap; do
  [[ -x "/usr/lib/cni/$p" ]] || die "/usr/lib/cni/$p missing: run 'make deps' (containernetworking-plugins)"
done
[[ -d /sys/fs/cgroup/memory || -f /sys/fs/cgroup/cgroup.controllers ]] || die "no cgroup memory controller mounted"
# State left by a cluster whose processes are all gone (machine or session restarted, processes killed): its
# mounts, netns and chains are stale, so tear it down properly before starting fresh.
if [[ -d "$RUN" ]] && compgen -G "$RUN/*.pid" >/dev/null; then
  alive=0
  for pidf in "$RUN"/*.pid; do pid_alive "$(basename "$pidf" .pid)" && alive=1; done
  if (( alive == 0 )); then
    log "stale state in $CLUSTER_DIR (no recorded process alive): cleaning it with down.sh first"
    "$CLUSTER_HACK/down.sh"
  fi
fi
mkdir -p "$CLUSTER_DIR"
echo "$CLUSTER_DIR" >"$CLUSTER_DIR/.arkouda-k8s-cluster"   # marker: down.sh refuses to rm -rf anything else

# The control plane of the cluster, on node 0: after its network (the API server listens on the bridge address)
# and certificates, before its kubelet registers.
control_plane_up() {
  phase etcd
  start etcd "$ETCD_BIN/etcd" --name local --data-dir "$CLUSTER_DIR/etcd" \
    --listen-client-urls "https://127.0.0.1:2379" --advertise-client-urls "https://127.0.0.1:2379" \
    --listen-peer-urls "http://127.0.0.1:2380" --initial-advertise-peer-urls "http://127.0.0.1:2380" \
    --initial-cluster "local=http://127.0.0.1:2380" --listen-metrics-urls "http://127.0.0.1:2381" \
    --cert-file "$PKI/etcd.crt" --key-file "$PKI/etcd.key" --trusted-ca-file "$PKI/ca.crt" --client-cert-auth \
    --unsafe-no-fsync --log-level warn
  wait_for etcd 60 curl -fsS http://127.0.0.1:2381/health

  phase kube-apiserver
  start_apiserver

  phase controllers
  start kube-controller-manager "$K8S_BIN/kube-controller-manager" \
    --kubeconfig "$KCFG/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$KCFG/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$KCFG/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" --allocate-node-cidrs=false --profiling=false
  start kube-scheduler "$K8S_BIN/kube-scheduler" \
    --kubeconfig "$KCFG/scheduler.kubeconfig" \
    --authentication-kubeconfig "$KCFG/scheduler.kubeconfig" --authorization-kubeconfig "$KCFG/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --profiling=false
  # CoreDNS reads Services/EndpointSlices/Pods/Namespaces with its own certificate user, nothing more.
  kubectl_ apply -f "$CLUSTER_HACK/config/coredns-rbac.yaml" >/dev/null
}

# Node 0 (lib.sh node_up: network, certificates, containerd, its images, [control plane], kubelet, kube-proxy,
# kube-router), then CoreDNS, which only the kubelets' pods use.
node_up control_plane_up

phase coredns
write_file "$CLUSTER_DIR/config/Corefile" <<COREFILE
.:53 {
    bind ${NODE_IP}
    ready 127.0.0.1:18181
    health 127.0.0.1:18080
    errors
    cache 30
    kubernetes ${CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {
        kubeconfig ${KCFG}/coredns.kubeconfig arkouda-local
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
}
COREFILE
start coredns "$COREDNS_BIN/coredns" -conf "$CLUSTER_DIR/config/Corefile"
wait_for coredns 60 curl -fsS http://127.0.0.1:18181/ready

phase nodes
# Extra nodes 1..NODES-1 (node.sh), each in its own network namespace; nodes that exist are re-checked, nodes
# beyond NODES are left alone (remove one with `make cluster-node-remove NODE=i`).
nodes="${NODES:-1}"
[[ "$nodes" =~ ^[1-9][0-9]?$ ]] || die "NODES=$nodes is not a node count 1..99"
for (( i = 1; i < nodes; i++ )); do
  "$CLUSTER_HACK/node.sh" add "$i" --no-images
done
for i in $(extra_nodes); do
  (( i < nodes )) || log "extra node $(node_name "$i") exists beyond NODES=$nodes: kept (make cluster-node-remove NODE=$i)"
done

phase images
"$CLUSTER_HACK/load-images.sh"

phase multus
# Multus + the secondary network arkouda-net1 on every node (multus.sh, README), with CLUSTER_MULTUS=1 only (the
# e2e cluster sets it): every pod's CNI ADD/DEL then goes through Multus, which a plain node does not need
[[ "${CLUSTER_MULTUS:-0}" != 1 ]] || "$CLUSTER_HACK/multus.sh" up

phase kueue
# Kueue (kueue.sh, README) for global.scheduling.queueName, with CLUSTER_KUEUE=1 only (the e2e cluster sets it)
[[ "${CLUSTER_KUEUE:-0}" != 1 ]] || "$CLUSTER_HACK/kueue.sh" up

phase shared-storage
# ReadWriteMany volumes that are one filesystem for every node (global.sharedVolume; shared-storage.sh says why)
"$CLUSTER_HACK/shared-storage.sh" up

phase smoke
"$CLUSTER_HACK/smoke.sh"
phase_end
log "cluster up in $(awk -v a="$total_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')s; KUBECONFIG=$ADMIN_KUBECONFIG"
