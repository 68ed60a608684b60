#!/usr/bin/env bash
# Build the local node's binaries from the Go module proxy, cached by version:
#   $CACHE_DIR/k8s-$KUBERNETES_VERSION/      kube-apiserver kube-controller-manager kube-scheduler kubelet
#                                            kube-proxy kubectl
#   $CACHE_DIR/etcd-$ETCD_VERSION/           etcd
#   $CACHE_DIR/coredns-$COREDNS_VERSION/     coredns (trimmed plugin set, tools/coredns/main.go)
#   $CACHE_DIR/kube-router-$KUBE_ROUTER_VERSION/  kube-router (run firewall-only: the NetworkPolicy enforcer)
# and symlinks them into $BIN. A directory that exists is complete (binaries are built into a temp dir and
# renamed), so a warm run only checks and re-links.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=/dev/null
. "$repo/hack/versions.env"
CACHE_DIR="${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/arkouda-k8s}"
BIN="${BIN:-$CACHE_DIR/bin}"
mkdir -p "$BIN"

log() { printf '[cluster-tools] %s\n' "$*"; }
die() { printf 'cluster-tools: %s\n' "$*" >&2; exit 1; }

grep -Eq "^(require )?\s*k8s.io/kubernetes ${KUBERNETES_VERSION}( |$)" "$here/tools/k8s/go.mod" ||
  die "hack/cluster/tools/k8s/go.mod is not for KUBERNETES_VERSION=${KUBERNETES_VERSION}: run hack/cluster/gen-tools-mod.sh and commit the result"
grep -Eq "^(require )?\s*go.etcd.io/etcd/server/v3 ${ETCD_VERSION}( |$)" "$here/tools/k8s/go.mod" ||
  die "hack/cluster/tools/k8s/go.mod does not pin etcd ${ETCD_VERSION}: run hack/cluster/gen-tools-mod.sh (the pin must also satisfy kubernetes' own etcd requirement)"
grep -Eq "^(require )?\s*github.com/coredns/coredns ${COREDNS_VERSION}( |$)" "$here/tools/coredns/go.mod" ||
  die "hack/cluster/tools/coredns/go.mod is not for COREDNS_VERSION=${COREDNS_VERSION}: run hack/cluster/gen-tools-mod.sh"
grep -Eq "^(require )?\s*github.com/cloudnativelabs/kube-router/v2 ${KUBE_ROUTER_VERSION}( |$)" "$here/tools/kube-router/go.mod" ||
  die "hack/cluster/tools/kube-router/go.mod is not for KUBE_ROUTER_VERSION=${KUBE_ROUTER_VERSION}: edit its require and the copied requirements of that kube-router release"

export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly -trimpath -buildvcs=false"
build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

# build DIR MODULE_DIR LDFLAGS PKG...: one `go build` for all packages, so shared packages compile once.
build() {
  local dest="$1" moddir="$2" ldflags="$3"; shift 3
  if [[ -d "$dest" ]]; then log "cached: $dest"; return 0; fi
  local tmp="$dest.tmp.$$" start=$SECONDS
  rm -rf "$tmp"; mkdir -p "$tmp"
  log "building $(basename "$dest") ($*) — a cold build takes long on 2 cores"
  (cd "$moddir" && go build -ldflags="-s -w $ldflags" -o "$tmp/" "$@")
  mv "$tmp" "$dest"
  log "built $(basename "$dest") in $((SECONDS - start))s"
}

minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
k8s_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $pkg.gitVersion=${KUBERNETES_VERSION} -X $pkg.gitMajor=1 -X $pkg.gitMinor=${minor}"
  k8s_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=${build_date}"
done

k8s_dir="$CACHE_DIR/k8s-${KUBERNETES_VERSION}"
etcd_dir="$CACHE_DIR/etcd-${ETCD_VERSION}"
coredns_dir="$CACHE_DIR/coredns-${COREDNS_VERSION}"
build "$k8s_dir" "$here/tools/k8s" "$k8s_ldflags" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy \
  k8s.io/kubernetes/cmd/kubectl
build "$etcd_dir" "$here/tools/k8s" "" go.etcd.io/etcd/server/v3
# go names the binary of go.etcd.io/etcd/server/v3 "server"
[[ -x "$etcd_dir/etcd" || ! -x "$etcd_dir/server" ]] || mv "$etcd_dir/server" "$etcd_dir/etcd"
build "$coredns_dir" "$here/tools/coredns" "" .
kr_dir="$CACHE_DIR/kube-router-${KUBE_ROUTER_VERSION}"
kr_pkg=github.com/cloudnativelabs/kube-router/v2
build "$kr_dir" "$here/tools/kube-router" \
  "-X $kr_pkg/pkg/version.Version=${KUBE_ROUTER_VERSION} -X $kr_pkg/pkg/version.BuildDate=${build_date}" "$kr_pkg/cmd/kube-router"

for f in "$k8s_dir"/* "$etcd_dir/etcd" "$coredns_dir/coredns" "$kr_dir/kube-router"; do
  [[ -x "$f" ]] || die "missing binary $f (remove $(dirname "$f") and re-run make cluster-tools)"
  ln -sfn "$f" "$BIN/$(basename "$f")"
done
log "binaries linked into $BIN: $(cd "$k8s_dir" && echo *) etcd coredns kube-router"
