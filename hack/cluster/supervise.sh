#!/usr/bin/env bash
# supervise.sh PIDFILE EXE ARGS...: run EXE and start it again 1 s after it exits, as a real cluster's kubelet
# restarts a static control-plane pod (or systemd a unit with Restart=always). kube-scheduler and
# kube-controller-manager exit by design on some conditions they expect to be restarted from (the scheduler on a
# cache it finds corrupted, seen after an API server restart); without this the local cluster lost its scheduler
# for good after an outage test. PIDFILE always holds "PID EXE" of the current process (lib.sh pid_alive, stop);
# lib.sh stop creates PIDFILE.stop first, so the exit it causes is the last one.
set -uo pipefail
pidfile="$1" exe="$2"; shift 2
stopfile="$pidfile.stop"
child=""
# a SIGTERM for the supervisor goes to the daemon, and ends the loop
trap 'touch "$stopfile"; [[ -n "$child" ]] && kill -TERM "$child" 2>/dev/null' TERM INT
while :; do
  "$exe" "$@" &
  child=$!
  echo "$child $exe" >"$pidfile"
  rc=0
  # `wait` returns early when a trapped signal arrives: wait until the daemon is really gone
  while kill -0 "$child" 2>/dev/null; do wait "$child"; rc=$?; done
  [[ -e "$stopfile" ]] && break
  printf '[supervise] %s exited with status %s; starting it again in 1 s\n' "$(basename "$exe")" "$rc"
  sleep 1
  [[ -e "$stopfile" ]] && break
done
rm -f "$stopfile"
