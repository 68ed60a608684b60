"""ApiServerDouble: a named test double of the Kubernetes API server on a loopback port (plain HTTP), so the
bootstrap's KubernetesApi runs through the real client (CoreV1Api, watch.Watch, urllib3) in unit tests.

Each request is answered by the first scripted `Answer` whose method and path match, and recorded. A watch
answer streams its lines and closes the connection, as the API server does when `timeoutSeconds` passes."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from arkouda_bootstrap.kube.api import KubernetesApi
from kubernetes import client

TOKEN = "double-token"
# Where the registration's objects live in the namespace `ns` of the tests, and the label that marks them ours.
SERVICES = "/api/v1/namespaces/ns/services"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/ns/endpointslices"
MANAGED = {"app.kubernetes.io/managed-by": "arkouda-bootstrap"}


@dataclass
class Answer:
    """One scripted answer: a JSON body, or watch lines (objects or raw bytes). `stall` seconds of silence:
    before the answer, or for watch lines after them with the connection left open (a dead watch)."""

    method: str
    path: str
    status: int = 200
    body: dict[str, Any] | None = None
    lines: Sequence[dict[str, Any] | bytes] = ()
    stall: float = 0.0
    times: int = 1


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: dict[str, Any] | None


@dataclass
class ApiServerDouble:
    answers: list[Answer] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    port: int = 0

    def answer(self, *answers: Answer) -> None:
        self.answers.extend(answers)

    def take(self, method: str, path: str) -> Answer | None:
        for i, candidate in enumerate(self.answers):
            if candidate.method == method and candidate.path == path:
                candidate.times -= 1
                if candidate.times <= 0:
                    del self.answers[i]
                return candidate
        return None

    def api(self, *, request_timeout: float = 5.0) -> KubernetesApi:
        configuration = client.Configuration(
            host=f"http://127.0.0.1:{self.port}",
            api_key={"authorization": TOKEN},
            api_key_prefix={"authorization": "Bearer"},
        )
        return KubernetesApi(client.ApiClient(configuration), request_timeout=request_timeout)


def _handler(double: ApiServerDouble) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # chunked watch answers

        def _serve(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            double.seen.append(
                Seen(
                    method=self.command,
                    path=url.path,
                    query=dict(parse_qsl(url.query)),
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=json.loads(raw) if raw else None,
                )
            )
            found = double.take(self.command, url.path)
            if found is None:
                found = Answer(self.command, url.path, status=500, body={"kind": "Status", "message": "unscripted"})
            if found.stall and not found.lines:
                time.sleep(found.stall)
            self.send_response(found.status)
            self.send_header("Content-Type", "application/json")
            if not found.lines:
                payload = json.dumps(found.body or {}).encode()
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            # chunked, one event per chunk, as the API server streams a watch
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            for line in found.lines:
                data = (line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            time.sleep(found.stall)
            self.wfile.write(b"0\r\n\r\n")

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve  # noqa: N815 -- BaseHTTPRequestHandler's naming

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextlib.contextmanager
def serving() -> Iterator[ApiServerDouble]:
    """Run an ApiServerDouble on a free loopback port for the block."""
    double = ApiServerDouble()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(double))
    server.daemon_threads = True
    double.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="apiserver-double", daemon=True)
    thread.start()
    try:
        yield double
    finally:
        server.shutdown()
        server.server_close()
