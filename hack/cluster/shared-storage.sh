#!/usr/bin/env bash
# ReadWriteMany storage of the local cluster that is one filesystem for every node (global.sharedVolume):
#   shared-storage.sh up                   the directory $CLUSTER_DIR/shared and the StorageClass arkouda-shared-hostpath
#                                          (no provisioner; up.sh runs this)
#   shared-storage.sh claim NS PVC [SIZE]  a PersistentVolume for the claim NS/PVC only (claimRef), backed by the host
#                                          directory $CLUSTER_DIR/shared/NS owned by SHARED_UID (default 1000: the
#                                          chart's runAsUser; a hostPath gets no fsGroup)
#   shared-storage.sh release NS           that PersistentVolume and its directory removed
# Why a hostPath is faithful here and nowhere else: every node's kubelet, containerd and runc are host processes
# in the host's one mount namespace (extra nodes only enter a network namespace, README "Layout"), so the same
# host directory is the same filesystem in the pods of every node, as an NFS export is on a real cluster. On
# machines of their own, a hostPath is per node and Arkouda's checkpoints and multi-locale reads would fail.
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

STORAGE_CLASS="arkouda-shared-hostpath"
SHARED_DIR="$CLUSTER_DIR/shared"
SHARED_UID="${SHARED_UID:-1000}"
usage() { die "usage: shared-storage.sh up | claim NAMESPACE PVC [SIZE] | release NAMESPACE"; }
dns_label() { [[ "$1" =~ ^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$ ]] || die "$2 '$1' is not a DNS label"; }
[[ $EUID -eq 0 ]] || die "shared-storage.sh needs root (it creates host directories for the nodes' pods)"

case "${1:-}" in
  up)
    install -d -m 0755 "$SHARED_DIR"
    kubectl_ apply -f - >/dev/null <<YAML
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $STORAGE_CLASS
provisioner: kubernetes.io/no-provisioner
reclaimPolicy: Retain
volumeBindingMode: Immediate
YAML
    log "shared storage: StorageClass $STORAGE_CLASS, volumes under $SHARED_DIR (one filesystem for every node)" ;;
  claim)
    ns="${2:-}" pvc="${3:-}" size="${4:-1Gi}"
    dns_label "$ns" namespace; dns_label "$pvc" "PVC name"
    install -d -m 0770 -o "$SHARED_UID" -g "$SHARED_UID" "$SHARED_DIR/$ns"
    kubectl_ apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolume
metadata:
  name: $STORAGE_CLASS-$ns
spec:
  capacity: {storage: $size}
  accessModes: [ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: $STORAGE_CLASS
  claimRef: {namespace: $ns, name: $pvc}
  hostPath: {path: $SHARED_DIR/$ns, type: Directory}
YAML
    log "shared storage: PersistentVolume $STORAGE_CLASS-$ns for $ns/$pvc at $SHARED_DIR/$ns" ;;
  release)
    ns="${2:-}"
    dns_label "$ns" namespace
    kubectl_ delete pv "$STORAGE_CLASS-$ns" --ignore-not-found --wait=false >/dev/null
    rm -rf -- "${SHARED_DIR:?}/$ns"
    log "shared storage: PersistentVolume $STORAGE_CLASS-$ns and $SHARED_DIR/$ns removed" ;;
  *) usage ;;
esac
