#!/usr/bin/env bash
# Shared by hack/slurm/{up,down,status}.sh: paths, logging, PID records. Sourced, not run.
#
# Two directories, because job users are not root:
#   SLURM_DIR         private state under the tools cache (munge key, controller state, logs, PIDs); only the
#                     root daemons read it.
#   SLURM_PUBLIC_DIR  what every user's sbatch/squeue/scontrol and every job needs: slurm.conf, the munge
#                     socket and slurmd's spool (a job's script is executed from there as the job's user).
#                     Root's cache dir sits under /root (mode 0700), which other users cannot enter, so this
#                     lives under /run (root-owned, 0755), as /etc/slurm and /run/munge do on a real site.
# shellcheck disable=SC2034  # the variables are for the scripts that source this file
set -euo pipefail

SLURM_HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE_DIR=${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/arkouda-k8s}
SLURM_DIR=${SLURM_DIR:-$CACHE_DIR/slurm}
SLURM_PUBLIC_DIR=${SLURM_PUBLIC_DIR:-/run/arkouda-k8s-slurm}
SLURM_CTLD_PORT=${SLURM_CTLD_PORT:-6817}
SLURMD_PORT=${SLURMD_PORT:-6818}
# Nodes: SLURM_NODES slurmd on this host, node i named and addressed 127.0.0.i (loopback, so ssh and GASNet
# reach each "node" by its name without DNS), slurmd port SLURMD_PORT+i-1. Each has SLURM_NODE_CPUS CPUs; more
# than the machine's cores is fine (config_overrides): the tests ask for tasks to check the layout, not for speed.
SLURM_NODES=${SLURM_NODES:-2}
SLURM_NODE_CPUS=${SLURM_NODE_CPUS:-2}
SLURM_PARTITION=${SLURM_PARTITION:-arkouda}
SLURM_CONF_FILE=$SLURM_PUBLIC_DIR/slurm.conf
MUNGE_SOCKET=$SLURM_PUBLIC_DIR/munge/munge.socket
RUN=$SLURM_DIR/run
LOGS=$SLURM_DIR/logs
MARKER=.arkouda-k8s-slurm
export SLURM_CONF=$SLURM_CONF_FILE

log() { printf '[slurm] %s\n' "$*"; }
die() { printf 'slurm: error: %s\n' "$*" >&2; exit 1; }
# any other failing command ends the script with one line naming it (its own output, if any, comes before)
trap 'die "$(basename "$0") line $LINENO: \`$BASH_COMMAND\` failed"' ERR

# A recorded process is ours only when its PID is alive AND runs the binary recorded with it (a reused PID is not).
pid_alive() {
  local f=$RUN/$1.pid pid bin
  [[ -f $f ]] || return 1
  read -r pid bin <"$f" || return 1
  [[ -n $pid && -d /proc/$pid ]] || return 1
  [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$bin" ]]
}

recorded_pid() { local pid _; read -r pid _ <"$RUN/$1.pid"; echo "$pid"; }

node_name() { echo "127.0.0.$1"; }
