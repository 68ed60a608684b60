#!/usr/bin/env bash
# The host's neighbour (ARP) table thresholds, which every node of the local cluster shares (one kernel):
#   neigh-table.sh show       gc_thresh1 2 3 now, and the table's overflow count (table_fulls) since boot
#   neigh-table.sh cluster    the cluster's values (CLUSTER_NEIGH_GC_THRESH, set by cluster-up)
#   neigh-table.sh kernel     Linux's defaults (128 512 1024): the "before" of the bench's launch rows
# cluster-down restores what the host had before cluster-up.
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

[[ $EUID -eq 0 ]] || die "neigh-table.sh needs root (the thresholds are host-wide sysctls)"
# /proc/net/stat/arp_cache: one row per CPU, in hex; the last column is table_fulls
table_fulls() { python3 -c 'print(sum(int(l.split()[-1], 16) for l in open("/proc/net/stat/arp_cache").readlines()[1:]))'; }
read -r -a cluster_values <<<"$CLUSTER_NEIGH_GC_THRESH"
read -r -a kernel_values <<<"$NEIGH_KERNEL_DEFAULTS"
case "${1:-}" in
  show) printf 'gc_thresh %s table_fulls %s\n' "$(neigh_gc_thresh)" "$(table_fulls)" ;;
  cluster) [[ "$CLUSTER_NEIGH_GC_THRESH" == kernel ]] || set_neigh_gc_thresh "${cluster_values[@]}" ;;
  kernel) set_neigh_gc_thresh "${kernel_values[@]}" ;;
  *) die "usage: neigh-table.sh show|cluster|kernel" ;;
esac
