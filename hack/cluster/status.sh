#!/usr/bin/env bash
# What of the local cluster runs: every daemon that up.sh / node.sh started (control plane, and per node
# containerd, kubelet, kube-proxy, kube-router), alive or gone, with the last lines of a gone one's log, then the
# Nodes as the API server reports them; a supervised daemon (lib.sh SUPERVISED) also with how often supervise.sh
# started it again. Read-only and without the cluster lock, so a test can call it while a disruption is under way
# (tests/e2e/conftest.py prints it under every failed test).
#   status.sh           every daemon and node; exit 0 when every daemon runs, 1 when one is gone
#   status.sh --brief   one line: "all N daemons run" or the gone ones
# Exit 2: no local cluster here (never brought up, or brought down).
unset CLUSTER_NODE
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

brief=0
[[ "${1:-}" != --brief ]] || brief=1
[[ -d "$CLUSTER_DIR/run" ]] || { echo "local cluster: not up ($CLUSTER_DIR/run missing)"; exit 2; }

total=0 gone=() restarted=()
report() {  # report NODE_LABEL: the daemons of the node node_ctx selected
  local pidf name pid restarts
  for pidf in "$RUN"/*.pid; do
    [[ -e "$pidf" ]] || continue
    name="$(basename "$pidf" .pid)"
    total=$((total + 1))
    read -r pid _ <"$pidf" || pid="?"
    restarts=""
    if supervised "$name"; then
      restarts=", started again $(grep -c '^\[supervise\] .* exited' "$LOGS/$name.log" 2>/dev/null || true) time(s)"
      if [[ "$restarts" != ", started again 0 time(s)" ]]; then restarted+=("$name on $1${restarts#,}"); fi
    fi
    if pid_alive "$name"; then
      (( brief )) || printf '  %-24s %-24s running (pid %s%s)\n' "$1" "$name" "$pid" "$restarts"
    else
      gone+=("$name on $1")
      (( brief )) && continue
      printf '  %-24s %-24s GONE (pid %s), last lines of %s:\n' "$1" "$name" "$pid" "$LOGS/$name.log"
      tail -n 8 "$LOGS/$name.log" 2>/dev/null | sed 's/^/      | /'
    fi
  done
}

(( brief )) || echo "local cluster daemons:"
node_ctx 0
report "$NODE_NAME"
for i in $(extra_nodes); do
  node_ctx "$i"
  report "$THIS_NAME"
done
if (( brief )); then
  if (( ${#gone[@]} == 0 )); then line="local cluster: all $total daemons run"
  else line="local cluster: ${#gone[@]} of $total daemons gone: $(IFS=,; echo "${gone[*]}")"
  fi
  (( ${#restarted[@]} == 0 )) || line+="; supervise.sh started again: $(IFS=,; echo "${restarted[*]}")"
  echo "$line"
else
  echo "nodes:"
  node_ctx 0
  kubectl_ get nodes -o wide --request-timeout=10s 2>&1 | sed 's/^/  /'
fi
(( ${#gone[@]} == 0 ))
