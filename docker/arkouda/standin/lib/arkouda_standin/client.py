"""A replay of the requests the pinned Arkouda client (v2026.07.15, arkouda/core/client.py ``connect()``) sends when
it connects, on pyzmq, for places without the arkouda package (the chart's ``helm test`` pod, image tests).
It is not the Arkouda client; it works against the real server and the stand-in alike.

    python3 -m arkouda_standin.client --host H --port P [--token-file F] [--expect-locales N]
                                      [--timeout S] [--user U] [--shutdown]

Steps, as ``ak.connect()``: ``connect``; ``getconfig`` (every field of Arkouda's createConfig with its JSON
type; the client itself needs ``arkoudaVersion``, a mismatch being only a warning, and ``regexMaxCaptures``);
``getRegistrationConfig`` (JSON; ``parameter_classes.array.nd`` a list of ints, read by
``ak.get_array_ranks()``). Then ``numLocales`` is compared with ``--expect-locales``. The token (from
``--token-file``, taken verbatim like Arkouda takes ``ARKOUDA_SERVER_TOKEN``) goes in every request.
Prints ``numLocales=<N>`` last; exit 0 when every check passed, 1 (one line naming the failure) otherwise,
2 for bad arguments. Never waits longer than ``--timeout`` for a reply.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from dataclasses import dataclass
from typing import Any

import zmq

from .protocol import ARKOUDA_VERSION, request_bytes

PROG = "arkouda_standin.client"
BANNER = (
    f"{PROG}: a replay of the requests the pinned Arkouda client ({ARKOUDA_VERSION}) sends in ak.connect(); "
    "not the Arkouda client"
)
CONFIG_TYPES: dict[str, type] = {
    "arkoudaVersion": str,
    "chplVersion": str,
    "pythonVersion": str,
    "ZMQVersion": str,
    "HDF5Version": str,
    "serverHostname": str,
    "ServerPort": int,
    "numLocales": int,
    "numNodes": int,
    "numPUs": int,
    "maxTaskPar": int,
    "physicalMemory": int,
    "distributionType": str,
    "LocaleConfigs": list,
    "authenticate": bool,
    "logLevel": str,
    "logChannel": str,
    "regexMaxCaptures": int,
    "byteorder": str,
    "autoShutdown": bool,
    "serverInfoNoSplash": bool,
}
LOCALE_TYPES: dict[str, type] = {
    "id": int,
    "name": str,
    "numPUs": int,
    "numColocales": int,
    "maxTaskPar": int,
    "physicalMemory": int,
}


class HandshakeError(Exception):
    """The server did not answer as the pinned client needs; the message says what and where."""


@dataclass(frozen=True)
class Handshake:
    connect_msg: str
    config: dict[str, Any]
    registration: dict[str, Any]
    warnings: list[str]


def _typed(value: Any, kind: type) -> bool:
    # JSON true/false are Python bools, which are also ints.
    return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))


def check_config(config: Any) -> None:
    if not isinstance(config, dict):
        raise HandshakeError("getconfig: msg is not a JSON object")
    for key, kind in CONFIG_TYPES.items():
        if key not in config:
            raise HandshakeError(
                f"getconfig: field {key!r} missing (ak.connect() needs arkoudaVersion, regexMaxCaptures)"
            )
        if not _typed(config[key], kind):
            raise HandshakeError(f"getconfig: field {key!r} is {config[key]!r}, not a JSON {kind.__name__}")
    if len(config["LocaleConfigs"]) != config["numLocales"]:
        raise HandshakeError(
            f"getconfig: {len(config['LocaleConfigs'])} LocaleConfigs entries for numLocales={config['numLocales']}"
        )
    for index, loc in enumerate(config["LocaleConfigs"]):
        for key, kind in LOCALE_TYPES.items():
            if not isinstance(loc, dict) or not _typed(loc.get(key), kind):
                raise HandshakeError(f"getconfig: LocaleConfigs[{index}].{key} missing or not a JSON {kind.__name__}")


def check_registration(registration: Any) -> None:
    try:
        nd = registration["parameter_classes"]["array"]["nd"]
    except (TypeError, KeyError):
        raise HandshakeError("getRegistrationConfig: parameter_classes.array.nd missing") from None
    if not isinstance(nd, list) or not nd or not all(_typed(n, int) for n in nd):
        raise HandshakeError(f"getRegistrationConfig: parameter_classes.array.nd is {nd!r}, not a list of ints")


class _Channel:
    def __init__(self, *, host: str, port: int, token: str | None, user: str, timeout: float) -> None:
        self.url = f"tcp://{host}:{port}"
        self.token = token
        self.user = user
        self.timeout = timeout
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.socket = self.context.socket(zmq.REQ)
        for option, value in (
            (zmq.LINGER, 0),
            (zmq.RCVTIMEO, int(timeout * 1000)),
            (zmq.SNDTIMEO, int(timeout * 1000)),
        ):
            self.socket.setsockopt(option, value)
        self.socket.connect(self.url)

    def close(self) -> None:
        self.socket.close()
        self.context.term()

    def send(self, cmd: str) -> str:
        try:
            self.socket.send(request_bytes(cmd, user=self.user, token=self.token))
            raw = self.socket.recv()
        except zmq.Again:
            hint = (
                " -- with --authenticate, Arkouda v2026.07.15 does not answer a wrong or missing token: the server "
                "halts (its log says 'does not match server token' or 'requires a token')"
            )
            raise HandshakeError(f"{cmd}: no reply from {self.url} within {self.timeout:g}s{hint}") from None
        try:
            body = json.loads(raw)
            msg, msg_type = body["msg"], body["msgType"]
        except (ValueError, TypeError, KeyError):
            raise HandshakeError(f"{cmd}: reply from {self.url} is not Arkouda's JSON reply: {raw[:200]!r}") from None
        if msg_type == "ERROR":
            raise HandshakeError(f"{cmd}: server error: {msg}")
        if msg_type not in ("NORMAL", "WARNING"):
            raise HandshakeError(f"{cmd}: reply msgType {msg_type!r} is not NORMAL, WARNING or ERROR")
        return str(msg)


def handshake(
    *, host: str, port: int, token: str | None, user: str, timeout: float, shutdown: bool = False
) -> Handshake:
    channel = _Channel(host=host, port=port, token=token, user=user, timeout=timeout)
    try:
        connect_msg = channel.send("connect")
        try:
            config = json.loads(channel.send("getconfig"))
        except ValueError:
            raise HandshakeError("getconfig: Returned config is not valid JSON") from None
        check_config(config)
        warnings = []
        if config["arkoudaVersion"] != ARKOUDA_VERSION:
            warnings.append(
                f"Version mismatch between client ({ARKOUDA_VERSION}) and server ({config['arkoudaVersion']}) "
                "(the Arkouda client only warns)"
            )
        try:
            registration = json.loads(channel.send("getRegistrationConfig"))
        except ValueError:
            raise HandshakeError("getRegistrationConfig: Returned config is not valid JSON") from None
        check_registration(registration)
        if shutdown:
            channel.send("shutdown")
    finally:
        channel.close()
    return Handshake(connect_msg=connect_msg, config=config, registration=registration, warnings=warnings)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description=BANNER)
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--token-file", help="file whose whole content is the token (verbatim, like ARKOUDA_SERVER_TOKEN)")
    ap.add_argument("--expect-locales", type=int, help="fail unless getconfig says this numLocales")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for each reply (default 10)")
    ap.add_argument("--user", default=None, help="user name sent in the requests (default: the login name)")
    ap.add_argument("--shutdown", action="store_true", help="send shutdown after the handshake (the server exits)")
    ns = ap.parse_args(argv)
    print(BANNER, flush=True)
    token: str | None = None
    if ns.token_file:
        try:
            with open(ns.token_file, encoding="utf-8", newline="") as f:
                token = f.read()
        except OSError as exc:
            print(f"{PROG}: error: cannot read --token-file: {exc}", file=sys.stderr)
            return 2
    try:
        result = handshake(
            host=ns.host,
            port=ns.port,
            token=token,
            user=ns.user or getpass.getuser(),
            timeout=ns.timeout,
            shutdown=ns.shutdown,
        )
    except HandshakeError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    config = result.config
    print(f"connect: {result.connect_msg}")
    print(f"getconfig: arkoudaVersion={config['arkoudaVersion']} regexMaxCaptures={config['regexMaxCaptures']}")
    for warning in result.warnings:
        print(f"warning: {warning}")
    print(
        f"getRegistrationConfig: parameter_classes.array.nd={result.registration['parameter_classes']['array']['nd']}"
    )
    if ns.expect_locales is not None and config["numLocales"] != ns.expect_locales:
        print(f"{PROG}: error: numLocales={config['numLocales']}, expected {ns.expect_locales}", file=sys.stderr)
        return 1
    print(f"numLocales={config['numLocales']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
