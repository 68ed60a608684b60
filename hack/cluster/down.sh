#!/usr/bin/env bash
# Tear down the local node: stop only the processes up.sh recorded (by PID + binary), the containers of its own
# containerd, unmount what they mounted under $CLUSTER_DIR, remove the bridge, veths, netns, iptables chains and
# sysctls it set, then delete $CLUSTER_DIR. Safe to run when nothing (or only part) is up.
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
# 0. The extra nodes (node.sh), each with its pods, processes, netns, routes, cgroups and state.
for i in $(extra_nodes); do "$CLUSTER_HACK/node.sh" remove "$i"; done

phase delete-pods
# 1. Let the kubelet tear pods down properly (CNI DEL, netns removal) while everything still runs.
if pid_alive kube-apiserver && pid_alive kubelet; then
  kubectl_ delete pods --all --all-namespaces --force --grace-period=0 --wait=false >/dev/null 2>&1 || true
  for _ in $(seq 1 60); do
    ctr_ -n k8s.io tasks ls 2>/dev/null | grep -q RUNNING || break
    sleep 0.5
  done
fi
phase stop-components
for name in coredns kube-router kube-proxy kubelet kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$name"; done

phase containers
# 2. Whatever containers are left in our containerd: record their netns, kill and delete them.
netns=()
if ! pid_alive containerd && [[ -f "$CLUSTER_DIR/config/containerd.toml" && -d "$CLUSTER_DIR/containerd" ]]; then
  # Stale state (processes gone): start our containerd once more so it can name and remove its containers.
  start containerd "$(command -v containerd)" --config "$CLUSTER_DIR/config/containerd.toml"
  for _ in $(seq 1 40); do ctr_ version >/dev/null 2>&1 && break; sleep 0.5; done
fi
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
# Shims of our containerd outlive it by design; they carry our socket path on their command line.
sock_re="$(printf '%s' "$CONTAINERD_SOCK" | sed 's/[.[\*^$]/\\&/g')"
for pid in $(pgrep -f -- "-address ${sock_re}( |$)" || true); do
  [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == */containerd-shim* ]] || continue
  kill -KILL "$pid" 2>/dev/null && log "killed leftover shim $pid"
done

phase iptables
# 3. kube-proxy's iptables rules (it knows its own chains).
if [[ -f "$CLUSTER_DIR/config/kube-proxy.yaml" && -x "$K8S_BIN/kube-proxy" ]]; then
  "$K8S_BIN/kube-proxy" --cleanup >"$LOGS/kube-proxy-cleanup.log" 2>&1 || log "kube-proxy --cleanup failed (see $LOGS/kube-proxy-cleanup.log)"
fi

# The kubelet's own chains (KUBE-FIREWALL guards 127.0.0.0/8, canaries, hint), which --cleanup leaves.
drop_chains() {  # drop_chains IPTABLES TABLE CHAIN...: delete the jumps to each CHAIN, then the chain
  local ipt="$1" table="$2" chain rule; shift 2
  for chain in "$@"; do
    "$ipt" -w -t "$table" -S "$chain" >/dev/null 2>&1 || continue
    while rule="$("$ipt" -w -t "$table" -S | grep -m1 -E "^-A [^ ]+ .*-j $chain( |$)")"; do
      eval "$ipt -w -t $table ${rule/#-A /-D }" || break
    done
    "$ipt" -w -t "$table" -F "$chain" && "$ipt" -w -t "$table" -X "$chain" || true
  done
}
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
if [[ -f "$CLUSTER_DIR/config/kubelet.yaml" ]]; then
  for ipt in iptables ip6tables; do
    command -v "$ipt" >/dev/null || continue
    for table in filter nat mangle; do
      drop_chains "$ipt" "$table" KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT
    done
  done
fi

phase netns-mounts
# 4. Network namespaces of pods the kubelet did not get to tear down.
for n in "${netns[@]}"; do
  [[ -e "$n" ]] || continue
  umount "$n" 2>/dev/null || umount -l "$n" 2>/dev/null || true
  rm -f "$n" && log "removed netns $n"
done

# 5. Mounts under our directory (overlay rootfs, shm, volumes, ...), deepest first.
for _ in 1 2 3; do
  mapfile -t mnts < <(awk -v d="$CLUSTER_DIR/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
  (( ${#mnts[@]} )) || break
  for m in "${mnts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
done

phase network
# 6. Our iptables chains, the bridge and its leftover veths, sysctls.
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
# The extra nodes' underlay bridge and FORWARD chain (node.sh), once no extra node is left.
if [[ -z "$(extra_nodes)" ]]; then
  iptables -w -D FORWARD -j "$NODES_FW_CHAIN" 2>/dev/null || true
  iptables -w -F "$NODES_FW_CHAIN" 2>/dev/null && iptables -w -X "$NODES_FW_CHAIN" 2>/dev/null || true
  ip link show "$UNDERLAY_BRIDGE" >/dev/null 2>&1 && ip link del "$UNDERLAY_BRIDGE" && log "removed bridge $UNDERLAY_BRIDGE"
fi
if [[ -f "$RUN/sysctl.saved" ]]; then
  while IFS= read -r kv; do sysctl -qw "$kv" || true; done <"$RUN/sysctl.saved"
fi

phase cgroups
# 7. Pod cgroups the kubelet created (cgroupfs driver: /kubepods in every hierarchy), container log symlinks.
for root in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods /sys/fs/cgroup/unified/kubepods; do
  [[ -d "$root" ]] || continue
  find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null || true
done
if [[ -d /var/log/containers ]]; then
  for l in /var/log/containers/*.log; do
    [[ -L "$l" && "$(readlink "$l")" == "$CLUSTER_DIR/"* ]] && rm -f "$l"
  done
fi

phase state
# 8. State.
if awk -v d="$CLUSTER_DIR/" 'index($5, d) == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; then
  die "mounts remain under $CLUSTER_DIR (see /proc/self/mountinfo); not deleting it"
fi
rm -rf "$CLUSTER_DIR"
phase_end
log "cluster down in $(( $(date +%s) - start_s ))s"
