"""The gate's checks of one client request, pure (no sockets): the request envelope the pinned Arkouda client
sends (../shared/reference/arkouda-facts.md), its size, the release's token, and the commands a client may not
send. A request that fails is answered by the gate with an Arkouda-shaped ERROR reply (`error_reply`) and never
reaches the server, whose request loop a malformed or wrongly authenticated request would end for good.

A request is the frames after the REQ delimiter: one JSON frame (`format` STRING), or the JSON frame with the
marker BINARY_PAYLOAD appended and a second frame, the payload (`format` BINARY). Only the first frame is parsed,
and only after its size was checked; the payload is never read.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

log = logging.getLogger(__name__)

BINARY_MARKER = b"BINARY_PAYLOAD"
FIELDS = ("user", "token", "cmd", "format", "args", "size")
FORMATS = ("STRING", "BINARY")
# The command whose reply the client reads as raw bytes (recv_binary): `tondarray`, also named
# `tondarray<dtype,ndim>` by clients of multi-dimensional arrays. The client raises on a reply that starts with
# "Error:" and would take a JSON reply for data.
BINARY_REPLY_COMMAND = "tondarray"
# A client may stop the shared server only where a value allows it (server.gate.allowShutdown).
SHUTDOWN = "shutdown"


class Refusal(StrEnum):
    """Why the gate answered a request itself (the label of arkouda_gate_refused_requests_total)."""

    MALFORMED = "malformed"
    TOO_LARGE = "too_large"
    TOKEN = "token"
    SHUTDOWN = "shutdown"
    HELD_LIMIT = "held_limit"
    NOT_READY = "not_ready"
    SERVER_LOST = "server_lost"


@dataclass(frozen=True)
class Request:
    """The checked envelope: what the gate needs to route, refuse and answer it."""

    user: str
    cmd: str
    binary: bool  # a payload frame follows


@dataclass(frozen=True)
class Refused:
    reason: Refusal
    message: str
    user: str = ""
    cmd: str = ""


@dataclass(frozen=True)
class Limits:
    max_envelope_bytes: int
    allow_shutdown: bool = False


def check_request(
    frames: Sequence[memoryview], *, limits: Limits, token: Callable[[], bytes | None]
) -> Request | Refused:
    """`frames`: the request's frames (zero-copy views). `token()`: the release's token, None without
    authentication (read only when the envelope is otherwise valid)."""
    if not frames:
        return Refused(Refusal.MALFORMED, "the request has no frame (not an Arkouda client?)")
    head = frames[0]
    if len(head) > limits.max_envelope_bytes:
        return Refused(
            Refusal.TOO_LARGE,
            f"the request envelope is {len(head)} bytes, above the gate's limit of {limits.max_envelope_bytes} "
            "(server.gate.maxEnvelopeBytes); large data goes in the payload frame of a BINARY request",
        )
    raw = bytes(head)
    binary = raw.endswith(BINARY_MARKER)
    if binary:
        raw = raw[: -len(BINARY_MARKER)]
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        return Refused(Refusal.MALFORMED, "the request is not Arkouda's JSON envelope (not JSON)")
    if not isinstance(body, dict):
        return Refused(Refusal.MALFORMED, "the request is not Arkouda's JSON envelope (not a JSON object)")
    user = str(body["user"]) if isinstance(body.get("user"), str) else ""
    missing = [f for f in FIELDS if f not in body]
    if missing:
        return Refused(Refusal.MALFORMED, f"the request envelope lacks the field(s) {', '.join(missing)}", user)
    problem = _field_problem(body, binary=binary, frames=len(frames))
    cmd = body["cmd"] if isinstance(body["cmd"], str) else ""
    if problem:
        return Refused(Refusal.MALFORMED, f"the request envelope is malformed: {problem}", user, cmd)
    expected = token()
    if expected is not None:
        if not expected:
            return Refused(
                Refusal.TOKEN, "the gate could not read the release's token (its Secret key token)", user, cmd
            )
        given = body["token"] or ""
        if not given:
            return Refused(Refusal.TOKEN, "the request carries no token and the server requires one", user, cmd)
        if not hmac.compare_digest(given.encode(), expected):
            return Refused(
                Refusal.TOKEN,
                "the request's token is not the release's current token (rotated by global.keyRotationId? read "
                "it again from the release's Secret and connect again)",
                user,
                cmd,
            )
    if cmd == SHUTDOWN and not limits.allow_shutdown:
        return Refused(
            Refusal.SHUTDOWN,
            "shutdown is refused by the gate: the server is shared by every client of the release "
            "(`helm uninstall` stops the release; server.gate.allowShutdown=true lets clients do it)",
            user,
            cmd,
        )
    return Request(user=user, cmd=cmd, binary=binary)


def _field_problem(body: dict[str, object], *, binary: bool, frames: int) -> str:
    for name in ("user", "cmd", "args"):
        if not isinstance(body[name], str):
            return f"{name} is not a string"
    if not body["cmd"]:
        return "cmd is empty"
    if body["token"] is not None and not isinstance(body["token"], str):
        return "token is not a string"
    size = body["size"]
    if not isinstance(size, int) or isinstance(size, bool):
        return "size is not an integer"
    if body["format"] not in FORMATS:
        return f"format is {body['format']!r}, not STRING or BINARY"
    if binary != (body["format"] == "BINARY"):
        return "format BINARY goes with the BINARY_PAYLOAD marker, and only it"
    if frames != (2 if binary else 1):
        return f"a {body['format']} request has {'2 frames' if binary else '1 frame'}, this one {frames}"
    return ""


def error_reply(message: str, *, user: str, cmd: str) -> bytes:
    """Arkouda's ERROR reply (the MsgTuple record, the request's user echoed as the server does), or for a
    command whose reply the client reads as bytes, the text it raises on."""
    if cmd == BINARY_REPLY_COMMAND or cmd.startswith(BINARY_REPLY_COMMAND + "<"):
        return f"Error: {message}".encode()
    reply = {"msg": message, "msgType": "ERROR", "msgFormat": "STRING", "user": user, "payload": ""}
    return json.dumps(reply).encode()


def request_bytes(cmd: str, *, user: str, token: bytes | None, params: dict[str, str] | None = None) -> bytes:
    """A STRING request as the client builds it (the gate's own health check, save and load): `args` is a JSON
    list of JSON-encoded {"key", "dtype", "val"} parameters, `size` their count (-1 and "" without any)."""
    items = [json.dumps({"key": k, "dtype": "str", "val": v}) for k, v in (params or {}).items()]
    body = {
        "user": user,
        "token": (token or b"").decode(),
        "cmd": cmd,
        "format": "STRING",
        "args": json.dumps(items) if items else "",
        "size": len(items) if items else -1,
    }
    return json.dumps(body).encode()


def parse_reply(raw: bytes) -> tuple[bool, str]:
    """(ok, msg) of a server reply: ok unless msgType is ERROR or the reply is not Arkouda's JSON."""
    try:
        body = json.loads(raw)
    except ValueError:
        return False, f"an unreadable reply: {raw[:200]!r}"
    if not isinstance(body, dict):
        return False, f"an unreadable reply: {raw[:200]!r}"
    return body.get("msgType") != "ERROR", str(body.get("msg", ""))


class TokenFile:
    """The release's token, from the one Secret key the gate mounts, read again when the kubelet replaces the
    file (a key rotation), checked at most every `recheck_seconds`."""

    def __init__(self, path: Path, *, clock: Callable[[], float], recheck_seconds: float = 2.0) -> None:
        self._path = path
        self._clock = clock
        self._recheck = recheck_seconds
        self._checked = float("-inf")
        self._stamp: tuple[int, int, int] | None = None
        self._token = b""

    def __call__(self) -> bytes:
        now = self._clock()
        if now - self._checked >= self._recheck:
            self._checked = now
            self._reload()
        return self._token

    def _reload(self) -> None:
        try:
            st = os.stat(self._path)
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
            if stamp != self._stamp:
                token = self._path.read_bytes()
                if token != self._token and self._stamp is not None:
                    log.info("the release's token changed (%s): requests need the new one", self._path)
                self._token, self._stamp = token, stamp
        except OSError as exc:  # the kubelet swaps the files with a symlink: a moment without is harmless
            log.warning("reading the token %s: %s; keeping the previous one", self._path, exc)
