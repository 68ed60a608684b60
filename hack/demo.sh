#!/usr/bin/env bash
# `make demo`: the README's "run it" command. Uses the current kube context when it reaches a cluster
# (DEMO_LOCAL=1 forces the project's own node), otherwise brings up the local one-node cluster; builds and
# loads the images; installs the chart with values/mpi-hybrid.yaml; runs `helm test`; prints the hybrid hello
# lines and where to look next. With a full (non-stand-in) Arkouda image it also installs Arkouda mode and
# prints ak.get_config() from the test pod. Each phase prints its duration.
set -euo pipefail
: "${REPO_ROOT:?run through make demo}"
NS=${DEMO_NAMESPACE:-arkouda-demo}
RELEASE=${DEMO_RELEASE:-demo}
started=$SECONDS

phase() {
  local name=$1; shift
  local t0=$SECONDS
  echo "==> demo: $name"
  "$@"
  echo "    demo: $name took $((SECONDS - t0))s"
}

reachable() {
  [ -z "${DEMO_LOCAL:-}" ] || return 1
  command -v kubectl >/dev/null 2>&1 || return 1
  kubectl config current-context >/dev/null 2>&1 || return 1
  kubectl version --request-timeout=5s >/dev/null 2>&1
}

if reachable; then
  echo "==> demo: using the current kube context ($(kubectl config current-context))"
  echo "    the images must be pullable from that cluster: push $IMAGE_PREFIX/{mpi,arkouda}:$IMAGE_TAG to a registry"
  echo "    and pass DEMO_SET='--set global.image.registry=<registry>' (see docker/README.md)"
  local_node=0
else
  local_node=1
  phase "images (buildah)" make -s -C "$REPO_ROOT" images
  phase "local one-node cluster" make -s -C "$REPO_ROOT" cluster-up
  phase "load images into the node" make -s -C "$REPO_ROOT" cluster-load-images
  KUBECONFIG=$(make -s -C "$REPO_ROOT" cluster-kubeconfig)
  export KUBECONFIG
fi

# install RELEASE VALUES_FILE: install or upgrade one release of the chart and wait until it is Ready.
install() {
  local release=$1 values=$2
  helm upgrade --install "$release" "$REPO_ROOT/charts/arkouda" -n "$NS" --create-namespace \
    -f "$REPO_ROOT/values/$values" --set "global.image.tag=$IMAGE_TAG" ${DEMO_SET:-} --wait --timeout 10m
}

kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl label namespace "$NS" --overwrite pod-security.kubernetes.io/enforce=restricted >/dev/null
phase "helm install (mode mpi, values/mpi-hybrid.yaml)" install "$RELEASE" mpi-hybrid.yaml
out=$(mktemp)
trap 'rm -f "$out"' EXIT
phase "helm test" bash -c "helm test '$RELEASE' -n '$NS' --timeout 5m > '$out' 2>&1 || { cat '$out'; exit 1; }"
echo
echo "Hybrid MPI+OpenMP hello, 2 ranks x 2 OpenMP threads over the server pod and a locale pod:"
grep '^Hello from thread' "$out" | sort -u
echo
if [ "${DEMO_ARKOUDA:-0}" = 1 ]; then
  phase "helm install (mode arkouda)" install "$RELEASE-ak" "$([ $local_node = 1 ] && echo local.yaml || echo small-dev.yaml)"
  phase "helm test (ak.get_config())" helm test "$RELEASE-ak" -n "$NS" --timeout 5m
fi
cat <<EOT
Where to look next (demo took $((SECONDS - started))s):
  export KUBECONFIG=${KUBECONFIG:-~/.kube/config}
  kubectl -n $NS get pods -o wide
  kubectl -n $NS describe pod $RELEASE-arkouda-server-0     # LocalesReady / Launched events
  kubectl -n $NS logs $RELEASE-arkouda-server-0 -c server   # discovery, ssh probe, mpirun output
  helm -n $NS uninstall $RELEASE                             # clean up (make cluster-down stops the local node)
EOT
