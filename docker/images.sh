#!/usr/bin/env bash
# Builds the project's images daemonless with buildah (called by mk/images.mk; see docker/README.md).
#
#   images.sh base                 local Debian base image from debootstrap (docker/base/build-base.sh)
#   images.sh wheel                the bootstrap wheel into $IMAGES_WHEEL_DIR (rebuilt when bootstrap/ changes)
#   images.sh gasnet               GASNet-EX udp conduit + amudprun ("gasnet" stage of docker/arkouda/Dockerfile)
#                                  as $IMAGE_PREFIX/gasnet-udp:$GASNET_VERSION, from the checked GASNET_ARCHIVE
#   images.sh runtime              the runtime base both images start from (docker/runtime/Dockerfile: user
#                                  arkouda, sshd, tini, the bootstrap) as $IMAGE_PREFIX/runtime:$IMAGE_TAG
#   images.sh build NAME           NAME = arkouda | mpi: buildah bud of docker/NAME/Dockerfile (runtime first)
#   images.sh archive NAME         docker-archive of the image under $CACHE_DIR/images/ for `ctr images import`
#
# Every step is cached: an image carries the hash of everything it was built from in the label
# io.arkouda-k8s.inputs and is rebuilt only when that hash changes; an archive is rewritten only when the
# image ID changes. Each step prints its duration.
#
# Environment (exported by the Makefile from hack/versions.env): REPO_ROOT, CACHE_DIR, IMAGE_PREFIX,
# IMAGE_TAG, DEBIAN_SUITE; optional: IMAGE_BASE (default $IMAGE_PREFIX/debian-base:$DEBIAN_SUITE),
# ARKOUDA_SERVER_STAGE (default standin; arkouda: the real server, see REAL_SERVER_ARGS), DEBIAN_MIRROR,
# EXTRA_BUILD_ARGS (word-split into buildah bud),
# GASNET_ARCHIVE (path or http(s) URL of the GASNet-EX release archive; default
# $REPO_ROOT/../shared/vendor/gasnet/GASNet-$GASNET_VERSION.tar.gz); GASNET_VERSION and GASNET_SHA256 default to
# hack/versions.env.
set -euo pipefail

: "${REPO_ROOT:?}" "${CACHE_DIR:?}" "${IMAGE_PREFIX:?}" "${IMAGE_TAG:?}" "${DEBIAN_SUITE:?}"
IMAGE_BASE=${IMAGE_BASE:-$IMAGE_PREFIX/debian-base:$DEBIAN_SUITE}
IMAGES_WHEEL_DIR=${IMAGES_WHEEL_DIR:-$REPO_ROOT/_out/images/wheels}
ARKOUDA_SERVER_STAGE=${ARKOUDA_SERVER_STAGE:-standin}
ARCHIVE_DIR=$CACHE_DIR/images
LABEL=io.arkouda-k8s.inputs
pinned() { sed -n "s/^$1=//p" "$REPO_ROOT/hack/versions.env"; }
GASNET_VERSION=${GASNET_VERSION:-$(pinned GASNET_VERSION)}
GASNET_SHA256=${GASNET_SHA256:-$(pinned GASNET_SHA256)}
GASNET_ARCHIVE=${GASNET_ARCHIVE:-$REPO_ROOT/../shared/vendor/gasnet/GASNet-$GASNET_VERSION.tar.gz}
GASNET_STAGED=$REPO_ROOT/_out/images/gasnet/GASNet-$GASNET_VERSION.tar.gz  # in the build context
GASNET_IMAGE=$IMAGE_PREFIX/gasnet-udp:$GASNET_VERSION
RUNTIME_IMAGE=$IMAGE_PREFIX/runtime:$IMAGE_TAG
# The real server's pins (hack/versions.env; the environment overrides each, e.g. CHAPEL_URL=<mirror>), its make
# parallelism and the optional trimmed module list (ARKOUDA_CONFIG_FILE, a smoke build only).
REAL_SERVER_ARGS=()
for name in CHAPEL_VERSION CHAPEL_URL CHAPEL_SHA256 CHAPEL_MIN CHAPEL_MAX CHAPEL_LLVM_VERSION \
            ARKOUDA_VERSION ARKOUDA_URL ARKOUDA_SHA256; do
  REAL_SERVER_ARGS+=(--build-arg "$name=${!name:-$(pinned "$name")}")
done
REAL_SERVER_ARGS+=(--build-arg "MAKE_JOBS=${ARKOUDA_MAKE_JOBS:-4}" --build-arg "ARKOUDA_CONFIG_FILE=${ARKOUDA_CONFIG_FILE:-}")

log() { echo "images: $*"; }
die() { echo "images: $*" >&2; exit 1; }

# sha256 over the paths and contents of the given files/directories (sorted, caches excluded).
hash_inputs() {
  local f
  find "$@" -type f ! -path '*/__pycache__/*' ! -path '*.egg-info/*' ! -name '*.pyc' \
       ! -path '*/build/*' ! -path '*/dist/*' -print0 \
    | sort -z \
    | while IFS= read -r -d '' f; do printf '%s\n' "${f#"$REPO_ROOT"/}"; sha256sum <"$f"; done \
    | sha256sum | cut -c1-16
}

image_label() {
  buildah inspect --type image --format "{{ index .OCIv1.Config.Labels \"$LABEL\" }}" "$1" 2>/dev/null || true
}

image_id() {
  buildah inspect --type image --format '{{ .FromImageID }}' "$1" 2>/dev/null
}

base_image_id() {
  image_id "$IMAGE_BASE" || die "base image $IMAGE_BASE not found; run 'make images' (it builds it) or set IMAGE_BASE"
}

require_wheel() {
  compgen -G "$IMAGES_WHEEL_DIR/arkouda_bootstrap-*.whl" >/dev/null \
    || die "no bootstrap wheel in $IMAGES_WHEEL_DIR; run 'make images'"
}

# Where PyPI is reached through a TLS-inspecting proxy, pip in the build needs the host's CA bundle: pass
# it as the build secret pip-ca (mounted for the pip steps only; not part of the image or its inputs hash).
pip_ca=${PIP_CERT:-$(python3 -m pip config get global.cert 2>/dev/null || true)}
PIP_CA_SECRET=()
[ -z "$pip_ca" ] || [ ! -s "$pip_ca" ] || PIP_CA_SECRET=(--secret "id=pip-ca,src=$pip_ca")

# build_cached IMAGE INPUTS LOGNAME FORMAT DOCKERFILE BUD-ARGS...: buildah bud of IMAGE labelled with the hash
# of its INPUTS, skipped when the image already carries that hash. On failure: the log's tail and one line.
build_cached() {
  local image=$1 inputs=$2 name=$3 format=$4 dockerfile=$5 t0=$SECONDS logf
  shift 5
  if [ "$(image_label "$image")" = "$inputs" ]; then
    log "$image is up to date (inputs $inputs); skipping"
    return
  fi
  log "building $image (inputs $inputs)"
  mkdir -p "$REPO_ROOT/_out/images"
  logf=$REPO_ROOT/_out/images/build-$name.log
  if ! buildah bud --layers --force-rm --isolation chroot --network host --format "$format" \
        --label "$LABEL=$inputs" "$@" -f "$dockerfile" -t "$image" "$REPO_ROOT" >"$logf" 2>&1; then
    tail -n 30 "$logf" >&2
    die "buildah bud of $image failed (full log: $logf)"
  fi
  # When every step is cached, buildah (1.28) hands back the cached image with the label of the build that made
  # it: write this build's inputs hash, or the next run would rebuild it again.
  if [ "$(image_label "$image")" != "$inputs" ]; then
    local ctr
    ctr=$(buildah from --pull-never "$image")
    buildah config --label "$LABEL=$inputs" "$ctr"
    buildah commit --quiet --rm --format "$format" "$ctr" "$image" >/dev/null
  fi
  log "phase build $name: $image built in $((SECONDS - t0))s (log: $logf)"
}

cmd_base() {
  local t0=$SECONDS
  "$REPO_ROOT/docker/base/build-base.sh" "$IMAGE_BASE" "$DEBIAN_SUITE" "${DEBIAN_MIRROR:-}"
  log "phase base: $((SECONDS - t0))s"
}

cmd_wheel() {
  local t0=$SECONDS src_hash tmp
  [ -f "$REPO_ROOT/bootstrap/pyproject.toml" ] \
    || die "bootstrap/pyproject.toml not found: the images install the bootstrap from it"
  src_hash=$(hash_inputs "$REPO_ROOT/bootstrap")
  if [ -f "$IMAGES_WHEEL_DIR/.src-hash" ] && [ "$(cat "$IMAGES_WHEEL_DIR/.src-hash")" = "$src_hash" ] \
     && compgen -G "$IMAGES_WHEEL_DIR/arkouda_bootstrap-*.whl" >/dev/null; then
    log "wheel up to date ($(basename "$IMAGES_WHEEL_DIR"/arkouda_bootstrap-*.whl))"
    return
  fi
  # Build from a copy so that setuptools' build/ and *.egg-info never land in the source tree.
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  cp -r "$REPO_ROOT/bootstrap" "$tmp/bootstrap"
  find "$tmp/bootstrap" \( -name __pycache__ -o -name '*.egg-info' -o -name build -o -name dist \) -prune \
    -exec rm -rf {} +
  rm -rf "$IMAGES_WHEEL_DIR"
  mkdir -p "$IMAGES_WHEEL_DIR"
  if ! python3 -m pip wheel --quiet --disable-pip-version-check --no-deps -w "$IMAGES_WHEEL_DIR" "$tmp/bootstrap" \
       >"$tmp/wheel.log" 2>&1; then
    tail -n 20 "$tmp/wheel.log" >&2
    die "building the bootstrap wheel from bootstrap/ failed (log above)"
  fi
  echo "$src_hash" >"$IMAGES_WHEEL_DIR/.src-hash"
  log "phase wheel: built $(basename "$IMAGES_WHEEL_DIR"/arkouda_bootstrap-*.whl) in $((SECONDS - t0))s"
}

# The GASNet archive into the build context, after checking it is the pinned release (one line on failure).
stage_gasnet_archive() {
  local src=$GASNET_ARCHIVE got fix url
  url=$(pinned GASNET_URL)
  fix="set GASNET_ARCHIVE to the GASNet-EX $GASNET_VERSION release archive (a path, or a URL such as $url)"
  if [ -f "$GASNET_STAGED" ] && [ "$(sha256sum <"$GASNET_STAGED" | cut -d' ' -f1)" = "$GASNET_SHA256" ]; then
    return
  fi
  mkdir -p "$(dirname "$GASNET_STAGED")"
  case $src in
    http://*|https://*)
      log "downloading $src"
      curl -fsSL --retry 3 -o "$GASNET_STAGED.tmp" "$src" \
        || { rm -f "$GASNET_STAGED.tmp"; die "GASNET_ARCHIVE=$src could not be downloaded; $fix"; } ;;
    *)
      [ -f "$src" ] || die "GASNET_ARCHIVE=$src: no such file; $fix"
      cp "$src" "$GASNET_STAGED.tmp" ;;
  esac
  got=$(sha256sum <"$GASNET_STAGED.tmp" | cut -d' ' -f1)
  if [ "$got" != "$GASNET_SHA256" ]; then
    rm -f "$GASNET_STAGED.tmp"
    die "GASNET_ARCHIVE=$src has sha256 $got, not $GASNET_SHA256 (GASNET_SHA256 in hack/versions.env); $fix"
  fi
  mv "$GASNET_STAGED.tmp" "$GASNET_STAGED"
}

# The "gasnet" stage as its own image, rebuilt only when its inputs change: the archive's checksum, the stage's
# text in the Dockerfile, the base image and the build args. The Arkouda image then starts from it.
cmd_gasnet() {
  local dockerfile=$REPO_ROOT/docker/arkouda/Dockerfile base_id inputs
  local -a args
  stage_gasnet_archive
  base_id=$(base_image_id)
  args=(--build-arg "BASE_IMAGE=$IMAGE_BASE" --build-arg "GASNET_VERSION=$GASNET_VERSION"
        --build-arg "GASNET_SHA256=$GASNET_SHA256"
        --build-arg "GASNET_ARCHIVE=${GASNET_STAGED#"$REPO_ROOT"/}" --target gasnet)
  # shellcheck disable=SC2206 # EXTRA_BUILD_ARGS is a word list on purpose
  args+=(${EXTRA_BUILD_ARGS:-})
  inputs=$( { awk '/^FROM .* AS gasnet$/ {on=1} /^FROM / && !/ AS gasnet$/ {on=0} on' "$dockerfile"
              grep '^ARG ' "$dockerfile"; echo "$base_id ${args[*]}"; } | sha256sum | cut -c1-16)
  # GASNet-EX's build takes about 3 minutes on 2 cores when it runs.
  build_cached "$GASNET_IMAGE" "$inputs" gasnet oci "$dockerfile" "${args[@]}"
}

# The runtime base: everything the two images promise alike (user, sshd, tini, the bootstrap as entrypoint).
# The wheel's own bytes change on every rebuild (zip timestamps); its source hash (.src-hash) does not, so the
# inputs take the hash of the sources instead of the .whl.
cmd_runtime() {
  local base_id inputs
  local -a args
  require_wheel
  base_id=$(base_image_id)
  args=(--build-arg "BASE_IMAGE=$IMAGE_BASE" --build-arg "BOOTSTRAP_WHEEL_DIR=${IMAGES_WHEEL_DIR#"$REPO_ROOT"/}")
  # shellcheck disable=SC2206 # EXTRA_BUILD_ARGS is a word list on purpose
  args+=(${EXTRA_BUILD_ARGS:-})
  inputs=$( { hash_inputs "$REPO_ROOT/docker/runtime" "$REPO_ROOT/requirements-dev.txt"
              cat "$IMAGES_WHEEL_DIR/.src-hash"; echo "$base_id ${args[*]}"; } | sha256sum | cut -c1-16)
  build_cached "$RUNTIME_IMAGE" "$inputs" runtime oci "$REPO_ROOT/docker/runtime/Dockerfile" \
    "${args[@]}" "${PIP_CA_SECRET[@]}"
}

cmd_build() {
  local name=${1:?build NAME} image dockerfile base_id runtime_id inputs gasnet_id="" format=oci
  local -a args
  image=$IMAGE_PREFIX/$name:$IMAGE_TAG
  dockerfile=$REPO_ROOT/docker/$name/Dockerfile
  [ -f "$dockerfile" ] || die "no Dockerfile for image '$name' at $dockerfile"
  base_id=$(base_image_id)
  cmd_runtime
  runtime_id=$(image_id "$RUNTIME_IMAGE")
  args=(--build-arg "BASE_IMAGE=$IMAGE_BASE" --build-arg "RUNTIME_IMAGE=$RUNTIME_IMAGE" --target runtime)
  case $name in
    arkouda)
      args+=(--build-arg "SERVER_STAGE=$ARKOUDA_SERVER_STAGE")
      case $ARKOUDA_SERVER_STAGE in
        standin)
          cmd_gasnet
          gasnet_id=$(image_id "$GASNET_IMAGE")
          args+=(--build-arg "GASNET_IMAGE=$GASNET_IMAGE" --build-arg "GASNET_VERSION=$GASNET_VERSION"
                 --build-arg "GASNET_SHA256=$GASNET_SHA256"
                 --build-arg "GASNET_ARCHIVE=${GASNET_STAGED#"$REPO_ROOT"/}") ;;
        arkouda)
          # The real server: Chapel with the GASNet it bundles (its amudprun ships), so no GASNet archive or
          # gasnet image is involved. The chapel/arkouda-build stages use SHELL (pipefail), which buildah
          # applies only to docker-format images.
          format=docker
          args+=("${REAL_SERVER_ARGS[@]}") ;;
        *) die "ARKOUDA_SERVER_STAGE=$ARKOUDA_SERVER_STAGE: use standin or arkouda" ;;
      esac
      ;;
  esac
  # shellcheck disable=SC2206 # EXTRA_BUILD_ARGS is a word list on purpose
  args+=(${EXTRA_BUILD_ARGS:-})
  inputs=$( { hash_inputs "$REPO_ROOT/docker/$name"; echo "$base_id $runtime_id $gasnet_id ${args[*]}"; } \
            | sha256sum | cut -c1-16)
  build_cached "$image" "$inputs" "$name" "$format" "$dockerfile" "${args[@]}" "${PIP_CA_SECRET[@]}"
}

cmd_archive() {
  local name=${1:?archive NAME} t0=$SECONDS image id archive
  image=$IMAGE_PREFIX/$name:$IMAGE_TAG
  id=$(image_id "$image") || die "image $image not found; run 'make images'"
  mkdir -p "$ARCHIVE_DIR"
  archive=$ARCHIVE_DIR/$name-$IMAGE_TAG.tar
  if [ -f "$archive" ] && [ "$(cat "$archive.id" 2>/dev/null)" = "$id" ]; then
    log "$archive is up to date"
    return
  fi
  rm -f "$archive" "$archive.id" "$archive.tmp"
  # Written under a temporary name and renamed, so an importer never reads a half-written archive.
  buildah push --quiet "$image" "docker-archive:$archive.tmp:$image" >/dev/null
  mv "$archive.tmp" "$archive"
  echo "$id" >"$archive.id"
  log "phase archive $name: $archive ($(du -h "$archive" | cut -f1)) in $((SECONDS - t0))s"
}

cmd=${1:-}
shift || true
case $cmd in
  base) cmd_base ;;
  wheel) cmd_wheel ;;
  gasnet) cmd_gasnet ;;
  runtime) cmd_runtime ;;
  build) cmd_build "$@" ;;
  archive) cmd_archive "$@" ;;
  *) die "usage: images.sh base|wheel|gasnet|runtime|build NAME|archive NAME" ;;
esac
