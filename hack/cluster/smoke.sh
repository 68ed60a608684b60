#!/usr/bin/env bash
# Smoke test of the local node: in a namespace enforcing the `restricted` Pod Security Standard, a web pod behind a
# ClusterIP Service and a client pod that fetches it by its DNS name. Passing proves scheduling, the kubelet +
# containerd + runc, the CNI bridge, CoreDNS, kube-proxy's Service NAT and PodSecurity admission all work.
# shellcheck source=hack/cluster/lib.sh
. "$(dirname "$0")/lib.sh"
ns="arkouda-cluster-smoke-$(date +%s)-$$"   # fresh name: a previous run's namespace may still be terminating
start=$(date +%s)
sc='{"runAsNonRoot": true, "runAsUser": 65534, "allowPrivilegeEscalation": false,
     "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}'
kubectl_ apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Namespace
metadata:
  name: $ns
  labels: {pod-security.kubernetes.io/enforce: restricted}
YAML
# The namespace goes whatever the outcome (a failed run's pods are described above the error line).
# shellcheck disable=SC2064  # $ns is fixed from here on
trap "kubectl_ delete namespace '$ns' --wait=false >/dev/null 2>&1 || true" EXIT
wait_default_sa "$ns"
kubectl_ apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: $ns, labels: {app: smoke-web}}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1   # httpd as PID 1 ignores SIGTERM
  containers:
  - name: web
    image: $SMOKE_IMAGE
    imagePullPolicy: Never
    args: [httpd, -f, -p, "8080", -h, /www]
    ports: [{containerPort: 8080}]
    readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
    securityContext: $sc
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: $ns}
spec:
  selector: {app: smoke-web}
  ports: [{port: 80, targetPort: 8080}]
YAML
kubectl_ -n "$ns" wait pod/web --for=condition=Ready --timeout=120s >/dev/null ||
  { kubectl_ -n "$ns" describe pod web | tail -20; die "smoke: pod web not Ready (kubelet log: $LOGS/kubelet.log)"; }
# With several nodes the client runs on another (untainted) node than the web pod: the fetch then crosses the
# routed node networks (and the web node's kube-router, which lets it through: no NetworkPolicy here).
web_node="$(kubectl_ -n "$ns" get pod web -o jsonpath='{.spec.nodeName}')"
client_node="$(kubectl_ get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.spec.taints}{"\n"}{end}' |
  awk -v w="$web_node" '$1 != w && NF == 1 { print $1; exit }')"
kubectl_ apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: $ns}
spec:
  ${client_node:+nodeName: $client_node}
  automountServiceAccountToken: false
  restartPolicy: Never
  containers:
  - name: client
    image: $SMOKE_IMAGE
    imagePullPolicy: Never
    # busybox-static's wget crashes (static glibc); nslookup and nc have their own resolver/socket code.
    args:
    - sh
    - -c
    - |
      for i in 1 2 3 4 5 6 7 8 9 10; do
        ip=\$(nslookup web.$ns.svc.$CLUSTER_DOMAIN | awk '/^Name:/ {f = 1} f && /^Address/ {print \$2; exit}')
        echo "web.$ns.svc.$CLUSTER_DOMAIN -> \${ip:-not resolved}"
        [ -n "\$ip" ] && printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 "\$ip" 80 && exit 0
        sleep 1
      done
      exit 1
    securityContext: $sc
YAML
# The container's exit code, not the pod phase: the kubelet reports a terminal phase only once the sandbox is torn
# down (CNI DEL), which says nothing about the path under test.
for _ in $(seq 1 120); do
  phase_="$(kubectl_ -n "$ns" get pod client -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}')"
  [[ -n "$phase_" ]] && break
  sleep 0.5
done
out="$(kubectl_ -n "$ns" logs client 2>&1 || true)"
if [[ "$phase_" != 0 || "$out" != *"arkouda-k8s cluster smoke"* ]]; then
  kubectl_ -n "$ns" get pods,svc,endpointslices -o wide >&2 || true
  die "smoke: client pod could not fetch http://web.$ns.svc.$CLUSTER_DOMAIN/ (exit code '$phase_', output: $out) — check $LOGS/coredns.log and $LOGS/kube-proxy.log"
fi
log "smoke: pod (${client_node:-$web_node}) -> Service DNS name -> pod ($web_node) works under PodSecurity restricted ($(( $(date +%s) - start ))s)"
