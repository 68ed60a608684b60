#!/usr/bin/env bash
# Kueue on the local cluster, as upstream ships it, for the chart's global.scheduling.queueName.
#
#   hack/cluster/kueue.sh up      # build (cached), install, wait until its webhooks answer
#   hack/cluster/kueue.sh down    # remove it again (also safe when nothing is installed)
#   hack/cluster/kueue.sh status  # what is installed
#
# What `up` does (hack/cluster/README.md, "Kueue"):
# - builds cmd/kueue of sigs.k8s.io/kueue@$KUEUE_VERSION (static, from the Go module proxy) into
#   $CACHE_DIR/kueue-$KUEUE_VERSION/ and a one-layer image $KUEUE_IMAGE of it, imported into every node;
# - renders the module's own config/default (CRDs, RBAC, the controller Deployment in kueue-system, webhooks with
#   Kueue's internal certificate management) with `kubectl kustomize` and changes only what this cluster needs
#   (kueue-manifests.py): the local image, small requests, the Configuration (integrations batch/job and pod,
#   waitForPodsReady), no visibility API server, and webhooks that act only in namespaces labelled
#   arkouda-k8s.test/kueue=enabled, so the suite's other modules never pass through them.
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

KUEUE_BIN_DIR="$CACHE_DIR/kueue-${KUEUE_VERSION:?KUEUE_VERSION missing in hack/versions.env}"
KUEUE_IMAGE="localhost/arkouda-k8s/kueue:$KUEUE_VERSION"
KUEUE_ARCHIVE="$CLUSTER_IMAGES_DIR/kueue-$KUEUE_VERSION.tar"
KUEUE_NS="kueue-system"
KUEUE_PY="${KUEUE_PYTHON:-python3}"  # with PyYAML (make passes the project venv's)

module_dir() {  # outside any module, so that no go.mod around the caller takes part
  (cd / && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION") |
    "$KUEUE_PY" -c 'import json, sys; print(json.load(sys.stdin)["Dir"])'
}

manifests() {  # the module's config/default with this cluster's changes, what up applies and down deletes
  "$K8S_BIN/kubectl" kustomize "$(module_dir)/config/default" |
    "$KUEUE_PY" "$CLUSTER_HACK/kueue-manifests.py" --image "$KUEUE_IMAGE"
}

build() {
  command -v go >/dev/null || die "no 'go' on PATH: Kueue is built from the Go module proxy"
  if [[ ! -x "$KUEUE_BIN_DIR/kueue" ]]; then
    log "building kueue $KUEUE_VERSION into $KUEUE_BIN_DIR (Go module proxy; a few minutes the first time)"
    rm -rf "$KUEUE_BIN_DIR.tmp" && mkdir -p "$KUEUE_BIN_DIR.tmp"
    (cd / && CGO_ENABLED=0 GOFLAGS=-mod=mod GOBIN="$KUEUE_BIN_DIR.tmp" \
      go install -p 2 -trimpath -ldflags "-s -w" "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION")
    rm -rf "$KUEUE_BIN_DIR" && mv "$KUEUE_BIN_DIR.tmp" "$KUEUE_BIN_DIR"
  fi
  if [[ ! -s "$KUEUE_ARCHIVE" ]]; then
    local root
    root="$(mktemp -d)"
    mkdir -p "$root/tmp" && chmod 1777 "$root/tmp"
    cp "$KUEUE_BIN_DIR/kueue" "$root/manager"
    mkdir -p "$CLUSTER_IMAGES_DIR"
    buildah_image "$KUEUE_IMAGE" "$KUEUE_ARCHIVE" "$root" '["/manager"]'
    rm -rf "$root"
  fi
  "$CLUSTER_HACK/load-images.sh" --archive "$KUEUE_ARCHIVE"
}

probe_webhook() {
  kubectl_ apply --dry-run=server -f - >/dev/null <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: probe, namespace: kueue-probe}
spec: {clusterQueue: probe}
YAML
}

up() {
  local t0=$SECONDS
  build
  log "kueue: applying config/default of $(module_dir)"
  manifests | kubectl_ apply --server-side --force-conflicts -f - >/dev/null
  kubectl_ -n "$KUEUE_NS" rollout status deployment/kueue-controller-manager --timeout=180s
  # Ready is not enough: the webhooks answer once Kueue's certificate rotator has written the Secret, the kubelet
  # has put it into the pod and the CA is in the webhook configurations; a dry-run LocalQueue in an opted-in
  # namespace passes through the validating webhook
  kubectl_ apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Namespace
metadata: {name: kueue-probe, labels: {arkouda-k8s.test/kueue: enabled}}
YAML
  local n
  for n in $(seq 1 60); do
    probe_webhook && break
    (( n < 60 )) || die "kueue: its webhook did not answer a dry-run LocalQueue within 120 s: $(probe_webhook 2>&1 | tail -1)"
    sleep 2
  done
  # waited for: a second `up` must not find it Terminating (its dry-run would be refused)
  kubectl_ delete namespace kueue-probe --timeout=120s >/dev/null
  log "kueue $KUEUE_VERSION up in $((SECONDS - t0)) s"
}

down() {
  kubectl_ get namespace "$KUEUE_NS" >/dev/null 2>&1 || { log "kueue: not installed"; return 0; }
  manifests | kubectl_ delete --ignore-not-found --wait=false -f - >/dev/null
  log "kueue: removed"
}

status() {
  kubectl_ -n "$KUEUE_NS" get deployment,pods 2>&1
  kubectl_ get clusterqueues,localqueues -A 2>&1 | head -20
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) die "usage: kueue.sh up|down|status" ;;
esac
