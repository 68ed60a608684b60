#!/usr/bin/env bash
# Stop what hack/slurm/up.sh started and remove its state: jobs cancelled (their processes get scancel's
# SIGTERM and time to clean up), every slurmd, slurmctld and munged stopped by recorded PID, leftover job step daemons
# of our spool killed, then $SLURM_DIR and $SLURM_PUBLIC_DIR deleted (only when they carry up.sh's marker).
# Idempotent: with nothing running and nothing left it says so. --daemons-only: stop the daemons, keep the state.
# shellcheck source=hack/slurm/lib.sh
. "$(dirname "$0")/lib.sh"
t0=$SECONDS
daemons_only=0
[[ ${1:-} == --daemons-only ]] && daemons_only=1
[[ $EUID -eq 0 ]] || die "slurm-down needs root (it stops root's daemons)"

if [[ ! -d $SLURM_DIR && ! -d $SLURM_PUBLIC_DIR ]]; then
  log "nothing to stop: no $SLURM_DIR, no $SLURM_PUBLIC_DIR"
  exit 0
fi

# Jobs first, while the controller and slurmd still run, so their processes get SIGTERM like any scancel.
if (( daemons_only == 0 )) && pid_alive slurmctld; then
  mapfile -t jobs < <(squeue -h -o %i 2>/dev/null)
  if (( ${#jobs[@]} > 0 )); then
    log "cancelling ${#jobs[@]} job(s): ${jobs[*]}"
    scancel "${jobs[@]}" 2>/dev/null || true
    deadline=$((SECONDS + 45))   # KillWait (30 s) and a margin
    while [[ -n "$(squeue -h -o %i 2>/dev/null)" ]] && (( SECONDS < deadline )); do sleep 1; done
  fi
fi

stop() {
  local name=$1 pid
  pid_alive "$name" || { rm -f "$RUN/$name.pid"; return; }
  pid=$(recorded_pid "$name")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 30); do [[ -d /proc/$pid ]] || break; sleep 0.5; done
  if [[ -d /proc/$pid ]]; then
    log "$name (pid $pid) still running after 15s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$RUN/$name.pid"
  log "$name: stopped (pid $pid)"
}
for f in "$RUN"/slurmd-*.pid; do [[ -e $f ]] && stop "$(basename "$f" .pid)"; done
stop slurmctld

# Job step daemons (slurmstepd detaches from slurmd) that are still alive: ours are those holding a socket in
# our spool directory; another Slurm's are left alone.
stepd=$(readlink -f "$(command -v slurmstepd 2>/dev/null || echo /usr/sbin/slurmstepd)")
ours=$(awk -v d="$SLURM_PUBLIC_DIR/spool/" 'index($8, d) == 1 {print $7}' /proc/net/unix 2>/dev/null | sort -u)
if [[ -n $ours ]]; then
  for p in /proc/[0-9]*; do
    [[ "$(readlink "$p/exe" 2>/dev/null)" == "$stepd" ]] || continue
    for fd in "$p"/fd/*; do
      inode=$(readlink "$fd" 2>/dev/null | sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p')
      if [[ -n $inode ]] && grep -qx "$inode" <<<"$ours"; then
        log "killing leftover slurmstepd ${p#/proc/}"
        kill -KILL "${p#/proc/}" 2>/dev/null || true
        break
      fi
    done
  done
fi

stop munged
(( daemons_only == 1 )) && exit 0

for dir in "$SLURM_DIR" "$SLURM_PUBLIC_DIR"; do
  [[ -d $dir ]] || continue
  [[ -f $dir/$MARKER ]] || die "$dir has no $MARKER marker: not removing a directory up.sh did not make"
  rm -rf "$dir"
done
log "slurm down in $((SECONDS - t0))s: daemons stopped, $SLURM_DIR and $SLURM_PUBLIC_DIR removed"
