#!/usr/bin/env bash
# node-kill.sh NODE: a power loss of extra node NODE (arkouda-node-<i>) for the node-loss tests: its link cut, then
# SIGKILL to its kubelet, kube-proxy, kube-router, containerd, shims and containers (node.sh kill). Never node 0.
set -euo pipefail
[[ "${1:-}" =~ ^arkouda-node-([1-9][0-9]?)$ ]] || { echo "usage: node-kill.sh arkouda-node-<i> (an extra node, i >= 1)" >&2; exit 2; }
exec "$(dirname "$0")/node.sh" kill "${BASH_REMATCH[1]}"
