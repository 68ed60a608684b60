"""The Arkouda program arguments and environment the stand-in server reads, parsed as Chapel parses config
constants: ``--name=value``, ``--name value``, a bare ``--name`` for a boolean (true), and the module-qualified
spelling ``--Module.name``. Names and defaults are those of Arkouda v2025.01.13 (src/ServerConfig.chpl,
src/ServerDaemon.chpl, src/MetricsMsg.chpl); arguments the stand-in has no use for are ignored.

The locales come from the GASNet job (the C launcher on locale 0 passes them in ``ARKOUDA_STANDIN_NUMLOCALES``
and ``ARKOUDA_STANDIN_LOCALES``); without them the stand-in cannot answer ``getconfig`` truthfully and refuses
to start.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

DEFAULT_SERVER_PORT = 5555
DEFAULT_METRICS_PORT = 5556
DAEMON_TYPES = ("DEFAULT", "INTEGRATION", "METRICS", "STATUS")
LOG_LEVELS = ("DEBUG", "INFO", "WARN", "ERROR", "CRITICAL")
LOG_CHANNELS = ("CONSOLE", "FILE")
BOOL_NAMES = frozenset({"authenticate", "trace", "memTrack", "autoShutdown", "serverInfoNoSplash"})
VALUE_NAMES = frozenset({"ServerPort", "logLevel", "logChannel", "daemonTypes", "memMax", "serverConnectionInfo"})
LOCALE_KEYS = ("id", "name", "pid", "uid", "numPUs", "physicalMemory")


class UsageError(Exception):
    """A mistake in the arguments or the environment; the message names what to fix."""


@dataclass(frozen=True)
class ServerOptions:
    server_port: int = DEFAULT_SERVER_PORT
    authenticate: bool = False
    trace: bool = True
    mem_track: bool = False
    auto_shutdown: bool = False
    server_info_no_splash: bool = False
    log_level: str = "INFO"
    log_channel: str = "CONSOLE"
    daemon_types: tuple[str, ...] = ("DEFAULT",)
    mem_max: int = 0
    server_connection_info: str = ""
    metrics_port: int = DEFAULT_METRICS_PORT

    @property
    def metrics_enabled(self) -> bool:
        return "METRICS" in self.daemon_types


@dataclass(frozen=True)
class Locale:
    id: int
    name: str
    pid: int
    uid: int
    num_pus: int
    physical_memory: int


def _bool(name: str, value: str) -> bool:
    if value not in ("true", "false"):
        raise UsageError(f"--{name} takes true or false, got {value!r}")
    return value == "true"


def _int(name: str, value: str, *, low: int, high: int | None = None) -> int:
    try:
        number = int(value)
    except ValueError:
        raise UsageError(f"--{name} takes an integer, got {value!r}") from None
    if number < low or (high is not None and number > high):
        raise UsageError(f"--{name}={number} is out of range ({low}..{high if high is not None else ''})")
    return number


def _enum(name: str, value: str, *, enum: str, members: tuple[str, ...]) -> str:
    # Chapel's string-to-enum cast takes the bare or the qualified constant (``INFO``, ``LogLevel.INFO``).
    bare = value.removeprefix(f"{enum}.")
    if bare not in members:
        raise UsageError(f"--{name}: {value!r} is not one of {', '.join(f'{enum}.{m}' for m in members)}")
    return bare


def parse_args(argv: list[str], env: dict[str, str]) -> ServerOptions:
    """Arkouda's program arguments (without the program name) and environment → options."""
    values: dict[str, str] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if not arg.startswith("--"):
            continue
        name, eq, value = arg[2:].partition("=")
        name = name.rsplit(".", 1)[-1]  # --ServerDaemon.daemonTypes, --ServerConfig.ServerPort
        if name not in BOOL_NAMES and name not in VALUE_NAMES:
            continue
        if not eq:
            if name in BOOL_NAMES:
                value = "true"
            elif i < len(argv):
                value = argv[i]
                i += 1
            else:
                raise UsageError(f"--{name} needs a value")
        values[name] = value

    daemon_types = tuple(
        _enum("ServerDaemon.daemonTypes", t, enum="ServerDaemonType", members=DAEMON_TYPES)
        for t in values.get("daemonTypes", "ServerDaemonType.DEFAULT").split(",")
    )
    metrics_port_text = env.get("METRICS_SERVER_PORT", "") or str(DEFAULT_METRICS_PORT)
    try:
        metrics_port = int(metrics_port_text)
    except ValueError:
        raise UsageError(f"METRICS_SERVER_PORT must be a port number, got {metrics_port_text!r}") from None
    return ServerOptions(
        server_port=_int("ServerPort", values.get("ServerPort", str(DEFAULT_SERVER_PORT)), low=1, high=65535),
        authenticate=_bool("authenticate", values.get("authenticate", "false")),
        trace=_bool("trace", values.get("trace", "true")),
        mem_track=_bool("memTrack", values.get("memTrack", "false")),
        auto_shutdown=_bool("autoShutdown", values.get("autoShutdown", "false")),
        server_info_no_splash=_bool("serverInfoNoSplash", values.get("serverInfoNoSplash", "false")),
        log_level=_enum("logLevel", values.get("logLevel", "INFO"), enum="LogLevel", members=LOG_LEVELS),
        log_channel=_enum("logChannel", values.get("logChannel", "CONSOLE"), enum="LogChannel", members=LOG_CHANNELS),
        daemon_types=daemon_types,
        mem_max=_int("memMax", values.get("memMax", "0"), low=0),
        # Arkouda's default for --serverConnectionInfo is this environment variable.
        server_connection_info=values.get("serverConnectionInfo", env.get("ARKOUDA_SERVER_CONNECTION_INFO", "")),
        metrics_port=metrics_port,
    )


def parse_locales(env: dict[str, str]) -> list[Locale]:
    """The GASNet job's locales from ``ARKOUDA_STANDIN_NUMLOCALES`` and ``ARKOUDA_STANDIN_LOCALES``."""
    count_text = env.get("ARKOUDA_STANDIN_NUMLOCALES")
    table_text = env.get("ARKOUDA_STANDIN_LOCALES")
    if count_text is None or table_text is None:
        missing = [n for n in ("ARKOUDA_STANDIN_NUMLOCALES", "ARKOUDA_STANDIN_LOCALES") if n not in env]
        raise UsageError(
            f"{' and '.join(missing)} not set: the stand-in server runs under arkouda_server_real on locale 0, "
            "which sets them from the GASNet job"
        )
    if not count_text.isdigit() or int(count_text) < 1:
        raise UsageError(f"ARKOUDA_STANDIN_NUMLOCALES must be a positive integer, got {count_text!r}")
    try:
        table: Any = json.loads(table_text)
    except ValueError as exc:
        raise UsageError(f"ARKOUDA_STANDIN_LOCALES is not JSON ({exc})") from None
    if not isinstance(table, list) or len(table) != int(count_text):
        raise UsageError(
            f"ARKOUDA_STANDIN_LOCALES must be a JSON array of ARKOUDA_STANDIN_NUMLOCALES={count_text} objects"
        )
    locales: list[Locale] = []
    for index, entry in enumerate(table):
        if not isinstance(entry, dict) or any(k not in entry for k in LOCALE_KEYS):
            raise UsageError(f"ARKOUDA_STANDIN_LOCALES[{index}] must be an object with keys {', '.join(LOCALE_KEYS)}")
        ints = ("id", "pid", "uid", "numPUs", "physicalMemory")
        if not isinstance(entry["name"], str) or any(
            not isinstance(entry[k], int) or isinstance(entry[k], bool) for k in ints
        ):
            raise UsageError(f"ARKOUDA_STANDIN_LOCALES[{index}]: name must be a string and {', '.join(ints)} integers")
        if entry["id"] != index:
            raise UsageError(f"ARKOUDA_STANDIN_LOCALES must be ordered by id: entry {index} has id {entry['id']}")
        locales.append(
            Locale(
                id=entry["id"],
                name=entry["name"],
                pid=entry["pid"],
                uid=entry["uid"],
                num_pus=entry["numPUs"],
                physical_memory=entry["physicalMemory"],
            )
        )
    return locales
