#!/usr/bin/env bash
# Cut or restore one pod's network inside its own network namespace, for the tests of a locale that stops
# answering while its node stays Ready (the node keeps reporting, only the pod's traffic is gone):
#   pod-net.sh drop NAMESPACE POD      every packet in or out of the pod, except loopback, dropped (no RST, no ICMP)
#   pod-net.sh restore NAMESPACE POD   the drop removed; nothing else of the pod's network is touched
# The pod's network namespace is found through its cgroup (pod<uid> under the pids hierarchy of any node of this
# cluster); the rules live in a chain of their own there, so restore removes exactly what drop added.
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

CHAIN=ARKOUDA-POD-DROP
action="${1:-}" namespace="${2:-}" pod="${3:-}"
[[ "$action" =~ ^(drop|restore)$ && -n "$namespace" && -n "$pod" ]] || die "usage: pod-net.sh drop|restore NAMESPACE POD"
[[ $EUID -eq 0 ]] || die "pod-net.sh needs root (it enters the pod's network namespace)"

uid="$(kubectl_ -n "$namespace" get pod "$pod" -o jsonpath='{.metadata.uid}')" || die "no pod $namespace/$pod"
pid=""
# cgroupfs names the pod's cgroup pod<uid>; any process of it (the pause container's included) shares its netns
while IFS= read -r dir; do
  pid="$(head -n 1 "$dir/cgroup.procs" 2>/dev/null || true)"
  [[ -n "$pid" ]] && break
done < <(find /sys/fs/cgroup/pids -maxdepth 6 -type d -path "*/pod${uid}/*" 2>/dev/null)
[[ -n "$pid" ]] || die "no process of pod $namespace/$pod (uid $uid) under /sys/fs/cgroup/pids: is it running on this machine's cluster?"
in_pod() { nsenter "--net=/proc/$pid/ns/net" -- "$@"; }

if [[ "$action" == drop ]]; then
  in_pod iptables -w -N "$CHAIN" 2>/dev/null || in_pod iptables -w -F "$CHAIN"
  in_pod iptables -w -A "$CHAIN" -j DROP
  in_pod iptables -w -C INPUT ! -i lo -j "$CHAIN" 2>/dev/null || in_pod iptables -w -I INPUT 1 ! -i lo -j "$CHAIN"
  in_pod iptables -w -C OUTPUT ! -o lo -j "$CHAIN" 2>/dev/null || in_pod iptables -w -I OUTPUT 1 ! -o lo -j "$CHAIN"
  log "pod $namespace/$pod: its traffic is dropped (restore: pod-net.sh restore $namespace $pod)"
else
  while in_pod iptables -w -D INPUT ! -i lo -j "$CHAIN" 2>/dev/null; do :; done
  while in_pod iptables -w -D OUTPUT ! -o lo -j "$CHAIN" 2>/dev/null; do :; done
  if in_pod iptables -w -S "$CHAIN" >/dev/null 2>&1; then
    in_pod iptables -w -F "$CHAIN"
    in_pod iptables -w -X "$CHAIN"
  fi
  log "pod $namespace/$pod: its traffic flows again"
fi
