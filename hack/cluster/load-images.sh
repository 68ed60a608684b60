#!/usr/bin/env bash
# Import images into the local nodes' containerds (namespace k8s.io), where the kubelets find them without a pull.
# CLUSTER_NODE=i: only extra node i; unset: node 0, then every extra node.
#   load-images.sh                 import every archive in $IMAGES_DIR (from `make images`; docker-archive or
#                                  oci-archive .tar carrying the full image name)
#   load-images.sh --node-images   build (cached) and import the node's own images: the pod sandbox image
#                                  $PAUSE_IMAGE (pause/pause.c) and $SMOKE_IMAGE (static busybox, for smoke.sh)
#   load-images.sh --archive FILE  import that one archive (kueue.sh's image), on every node as above
# An archive already imported into this cluster (same path, size and mtime) is skipped.
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "$0")/lib.sh"
ctr_ version >/dev/null 2>&1 || die "containerd of the local node ${CLUSTER_NODE:-0} is not running: run 'make cluster-up'"

import() {  # import ARCHIVE: ctr import unless this exact archive was already imported into this cluster
  local f="$1" stamp
  stamp="$(stat -c '%n %s %Y' "$f")"
  if grep -qxF "$stamp" "$RUN/imported.list" 2>/dev/null; then log "already imported: $f"; return 0; fi
  # containerd 1.6 can garbage-collect a snapshot that a concurrent unpack is about to use as its parent (the
  # re-tagged image dropped the last reference to its shared base layer): "failed to prepare extraction
  # snapshot ... parent snapshot ... does not exist". A second import unpacks that parent afresh.
  local attempt
  for attempt in 1 2 3; do
    if ctr_ -n k8s.io images import "$f" | sed 's/^/  /'; then
      echo "$stamp" >>"$RUN/imported.list"
      return 0
    fi
    log "ctr images import $f failed (attempt $attempt/3)"
    sleep 1
  done
  die "ctr images import $f failed 3 times (is it a docker-archive/oci-archive with an image name?)"
}

if [[ "${1:-}" == "--node-images" ]]; then
  mkdir -p "$CLUSTER_IMAGES_DIR"
  key="$(cat "$CLUSTER_HACK/pause/pause.c" "$CLUSTER_HACK/load-images.sh" | sha256sum | cut -c1-12)"
  pause_tar="$CLUSTER_IMAGES_DIR/pause-$key.tar"
  if [[ ! -s "$pause_tar" ]]; then
    root="$(mktemp -d)"
    gcc -static -Os -o "$root/pause" "$CLUSTER_HACK/pause/pause.c"
    buildah_image "$PAUSE_IMAGE" "$pause_tar" "$root" '["/pause"]'
    rm -rf "$root"
  fi
  busybox="$(command -v busybox || true)"
  if [[ -z "$busybox" ]] || ! { ldd "$busybox" 2>&1 || true; } | grep -q 'not a dynamic executable'; then
    die "a static busybox is needed for the smoke image: run 'make deps' (busybox-static)"
  fi
  smoke_tar="$CLUSTER_IMAGES_DIR/smoke-$key-$(sha256sum "$busybox" | cut -c1-12).tar"
  if [[ ! -s "$smoke_tar" ]]; then
    root="$(mktemp -d)"
    mkdir -p "$root/bin" "$root/tmp" "$root/www"; chmod 1777 "$root/tmp"
    cp "$busybox" "$root/bin/busybox"
    for a in sh cat echo sleep nslookup nc awk printf httpd hostname ls env id; do ln -s busybox "$root/bin/$a"; done
    echo "arkouda-k8s cluster smoke" >"$root/www/index.html"
    buildah_image "$SMOKE_IMAGE" "$smoke_tar" "$root" '["/bin/busybox"]'
    rm -rf "$root"
  fi
  import "$pause_tar"
  import "$smoke_tar"
  exit 0
fi

shopt -s nullglob
if [[ "${1:-}" == "--archive" ]]; then
  [[ -s "${2:-}" ]] || die "load-images.sh --archive FILE: no archive at '${2:-}'"
  archives=("$2")
else
  archives=("$IMAGES_DIR"/*.tar)
fi
if (( ${#archives[@]} == 0 )); then log "no image archives in $IMAGES_DIR (run 'make images')"; exit 0; fi
# Every extra node has a containerd of its own: import there too, all nodes at once (independent containerds and
# state; on a fresh 3-node cluster one after the other took 41 s).
pids=()
if [[ -z "${CLUSTER_NODE:-}" ]]; then
  for i in $(extra_nodes); do
    [[ -S "$NODES_DIR/$i/run/containerd.sock" ]] || continue
    log "images for node $(node_name "$i")"
    CLUSTER_NODE="$i" "$0" "$@" &
    pids+=("$!")
  done
fi
for f in "${archives[@]}"; do import "$f"; done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
(( failed == 0 )) || die "importing the images into an extra node failed (its lines above say which and why)"
