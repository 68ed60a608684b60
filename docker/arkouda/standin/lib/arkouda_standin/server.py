"""The stand-in's Arkouda server side: ZeroMQ REP on ``--ServerPort`` answering enough of Arkouda's client
protocol for ``ak.connect()`` and ``ak.get_config()``.

Two request forms are understood, matching the two generations of Arkouda's client:
* JSON ``{"user", "token", "cmd", "format", "args", "size"}`` (current clients); the reply is JSON
  ``{"msg", "msgType": "NORMAL"|"ERROR", "user"}``;
* a bare string ``"<cmd> [args]"`` (clients up to 2020, e.g. PyPI's arkouda 2020.7.7); the reply is the bare
  message, errors prefixed ``Error:``.
Commands: ``connect``, ``getconfig`` (numLocales, LocaleConfigs, …), ``ruok`` (``imok``), ``getmemused``,
``standinreport`` (the launch report as JSON; stand-in only), ``disconnect``, ``shutdown``. Anything else
is answered with an error that says STAND-IN.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import socketserver
import sys
import threading
from collections.abc import Callable
from typing import Any

from . import __version__, zmtp

log = logging.getLogger(__name__)


def physical_memory() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def build_config(report: dict[str, Any], *, port: int, authenticate: bool) -> dict[str, Any]:
    locales = report["locales"]
    return {
        "standIn": True,
        "arkoudaVersion": f"standin-{__version__}",
        "chplVersion": "STAND-IN (no Chapel)",
        "ZMQVersion": "ZMTP 3.0 (stand-in, stdlib)",
        "HDF5Version": "none",
        "ARROW_VERSION": "none",
        "serverHostname": socket.gethostname(),
        "ServerPort": port,
        "numLocales": report["numLocales"],
        "numPUs": locales[0].get("numPUs", 0),
        "maxTaskPar": locales[0].get("numPUs", 0),
        "physicalMemory": locales[0].get("physicalMemory", 0),
        "distributionType": "STAND-IN",
        "LocaleConfigs": [
            {
                "id": loc["locale"],
                "name": loc["hostname"],
                "ip": loc["ip"],
                "numPUs": loc.get("numPUs", 0),
                "maxTaskPar": loc.get("numPUs", 0),
                "physicalMemory": loc.get("physicalMemory", 0),
            }
            for loc in locales
        ],
        "authenticate": authenticate,
        "logLevel": "INFO",
        "regexMaxCaptures": 20,
        "byteorder": sys.byteorder,
        "autoShutdown": False,
        "serverInfoNoSplit": False,
        "maxTransferBytes": 1 << 30,
    }


class StandInServer:
    def __init__(
        self,
        *,
        port: int,
        report: dict[str, Any],
        env: dict[str, str],
        authenticate: bool,
        on_shutdown: Callable[[], None],
    ) -> None:
        self.port = port
        self.report = report
        self.config = build_config(report, port=port, authenticate=authenticate)
        self.authenticate = authenticate
        self.token = env.get("ARKOUDA_SERVER_TOKEN", "")
        self.on_shutdown = on_shutdown
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                outer.serve_connection(self.request)

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        socketserver.ThreadingTCPServer.daemon_threads = True
        self._tcp = socketserver.ThreadingTCPServer(("0.0.0.0", port), Handler)  # noqa: S104 - a server

    def start(self) -> None:
        threading.Thread(target=self._tcp.serve_forever, name="zmq-rep", daemon=True).start()

    def stop(self) -> None:
        self._tcp.shutdown()
        self._tcp.server_close()

    def serve_connection(self, sock: socket.socket) -> None:
        conn = zmtp.Connection(sock, socket_type="REP")
        try:
            conn.handshake()
            while True:
                envelope, body = zmtp.split_envelope(conn.recv_multipart())
                reply, after = self.handle(b"".join(body))
                conn.send_multipart([*envelope, reply])
                if after is not None:
                    after()
        except (zmtp.ZmtpError, OSError) as exc:
            log.debug("connection ended: %s", exc)

    def handle(self, raw: bytes) -> tuple[bytes, Callable[[], None] | None]:
        """One request → (reply bytes, action to run after the reply was sent)."""
        text = raw.decode("utf-8", "replace")
        as_json = text.lstrip().startswith("{")
        user, token = "", ""
        if as_json:
            try:
                req = json.loads(text)
                cmd, user, token = str(req.get("cmd", "")), str(req.get("user", "")), str(req.get("token") or "")
            except ValueError:
                cmd = ""
        else:
            cmd = text.split(" ", 1)[0].strip()
        ok, msg, after = self.dispatch(cmd, token=token)
        if as_json:
            return json.dumps({"msg": msg, "msgType": "NORMAL" if ok else "ERROR", "user": user}).encode(), after
        return (msg if ok else f"Error: {msg}").encode(), after

    def dispatch(self, cmd: str, *, token: str) -> tuple[bool, str, Callable[[], None] | None]:
        if self.authenticate and token != self.token:
            return False, "Incorrect token (STAND-IN checks ARKOUDA_SERVER_TOKEN)", None
        where = f"tcp://*:{self.port}"
        if cmd == "connect":
            return True, f"connected to arkouda server {where} (STAND-IN)", None
        if cmd == "getconfig":
            return True, json.dumps(self.config), None
        if cmd == "ruok":
            return True, "imok", None
        if cmd == "getmemused":
            return True, "0", None
        if cmd == "standinreport":
            return True, json.dumps(self.report), None
        if cmd == "disconnect":
            return True, f"disconnected from arkouda server {where}", None
        if cmd == "shutdown":
            return True, f"shutdown server ({self.config['numLocales']} locales) (STAND-IN)", self.on_shutdown
        return False, f"STAND-IN server does not implement command {cmd!r} (pid {os.getpid()})", None
