"""A TEST DOUBLE of the pinned Arkouda client's request building (arkouda/core/client.py and
arkouda/core/message.py at v2026.07.15): ``generic_msg``'s envelope, ``_json_args_to_str`` with
``ParameterObject.factory`` (tuples as JSON lists of strings, numbers as ``str()``, pdarrays by name), and the
BINARY request (``<json>BINARY_PAYLOAD`` then the payload frame). The real client is not on PyPI at that
version; this replays what it sends, for the stand-in's tests.
"""

from __future__ import annotations

import json
import time
from typing import Any

import zmq


class ArrayRef:
    """What a pdarray argument becomes: its name, with its dtype as the parameter's dtype."""

    def __init__(self, name: str, dtype: str) -> None:
        self.name = name
        self.dtype = dtype


def _param(key: str, val: object) -> dict[str, str]:
    if isinstance(val, ArrayRef):
        return {"key": key, "dtype": val.dtype, "val": val.name}
    if isinstance(val, (tuple, list)):
        return {"key": key, "dtype": "int64", "val": json.dumps([str(v) for v in val])}
    if isinstance(val, bool):
        return {"key": key, "dtype": "bool", "val": str(val)}
    if isinstance(val, int):
        return {"key": key, "dtype": "int64", "val": str(val)}
    if isinstance(val, float):
        return {"key": key, "dtype": "float64", "val": str(val)}
    return {"key": key, "dtype": "str", "val": str(val)}


def envelope(cmd: str, args: dict[str, object] | None, *, binary: bool, token: str = "") -> bytes:
    items = [json.dumps(_param(k, v)) for k, v in (args or {}).items()]
    body = {
        "user": "alice",
        "token": token,
        "cmd": cmd,
        "format": "BINARY" if binary else "STRING",
        "args": json.dumps(items),
        "size": len(items),
    }
    text = json.dumps(body)
    return (text + "BINARY_PAYLOAD").encode() if binary else text.encode()


class Session:
    """One REQ socket, as the client keeps one for its session."""

    def __init__(self, port: int, *, timeout: float = 20) -> None:
        self.ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.sock = self.ctx.socket(zmq.REQ)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.RCVTIMEO, int(timeout * 1000))
        self.sock.connect(f"tcp://127.0.0.1:{port}")

    def close(self) -> None:
        self.sock.close()
        self.ctx.term()

    def msg(self, cmd: str, args: dict[str, object] | None = None, *, payload: bytes | None = None) -> dict[str, Any]:
        if payload is None:
            self.sock.send(envelope(cmd, args, binary=False))
        else:
            self.sock.send(envelope(cmd, args, binary=True), flags=zmq.SNDMORE)
            self.sock.send(payload)
        answer: dict[str, Any] = json.loads(self.sock.recv())
        return answer

    def ok(self, cmd: str, args: dict[str, object] | None = None, *, payload: bytes | None = None) -> str:
        answer = self.msg(cmd, args, payload=payload)
        assert answer["msgType"] == "NORMAL", answer["msg"]
        return str(answer["msg"])

    def binary(self, cmd: str, args: dict[str, object]) -> bytes:
        self.sock.send(envelope(cmd, args, binary=False))
        return bytes(self.sock.recv())

    # --- what ak.* calls send ---

    def created(self, cmd: str, args: dict[str, object], *, payload: bytes | None = None) -> ArrayRef:
        # create_pdarray: "created <name> <dtype> <size> <ndim> <shape> <itemsize>"
        fields = self.ok(cmd, args, payload=payload).split("+")[0].split()
        assert fields[0] == "created"
        return ArrayRef(fields[1], fields[2])

    def array(self, dtype: str, fmt: str, values: list[Any]) -> ArrayRef:
        import struct

        payload = struct.pack(f"={len(values)}{fmt}", *values)
        return self.created(
            f"array<{dtype},1>", {"dtype": dtype, "shape": (len(values),), "seg_string": False}, payload=payload
        )

    def to_list(self, a: ArrayRef, fmt: str) -> list[Any]:
        import struct

        data = self.binary(f"tondarray<{a.dtype},1>", {"array": a})
        assert not data.startswith(b"Error:"), data.decode()
        return list(struct.unpack(f"={len(data) // struct.calcsize(fmt)}{fmt}", data))

    def names(self) -> list[str]:
        return [e["name"] for e in json.loads(self.ok("info", {"names": "__AllSymbols__"}))]


def connected_session(port: int, *, tries: int = 100, timeout: float = 60) -> Session:
    """A Session whose `connect` was answered: the server listens only once its GASNet job is up, so a request
    that times out is made again on a fresh socket (a REQ socket cannot send twice), up to `tries` times."""
    for _ in range(tries - 1):
        session = Session(port, timeout=timeout)
        try:
            session.ok("connect")
            return session
        except zmq.Again:
            session.close()
            time.sleep(0.2)
    session = Session(port, timeout=timeout)
    session.ok("connect")  # the last try's zmq.Again reaches the caller
    return session
