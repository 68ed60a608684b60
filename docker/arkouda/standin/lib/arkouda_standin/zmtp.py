"""A minimal ZeroMQ wire protocol (ZMTP 3.0, NULL security) for one REQ/REP exchange at a time, stdlib only.

Arkouda's client talks to the server over a ZeroMQ REQ socket. The stand-in server has no libzmq, so it
speaks the wire protocol (https://rfc.zeromq.org/spec/23/) itself: the 64-byte greeting, the READY
command with the Socket-Type property, and length-prefixed frames with a MORE flag. A REQ peer sends an
empty delimiter frame before the request; the REP side echoes that envelope in front of its reply.
PING commands (ZMTP 3.1 heartbeats) are answered with PONG. tests/images checks interoperability with
libzmq through pyzmq.
"""

from __future__ import annotations

import logging
import socket
import struct

log = logging.getLogger(__name__)

SIGNATURE_HEAD = b"\xff" + b"\x00" * 8 + b"\x7f"
FLAG_MORE = 0x01
FLAG_LONG = 0x02
FLAG_COMMAND = 0x04


class ZmtpError(Exception):
    """The peer broke the protocol or closed the connection."""


def greeting() -> bytes:
    """Our greeting: ZMTP 3.0, mechanism NULL, as-server 0, padded to 64 bytes."""
    mechanism = b"NULL".ljust(20, b"\x00")
    return SIGNATURE_HEAD + bytes([3, 0]) + mechanism + b"\x00" + b"\x00" * 31


def encode_frame(body: bytes, *, more: bool = False, command: bool = False) -> bytes:
    flags = (FLAG_MORE if more else 0) | (FLAG_COMMAND if command else 0)
    if len(body) > 255:
        return bytes([flags | FLAG_LONG]) + struct.pack(">Q", len(body)) + body
    return bytes([flags, len(body)]) + body


def encode_command(name: str, body: bytes) -> bytes:
    raw = name.encode("ascii")
    return encode_frame(bytes([len(raw)]) + raw + body, command=True)


def encode_properties(props: dict[str, bytes]) -> bytes:
    out = b""
    for key, value in props.items():
        raw = key.encode("ascii")
        out += bytes([len(raw)]) + raw + struct.pack(">I", len(value)) + value
    return out


def decode_properties(data: bytes) -> dict[str, bytes]:
    props: dict[str, bytes] = {}
    pos = 0
    while pos < len(data):
        klen = data[pos]
        key = data[pos + 1 : pos + 1 + klen].decode("ascii", "replace")
        pos += 1 + klen
        if pos + 4 > len(data):
            raise ZmtpError("truncated property in READY")
        (vlen,) = struct.unpack(">I", data[pos : pos + 4])
        props[key] = data[pos + 4 : pos + 4 + vlen]
        pos += 4 + vlen
    return props


class Connection:
    """One ZMTP connection over a connected TCP socket."""

    def __init__(self, sock: socket.socket, *, socket_type: str) -> None:
        self.sock = sock
        self.socket_type = socket_type
        self.peer_type = ""

    def _recv_exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ZmtpError("connection closed by peer")
            buf += chunk
        return buf

    def handshake(self) -> None:
        """Exchange greetings and READY commands (NULL mechanism)."""
        self.sock.sendall(greeting())
        peer = self._recv_exact(64)
        if peer[0] != 0xFF or peer[9] != 0x7F:
            raise ZmtpError("peer is not a ZMTP 3 endpoint (bad signature)")
        if peer[10] < 3:
            raise ZmtpError(f"peer speaks ZMTP {peer[10]}.{peer[11]}; need 3.x")
        mechanism = peer[12:32].rstrip(b"\x00").decode("ascii", "replace")
        if mechanism != "NULL":
            raise ZmtpError(f"peer wants security mechanism {mechanism}; only NULL is implemented")
        self.sock.sendall(encode_command("READY", encode_properties({"Socket-Type": self.socket_type.encode()})))
        while not self.peer_type:
            flags, body = self._recv_frame()
            if not flags & FLAG_COMMAND:
                raise ZmtpError("message frame before READY")
            name, data = self._split_command(body)
            if name == "READY":
                props = decode_properties(data)
                self.peer_type = props.get("Socket-Type", b"").decode("ascii", "replace")
            elif name == "ERROR":
                raise ZmtpError(f"peer sent ERROR: {data[1:].decode('utf-8', 'replace')}")
        log.debug("zmtp: handshake done, peer socket type %s", self.peer_type)

    @staticmethod
    def _split_command(body: bytes) -> tuple[str, bytes]:
        nlen = body[0]
        return body[1 : 1 + nlen].decode("ascii", "replace"), body[1 + nlen :]

    def _recv_frame(self) -> tuple[int, bytes]:
        flags = self._recv_exact(1)[0]
        if flags & FLAG_LONG:
            (size,) = struct.unpack(">Q", self._recv_exact(8))
        else:
            size = self._recv_exact(1)[0]
        return flags, self._recv_exact(size) if size else b""

    def recv_multipart(self) -> list[bytes]:
        """Next message (all its frames); answers PING commands on the way."""
        frames: list[bytes] = []
        while True:
            flags, body = self._recv_frame()
            if flags & FLAG_COMMAND:
                name, data = self._split_command(body)
                if name == "PING":
                    # PING = 2-byte TTL + context; PONG echoes the context.
                    self.sock.sendall(encode_command("PONG", data[2:]))
                elif name == "ERROR":
                    raise ZmtpError(f"peer sent ERROR: {data[1:].decode('utf-8', 'replace')}")
                continue
            frames.append(body)
            if not flags & FLAG_MORE:
                return frames

    def send_multipart(self, frames: list[bytes]) -> None:
        out = b"".join(encode_frame(f, more=i < len(frames) - 1) for i, f in enumerate(frames))
        self.sock.sendall(out)


def split_envelope(frames: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    """REP side: split a REQ message into its envelope (up to the empty delimiter) and its body."""
    for i, frame in enumerate(frames):
        if frame == b"":
            return frames[: i + 1], frames[i + 1 :]
    raise ZmtpError("request without the empty delimiter frame a REQ socket sends")


def request(host: str, port: int, payload: bytes, *, timeout: float = 10.0) -> bytes:
    """REQ side: one request/reply round trip on a fresh connection."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        conn = Connection(sock, socket_type="REQ")
        conn.handshake()
        conn.send_multipart([b"", payload])
        _, body = split_envelope(conn.recv_multipart())
        return b"".join(body)
