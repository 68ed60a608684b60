# shellcheck shell=bash
# Certificates and kubeconfigs of the local node, made with openssl (sourced by lib.sh). Existing files are kept,
# so a re-run of cluster-up reuses them; cluster-down deletes them with the rest of the state.

# cert NAME CN O EXT: key + certificate signed by the cluster CA. EXT is an openssl x509 extension section body.
cert() {
  local name="$1" cn="$2" o="$3" ext="$4" subj
  [[ -s "$PKI/$name.crt" ]] && return 0
  subj="/CN=$cn"; [[ -n "$o" ]] && subj="/O=$o$subj"
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key" 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr"
  printf '%s\n' "$ext" >"$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
  chmod 0600 "$PKI/$name.key"
}

client_ext="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
server_ext() { printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=%s\n' "$1"; }

# kubeconfig NAME CERT: kubeconfig for user CERT (a client certificate name) against our API server.
kubeconfig() {
  local name="$1" crt="$2" f="$KCFG/$1.kubeconfig"
  [[ -s "$f" ]] && return 0
  cat >"$f" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: arkouda-local
  cluster:
    server: https://${NODE_IP}:${APISERVER_PORT}
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$crt.crt")
    client-key-data: $(base64 -w0 "$PKI/$crt.key")
contexts:
- name: arkouda-local
  context: {cluster: arkouda-local, user: $name}
current-context: arkouda-local
KCFG
  chmod 0600 "$f"
}

make_pki() {
  mkdir -p "$PKI" "$KCFG"; chmod 0700 "$PKI" "$KCFG"
  if [[ ! -s "$PKI/ca.crt" ]]; then
    openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=arkouda-local-ca" -days 3650 -sha256 \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
      -out "$PKI/ca.crt"
    chmod 0600 "$PKI/ca.key"
  fi
  [[ -s "$PKI/sa.key" ]] || {
    openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key" 2>/dev/null
    openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
    chmod 0600 "$PKI/sa.key"
  }
  local svc="kubernetes.default.svc"
  cert etcd etcd "" "$(server_ext "IP:127.0.0.1,DNS:localhost")"
  cert etcd-client kube-apiserver-etcd-client "" "$client_ext"
  cert apiserver kube-apiserver "" \
    "$(server_ext "IP:${NODE_IP},IP:${KUBERNETES_SVC_IP},IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:${svc},DNS:${svc}.${CLUSTER_DOMAIN}")"
  cert apiserver-kubelet-client kube-apiserver-kubelet-client "system:masters" "$client_ext"
  cert kubelet "$NODE_NAME" "" "$(server_ext "IP:${NODE_IP},DNS:${NODE_NAME}")"
  cert node "system:node:${NODE_NAME}" "system:nodes" "$client_ext"
  cert admin kubernetes-admin "system:masters" "$client_ext"
  cert controller-manager system:kube-controller-manager "" "$client_ext"
  cert scheduler system:kube-scheduler "" "$client_ext"
  cert kube-proxy system:kube-proxy "" "$client_ext"
  cert coredns arkouda-local:coredns "" "$client_ext"
  cert kube-router arkouda-local:kube-router "" "$client_ext"
  kubeconfig admin admin
  kubeconfig controller-manager controller-manager
  kubeconfig scheduler scheduler
  kubeconfig kubelet node
  kubeconfig kube-proxy kube-proxy
  kubeconfig coredns coredns
  kubeconfig kube-router kube-router
}

# make_node_pki NAME IP: the kubelet serving certificate and the node client certificate (system:node:NAME, so
# the Node authorizer and NodeRestriction treat it as that node) of an extra node, and its kubeconfig.
make_node_pki() {
  local name="$1" ip="$2"
  cert "kubelet-$name" "$name" "" "$(server_ext "IP:${ip},DNS:${name}")"
  cert "node-$name" "system:node:${name}" "system:nodes" "$client_ext"
  kubeconfig "kubelet-$name" "node-$name"
}
