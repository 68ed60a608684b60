#!/usr/bin/env bash
# node-restore.sh NODE: bring a killed extra node back (link up, containerd, kubelet, kube-proxy, kube-router) and
# wait until its Node is Ready (node.sh restore).
set -euo pipefail
[[ "${1:-}" =~ ^arkouda-node-([1-9][0-9]?)$ ]] || { echo "usage: node-restore.sh arkouda-node-<i> (an extra node, i >= 1)" >&2; exit 2; }
exec "$(dirname "$0")/node.sh" restore "${BASH_REMATCH[1]}"
