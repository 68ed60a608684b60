"""The stand-in's arkouda_server on locale 0: Arkouda v2025.01.13's server daemons (src/ServerDaemon.chpl) on
pyzmq, started by the C launcher ``arkouda_server_real`` once the GASNet job is up.

* DEFAULT daemon: ZeroMQ REP on ``--ServerPort`` (default 5555). ``connect``, ``getconfig``,
  ``getRegistrationConfig``, ``disconnect`` (with ``--autoShutdown=true``: shutdown), ``noop``, ``ruok``,
  ``getmemused``, ``metrics``, ``shutdown`` (reply ``shutdown server (<n> req)``, exit 0), the stand-in's own
  ``standinlocales`` (the GASNet locale table), ``standin_sleep`` (argument ``seconds``: a command that
  takes that long, for tests of long requests) and ``standin_wedge`` (replies, then the DEFAULT daemon never
  reads another request while the process and its other daemons live on: a request loop that stopped answering,
  for tests of the gate's health check); anything else: Arkouda's ``Unrecognized command`` error, naming the
  stand-in.
* METRICS daemon (only with ``ServerDaemonType.METRICS`` in ``--ServerDaemon.daemonTypes``): ZeroMQ REP on
  ``$METRICS_SERVER_PORT`` (default 5556): ``connect``, ``getconfig``, ``metrics`` (see ``metrics``).
* Errors Arkouda does not catch in a daemon's loop (a wrong or missing token with ``--authenticate``, a request
  that is not JSON, a bad metrics category, ``connect`` on the metrics socket with ``--authenticate``) get no
  reply: they end that daemon; when no daemon is left the program halts with exit status 1, as Chapel's
  coforall in ``main()`` does. With the METRICS daemon still running the process stays up and the client
  port stops answering.

Exit status: 0 after ``shutdown`` and after SIGTERM/SIGINT (the stand-in stops cleanly; a real Chapel program
dies by the signal), 1 for a halt, 2 for bad arguments or environment.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import zmq

from . import partfiles, startup
from .arraymsg import ArrayCommands, UnknownCommandError
from .checkpoint import Checkpoints
from .metrics import MEMORY_USED, MetricsTables
from .options import Locale, ServerOptions, UsageError, parse_args, parse_locales
from .partfiles import LocaleParts
from .protocol import (
    STANDIN_NOTE,
    STANDIN_VERSION,
    Request,
    UncaughtError,
    local_hostname,
    parse_request,
    registration_config,
    reply,
    server_config,
)
from .symtab import CommandError, SymbolTable

log = logging.getLogger(__name__)

PROG = "arkouda_server STAND-IN"
POLL_MS = 100
# How long a reply sent just before the exit may still take to leave (shutdown's reply).
LINGER_MS = 2000
CHECKPOINT_COMMANDS = ("save_checkpoint", "load_checkpoint")
# standin_sleep's ceiling: a typo must not wedge a test's server for hours.
MAX_SLEEP_SECONDS = 3600.0

# (socket, request frame, payload frame of a BINARY request or None)
Handler = Callable[["zmq.Socket[bytes]", bytes, bytes | None], None]


class StandInServer:
    def __init__(
        self,
        *,
        options: ServerOptions,
        locales: list[Locale],
        token: str,
        hostname: str,
        context: zmq.Context[zmq.Socket[bytes]],
        parts: LocaleParts,
    ) -> None:
        self.options = options
        self.locales = locales
        self.token = token
        self.hostname = hostname
        self.config_json = json.dumps(server_config(options, locales, hostname=hostname))
        self.tables = MetricsTables(options=options, locales=locales, hostname=hostname)
        self.table = SymbolTable()
        self.table_lock = threading.Lock()
        self.arrays = ArrayCommands(table=self.table)
        self.checkpoints = Checkpoints(table=self.table, num_locales=len(locales), parts=parts)
        self.stop = threading.Event()
        self.exit_code = 0
        self.req_count = 0
        self.rep_count = 0
        self._lock = threading.Lock()
        self._alive: set[str] = set()
        self._threads: list[threading.Thread] = []
        self.main_socket = self._bind(context, options.server_port)
        self.metrics_socket = self._bind(context, options.metrics_port) if options.metrics_enabled else None

    @staticmethod
    def _bind(context: zmq.Context[zmq.Socket[bytes]], port: int) -> zmq.Socket[bytes]:
        sock = context.socket(zmq.REP)
        sock.setsockopt(zmq.LINGER, LINGER_MS)
        sock.bind(f"tcp://*:{port}")
        return sock

    # --- lifecycle --------------------------------------------------------------------------------------

    def start(self) -> None:
        daemons: list[tuple[str, zmq.Socket[bytes], Handler]] = [("DEFAULT", self.main_socket, self._handle_main)]
        if self.metrics_socket is not None:
            daemons.append(("METRICS", self.metrics_socket, self._handle_metrics))
        for name, sock, handler in daemons:
            self._alive.add(name)
            thread = threading.Thread(target=self._serve, args=(name, sock, handler), name=name, daemon=True)
            self._threads.append(thread)
            thread.start()

    def finish(self, code: int) -> None:
        with self._lock:
            if not self.stop.is_set():
                self.exit_code = code
                self.stop.set()

    def close(self) -> None:
        for thread in self._threads:
            thread.join(timeout=5)
        self.main_socket.close()
        if self.metrics_socket is not None:
            self.metrics_socket.close()

    def _serve(self, name: str, sock: zmq.Socket[bytes], handler: Handler) -> None:
        while not self.stop.is_set():
            if not sock.poll(POLL_MS):
                continue
            raw = sock.recv()
            payload: bytes | None = None
            while sock.getsockopt(zmq.RCVMORE):
                payload = sock.recv()  # a BINARY request's payload frame (ak.array's values)
            try:
                handler(sock, raw, payload)
            except UncaughtError as exc:
                self._daemon_died(name, str(exc))
                return

    def _daemon_died(self, name: str, message: str) -> None:
        with self._lock:
            self._alive.discard(name)
            left = sorted(self._alive)
        if left:
            log.error(
                "uncaught %s -- Arkouda v2025.01.13 does not catch this error: its %s daemon ends without "
                "replying (port %d no longer answers) while the %s daemon keeps running",
                message,
                name,
                self.options.server_port if name == "DEFAULT" else self.options.metrics_port,
                " and ".join(left),
            )
            return
        print(f"{PROG}: error: uncaught {message} (Arkouda v2025.01.13 halts here)", file=sys.stderr, flush=True)
        self.finish(1)

    # --- the DEFAULT daemon -----------------------------------------------------------------------------

    def _authenticate(self, token: str) -> None:
        # ServerDaemon.authenticateUser throws outside any try: the server never replies to this request.
        if token in ("", "None"):
            raise UncaughtError("ErrorWithMsg: Error: access to arkouda requires a token")
        if token != self.token:
            raise UncaughtError(
                f"ErrorWithMsg: Error: token {token} does not match server token, check with server owner"
            )

    def _handle_main(self, sock: zmq.Socket[bytes], raw: bytes, payload: bytes | None) -> None:
        self.req_count += 1
        start = time.monotonic()
        req = parse_request(raw)
        if self.options.authenticate:
            self._authenticate(req.token)
        if self.options.trace:
            log.info(">>> %r %r", req.cmd, req.args)
        if req.cmd == "shutdown" or (req.cmd == "disconnect" and self.options.auto_shutdown):
            self._shutdown(sock, req.user, start)
            return
        if self.arrays.handles(req.cmd) or req.cmd in CHECKPOINT_COMMANDS:
            msg, msg_type = self._array_command(sock, req, payload)
        else:
            msg, msg_type = self._dispatch(req)
            self.rep_count += 1
            sock.send(reply(msg, msg_type=msg_type, user=req.user))
        if req.cmd == "standin_wedge":
            log.warning("standin_wedge: the DEFAULT daemon stops reading requests (the test double's dead loop)")
            self.stop.wait()  # until SIGTERM or SIGINT: the process stays up, port %d open, nothing read
            return
        elapsed = time.monotonic() - start
        if self.options.trace:
            if msg_type == "ERROR":
                log.error("<<< %s resulted in error %s in %.6f sec", req.cmd, msg, elapsed)
            else:
                log.info("<<< %s took %.6f sec", req.cmd, elapsed)
        if self.options.trace and self.options.mem_track:
            mem_used = MEMORY_USED * len(self.locales)
            log.info("bytes of memory %d used after %s command", mem_used, req.cmd)
            if self.options.metrics_enabled:
                self.tables.record(user=req.user, cmd=req.cmd, elapsed=elapsed, mem_used=mem_used)

    def _array_command(self, sock: zmq.Socket[bytes], req: Request, payload: bytes | None) -> tuple[str, str]:
        """One of the array commands; a thrown error is answered as Arkouda's daemon answers it."""
        binary = self.arrays.binary_reply(req.cmd)
        try:
            with self.table_lock:
                result: str | bytes
                if req.cmd == "save_checkpoint":
                    result = self.checkpoints.save(req.params)
                    msg, msg_type = result, "NORMAL"
                elif req.cmd == "load_checkpoint":
                    msg, msg_type = self.checkpoints.load(req.params)
                    result = msg
                else:
                    result = self.arrays.run(req.cmd, req.params, payload)
                    msg, msg_type = (result, "NORMAL") if isinstance(result, str) else ("", "NORMAL")
        except UnknownCommandError as exc:
            msg, msg_type = str(exc), "ERROR"
        except CommandError as exc:
            msg, msg_type = f"Error executing command {req.cmd}: {exc}", "ERROR"
        self.rep_count += 1
        if binary:
            # A binary reply is the bytes alone; an error is its text, which the client recognizes by "Error:".
            sock.send(result if msg_type == "NORMAL" and isinstance(result, bytes) else f"Error: {msg}".encode())
        else:
            sock.send(reply(msg, msg_type=msg_type, user=req.user))
        return msg, msg_type

    def _shutdown(self, sock: zmq.Socket[bytes], user: str, start: float) -> None:
        self.rep_count += 1
        # requestShutdown serializes through MsgTuple.init, which drops the user: the reply's user is "".
        sock.send(reply(f"shutdown server ({self.rep_count} req)"))
        if self.options.trace:
            log.info("<<< shutdown initiated by %s took %.6f sec", user, time.monotonic() - start)
        self.finish(0)

    def _dispatch(self, req: Request) -> tuple[str, str]:
        port = self.options.server_port
        if req.cmd == "connect":
            if self.options.authenticate:
                return f"connected to arkouda server tcp://*:{port} as user {req.user} with token {req.token}", "NORMAL"
            return f"connected to arkouda server tcp://*:{port}", "NORMAL"
        if req.cmd == "disconnect":
            return f"disconnected from arkouda server tcp://*:{port}", "NORMAL"
        if req.cmd == "noop":
            return "noop", "NORMAL"
        if req.cmd == "ruok":
            return "imok", "NORMAL"
        if req.cmd == "getconfig":
            return self.config_json, "NORMAL"
        if req.cmd == "getRegistrationConfig":
            return registration_config(), "NORMAL"
        if req.cmd == "getmemused":
            missing = [k for k in ("factor", "as_percent") if k not in req.params]
            if missing:
                return f"Error executing command: Key {missing[0]} not found in MessageArgs", "ERROR"
            return str(MEMORY_USED), "NORMAL"
        if req.cmd == "metrics":
            # MetricsMsg registers "metrics" in the command map, so the client port answers it too.
            try:
                return self.tables.answer(req.params), "NORMAL"
            except UncaughtError as exc:
                return f"Error executing command: {exc}", "ERROR"
        if req.cmd == "standinlocales":
            return json.dumps({"standIn": STANDIN_NOTE, "locales": self.locale_table()}), "NORMAL"
        if req.cmd == "standin_sleep":
            return self._sleep(req.params)
        if req.cmd == "standin_wedge":
            return "wedged: this server's request loop reads no further request (STAND-IN test double)", "NORMAL"
        return (
            f"Unrecognized command: {req.cmd} (STAND-IN arkouda_server: a test double that answers only connect, "
            "getconfig, getRegistrationConfig, disconnect, noop, ruok, getmemused, metrics, the 1-D array commands "
            "create, array, arraySegString, tondarray, [int], [int]=val, set, info, delete, save_checkpoint, "
            "load_checkpoint, and standinlocales, "
            "standin_sleep, standin_wedge, shutdown)",
            "ERROR",
        )

    @staticmethod
    def _sleep(params: dict[str, str]) -> tuple[str, str]:
        """The test double's long command: blocks the client port for `seconds`, as a long Arkouda command does
        (one REP socket, one request at a time), then replies."""
        try:
            seconds = float(params["seconds"])
        except (KeyError, ValueError):
            return "Error executing command: standin_sleep needs a numeric argument seconds", "ERROR"
        if not 0 <= seconds <= MAX_SLEEP_SECONDS:
            return f"Error executing command: standin_sleep seconds must be within 0..{MAX_SLEEP_SECONDS}", "ERROR"
        time.sleep(seconds)
        return f"slept {seconds:g} s", "NORMAL"

    def locale_table(self) -> list[dict[str, object]]:
        return [
            {
                "id": loc.id,
                "name": loc.name,
                "pid": loc.pid,
                "uid": loc.uid,
                "numPUs": loc.num_pus,
                "physicalMemory": loc.physical_memory,
            }
            for loc in self.locales
        ]

    # --- the METRICS daemon -----------------------------------------------------------------------------

    def _handle_metrics(self, sock: zmq.Socket[bytes], raw: bytes, _payload: bytes | None) -> None:
        req = parse_request(raw)
        port = self.options.metrics_port
        msg = ""  # MetricsServerDaemon's select has no otherwise: other commands get an empty NORMAL reply
        if req.cmd == "metrics":
            msg = self.tables.answer(req.params)
        elif req.cmd == "connect":
            if self.options.authenticate:
                # "... as user " + "%s with token %s".format(port, user, token): three arguments for two
                # specifiers, so format() throws (the main daemon had the same bug, fixed in Arkouda PR #717).
                raise UncaughtError(
                    "IllegalArgumentError: too many arguments for format() in the metrics connect reply"
                )
            msg = f"connected to arkouda metrics server tcp://*:{port}"
        elif req.cmd == "getconfig":
            msg = self.config_json
        # The metrics daemon neither checks the token nor keeps the user in its replies.
        sock.send(reply(msg))


# --- the program ----------------------------------------------------------------------------------------


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        stream=sys.stdout,
        level={"WARN": logging.WARNING}.get(level, getattr(logging, level, logging.INFO)),
        format=f"%(asctime)s {PROG} [%(threadName)s] %(levelname)s %(message)s",
    )


def main(argv: list[str], env: dict[str, str], *, cwd: Path | None = None) -> int:
    """argv: the Arkouda program arguments (without the program name)."""
    try:
        options = parse_args(argv, env)
        locales = parse_locales(env)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    _configure_logging(options.log_level)
    here = cwd or Path.cwd()
    hostname = local_hostname()
    try:
        arkouda_dir = startup.init_arkouda_directory(here)
        token, source = startup.arkouda_token(arkouda_dir, env) if options.authenticate else ("", "")
    except startup.HaltError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr, flush=True)
        return 1
    if options.authenticate:
        log.info("token from %s", source)

    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    try:
        server = StandInServer(
            options=options,
            locales=locales,
            token=token,
            hostname=hostname,
            context=context,
            parts=partfiles.from_env(env),
        )
    except zmq.ZMQError as exc:
        print(f"{PROG}: error: cannot bind a port ({exc}); --ServerPort and METRICS_SERVER_PORT", file=sys.stderr)
        context.term()
        return 1

    received: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        # No printing or logging here: a signal landing inside a print would raise "reentrant call".
        received.append(signum)
        server.finish(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    url = startup.connect_url(hostname, options.server_port, token)
    startup.write_connection_info(options, hostname=hostname, url=url)
    print(f"arkouda_server {STANDIN_NOTE}; {len(locales)} locales from the GASNet job", flush=True)
    if options.server_info_no_splash:
        print(server.config_json, flush=True)
    else:
        lines = startup.splash(
            url=url,
            version=STANDIN_VERSION,
            chpl_version=" STAND-IN (no Chapel)",
            mem_track=options.mem_track,
            mem_limit=options.mem_max or locales[0].physical_memory * 90 // 100,
            mem_used=MEMORY_USED,
        )
        print("\n".join(lines), flush=True)
    if options.metrics_enabled:
        log.info("metrics daemon listening on tcp://*:%d", options.metrics_port)
    server.start()
    while not server.stop.wait(1.0):
        pass
    if received:
        log.info("%s received: stopped", signal.Signals(received[0]).name)
    server.close()
    context.term()
    if server.exit_code == 0:  # a halt leaves the file behind, as Chapel's halt does
        startup.remove_connection_info(options)
    log.info("requests = %d responseCount = %d", server.req_count, server.rep_count)
    return server.exit_code


def run() -> None:
    sys.exit(main(sys.argv[1:], dict(os.environ)))
