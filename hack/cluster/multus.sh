#!/usr/bin/env bash
# Multus (thin plugin, a host binary) and a second bridge network on the local cluster, for the chart's
# global.network.attachment (docs/interfaces.md, "Secondary network").
#
#   hack/cluster/multus.sh up      # build (cached), install, and check with a throw-away pod
#   hack/cluster/multus.sh down    # remove every piece again (also safe when nothing is installed)
#   hack/cluster/multus.sh status  # what is installed
#
# What `up` does (hack/cluster/README.md, "Secondary network"):
# - builds cmd/multus of gopkg.in/k8snetworkplumbingwg/multus-cni.v4@$MULTUS_VERSION from hack/cluster/tools/multus
#   into $CACHE_DIR/multus-$MULTUS_VERSION/ and links it into the CNI bin dir of every node's containerd;
# - applies the NetworkAttachmentDefinition CRD (read from the module's own deployments/multus-daemonset.yml), a
#   ServiceAccount kube-system/multus with the quickstart's ClusterRole (pods get/update: it writes the
#   network-status annotation), and writes a kubeconfig with a token of it for the plugin;
# - per node: bridge akk8s1 (no address: pods talk on it at L2; forwarded frames only bridge to bridge, chain
#   ARKOUDA-K8S-NET1) and the network `arkouda-net1` (bridge akk8s1, host-local IPAM in 10.250.0.0/16, node i's
#   addresses from 10.250.i.0/24 so nodes never hand out the same one) as a file in Multus' confDir; a
#   NetworkAttachmentDefinition named arkouda-net1 without spec.config selects that file on whichever node the
#   pod lands. The akk8s1 of every extra node (in its netns) is a port of node 0's akk8s1 on the host through a
#   veth (host side akm<i>): one L2 segment across the nodes, like a second NIC on its own switch;
# - puts 00-multus.conf first in every node's CNI conf dir: containerd then calls Multus for every pod; Multus
#   runs the existing bridge conflist as the default network (eth0, pod IP unchanged) and the pod's requested
#   attachments as net1, net2, ...
# The nodes: node 0 on the host and the extra nodes of node.sh (netns akk8s-node-<i>); run `up` again after
# adding a node (up.sh does, after its nodes).
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

MULTUS_DIR="$CLUSTER_DIR/multus"
MULTUS_BIN_DIR="$CACHE_DIR/multus-${MULTUS_VERSION:?MULTUS_VERSION missing in hack/versions.env}"
MULTUS_TOOLS="$CLUSTER_HACK/tools/multus"
NET1_BRIDGE="akk8s1"
NET1_NAME="arkouda-net1"
NET1_SUBNET="10.250.0.0/16"
NET1_CHAIN="ARKOUDA-K8S-NET1"

# nodes: one line per node, "<index> <netns or -> <containerd.toml>"
nodes() {
  local i
  echo "0 - $CLUSTER_DIR/config/containerd.toml"
  for i in $(extra_nodes); do
    ip netns list | grep -qw "$(node_netns "$i")" || continue   # removed (or never finished)
    echo "$i $(node_netns "$i") $NODES_DIR/$i/config/containerd.toml"
  done
}

# in_node NETNS CMD...: run CMD in the node's network namespace ("-": the host's)
in_node() {
  local ns="$1"; shift
  if [[ "$ns" == - ]]; then "$@"; else ip netns exec "$ns" "$@"; fi
}

toml_value() {  # toml_value FILE KEY: the first `KEY = "value"` of the file
  sed -n "s/^[[:space:]]*$2[[:space:]]*=[[:space:]]*\"\(.*\)\"[[:space:]]*$/\1/p" "$1" | head -1
}

build() {
  grep -qE "^\s*gopkg\.in/k8snetworkplumbingwg/multus-cni\.v4 ${MULTUS_VERSION}( |$)" "$MULTUS_TOOLS/go.mod" ||
    die "hack/cluster/tools/multus/go.mod does not require multus-cni.v4 ${MULTUS_VERSION} (MULTUS_VERSION in hack/versions.env): cd hack/cluster/tools/multus && go get gopkg.in/k8snetworkplumbingwg/multus-cni.v4@${MULTUS_VERSION} && go mod tidy"
  if [[ -x "$MULTUS_BIN_DIR/multus" ]]; then return 0; fi
  command -v go >/dev/null || die "no 'go' on PATH: Multus is built from the Go module proxy"
  log "building multus ${MULTUS_VERSION} (thin plugin) into $MULTUS_BIN_DIR"
  rm -rf "$MULTUS_BIN_DIR.tmp" && mkdir -p "$MULTUS_BIN_DIR.tmp"
  (cd "$MULTUS_TOOLS" && CGO_ENABLED=0 go build -p 2 -mod=readonly -trimpath -ldflags "-s -w" \
    -o "$MULTUS_BIN_DIR.tmp/" gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus)
  rm -rf "$MULTUS_BIN_DIR" && mv "$MULTUS_BIN_DIR.tmp" "$MULTUS_BIN_DIR"
}

crd() {  # the NetworkAttachmentDefinition CRD: the first document of the module's quickstart manifest
  local dir
  dir="$(cd "$MULTUS_TOOLS" && go list -m -f '{{.Dir}}' gopkg.in/k8snetworkplumbingwg/multus-cni.v4)"
  awk 'BEGIN { n = 0 } /^---/ { n++; next } n == 1' "$dir/deployments/multus-daemonset.yml" |
    grep -q 'name: network-attachment-definitions.k8s.cni.cncf.io' ||
    die "no NetworkAttachmentDefinition CRD as the first document of $dir/deployments/multus-daemonset.yml"
  awk 'BEGIN { n = 0 } /^---/ { n++; next } n == 1' "$dir/deployments/multus-daemonset.yml"
}

kube_objects() {
  crd | kubectl_ apply -f - >/dev/null
  kubectl_ apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: ServiceAccount
metadata: {name: multus, namespace: kube-system}
---
# The rules of Multus' own quickstart (deployments/multus-daemonset.yml): read the attachments, write the pods'
# network-status annotation, record Events.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: multus}
rules:
  - apiGroups: [k8s.cni.cncf.io]
    resources: ["*"]
    verbs: ["*"]
  - apiGroups: [""]
    resources: [pods, pods/status]
    verbs: [get, update]
  - apiGroups: ["", events.k8s.io]
    resources: [events]
    verbs: [create, patch, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: multus}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: multus}
subjects: [{kind: ServiceAccount, name: multus, namespace: kube-system}]
YAML
  kubectl_ wait --for condition=established --timeout=30s crd/network-attachment-definitions.k8s.cni.cncf.io >/dev/null
  local server token
  server="$(kubectl_ config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
  # a bound token of the ServiceAccount; the test bed lives for hours, cluster-down deletes it all
  token="$(kubectl_ -n kube-system create token multus --duration=168h)"
  umask 077
  cat >"$MULTUS_DIR/multus.kubeconfig.tmp" <<KCFG
apiVersion: v1
kind: Config
clusters:
  - name: local
    cluster: {server: "$server", certificate-authority: "$PKI/ca.crt"}
users:
  - name: multus
    user: {token: "$token"}
contexts:
  - name: multus
    context: {cluster: local, user: multus}
current-context: multus
KCFG
  mv "$MULTUS_DIR/multus.kubeconfig.tmp" "$MULTUS_DIR/multus.kubeconfig"
}

# The rules of ARKOUDA-K8S-NET1, as `iptables -S` prints them: bridged frames between ports of akk8s1 pass (with
# br_netfilter they traverse FORWARD with -i/-o = the bridge); anything else of 10.250.0.0/16 is not forwarded.
net1_rules() {
  printf -- '-N %s\n' "$NET1_CHAIN"
  printf -- '-A %s -i %s -o %s -j ACCEPT\n' "$NET1_CHAIN" "$NET1_BRIDGE" "$NET1_BRIDGE"
  printf -- '-A %s -s %s -j DROP\n' "$NET1_CHAIN" "$NET1_SUBNET"
  printf -- '-A %s -d %s -j DROP\n' "$NET1_CHAIN" "$NET1_SUBNET"
}

# ensure_chain INDEX NETNS: the chain with exactly net1_rules and FORWARD's jump to it, written in ONE
# iptables-restore transaction. Not rule by rule: kube-router (every node) syncs by iptables-save of the whole
# filter table, editing, and iptables-restore without --noflush, up to several times a second while pods come and
# go; rules added by anyone between its save and its restore are reverted. One rule at a time, that can leave the
# chain with its DROPs but not the ACCEPT before them, and arkouda-net1 cut at that node. A transaction is kept or
# reverted as a whole (reverted: no chain, nothing dropped); `up` checks again after its pods ran.
ensure_chain() {
  local n="$1" ns="$2" jump=""
  if [[ "$(in_node "$ns" iptables -w -S "$NET1_CHAIN" 2>/dev/null)" == "$(net1_rules)" ]] &&
    in_node "$ns" iptables -w -C FORWARD -j "$NET1_CHAIN" 2>/dev/null; then
    return 0
  fi
  in_node "$ns" iptables -w -C FORWARD -j "$NET1_CHAIN" 2>/dev/null || jump="-I FORWARD 1 -j $NET1_CHAIN"
  # ":CHAIN - [0:0]" declares the chain (made if missing), -F empties one that exists
  { echo '*filter'
    echo ":$NET1_CHAIN - [0:0]"
    echo "-F $NET1_CHAIN"
    net1_rules | grep -v -- '^-N '
    [[ -z "$jump" ]] || echo "$jump"
    echo COMMIT
  } | in_node "$ns" iptables-restore -w --noflush
  log "node $n: chain $NET1_CHAIN written${jump:+ and jumped to from FORWARD}"
}

node_up() {  # node_up INDEX NETNS CONTAINERD_TOML
  local n="$1" ns="$2" cfg="$3" conf_dir bin_dir default default_name
  conf_dir="$(toml_value "$cfg" conf_dir)"
  bin_dir="$(toml_value "$cfg" bin_dir)"
  [[ -d "$conf_dir" && -d "$bin_dir" ]] || die "node $n: no CNI conf_dir/bin_dir in $cfg"
  default="$(find "$conf_dir" -maxdepth 1 -name '*.conflist' ! -name '00-multus.conf' | sort | head -1)"
  [[ -n "$default" ]] || die "node $n: no default network (*.conflist) in $conf_dir: is the cluster up?"
  # the conflist's own (top-level) name, e.g. arkouda-local
  default_name="$(sed -n 's/^  "name": *"\([^"]*\)".*/\1/p' "$default" | head -1)"
  [[ -n "$default_name" ]] || die "node $n: no top-level \"name\" in $default"
  # the plugin: a link in the runtime's CNI bin dir, removed by `down` (only if it is ours)
  if [[ ! -e "$bin_dir/multus" ]]; then
    ln -s "$MULTUS_BIN_DIR/multus" "$bin_dir/multus"
    echo "$bin_dir/multus" >>"$MULTUS_DIR/links"
  elif [[ "$(readlink -f "$bin_dir/multus")" != "$(readlink -f "$MULTUS_BIN_DIR/multus")" ]]; then
    die "node $n: $bin_dir/multus exists and is not ours: remove it or point it at $MULTUS_BIN_DIR/multus"
  fi
  # the second network: a bridge without an address; only bridge-to-bridge forwarding (no routing off it)
  if ! in_node "$ns" ip link show "$NET1_BRIDGE" >/dev/null 2>&1; then
    in_node "$ns" ip link add "$NET1_BRIDGE" type bridge
    echo "$ns" >>"$MULTUS_DIR/bridges"
  fi
  in_node "$ns" ip link set "$NET1_BRIDGE" up
  if [[ "$ns" != - ]]; then
    # the extra node's bridge joins node 0's through a veth: one L2 segment for every node's pods. Both ends are
    # (re)attached on every run, not only when the veth is made: a bridge re-created on either side (a partial
    # `down`, a node re-added) would otherwise keep a veth end without a master, and that node's pods alone.
    ip link show "akm$n" >/dev/null 2>&1 || ip link add "akm$n" type veth peer name akm-net1 netns "$ns"
    ip link set "akm$n" master "$NET1_BRIDGE" up
    in_node "$ns" ip link set akm-net1 master "$NET1_BRIDGE" up
  fi
  ensure_chain "$n" "$ns"
  mkdir -p "$MULTUS_DIR/node-$n/net.d" "$MULTUS_DIR/node-$n/cache" "$MULTUS_DIR/node-$n/ipam"
  # The default network is named to Multus by its name and found in Multus' confDir (a link to the node's own
  # conflist), not given as the file's path: for a path Multus v4.2.2 keeps the conflist only as the CNI library's
  # generic plugin structs (type, name, ipam.type, ...: LoadDelegateNetConfFromConfList) and runs DEL with those,
  # so the bridge plugin's DEL gets no "bridge" and no IPAM ranges ("plugin type=\"bridge\" failed (delete): no IP
  # ranges specified"): every pod's teardown fails while Multus is installed (upstream multus-cni issue #1449, fixed
  # by PR #1521 after v4.2.2). By name Multus keeps the file's raw bytes for ADD and DEL alike.
  ln -sfn "$default" "$MULTUS_DIR/node-$n/net.d/$(basename "$default")"
  write_file "$MULTUS_DIR/node-$n/net.d/$NET1_NAME.conf" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "$NET1_NAME",
  "type": "bridge",
  "bridge": "$NET1_BRIDGE",
  "isGateway": false,
  "ipMasq": false,
  "ipam": {
    "type": "host-local",
    "dataDir": "$MULTUS_DIR/node-$n/ipam",
    "ranges": [[{"subnet": "$NET1_SUBNET", "rangeStart": "10.250.$n.2", "rangeEnd": "10.250.$n.254"}]]
  }
}
JSON
  # last: from here on containerd sends every new pod through Multus
  write_file "$conf_dir/00-multus.conf" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "multus-cni-network",
  "type": "multus",
  "capabilities": {"portMappings": true},
  "kubeconfig": "$MULTUS_DIR/multus.kubeconfig",
  "clusterNetwork": "$default_name",
  "confDir": "$MULTUS_DIR/node-$n/net.d",
  "cniDir": "$MULTUS_DIR/node-$n/cache",
  "binDir": "$bin_dir",
  "logFile": "$LOGS/multus-node-$n.log",
  "logLevel": "error"
}
JSON
  log "node $n: multus in $conf_dir (default network $default_name, $(basename "$default")), $NET1_NAME on $NET1_BRIDGE, 10.250.$n.0/24"
}

# diag: what decides whether frames cross the akk8s1 bridges, per node (printed when the check fails)
diag() {
  local n ns cfg
  while read -r n ns cfg; do
    echo "--- node $n (netns $ns)"
    in_node "$ns" bridge link show master "$NET1_BRIDGE" 2>&1
    in_node "$ns" bridge fdb show br "$NET1_BRIDGE" 2>&1 | grep -cv permanent | sed 's/^/learned MACs: /'
    in_node "$ns" iptables -w -L "$NET1_CHAIN" -v -n -x 2>&1
    in_node "$ns" iptables -w -L FORWARD -v -n -x --line-numbers 2>&1 | head -4
  done < <(nodes)
}

# check: on every node a pod asking for arkouda-net1 gets a 10.250.x address in its network-status annotation,
# and the first one fetches a page from every other one at that address (across nodes: one L2 segment); then the
# pods are deleted, and the CNI DEL of every node must have gone through Multus without an error.
check() {
  local ns="multus-check-$$" node i=0 status ip first="" names=() try ok since
  since="$(date -u +%Y-%m-%dT%H:%M:%S)"
  kubectl_ create namespace "$ns" >/dev/null
  # shellcheck disable=SC2064
  trap "kubectl_ delete namespace '$ns' --wait=false >/dev/null 2>&1 || true" RETURN EXIT
  wait_default_sa "$ns"
  kubectl_ -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: $NET1_NAME}
YAML
  for node in $(kubectl_ get nodes -o jsonpath='{.items[*].metadata.name}'); do
    kubectl_ -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: check-$i
  annotations: {k8s.v1.cni.cncf.io/networks: $NET1_NAME}
spec:
  nodeName: $node
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 0
  containers: [{name: c, image: "$SMOKE_IMAGE", imagePullPolicy: Never, args: [httpd, -f, -p, "8080", -h, /www]}]
YAML
    names+=("check-$i")
    i=$((i + 1))
  done
  for name in "${names[@]}"; do
    if ! kubectl_ -n "$ns" wait --for condition=Ready --timeout=90s "pod/$name" >/dev/null; then
      kubectl_ -n "$ns" describe pod "$name" | tail -15 >&2
      die "pod $name with the $NET1_NAME attachment did not start (see $LOGS/multus-node-*.log and the Events above)"
    fi
    status="$(kubectl_ -n "$ns" get pod "$name" -o jsonpath='{.metadata.annotations.k8s\.v1\.cni\.cncf\.io/network-status}')"
    ip="$(tr -d ' \n' <<<"$status" | grep -o "\"name\":\"$ns/$NET1_NAME\"[^}]*\"ips\":\[\"10\.250\.[0-9.]*" | grep -o '10\.250\.[0-9.]*')" ||
      die "pod $name: its network-status has no 10.250.x address on $ns/$NET1_NAME: $status"
    if [[ -z "$first" ]]; then
      first="$name"
      log "check: $name on $(kubectl_ -n "$ns" get pod "$name" -o jsonpath='{.spec.nodeName}') got $ip on $NET1_NAME"
      continue
    fi
    ok=""
    for try in 1 2 3; do
      if kubectl_ -n "$ns" exec "$first" -- sh -c "printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 $ip 8080" |
        grep -q '^HTTP/1.[01] 200'; then ok=1; break; fi
      sleep 1
    done
    if [[ -z "$ok" ]]; then
      diag >&2
      die "pod $first cannot fetch a page from $name at $ip ($NET1_NAME, 3 tries): the nodes' akk8s1 bridges are not one segment (counters above)"
    fi
    log "check: $name on $(kubectl_ -n "$ns" get pod "$name" -o jsonpath='{.spec.nodeName}') got $ip on $NET1_NAME (reached from $first${try:+, try $try})"
  done
  # teardown through Multus: a failing DEL of the default network keeps sandboxes (and their pod IPs) on the node
  kubectl_ -n "$ns" delete pods --all --wait=true --timeout=60s >/dev/null ||
    die "the check pods were not deleted within 60 s: see $LOGS/multus-node-*.log and the kubelet logs"
  sleep 1
  if awk -v t="$since" '$1 >= t && /failed \(delete\)|DelegateDel/' "$LOGS"/multus-node-*.log 2>/dev/null | grep -q .; then
    awk -v t="$since" '$1 >= t && /failed \(delete\)|DelegateDel/' "$LOGS"/multus-node-*.log | tail -5 >&2
    die "CNI DEL through Multus failed while deleting the check pods (lines above from $LOGS/multus-node-*.log)"
  fi
  log "check: the ${#names[@]} pods deleted, every CNI DEL through Multus without error"
}

up() {
  kubectl_ get --raw /readyz >/dev/null 2>&1 || die "the cluster is not up (make cluster-up)"
  build
  mkdir -p "$MULTUS_DIR"
  kube_objects
  while read -r n ns cfg; do node_up "$n" "$ns" "$cfg"; done < <(nodes)
  check
  # a kube-router sync overlapping the transaction may have reverted it: the chains once more, after the check
  while read -r n ns cfg; do ensure_chain "$n" "$ns"; done < <(nodes)
}

down() {
  local n ns cfg conf_dir link
  while read -r n ns cfg; do
    [[ -f "$cfg" ]] || continue
    conf_dir="$(toml_value "$cfg" conf_dir)"
    [[ -n "$conf_dir" ]] && rm -f "$conf_dir/00-multus.conf"
    # a kube-router sync overlapping the removal writes the chain back (seen: a deleted chain back with its rules
    # a moment later): removed, looked at again half a second later, up to three times
    for _ in 1 2 3; do
      in_node "$ns" iptables -w -S "$NET1_CHAIN" >/dev/null 2>&1 || break
      while in_node "$ns" iptables -w -D FORWARD -j "$NET1_CHAIN" 2>/dev/null; do :; done
      { in_node "$ns" iptables -w -F "$NET1_CHAIN" && in_node "$ns" iptables -w -X "$NET1_CHAIN"; } 2>/dev/null || true
      sleep 0.5
    done
  done < <(nodes)
  for link in $(ip -o link show type veth | sed -n 's/^[0-9]*: \(akm[0-9]*\)@.*/\1/p'); do ip link del "$link"; done
  if [[ -f "$MULTUS_DIR/bridges" ]]; then
    while read -r ns; do in_node "$ns" ip link del "$NET1_BRIDGE" 2>/dev/null || true; done <"$MULTUS_DIR/bridges"
  fi
  if [[ -f "$MULTUS_DIR/links" ]]; then
    while read -r link; do [[ -L "$link" ]] && rm -f "$link"; done <"$MULTUS_DIR/links"
  fi
  if kubectl_ get --raw /readyz >/dev/null 2>&1; then
    kubectl_ delete clusterrolebinding/multus clusterrole/multus --ignore-not-found >/dev/null
    kubectl_ -n kube-system delete serviceaccount/multus --ignore-not-found >/dev/null
    kubectl_ delete crd/network-attachment-definitions.k8s.cni.cncf.io --ignore-not-found >/dev/null
  fi
  rm -rf "$MULTUS_DIR"
  log "multus removed"
}

status() {
  local n ns cfg
  while read -r n ns cfg; do
    echo "node $n (netns $ns): $(find "$(toml_value "$cfg" conf_dir)" -maxdepth 1 -type f -printf '%f ' 2>/dev/null)"
  done < <(nodes)
  [[ -d "$MULTUS_DIR" ]] && echo "state: $MULTUS_DIR" || echo "not installed"
}

case "${1:-}" in
  up) cluster_lock; up ;;
  down) cluster_lock; down ;;
  status) status ;;
  *) die "usage: $0 up|down|status" ;;
esac
