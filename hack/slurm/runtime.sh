#!/usr/bin/env bash
# What a Slurm site installs on its nodes, for the project's Slurm tests: the stand-in arkouda_server (GASNet's
# real amudprun + the C GASNet client arkouda_server_real + the Python stand-in server), the bootstrap's Python
# dependencies and the bootstrap of this work tree, under $SLURM_PUBLIC_DIR/runtime (readable by job users).
#
# Taken from the built Arkouda image ($IMAGE_PREFIX/arkouda:$IMAGE_TAG, `make images`), whose base is the same
# Debian release as the host: amudprun and arkouda_server_real link only libc/libstdc++, and the image's venv
# (/opt/arkouda-bootstrap, Debian's python3) runs with the host's /usr/bin/python3. arkouda_server is rebuilt
# here from docker/arkouda/standin/src (no GASNet needed) because it execs amudprun at a compiled-in path.
# Re-extracted when the image changes; the bootstrap source is refreshed on every run (cheap).
#
# Layout: bin/arkouda-bootstrap, arkouda/bin/{arkouda_server,arkouda_server_real,arkouda_standin_server},
# gasnet/bin/amudprun, venv/, env.sh (PATH and ARKOUDA_STANDIN_SERVER for a job script to source).
# shellcheck source=hack/slurm/lib.sh
. "$(dirname "$0")/lib.sh"
REPO_ROOT=${REPO_ROOT:-$(cd "$SLURM_HACK/../.." && pwd)}
IMAGE=${IMAGE_ARKOUDA:-${IMAGE_PREFIX:-localhost/arkouda-k8s}/arkouda:${IMAGE_TAG:-0.1.0}}
RT=$SLURM_PUBLIC_DIR/runtime
t0=$SECONDS

[[ $EUID -eq 0 ]] || die "slurm-runtime needs root (buildah mount of the image)"
[[ -f $SLURM_PUBLIC_DIR/$MARKER ]] || die "$SLURM_PUBLIC_DIR does not exist: run 'make slurm-up' first"
for c in buildah gcc; do command -v "$c" >/dev/null || die "$c not found: run 'make deps'"; done
image_id=$(buildah images --noheading --no-trunc --format '{{.ID}}' "$IMAGE" 2>/dev/null | head -1) || true
[[ -n $image_id ]] || die "image $IMAGE is not built: run 'make images'"

if [[ "$(cat "$RT/.image-id" 2>/dev/null)" != "$image_id" ]]; then
  log "runtime: extracting the stand-in server and the bootstrap venv from $IMAGE"
  new=$RT.new
  rm -rf "$new"
  mkdir -p "$new/bin" "$new/gasnet/bin"
  ctr=$(buildah from --pull-never "$IMAGE")
  trap 'buildah umount "$ctr" >/dev/null 2>&1; buildah rm "$ctr" >/dev/null 2>&1' EXIT
  root=$(buildah mount "$ctr")
  cp -a "$root/opt/arkouda" "$new/arkouda"
  cp -a "$root/opt/arkouda-bootstrap" "$new/venv"
  cp -a "$root/opt/gasnet/bin/amudprun" "$new/gasnet/bin/amudprun"
  buildah umount "$ctr" >/dev/null && buildah rm "$ctr" >/dev/null
  trap - EXIT
  rm -f "$new/arkouda/bin/arkouda_server"
  gcc -O2 -Wall -Wextra -Werror -DAMUDPRUN="\"$RT/gasnet/bin/amudprun\"" \
    -o "$new/arkouda/bin/arkouda_server" "$REPO_ROOT/docker/arkouda/standin/src/arkouda_server.c"
  # the image's Python server names /usr/bin/python3 (which has no pyzmq here): run it with the venv's python
  sed -i "1s|.*|#!$RT/venv/bin/python3|" "$new/arkouda/bin/arkouda_standin_server"
  cat >"$new/env.sh" <<ENV
# Source in a job script: the stand-in server and the bootstrap of $RT.
export PATH=$RT/bin:$RT/arkouda/bin:\$PATH
export ARKOUDA_STANDIN_SERVER=$RT/arkouda/bin/arkouda_standin_server
ENV
  cat >"$new/bin/arkouda-bootstrap" <<WRAP
#!/bin/sh
# the bootstrap of the work tree (copied by hack/slurm/runtime.sh) with the image's dependencies
PYTHONPATH=$RT/bootstrap-src\${PYTHONPATH:+:\$PYTHONPATH} exec $RT/venv/bin/python3 -m arkouda_bootstrap "\$@"
WRAP
  chmod 0755 "$new/bin/arkouda-bootstrap"
  echo "$image_id" >"$new/.image-id"
  rm -rf "$RT" && mv "$new" "$RT"
fi
rm -rf "$RT/bootstrap-src.new"
mkdir -p "$RT/bootstrap-src.new"
cp -a "$REPO_ROOT/bootstrap/src/arkouda_bootstrap" "$RT/bootstrap-src.new/"
find "$RT/bootstrap-src.new" -name __pycache__ -prune -exec rm -rf {} +
rm -rf "$RT/bootstrap-src" && mv "$RT/bootstrap-src.new" "$RT/bootstrap-src"
chmod -R a+rX "$RT"
"$RT/bin/arkouda-bootstrap" --help >/dev/null || die "$RT/bin/arkouda-bootstrap --help failed (see above)"
"$RT/arkouda/bin/arkouda_server" --version >/dev/null || die "$RT/arkouda/bin/arkouda_server --version failed"
log "runtime ready in $((SECONDS - t0))s: $RT (image ${image_id:0:12}, bootstrap from $REPO_ROOT/bootstrap/src)"
