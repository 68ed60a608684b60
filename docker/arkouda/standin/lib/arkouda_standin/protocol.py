"""Arkouda's request/reply messages and the two JSON documents the client's ``connect()`` reads, as in
Arkouda v2026.07.15 (src/Message.chpl, src/ServerConfig.chpl ``createConfig``, registration-config.json).

Request (one ZeroMQ frame, JSON): ``{"user", "token", "cmd", "format", "args", "size"}``; ``args`` is a JSON
array of JSON-encoded ``{"key", "dtype", "val"}`` objects when ``size`` > 0. Reply (one frame, JSON): the
``MsgTuple`` record ``{"msg", "msgType", "msgFormat", "user", "payload"}``; the client reads ``msg``,
``msgType`` (``NORMAL``/``WARNING``/``ERROR``) and ``user``.
"""

from __future__ import annotations

import json
import socket
import sys
from dataclasses import dataclass
from typing import Any

from .options import Locale, ServerOptions

ARKOUDA_VERSION = "v2026.07.15"
STANDIN_VERSION = f"{ARKOUDA_VERSION}-STAND-IN"
STANDIN_NOTE = (
    f"STAND-IN: a test double of arkouda_server {ARKOUDA_VERSION} (start-up, token, connect handshake, "
    "metrics socket, a symbol table of 1-D arrays); it computes nothing"
)

# registration-config.json at the tag: what the server was compiled for. The client's connect() parses it
# and ak.get_array_ranks() returns parameter_classes.array.nd.
REGISTRATION_CONFIG: dict[str, Any] = {
    "parameter_classes": {
        "array": {"nd": [1], "dtype": ["int", "uint", "uint(8)", "real", "bool", "bigint"]},
        "SparseSymEntry": {
            "etype": ["int"],
            "dimensions": [2],
            "matLayout": {"__enum__": "SparseMatrix.Layout", "__variants__": ["CSR", "CSC"]},
        },
        "binop": {"dtype": ["int", "uint", "real", "bool", "bigint"]},
        "scalar": {"dtype": ["int", "uint", "uint(8)", "real", "bool", "bigint"]},
    }
}


class UncaughtError(Exception):
    """An error Arkouda (v2025.01.13 and v2026.07.15 alike) does not catch inside a daemon's loop: it ends that
    daemon's task (and, when no other daemon runs, halts the program) without replying."""


@dataclass(frozen=True)
class Request:
    user: str
    token: str
    cmd: str
    format: str
    args: str
    size: int
    params: dict[str, str]


def parse_request(raw: bytes) -> Request:
    """Decode one request as Arkouda does; what it cannot deserialize is an :class:`UncaughtError` error."""
    # A BINARY request carries its payload after this marker (and in a second frame).
    head = raw.split(b"BINARY_PAYLOAD", 1)[0]
    try:
        text = head.decode("utf-8")
        body = json.loads(text)
    except (UnicodeDecodeError, ValueError):
        raise UncaughtError(f"ErrorWithContext: Incorrect JSON format {head.decode('utf-8', 'replace')}") from None
    if not isinstance(body, dict):
        raise UncaughtError(f"ErrorWithContext: Incorrect JSON format {text}")
    # Fields the client always sends; a missing one is read as empty here (not verified against Chapel's
    # JSON deserializer).
    try:
        size = int(body.get("size", -1))
    except (TypeError, ValueError):
        raise UncaughtError(f"Argument List size is not an integer. {body.get('size')!r} cannot be cast") from None
    args = str(body.get("args") or "")
    params: dict[str, str] = {}
    if size > 0:
        try:
            for item in json.loads(args)[:size]:
                param = json.loads(item)
                params[str(param["key"])] = str(param["val"])
        except (ValueError, TypeError, KeyError):
            raise UncaughtError(f"ErrorWithContext: Incorrect JSON format {args}") from None
    token = body.get("token")
    return Request(
        user=str(body.get("user") or ""),
        token="" if token is None else str(token),
        cmd=str(body.get("cmd") or ""),
        format=str(body.get("format") or "STRING"),
        args=args,
        size=size,
        params=params,
    )


def reply(msg: str, *, msg_type: str = "NORMAL", user: str = "") -> bytes:
    """MsgTuple serialized with formatJson (all record fields, in declaration order)."""
    return json.dumps(
        {"msg": msg, "msgType": msg_type, "msgFormat": "STRING", "user": user, "payload": ""},
        separators=(", ", ":"),
    ).encode()


def request_bytes(cmd: str, *, user: str, token: str | None, params: dict[str, str] | None = None) -> bytes:
    """A request as the pinned client's RequestMessage.asdict() + json.dumps builds it."""
    items = [json.dumps({"key": k, "dtype": "str", "val": v}) for k, v in (params or {}).items()]
    body = {
        "user": user,
        "token": token or "",
        "cmd": cmd,
        "format": "STRING",
        "args": json.dumps(items) if items else "",
        "size": len(items) if items else -1,
    }
    return json.dumps(body).encode()


def server_config(options: ServerOptions, locales: list[Locale], *, hostname: str) -> dict[str, Any]:
    """getconfig: ServerConfig.createConfig's fields, names, order and JSON types; locales from the GASNet job.

    Every locale runs in a pod of its own (no Chapel co-locales), so ``numColocales`` is 1 and ``numNodes``
    (Arkouda: numLocales / here.numColocales) equals ``numLocales``."""
    here = locales[0]
    colocales = 1
    return {
        "arkoudaVersion": STANDIN_VERSION,
        "chplVersion": "STAND-IN (no Chapel)",
        # Arkouda stamps the major.minor of the python3 it was built with (the interpreter ApplyMsg embeds).
        "pythonVersion": f"{sys.version_info.major}.{sys.version_info.minor}",
        "ZMQVersion": zmq_version(),
        "HDF5Version": "STAND-IN (no HDF5)",
        "serverHostname": hostname,
        "ServerPort": options.server_port,
        "numLocales": len(locales),
        "numNodes": len(locales) // colocales,
        "numPUs": here.num_pus,
        "maxTaskPar": here.num_pus,
        "physicalMemory": here.physical_memory,
        "distributionType": "STAND-IN (nothing is distributed)",
        "LocaleConfigs": [
            {
                "id": loc.id,
                "name": loc.name,
                "numPUs": loc.num_pus,
                "numColocales": colocales,
                "maxTaskPar": loc.num_pus,
                "physicalMemory": loc.physical_memory,
            }
            for loc in locales
        ],
        "authenticate": options.authenticate,
        "logLevel": options.log_level,
        "logChannel": options.log_channel,
        "regexMaxCaptures": 20,
        "byteorder": sys.byteorder,
        "autoShutdown": options.auto_shutdown,
        "serverInfoNoSplash": options.server_info_no_splash,
        # Not an Arkouda field (the client ignores unknown keys): says what answered.
        "standIn": STANDIN_NOTE,
    }


def registration_config() -> str:
    # register_commands.py stores json.dumps(config, indent=2) as the server's regConfig.
    return json.dumps(REGISTRATION_CONFIG, indent=2)


def zmq_version() -> str:
    import zmq  # noqa: PLC0415 - protocol helpers above are usable without pyzmq

    return str(zmq.zmq_version())


def local_hostname() -> str:
    return socket.gethostname()
