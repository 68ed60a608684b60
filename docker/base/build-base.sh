#!/usr/bin/env bash
# Builds the local Debian base image from Debian's own packages, for machines that reach Debian's archive
# but no container registry: `debootstrap --variant=minbase` into a temporary rootfs, then
# `buildah from scratch` + copy + `buildah commit`. Users with a registry never need this: the Dockerfiles
# default their BASE_IMAGE build arg to docker.io/library/debian:<suite>-slim.
#
# Cached: the image carries the sha256 of this script, the suite and the mirror in a label; when an image of
# that name with the same label exists, nothing is rebuilt.
#
# Usage: build-base.sh IMAGE SUITE [MIRROR]
#   MIRROR defaults to the first Debian URI that apt uses on this machine (/etc/apt/sources.list*), else
#   http://deb.debian.org/debian. Needs root (debootstrap chroots).
set -euo pipefail

image=${1:?usage: build-base.sh IMAGE SUITE [MIRROR]}
suite=${2:?usage: build-base.sh IMAGE SUITE [MIRROR]}
mirror=${3:-}

log() { echo "images: base: $*"; }
die() { echo "images: base: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap needs chroot); run 'make images' as root"
for tool in debootstrap buildah; do
  command -v "$tool" >/dev/null || die "'$tool' not found; run 'make deps'"
done

# The mirror apt uses here: first 'URIs:' (deb822) or 'deb URI' line that points at a .../debian archive
# (not debian-security, not third-party repos).
detect_mirror() {
  local f uri
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
    [ -r "$f" ] || continue
    uri=$(sed -n -e 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' \
                 -e 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\).*/\2/p' "$f" \
          | grep -E '/debian/?$' | head -n1 || true)
    if [ -n "$uri" ]; then echo "${uri%/}"; return; fi
  done
  echo "http://deb.debian.org/debian"
}
[ -n "$mirror" ] || mirror=$(detect_mirror)
security_mirror="${mirror%/debian}/debian-security"

script_hash=$(sha256sum "$0" | cut -c1-16)
want_label="${script_hash}-${suite}-$(printf '%s' "$mirror" | sha256sum | cut -c1-8)"
label_key=io.arkouda-k8s.base.recipe

if have=$(buildah inspect --type image --format "{{ index .ImageAnnotations \"$label_key\" }}" "$image" 2>/dev/null) \
   && [ "$have" = "$want_label" ]; then
  log "$image is up to date (recipe $want_label); skipping"
  exit 0
fi

t0=$SECONDS
work=$(mktemp -d /var/tmp/arkouda-k8s-base.XXXXXX)
ctr=""
cleanup() {
  [ -z "$ctr" ] || buildah rm "$ctr" >/dev/null 2>&1 || true
  # debootstrap may leave proc/sys mounted after a failure; unmount only below our own temp dir.
  if [ -d "$work" ]; then
    { grep -o " $work/[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
    rm -rf --one-file-system "$work"
  fi
}
trap cleanup EXIT

rootfs=$work/rootfs
log "debootstrap --variant=minbase $suite from $mirror (about a minute)"
if ! debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1; then
  tail -n 20 "$work/debootstrap.log" >&2
  die "debootstrap $suite from $mirror failed (log above); check that apt reaches $mirror"
fi

# What the official debian:*-slim images do, so the Dockerfiles behave the same on either base:
# deb822 sources with updates + security, no man pages/docs/locales, no apt caches, empty machine-id.
rm -f "$rootfs/etc/apt/sources.list"
cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security_mirror
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'DPKG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
DPKG
cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'APT'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT
cat >"$rootfs/etc/apt/apt.conf.d/docker-no-recommends" <<'APT'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
APT
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/log/* \
       "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/tmp/* "$rootfs"/debootstrap
: >"$rootfs/etc/machine-id"
t1=$SECONDS
log "debootstrap took $((t1 - t0))s"

ctr=$(buildah from scratch)
# Copy the rootfs as a tarball stream: buildah add keeps owners, modes and device nodes.
tar -C "$rootfs" --numeric-owner -cf "$work/rootfs.tar" .
buildah add "$ctr" "$work/rootfs.tar" / >/dev/null
buildah config \
  --cmd /bin/bash \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --annotation "$label_key=$want_label" \
  --label "$label_key=$want_label" \
  --label "org.opencontainers.image.description=Debian $suite minbase from $mirror (debootstrap)" \
  --os linux --arch "$(dpkg --print-architecture)" \
  "$ctr"
buildah commit --quiet --rm "$ctr" "$image" >/dev/null
ctr=""
log "committed $image in $((SECONDS - t1))s (total $((SECONDS - t0))s)"
