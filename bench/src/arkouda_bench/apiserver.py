"""A real kube-apiserver + etcd on loopback, no kubelet: the API side of the bootstrap-at-scale bench.

Binaries come from the cluster tooling (`make cluster-tools`: $(BIN)/kube-apiserver and $(BIN)/etcd, cached by
version under $(CACHE_DIR)). Authentication is a static token file with two users: `arkbench-admin`
(system:masters, drives the pods) and `arkbench-bootstrap` (the bootstrap, bound by RBAC to what the chart's
server Role grants). The audit policy logs only the bootstrap user's requests at level Metadata, so counting
the bootstrap's API calls is counting lines of the audit log.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import os
import secrets
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from arkouda_bench.sshd import BenchSetupError, free_port

log = logging.getLogger(__name__)

ADMIN_USER = "arkbench-admin"
BOOTSTRAP_USER = "arkbench-bootstrap"


def find_binary(name: str) -> Path | None:
    """$ARKBENCH_<NAME> (e.g. ARKBENCH_KUBE_APISERVER), else `name` from PATH (make puts $(BIN) first), else
    the versioned cache dirs `make cluster-tools` fills."""
    override = os.environ.get("ARKBENCH_" + name.upper().replace("-", "_"))
    if override:
        return Path(override) if os.access(override, os.X_OK) else None
    found = shutil.which(name)
    if found:
        return Path(found)
    cache = Path(os.environ.get("CACHE_DIR", Path.home() / ".cache" / "arkouda-k8s"))
    candidates = [
        cache / f"k8s-{os.environ.get('KUBERNETES_VERSION', '')}" / name,
        cache / f"etcd-{os.environ.get('ETCD_VERSION', '')}" / name,
        cache / "bin" / name,
    ]
    return next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


def missing_binaries() -> list[str]:
    return [n for n in ("etcd", "kube-apiserver") if find_binary(n) is None]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(d: Path) -> None:
    """A CA, a serving cert for 127.0.0.1/localhost, and the service-account signing key pair."""
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=arkbench-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        cwd=d,
    )
    _openssl(
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-subj",
        "/CN=kube-apiserver",
        "-keyout",
        "apiserver.key",
        "-out",
        "apiserver.csr",
        cwd=d,
    )
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    _openssl(
        "x509",
        "-req",
        "-in",
        "apiserver.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "san.ext",
        "-out",
        "apiserver.crt",
        cwd=d,
    )
    _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "sa.key", cwd=d)
    _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)


AUDIT_POLICY = f"""apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    users: ["{BOOTSTRAP_USER}"]
  - level: None
"""


@dataclass(frozen=True)
class ApiResponse:
    status: int
    body: Any


class RestClient:
    """A minimal keep-alive HTTPS JSON client for the bench driver (one connection per thread)."""

    def __init__(self, *, port: int, ca: Path, token: str) -> None:
        self._port = port
        self._ctx = ssl.create_default_context(cafile=str(ca))
        self._token = token
        self._local = threading.local()

    def _conn(self) -> http.client.HTTPSConnection:
        conn: http.client.HTTPSConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection("127.0.0.1", self._port, context=self._ctx, timeout=60)
            self._local.conn = conn
        return conn

    def request(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json"
    ) -> ApiResponse:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        for attempt in (1, 2):
            conn = self._conn()
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
            except (http.client.HTTPException, OSError):
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
                continue
            is_json = resp.getheader("Content-Type", "").startswith("application/json")
            return ApiResponse(status=resp.status, body=json.loads(raw) if raw and is_json else raw.decode())
        raise AssertionError("unreachable")

    def must(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        ok: tuple[int, ...] = (200, 201),
        content_type: str = "application/json",
    ) -> Any:
        r = self.request(method, path, body, content_type=content_type)
        if r.status not in ok:
            msg = r.body.get("message") if isinstance(r.body, dict) else r.body
            raise BenchSetupError(f"kube-apiserver: {method} {path} -> {r.status}: {msg}")
        return r.body


class ControlPlane:
    """etcd + kube-apiserver on loopback ports in a private temp dir; stopped and removed on exit."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="arkbench-cp-"))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.port = 0
        self.admin_token = secrets.token_hex(16)
        self.bootstrap_token = secrets.token_hex(16)
        self.admin: RestClient | None = None

    @property
    def audit_log(self) -> Path:
        return self.dir / "audit.log"

    def _start(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        out = (self.dir / f"{name}.log").open("wb")
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        self.procs.append(proc)
        return proc

    def _log_tail(self, name: str) -> str:
        try:
            lines = (self.dir / f"{name}.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(lines[-3:])

    def __enter__(self) -> ControlPlane:
        missing = missing_binaries()
        if missing:
            raise BenchSetupError(f"{', '.join(missing)} not found: run 'make cluster-tools'")
        etcd, apiserver = find_binary("etcd"), find_binary("kube-apiserver")
        assert etcd is not None
        assert apiserver is not None
        try:
            make_pki(self.dir)
            (self.dir / "tokens.csv").write_text(
                f'{self.admin_token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n'
                f"{self.bootstrap_token},{BOOTSTRAP_USER},{BOOTSTRAP_USER}\n"
            )
            (self.dir / "audit-policy.yaml").write_text(AUDIT_POLICY)
            etcd_client, etcd_peer = free_port(), free_port()
            self._start(
                "etcd",
                [
                    str(etcd),
                    "--name",
                    "arkbench",
                    "--data-dir",
                    str(self.dir / "etcd"),
                    "--listen-client-urls",
                    f"http://127.0.0.1:{etcd_client}",
                    "--advertise-client-urls",
                    f"http://127.0.0.1:{etcd_client}",
                    "--listen-peer-urls",
                    f"http://127.0.0.1:{etcd_peer}",
                    "--initial-advertise-peer-urls",
                    f"http://127.0.0.1:{etcd_peer}",
                    "--initial-cluster",
                    f"arkbench=http://127.0.0.1:{etcd_peer}",
                    "--unsafe-no-fsync",
                    "--log-level",
                    "warn",
                ],
            )
            self.port = free_port()
            self._start(
                "kube-apiserver",
                [
                    str(apiserver),
                    f"--etcd-servers=http://127.0.0.1:{etcd_client}",
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    f"--secure-port={self.port}",
                    f"--tls-cert-file={self.dir / 'apiserver.crt'}",
                    f"--tls-private-key-file={self.dir / 'apiserver.key'}",
                    f"--token-auth-file={self.dir / 'tokens.csv'}",
                    "--authorization-mode=RBAC",
                    "--service-account-issuer=https://kubernetes.default.svc",
                    f"--service-account-key-file={self.dir / 'sa.pub'}",
                    f"--service-account-signing-key-file={self.dir / 'sa.key'}",
                    "--service-cluster-ip-range=10.96.0.0/24",
                    f"--audit-policy-file={self.dir / 'audit-policy.yaml'}",
                    f"--audit-log-path={self.audit_log}",
                    "--audit-log-mode=blocking",
                    "--audit-log-maxbackup=1",
                    "--audit-log-maxsize=1024",
                    f"--cert-dir={self.dir / 'certs'}",
                    "--v=0",
                ],
            )
            self.admin = RestClient(port=self.port, ca=self.dir / "ca.crt", token=self.admin_token)
            self._wait_ready()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        log.info("kube-apiserver ready on https://127.0.0.1:%d (state %s)", self.port, self.dir)
        return self

    def _wait_ready(self, timeout: float = 90.0) -> None:
        assert self.admin is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for proc, name in zip(self.procs, ("etcd", "kube-apiserver"), strict=False):
                if proc.poll() is not None:
                    raise BenchSetupError(f"{name} exited with {proc.returncode}: {self._log_tail(name)}")
            try:
                # RBAC bootstrap roles are reconciled in a post-start hook: wait for one of them too.
                if (
                    self.admin.request("GET", "/readyz").status == 200
                    and self.admin.request(
                        "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin"
                    ).status
                    == 200
                ):
                    return
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.25)
        raise BenchSetupError(
            f"kube-apiserver not ready within {timeout:.0f} s: {self._log_tail('kube-apiserver')}"
        )

    def kubeconfig(self, path: Path, *, token: str, user: str, namespace: str) -> Path:
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "arkbench",
                    "clusters": [
                        {
                            "name": "arkbench",
                            "cluster": {
                                "server": f"https://127.0.0.1:{self.port}",
                                "certificate-authority-data": base64.b64encode(
                                    (self.dir / "ca.crt").read_bytes()
                                ).decode(),
                            },
                        }
                    ],
                    "users": [{"name": user, "user": {"token": token}}],
                    "contexts": [
                        {
                            "name": "arkbench",
                            "context": {"cluster": "arkbench", "user": user, "namespace": namespace},
                        }
                    ],
                },
                indent=1,
            )
        )
        return path

    def audit_counts(self, *, user: str = BOOTSTRAP_USER, since_line: int = 0) -> tuple[Counter[str], int]:
        """Requests by `user` in the audit log from line `since_line`: counts keyed `verb resource[/sub]`."""
        counts: Counter[str] = Counter()
        seen: set[str] = set()
        lines = self.audit_log.read_text().splitlines() if self.audit_log.exists() else []
        for line in lines[since_line:]:
            ev = json.loads(line)
            if ev.get("user", {}).get("username") != user or ev["auditID"] in seen:
                continue
            seen.add(ev["auditID"])
            ref = ev.get("objectRef") or {}
            res = ref.get("resource", ev.get("requestURI", "?"))
            if ref.get("subresource"):
                res += "/" + ref["subresource"]
            counts[f"{ev['verb']} {res}"] += 1
        return counts, len(lines)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs.clear()
        shutil.rmtree(self.dir, ignore_errors=True)


@contextmanager
def control_plane() -> Iterator[ControlPlane]:
    with ControlPlane() as cp:
        yield cp


def merge_patch(client: RestClient, path: str, patch: Mapping[str, Any]) -> Any:
    return client.must("PATCH", path, dict(patch), content_type="application/merge-patch+json")
