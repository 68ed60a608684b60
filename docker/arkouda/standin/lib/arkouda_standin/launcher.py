"""``arkouda_server`` STAND-IN: spawn the locales over SSH like amudprun, report them, then serve.

Exit status: 0 after a ``shutdown`` request or SIGTERM/SIGINT; 1 if a locale fails to start or report in
time, or is lost (its ssh exits) while serving; 2 for a usage error. Every failure ends in one line that
names what to fix.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from . import BANNER, __version__, server, spawn
from .config import LaunchArgs, SpawnEnv, UsageError, parse_args, parse_env

log = logging.getLogger(__name__)

REPORT_PREFIX = "STANDIN-LAUNCH-REPORT "
DEFAULT_TIMEOUT = 120.0
UDP_TIMEOUT = 20.0


def emit(line: str) -> None:
    """Launcher output goes to stdout, flushed, each line marked as the stand-in's."""
    print(f"arkouda_server STAND-IN: {line}", flush=True)


@dataclass
class Collector:
    """The launcher's bootstrap listener: each locale connects back and sends one JSON report line."""

    num_locales: int
    sock: socket.socket
    reports: dict[int, dict[str, Any]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    conns: dict[int, socket.socket] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def serve(self) -> None:
        while not self.done.is_set():
            try:
                conn, addr = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn, addr), daemon=True).start()

    def _handle(self, conn: socket.socket, addr: tuple[str, int]) -> None:
        try:
            conn.settimeout(30)
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    raise ValueError("closed before its report")
                data += chunk
            report = json.loads(data)
            locale = int(report["locale"])
            report["connected_from"] = addr[0]
        except (OSError, ValueError, KeyError) as exc:
            with self.lock:
                self.errors.append(f"bootstrap connection from {addr[0]}: {exc}")
            conn.close()
            return
        with self.lock:
            if not 0 <= locale < self.num_locales or locale in self.reports:
                self.errors.append(f"bootstrap connection from {addr[0]}: unexpected locale id {locale}")
                conn.close()
                return
            self.reports[locale] = report
            self.conns[locale] = conn
            if len(self.reports) == self.num_locales:
                self.done.set()

    def close(self) -> None:
        self.done.set()
        for c in [self.sock, *self.conns.values()]:
            with contextlib.suppress(OSError):
                c.close()


class LaunchInterruptedError(Exception):
    """SIGTERM/SIGINT arrived before every locale reported."""


def check_udp(collector: Collector, workers: list[spawn.Worker], *, timeout: float) -> dict[int, dict[str, Any]]:
    """Hand every locale the UDP endpoints of all, then collect who heard whom (see udp.py)."""
    reports = collector.reports
    table = {
        "ok": True,
        "numLocales": collector.num_locales,
        "udpTimeout": timeout,
        "peers": [{"locale": i, "ip": r["ip"], "udpPort": r["udpPort"]} for i, r in sorted(reports.items())],
    }
    line = json.dumps(table).encode() + b"\n"
    for conn in collector.conns.values():
        conn.sendall(line)
    results: dict[int, dict[str, Any]] = {}
    for i, conn in sorted(collector.conns.items()):
        host = workers[i].host
        conn.settimeout(timeout + 15)
        try:
            with conn.makefile("rb") as f:
                raw = f.readline()
            results[i] = json.loads(raw)["udp"]
        except (OSError, ValueError, KeyError) as exc:
            why = "it closed its bootstrap connection" if isinstance(exc, ValueError) else str(exc)
            raise RuntimeError(f"locale {i} on host {host} did not finish the UDP check: {why}") from exc
        if results[i]["missing"]:
            heard_none = ", ".join(str(j) for j in results[i]["missing"])
            raise RuntimeError(
                f"locale {i} on host {host} heard no UDP from locale(s) {heard_none} within {timeout:.0f}s "
                f"(GASNet's udp conduit needs UDP between all the release's pods; check the NetworkPolicy)"
            )
        reports[i]["udp"] = results[i]
    return results


def launch(
    args: LaunchArgs,
    senv: SpawnEnv,
    argv0: str,
    *,
    timeout: float,
    collector: Collector,
    workers: list[spawn.Worker],
    stop: threading.Event,
) -> dict[str, Any]:
    """Start every locale (appended to ``workers``); returns the launch report once all reported.

    Raises RuntimeError naming the failed locale."""
    port = collector.sock.getsockname()[1]
    threading.Thread(target=collector.serve, name="bootstrap", daemon=True).start()

    openssh = spawn.is_openssh(senv.ssh_cmd)
    real = argv0 + "_real"  # Chapel's launcher runs <argv0>_real (chpl_get_real_binary_name)
    hosts = senv.servers[: args.num_locales]
    emit(f"{BANNER}")
    emit(
        f"spawning {args.num_locales} locale(s) with ssh spawner; hosts: {' '.join(hosts)}; "
        f"launcher address {senv.master_ip}:{port} (from {senv.master_ip_source})"
    )
    for i, host in enumerate(hosts):
        command = spawn.build_command(
            ssh_cmd=senv.ssh_cmd,
            openssh=openssh,
            ssh_options=senv.ssh_options,
            host=host,
            remote_path=senv.remote_path,
            extra_env={
                "ARKOUDA_STANDIN_MASTER": f"{senv.master_ip}:{port}",
                "ARKOUDA_STANDIN_LOCALE": str(i),
                "ARKOUDA_STANDIN_NUMLOCALES": str(args.num_locales),
            },
            argv=[real, *args.program_args],
        )
        emit(f"locale {i}: exec(/bin/sh -c '{command}')")
        workers.append(spawn.start(i, host, command, emit=emit))

    deadline = time.monotonic() + timeout
    while not collector.done.wait(0.2):
        if stop.is_set():
            raise LaunchInterruptedError
        for w in workers:
            rc = w.proc.poll()
            if rc is not None and w.locale not in collector.reports:
                tail = " | ".join(w.output[-3:]) or "no output"
                raise RuntimeError(
                    f"locale {w.locale} on host {w.host} failed: ssh exited with status {rc} before the "
                    f"locale reported ({tail})"
                )
        if collector.errors:
            raise RuntimeError(collector.errors[0])
        if time.monotonic() > deadline:
            missing = [f"{w.locale} ({w.host})" for w in workers if w.locale not in collector.reports]
            raise RuntimeError(
                f"locale(s) {', '.join(missing)} did not report to {senv.master_ip}:{port} within {timeout:.0f}s "
                f"(check GASNET_MASTERIP is reachable from the locales and TCP among the pods is allowed)"
            )
    check_udp(collector, workers, timeout=UDP_TIMEOUT)
    report = {
        "standIn": True,
        "version": __version__,
        "numLocales": args.num_locales,
        "serverPort": args.server_port,
        "launcher": {
            "argv0": argv0,
            "real": real,
            "cwd": os.getcwd(),
            "uid": os.getuid(),
            "hostname": socket.gethostname(),
            "master": f"{senv.master_ip}:{port}",
            "masterSource": senv.master_ip_source,
        },
        "spawner": {
            "sshCmd": senv.ssh_cmd,
            "sshOptions": senv.ssh_options,
            "openssh": openssh,
            "remotePath": senv.remote_path,
            "servers": senv.servers,
            "env": senv.selected,
        },
        "commands": [w.command for w in workers],
        "locales": [collector.reports[i] for i in range(args.num_locales)],
    }
    return report


def print_report(report: dict[str, Any]) -> None:
    emit(f"launch report: {report['numLocales']} locale(s) up")
    for loc in report["locales"]:
        emit(
            f"  locale {loc['locale']}: host={report['spawner']['servers'][loc['locale']]} "
            f"hostname={loc['hostname']} ip={loc['ip']} uid={loc['uid']} gid={loc['gid']} cwd={loc['cwd']} "
            f"binary={loc['binary']} args={' '.join(loc['args'])} udp=heard {len(loc['udp']['peers'])} peer(s)"
        )
    print(REPORT_PREFIX + json.dumps(report, sort_keys=True), flush=True)


def main(argv: list[str], env: dict[str, str]) -> int:
    logging.basicConfig(
        level=env.get("ARKOUDA_STANDIN_LOG_LEVEL", "WARNING"), format="%(name)s %(levelname)s %(message)s"
    )
    if "--version" in argv[1:] or "--about" in argv[1:]:
        print(f"{BANNER} {__version__}")
        return 0
    if "--help" in argv[1:] or "-h" in argv[1:]:
        print(
            f"{BANNER}\nusage: {argv[0]} -nl N [--ServerPort=5555] [Arkouda/Chapel options…]\n"
            "Spawns N locales over SSH like GASNet's amudprun (env GASNET_SSH_SERVERS, GASNET_SSH_CMD, "
            "GASNET_SSH_OPTIONS, GASNET_SSH_REMOTE_PATH, GASNET_MASTERIP), prints a launch report and serves "
            "ak.connect()/ak.get_config(). A test double: it computes nothing."
        )
        return 0
    try:
        args = parse_args(argv[1:])
        senv = parse_env(env, num_locales=args.num_locales, cwd=os.getcwd())
        timeout = float(env.get("ARKOUDA_STANDIN_TIMEOUT", DEFAULT_TIMEOUT))
    except (UsageError, ValueError) as exc:
        emit(f"error: {exc}")
        return 2

    stop = threading.Event()
    exit_code = [0]

    signals: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        # No output here: the handler may interrupt a print of the main thread (a reentrant write of
        # stdout raises); the main thread reports the signal once it sees `stop`.
        signals.append(signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    workers: list[spawn.Worker] = []
    listener = socket.create_server(("0.0.0.0", 0))  # noqa: S104 - locales connect from other pods
    collector = Collector(num_locales=args.num_locales, sock=listener)
    try:
        try:
            report = launch(args, senv, argv[0], timeout=timeout, collector=collector, workers=workers, stop=stop)
        except RuntimeError as exc:
            emit(f"error: {exc}")
            return 1
        except LaunchInterruptedError:
            emit(f"received signal {signals[0]}: interrupted before every locale reported; stopping the locales")
            return 143
        print_report(report)
        srv = server.StandInServer(
            port=args.server_port, report=report, env=env, authenticate=args.authenticate, on_shutdown=stop.set
        )
        srv.start()
        emit(f"server listening on tcp://*:{args.server_port} (ak.connect()/ak.get_config() answered)")

        def watch() -> None:
            while not stop.is_set():
                for w in workers:
                    rc = w.proc.poll()
                    if rc is not None:
                        emit(f"error: locale {w.locale} on host {w.host} lost: ssh exited with status {rc}")
                        exit_code[0] = 1
                        stop.set()
                        return
                time.sleep(0.2)

        threading.Thread(target=watch, name="watch", daemon=True).start()
        stop.wait()
        if signals:
            emit(f"received signal {signals[0]}; shutting down")
        srv.stop()
        return exit_code[0]
    finally:
        collector.close()
        for w in workers:
            if w.proc.poll() is None:
                w.proc.terminate()
        for w in workers:
            try:
                w.proc.wait(timeout=5)
            except Exception:  # noqa: BLE001 - best effort at exit
                w.proc.kill()
        sys.stdout.flush()
