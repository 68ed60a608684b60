"""A minimal, strict SSH-2 client that does exactly the `server`'s probe of a locale and nothing else.

TCP connect, key exchange, compare the server's host key with the pinned one, public-key auth, run one command
(`true`), read its exit status, disconnect. Written from RFC 4251-4254 (architecture, transport, auth, connection),
RFC 8731 (curve25519-sha256), RFC 8709 (ssh-ed25519), RFC 5647 and OpenSSH's PROTOCOL (aes*-gcm@openssh.com) and
PROTOCOL.chacha20poly1305. It exists because a general client (paramiko, asyncssh) spends ~8 ms of client CPU per
host on its own machinery while the cryptography itself costs ~0.3 ms; at 1024 locales that was the bootstrap's
dominant cost (issue 6).

Deliberately small: one kex family, one host key algorithm, three AEAD ciphers, no compression, no rekeying, no
ext-info, no strict kex. The protocol is a resumable conversation without I/O (_Session); `probe` drives one
over a blocking socket with one monotonic deadline for the whole attempt, so it runs in the caller's thread pool
and under its retries. Every length from the wire is bounded and every malformed message
ends in a ProbeError; `fatal` tells the caller's retry policy whether trying again can help.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import os
import re
import socket
import struct
import time
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import NoReturn, TypeVar

from cryptography.exceptions import InvalidSignature, InvalidTag, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, x25519
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.poly1305 import Poly1305

from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.keys import PublicKey

log = logging.getLogger(__name__)

__all__ = [
    "AuthenticationFailedError",
    "CommandFailedError",
    "HostKeyMismatchError",
    "IncompatibleAlgorithmsError",
    "ProbeError",
    "TransientProbeError",
    "load_client_key",
    "probe",
]

CLIENT_VERSION = b"SSH-2.0-arkouda-bootstrap-probe"

# What we offer, in our preference order (RFC 4253 7.1: the first client algorithm the server also supports wins).
# Neither ext-info-c nor kex-strict-c-v00@openssh.com is offered. ext-info only matters for rsa-sha2 signature
# negotiation, and we speak ed25519 only. Strict kex is OpenSSH's answer to the Terrapin prefix truncation
# (CVE-2023-48795): an attacker who can edit the TCP stream shifts sequence numbers with IGNOREs during the
# unencrypted kex and so deletes the peer's first encrypted message(s). For this probe that can only turn a
# success into a failure, never the reverse: the host key is pinned and its signature over H (which covers both
# KEXINITs) is verified, the one extension message Terrapin targets (EXT_INFO) is never negotiated, every reply
# we wait for (SERVICE_ACCEPT, USERAUTH_SUCCESS, the channel confirmation, exit-status) is required in order, and
# the probe carries no data worth protecting. Leaving it out keeps sequence numbers simple: from 0, never reset.
KEX_ALGORITHMS = ("curve25519-sha256", "curve25519-sha256@libssh.org")
HOST_KEY_ALGORITHMS = ("ssh-ed25519",)
CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com")
# AEAD ciphers carry their own tag, so the MAC is never used (OpenSSH skips MAC negotiation for them); the list
# only has to be a valid, non-empty name-list.
MACS = ("hmac-sha2-256",)
COMPRESSION = ("none",)

KEYS_HINT = "global.sshKexAlgorithms must keep curve25519-sha256 and global.sshCiphers one of " + ",".join(CIPHERS)

MAX_PACKET = 256 * 1024  # packet_length bound; OpenSSH sends at most 256 KiB too
MAX_VERSION_LINE = 255  # RFC 4253 4.2, including CR LF
MAX_BANNER_LINE = 1024  # pre-version lines from the server
MAX_BANNER_LINES = 64
RECV_CHUNK = 65536
CHANNEL_WINDOW = 2 * 1024 * 1024
CHANNEL_MAX_PACKET = 32 * 1024

# message numbers (RFC 4250 4.1)
MSG_DISCONNECT = 1
MSG_IGNORE = 2
MSG_UNIMPLEMENTED = 3
MSG_DEBUG = 4
MSG_SERVICE_REQUEST = 5
MSG_SERVICE_ACCEPT = 6
MSG_KEXINIT = 20
MSG_NEWKEYS = 21
MSG_KEX_ECDH_INIT = 30
MSG_KEX_ECDH_REPLY = 31
MSG_USERAUTH_REQUEST = 50
MSG_USERAUTH_FAILURE = 51
MSG_USERAUTH_SUCCESS = 52
MSG_USERAUTH_BANNER = 53
MSG_GLOBAL_REQUEST = 80
MSG_REQUEST_FAILURE = 82
MSG_CHANNEL_OPEN = 90
MSG_CHANNEL_OPEN_CONFIRMATION = 91
MSG_CHANNEL_OPEN_FAILURE = 92
MSG_CHANNEL_WINDOW_ADJUST = 93
MSG_CHANNEL_DATA = 94
MSG_CHANNEL_EXTENDED_DATA = 95
MSG_CHANNEL_EOF = 96
MSG_CHANNEL_CLOSE = 97
MSG_CHANNEL_REQUEST = 98
MSG_CHANNEL_SUCCESS = 99
MSG_CHANNEL_FAILURE = 100

DISCONNECT_BY_APPLICATION = 11
# DISCONNECT reasons a retry can cure: CONNECTION_LOST, BY_APPLICATION, TOO_MANY_CONNECTIONS, and PROTOCOL_ERROR
# because OpenSSH's sshd sends that code for every disconnect it initiates (ssh_packet_disconnect), load-shedding
# included; a real protocol error just uses up the caller's bounded retries.
TRANSIENT_DISCONNECTS = frozenset({2, 10, 11, 12})


# ----------------------------------------------------------------------------------------------------------
# outcomes


class ProbeError(Exception):
    """Base of the probe outcomes; `fatal` ones are not retried."""

    fatal = True


class TransientProbeError(ProbeError):
    """Refused/timed-out connect, EOF/reset, handshake timeout, load-shedding DISCONNECT: worth retrying."""

    fatal = False


class HostKeyMismatchError(ProbeError):
    pass


class AuthenticationFailedError(ProbeError):
    pass


class CommandFailedError(ProbeError):
    pass


class IncompatibleAlgorithmsError(ProbeError):
    pass


class MalformedError(Exception):
    """A message from the server that breaks the wire format; turned into a ProbeError naming the host."""


class _IntegrityError(Exception):
    pass


class _ClosedError(Exception):
    pass


# ----------------------------------------------------------------------------------------------------------
# wire encoding (RFC 4251 5)


_U32 = struct.Struct(">I")

_T = TypeVar("_T")
# A step of the conversation: yields (nothing) whenever it needs more bytes from the server, returns a _T.
_Steps = Generator[None, None, _T]


def u32(value: int) -> bytes:
    return _U32.pack(value)


def string(data: bytes) -> bytes:
    return _U32.pack(len(data)) + data


def name_list(names: Sequence[str]) -> bytes:
    return string(",".join(names).encode("ascii"))


def mpint(value: int) -> bytes:
    """Two's complement, big-endian, minimal length; a non-negative value whose top bit is set gets a 0 byte."""
    if value < 0:
        raise ValueError("mpint: only non-negative values are used here")
    if value == 0:
        return b"\0\0\0\0"
    raw = value.to_bytes((value.bit_length() + 8) // 8, "big")  # one spare bit: room for the sign
    return string(raw)


def negotiate(client: Sequence[str], server: Sequence[str]) -> str | None:
    """RFC 4253 7.1: the first algorithm on the client's list that is also on the server's."""
    offered = set(server)
    for name in client:
        if name in offered:
            return name
    return None


# RFC 4251 5: comma-separated, non-empty names of printable US-ASCII without comma or space, at most 64 each
_NAME = rb"[\x21-\x2b\x2d-\x7e]{1,64}"
_NAME_LIST = re.compile(_NAME + rb"(?:," + _NAME + rb")*")


class WireReader:
    """Reads SSH data types from one message; any overrun or bad value raises MalformedError."""

    __slots__ = ("_data", "_end", "_pos", "what")

    def __init__(self, data: bytes, *, what: str, start: int = 0) -> None:
        self._data = data
        self._end = len(data)
        self._pos = start
        self.what = what

    def _truncated(self) -> MalformedError:
        return MalformedError(f"{self.what} is truncated")

    def byte(self) -> int:
        pos = self._pos
        if pos >= self._end:
            raise self._truncated()
        self._pos = pos + 1
        return self._data[pos]

    def boolean(self) -> bool:
        return self.byte() != 0

    def u32(self) -> int:
        pos = self._pos
        if pos + 4 > self._end:
            raise self._truncated()
        self._pos = pos + 4
        value: int = _U32.unpack_from(self._data, pos)[0]
        return value

    def string(self, *, limit: int = MAX_PACKET) -> bytes:
        start = self._pos + 4
        if start > self._end:
            raise self._truncated()
        n: int = _U32.unpack_from(self._data, start - 4)[0]
        if n > limit:
            raise MalformedError(f"{self.what} has a {n}-byte field (limit {limit})")
        end = start + n
        if end > self._end:
            raise self._truncated()
        self._pos = end
        return self._data[start:end]

    def text(self, *, limit: int = 4096) -> str:
        return self.string(limit=limit).decode("utf-8", errors="replace")

    def name_list(self) -> list[str]:
        raw = self.string(limit=64 * 1024)
        if not raw:
            return []
        if _NAME_LIST.fullmatch(raw) is None:
            raise MalformedError(f"{self.what} has an invalid name-list {_short(raw.decode('ascii', 'replace'), 80)!r}")
        return raw.decode("ascii").split(",")

    def end(self) -> None:
        if self._pos != self._end:
            raise MalformedError(f"{self.what} has {self._end - self._pos} trailing bytes")


# ----------------------------------------------------------------------------------------------------------
# packet protection


class _Plain:
    """Before the first NEWKEYS: no encryption, no MAC, 8-byte blocks over the whole packet."""

    tag = 0
    block = 8
    aead = False

    def seal(self, seq: int, body: bytes) -> bytes:
        del seq
        return u32(len(body)) + body

    def open(self, seq: int, packet: bytes) -> bytes:
        del seq
        return packet[4:]


class _AesGcm:
    """aes*-gcm@openssh.com (RFC 5647 with OpenSSH's PROTOCOL 1.6): the length is AAD in clear, 12-byte nonce =
    the derived IV whose last 8 bytes are an invocation counter incremented after every packet."""

    tag = 16
    block = 16
    aead = True

    def __init__(self, key: bytes, iv: bytes) -> None:
        self._aead = AESGCM(key)
        self._fixed = iv[:4]
        self._counter = int.from_bytes(iv[4:12], "big")

    def _nonce(self) -> bytes:
        nonce = self._fixed + self._counter.to_bytes(8, "big")
        self._counter = (self._counter + 1) & 0xFFFFFFFFFFFFFFFF
        return nonce

    def seal(self, seq: int, body: bytes) -> bytes:
        del seq
        head = u32(len(body))
        return head + self._aead.encrypt(self._nonce(), body, head)

    def open(self, seq: int, packet: bytes) -> bytes:
        del seq
        try:
            return self._aead.decrypt(self._nonce(), packet[4:], packet[:4])
        except InvalidTag:
            raise _IntegrityError from None


_ZERO8 = b"\0" * 8
_ZERO32 = b"\0" * 32
_BLOCK1 = b"\x01" + b"\0" * 7


def _chacha(key: bytes, counter8: bytes, seq8: bytes, data: bytes) -> bytes:
    # cryptography's ChaCha20 takes a 16-byte "nonce" that fills state words 12..15: OpenSSH's original-ChaCha
    # layout of a 64-bit little-endian block counter followed by the 64-bit nonce (here the sequence number, BE).
    return Cipher(algorithms.ChaCha20(key, counter8 + seq8), mode=None).encryptor().update(data)


class _ChaCha20Poly1305:
    """chacha20-poly1305@openssh.com: 64 bytes of key, K_2 (first 32) for payload and Poly1305 key, K_1 (last 32)
    for the 4-byte length; nonce = sequence number; Poly1305 over encrypted length || encrypted payload."""

    tag = 16
    block = 8
    aead = True

    def __init__(self, key: bytes) -> None:
        self._main = key[:32]
        self._header = key[32:64]

    def length(self, seq: int, head: bytes) -> int:
        return int.from_bytes(_chacha(self._header, _ZERO8, seq.to_bytes(8, "big"), head), "big")

    def seal(self, seq: int, body: bytes) -> bytes:
        seq8 = seq.to_bytes(8, "big")
        head = _chacha(self._header, _ZERO8, seq8, u32(len(body)))
        encrypted = head + _chacha(self._main, _BLOCK1, seq8, body)
        poly_key = _chacha(self._main, _ZERO8, seq8, _ZERO32)
        return encrypted + Poly1305.generate_tag(poly_key, encrypted)

    def open(self, seq: int, packet: bytes) -> bytes:
        seq8 = seq.to_bytes(8, "big")
        poly_key = _chacha(self._main, _ZERO8, seq8, _ZERO32)
        try:
            Poly1305.verify_tag(poly_key, packet[:-16], packet[-16:])
        except InvalidSignature:
            raise _IntegrityError from None
        return _chacha(self._main, _BLOCK1, seq8, packet[4:-16])


_Protection = _Plain | _AesGcm | _ChaCha20Poly1305


def _padding(protection: _Protection, payload: int) -> int:
    """RFC 4253 6: at least 4 bytes, to a multiple of the block size (AEAD: not counting the length field)."""
    block = protection.block
    pad = block - (payload + (1 if protection.aead else 5)) % block
    return pad + block if pad < 4 else pad


# name -> (key bytes, IV bytes)
_CIPHER_SIZES = {
    "aes128-gcm@openssh.com": (16, 12),
    "aes256-gcm@openssh.com": (32, 12),
    "chacha20-poly1305@openssh.com": (64, 0),
}


def _protection(name: str, key: bytes, iv: bytes) -> _Protection:
    if name == "chacha20-poly1305@openssh.com":
        return _ChaCha20Poly1305(key)
    return _AesGcm(key, iv)


def derive_key(shared: bytes, exchange_hash: bytes, letter: bytes, session_id: bytes, size: int) -> bytes:
    """RFC 4253 7.2: HASH(K || H || letter || session_id), extended by HASH(K || H || K1 || ...) as needed.
    `shared` is K already encoded as an mpint."""
    prefix = shared + exchange_hash
    key = hashlib.sha256(prefix + letter + session_id).digest()
    while len(key) < size:
        key += hashlib.sha256(prefix + key).digest()
    return key[:size]


def host_key_blob(public: ed25519.Ed25519PublicKey) -> bytes:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return string(b"ssh-ed25519") + string(raw)


def _short(text: str, limit: int = 120) -> str:
    """Server-supplied text made safe for a one-line message."""
    clean = "".join(c if c.isprintable() else "?" for c in text)
    return clean if len(clean) <= limit else clean[:limit] + "…"


def _algorithms(names: Sequence[str]) -> str:
    """A name-list for a message, without the pseudo-algorithms that only signal extensions."""
    shown = [n for n in names if not n.startswith(("ext-info-", "kex-strict-"))]
    return ",".join(shown) or "(nothing)"


# ----------------------------------------------------------------------------------------------------------
# one connection


class _Session:
    """The protocol state of one probe, without I/O: the conversation queues packets in `out` and yields
    whenever it needs more bytes in `buf`; a driver (`probe`, over a blocking socket) sends the
    queued bytes, reads, and resumes it, throwing socket errors, EOF (_ClosedError) and TimeoutError into it."""

    def __init__(self, *, where: str) -> None:
        self.where = where
        self.phase = "banner"
        self.buf = bytearray()
        self.out: list[bytes] = []
        self.seq_in = 0
        self.seq_out = 0
        self.p_in: _Protection = _Plain()
        self.p_out: _Protection = _Plain()
        self.authenticated = False
        self.guess_ok = False  # our guessed KEX_ECDH_INIT was the right one
        self.channel: int | None = None  # the server's channel number once open
        self.window = CHANNEL_WINDOW

    def take_output(self) -> bytes:
        data = b"".join(self.out)
        self.out.clear()
        return data

    # -- version exchange

    def read_version(self) -> _Steps[bytes]:
        """Skip the lines a server may send before its version (RFC 4253 4.2); return V_S without CR LF."""
        lines = 0
        last = b""
        while True:
            end = self.buf.find(b"\n")
            if end < 0:
                if len(self.buf) > MAX_BANNER_LINE:
                    raise MalformedError(f"a banner line longer than {MAX_BANNER_LINE} bytes")
                try:
                    yield  # more bytes, please
                except (_ClosedError, ConnectionResetError):
                    said = f" after it said {_short(last.decode('utf-8', 'replace'), 80)!r}" if last else ""
                    raise TransientProbeError(
                        f"{self.where} closed the connection before its SSH version line{said} "
                        "(sshd starting, or dropping connections under MaxStartups)"
                    ) from None
                continue
            line = bytes(self.buf[:end]).rstrip(b"\r")
            del self.buf[: end + 1]
            if line.startswith(b"SSH-"):
                if end + 1 > MAX_VERSION_LINE:
                    raise MalformedError(f"a version line longer than {MAX_VERSION_LINE} bytes")
                if not line.startswith((b"SSH-2.0-", b"SSH-1.99-")):
                    raise ProbeError(
                        f"{self.where} speaks {_short(line.decode('ascii', 'replace'), 60)!r}, not SSH protocol 2.0"
                    )
                return line
            lines += 1
            last = line
            if lines > MAX_BANNER_LINES or end > MAX_BANNER_LINE:
                raise MalformedError(f"more than {MAX_BANNER_LINES} lines or an overlong line before its version")

    # -- packets

    def send(self, payload: bytes) -> None:
        """Queue one packet; the driver sends everything queued in one write before it waits for the server."""
        protection = self.p_out
        pad = _padding(protection, len(payload))
        body = bytes((pad,)) + payload + os.urandom(pad)
        self.out.append(protection.seal(self.seq_out, body))
        self.seq_out = (self.seq_out + 1) & 0xFFFFFFFF

    def read_packet(self) -> _Steps[bytes]:
        protection = self.p_in
        buf = self.buf
        while len(buf) < 4:
            yield
        seq = self.seq_in
        if isinstance(protection, _ChaCha20Poly1305):  # the length is encrypted too
            length = aligned = protection.length(seq, bytes(buf[:4]))
        else:
            length = _U32.unpack_from(buf)[0]
            aligned = length if protection.aead else length + 4  # AEAD: the blocks start after the length
        if length > MAX_PACKET or length < 8 or aligned % protection.block:
            raise MalformedError(f"a packet with invalid length {length}")
        total = 4 + length + protection.tag
        while len(buf) < total:
            yield
        packet = bytes(buf[:total])
        del buf[:total]
        try:
            body = protection.open(seq, packet)
        except _IntegrityError:
            raise TransientProbeError(
                f"integrity check failed on packet {seq} from {self.where} (corrupted or tampered stream)"
            ) from None
        self.seq_in = (seq + 1) & 0xFFFFFFFF
        pad = body[0]
        if pad < 4 or pad + 2 > len(body):
            raise MalformedError(f"a packet with invalid padding length {pad}")
        return body[1 : len(body) - pad]

    def recv(self) -> _Steps[bytes]:
        """The next message that is not transport noise; handles DISCONNECT and, once logged in, the connection
        protocol's housekeeping (global requests, window adjusts, channel data)."""
        while True:
            payload = yield from self.read_packet()
            kind = payload[0]
            if kind in (MSG_IGNORE, MSG_DEBUG, MSG_UNIMPLEMENTED):
                continue
            if kind == MSG_DISCONNECT:
                self._disconnected(payload)
            if kind == MSG_USERAUTH_BANNER and self.phase == "authentication" and not self.authenticated:
                continue
            if self.authenticated and self._housekeeping(kind, payload):
                continue
            return payload

    def _disconnected(self, payload: bytes) -> NoReturn:
        reader = WireReader(payload, what="DISCONNECT", start=1)
        code = reader.u32()
        reason = _short(reader.text())
        message = f"{self.where} disconnected during {self.phase}: {reason or 'no reason given'} (code {code})"
        if code in TRANSIENT_DISCONNECTS:
            raise TransientProbeError(message)
        raise ProbeError(message)

    def _housekeeping(self, kind: int, payload: bytes) -> bool:
        if kind == MSG_GLOBAL_REQUEST:  # OpenSSH sends hostkeys-00@openssh.com after auth
            reader = WireReader(payload, what="GLOBAL_REQUEST", start=1)
            reader.string(limit=256)
            if reader.boolean():
                self.send(bytes((MSG_REQUEST_FAILURE,)))
            return True
        if kind == MSG_CHANNEL_WINDOW_ADJUST:
            return True  # we send nothing but requests, which windows do not cover
        if kind in (MSG_CHANNEL_DATA, MSG_CHANNEL_EXTENDED_DATA):
            reader = WireReader(payload, what="CHANNEL_DATA", start=1)
            reader.u32()
            if kind == MSG_CHANNEL_EXTENDED_DATA:
                reader.u32()
            self.window -= len(reader.string())
            if self.window < CHANNEL_WINDOW // 2 and self.channel is not None:
                # discarded output must not stall the command: give the window back
                self.send(bytes((MSG_CHANNEL_WINDOW_ADJUST,)) + u32(self.channel) + u32(CHANNEL_WINDOW - self.window))
                self.window = CHANNEL_WINDOW
            return True
        return False

    def expect(self, *kinds: int) -> _Steps[bytes]:
        payload = yield from self.recv()
        if payload[0] not in kinds:
            raise MalformedError(f"unexpected message {payload[0]} during {self.phase} (expected {kinds})")
        return payload

    def goodbye(self) -> None:
        """Queue a DISCONNECT by application (sent best effort: the outcome is already known)."""
        self.send(bytes((MSG_DISCONNECT,)) + u32(DISCONNECT_BY_APPLICATION) + string(b"probe done") + string(b""))


# ----------------------------------------------------------------------------------------------------------
# the probe


def _kexinit() -> bytes:
    return (
        bytes((MSG_KEXINIT,))
        + os.urandom(16)
        + name_list(KEX_ALGORITHMS)
        + name_list(HOST_KEY_ALGORITHMS)
        + name_list(CIPHERS)
        + name_list(CIPHERS)
        + name_list(MACS)
        + name_list(MACS)
        + name_list(COMPRESSION)
        + name_list(COMPRESSION)
        + name_list(())
        + name_list(())
        + b"\x01"  # first_kex_packet_follows: our KEX_ECDH_INIT follows without waiting for the server's KEXINIT
        + u32(0)
    )


def _negotiate_all(s: _Session, kexinit: bytes) -> tuple[str, str, str, bool]:
    """Parse the server's KEXINIT and pick (kex, cipher c->s, cipher s->c, server's guess follows)."""
    reader = WireReader(kexinit, what="KEXINIT", start=17)
    lists = [reader.name_list() for _ in range(10)]
    guess_follows = reader.boolean()
    reader.u32()
    reader.end()
    kex_s, hostkey_s, enc_cs, enc_sc, _mac_cs, _mac_sc, comp_cs, comp_sc = lists[:8]
    kex = negotiate(KEX_ALGORITHMS, kex_s)
    hostkey = negotiate(HOST_KEY_ALGORITHMS, hostkey_s)
    cipher_cs = negotiate(CIPHERS, enc_cs)
    cipher_sc = negotiate(CIPHERS, enc_sc)
    what, offered = "", kex_s
    ours: Sequence[str] = KEX_ALGORITHMS
    if kex is None:
        what = "key exchange"
    elif hostkey is None:
        what, offered, ours = "host key algorithm", hostkey_s, HOST_KEY_ALGORITHMS
    elif cipher_cs is None or cipher_sc is None:
        what, offered, ours = "cipher", enc_cs if cipher_cs is None else enc_sc, CIPHERS
    elif negotiate(COMPRESSION, comp_cs) is None or negotiate(COMPRESSION, comp_sc) is None:
        what, offered, ours = "compression", comp_cs + comp_sc, COMPRESSION
    if what or kex is None or cipher_cs is None or cipher_sc is None:
        raise IncompatibleAlgorithmsError(
            f"no {what} in common with {s.where}: it offers {_algorithms(offered)}, the probe speaks "
            f"{','.join(ours)}; {KEYS_HINT}"
        )
    # RFC 4253 7: a guess is right only when both sides put the same kex and host key algorithm first
    s.guess_ok = kex_s[0] == KEX_ALGORITHMS[0] and hostkey_s[0] == HOST_KEY_ALGORITHMS[0]
    return kex, cipher_cs, cipher_sc, guess_follows


def _key_exchange(s: _Session, *, pinned: PublicKey) -> _Steps[bytes]:
    """Version exchange, KEXINIT, curve25519 ECDH, host key check, NEWKEYS both ways (ours is left queued);
    returns the session id.

    We guess: our KEX_ECDH_INIT goes out with our KEXINIT (first_kex_packet_follows), which saves a round trip
    against every sshd that lists curve25519-sha256 first (the bootstrap's default). On a wrong guess the
    server drops that packet (RFC 4253 7) and we send it again once the algorithms are agreed."""
    ephemeral = x25519.X25519PrivateKey.generate()
    q_c = ephemeral.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    ecdh_init = bytes((MSG_KEX_ECDH_INIT,)) + string(q_c)
    i_c = _kexinit()
    s.out.append(CLIENT_VERSION + b"\r\n")
    s.send(i_c)
    s.send(ecdh_init)
    v_s = yield from s.read_version()
    s.phase = "key exchange"
    i_s = yield from s.expect(MSG_KEXINIT)
    kex, cipher_cs, cipher_sc, server_guess_follows = _negotiate_all(s, i_s)
    if server_guess_follows and not s.guess_ok:
        yield from s.recv()  # the server guessed wrong; its guessed kex packet is ignored
    if not s.guess_ok:
        s.send(ecdh_init)
    log.debug("%s: kex %s, ciphers %s / %s", s.where, kex, cipher_cs, cipher_sc)

    reply = WireReader((yield from s.expect(MSG_KEX_ECDH_REPLY)), what="KEX_ECDH_REPLY", start=1)
    k_s = reply.string(limit=4096)
    q_s = reply.string(limit=64)
    signature = reply.string(limit=4096)
    reply.end()

    blob = WireReader(k_s, what="server host key")
    key_type = blob.text(limit=64)
    if key_type != pinned.key_type or k_s != pinned.blob:
        raise HostKeyMismatchError(
            f"host key mismatch: {s.where} presented {key_type} {base64.b64encode(k_s).decode()[:24]}…, "
            f"pinned is {pinned.blob_b64[:24]}… (wrong Secret mounted?)"
        )
    host_raw = blob.string(limit=64)
    blob.end()
    if len(q_s) != 32 or len(host_raw) != 32:
        raise MalformedError("a key of the wrong size in KEX_ECDH_REPLY")
    try:
        shared = ephemeral.exchange(x25519.X25519PublicKey.from_public_bytes(q_s))
    except ValueError:
        shared = b""  # cryptography refuses an all-zero result (a low-order point from the server)
    if shared.count(0) == len(shared):
        raise MalformedError("a curve25519 public value that yields an all-zero shared secret (RFC 8731 3)")
    k = mpint(int.from_bytes(shared, "big"))  # RFC 8731 3.1: the 32 bytes as a big-endian unsigned integer
    h = hashlib.sha256(
        string(CLIENT_VERSION) + string(v_s) + string(i_c) + string(i_s) + string(k_s) + string(q_c) + string(q_s) + k
    ).digest()
    sig = WireReader(signature, what="host key signature")
    if sig.text(limit=64) != "ssh-ed25519":
        raise MalformedError("a host key signature that is not ssh-ed25519")
    sig_raw = sig.string(limit=64)
    sig.end()
    try:
        ed25519.Ed25519PublicKey.from_public_bytes(host_raw).verify(sig_raw, h)
    except InvalidSignature:
        raise HostKeyMismatchError(
            f"host key mismatch: {s.where} presented the pinned key {pinned.blob_b64[:24]}… but its signature "
            "over the exchange hash does not verify (it does not hold the private key; wrong Secret mounted?)"
        ) from None

    yield from s.expect(MSG_NEWKEYS)
    session_id = h
    key_cs, iv_cs = _CIPHER_SIZES[cipher_cs]
    key_sc, iv_sc = _CIPHER_SIZES[cipher_sc]
    s.send(bytes((MSG_NEWKEYS,)))
    s.p_out = _protection(
        cipher_cs, derive_key(k, h, b"C", session_id, key_cs), derive_key(k, h, b"A", session_id, iv_cs)
    )
    s.p_in = _protection(
        cipher_sc, derive_key(k, h, b"D", session_id, key_sc), derive_key(k, h, b"B", session_id, iv_sc)
    )
    return session_id


def _login_and_open(
    s: _Session, *, session_id: bytes, user: str, client_key: ed25519.Ed25519PrivateKey, command: str
) -> _Steps[int]:
    """ssh-userauth service, one signed publickey request (no query round trip) and the session channel's open,
    all pipelined behind our NEWKEYS in one write. RFC 4252 5.1 passes messages sent after the request that
    succeeds to the service; when authentication fails the server answers the early CHANNEL_OPEN with
    UNIMPLEMENTED and we report the USERAUTH_FAILURE."""
    s.phase = "authentication"
    s.send(bytes((MSG_SERVICE_REQUEST,)) + string(b"ssh-userauth"))
    blob = host_key_blob(client_key.public_key())
    signed = string(b"ssh-connection") + string(b"publickey") + b"\x01" + string(b"ssh-ed25519") + string(blob)
    head = bytes((MSG_USERAUTH_REQUEST,)) + string(user.encode("utf-8"))
    signature = client_key.sign(string(session_id) + head + signed)
    s.send(head + signed + string(string(b"ssh-ed25519") + string(signature)))
    s.send(bytes((MSG_CHANNEL_OPEN,)) + string(b"session") + u32(0) + u32(CHANNEL_WINDOW) + u32(CHANNEL_MAX_PACKET))
    accept = WireReader((yield from s.expect(MSG_SERVICE_ACCEPT)), what="SERVICE_ACCEPT", start=1)
    if accept.string(limit=64) != b"ssh-userauth":
        raise MalformedError("SERVICE_ACCEPT for another service")
    answer = yield from s.expect(MSG_USERAUTH_SUCCESS, MSG_USERAUTH_FAILURE)
    if answer[0] == MSG_USERAUTH_FAILURE:
        raise AuthenticationFailedError(
            f"public-key authentication as {user} rejected by {s.where}; "
            "the locale's authorized_keys does not hold our client key"
        )
    s.authenticated = True
    s.phase = f"running `{command}`"
    opened = yield from s.expect(MSG_CHANNEL_OPEN_CONFIRMATION, MSG_CHANNEL_OPEN_FAILURE)
    reader = WireReader(opened, what="CHANNEL_OPEN reply", start=1)
    if reader.u32() != 0:
        raise MalformedError("a channel reply for a channel we did not open")
    if opened[0] == MSG_CHANNEL_OPEN_FAILURE:
        code = reader.u32()
        raise CommandFailedError(
            f"{s.where} refused a session channel for `{command}`: {_short(reader.text())} (code {code})"
        )
    s.channel = reader.u32()
    return s.channel


def _run(s: _Session, *, channel: int, command: str) -> _Steps[None]:
    """`exec command` on the open channel, wait for its exit status and the server's CLOSE; our CLOSE is queued."""
    s.send(bytes((MSG_CHANNEL_REQUEST,)) + u32(channel) + string(b"exec") + b"\x01" + string(command.encode()))
    status: int | None = None
    signal: str | None = None
    while True:
        message = yield from s.expect(
            MSG_CHANNEL_SUCCESS, MSG_CHANNEL_FAILURE, MSG_CHANNEL_REQUEST, MSG_CHANNEL_EOF, MSG_CHANNEL_CLOSE
        )
        kind = message[0]
        reader = WireReader(message, what="channel message", start=1)
        if reader.u32() != 0:
            raise MalformedError("a channel message for a channel we did not open")
        if kind == MSG_CHANNEL_FAILURE:
            raise CommandFailedError(f"{s.where} refused to exec `{command}` (check the login shell)")
        if kind == MSG_CHANNEL_REQUEST:
            request = reader.string(limit=256)
            want_reply = reader.boolean()
            if request == b"exit-status":
                status = reader.u32()
            elif request == b"exit-signal":
                signal = _short(reader.text(limit=64), 32)
            elif want_reply:  # e.g. keepalive@openssh.com
                s.send(bytes((MSG_CHANNEL_FAILURE,)) + u32(channel))
        elif kind == MSG_CHANNEL_CLOSE:
            s.send(bytes((MSG_CHANNEL_CLOSE,)) + u32(channel))
            break
    if signal is not None:
        raise CommandFailedError(f"`{command}` was killed by signal {signal} on {s.where} (check the login shell)")
    if status is None:
        raise CommandFailedError(f"`{command}` ended without an exit status on {s.where} (check the login shell)")
    if status != 0:
        raise CommandFailedError(f"`{command}` exited {status} on {s.where} (check the login shell)")


def _connect(address: str, port: int, *, timeout: float, where: str) -> socket.socket:
    try:
        sock = socket.create_connection((address, port), timeout=timeout)
    except OSError as exc:
        raise TransientProbeError(f"connect to {where}: {exc}") from None
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError as exc:
        sock.close()
        raise TransientProbeError(f"connect to {where}: {exc}") from None
    return sock


def _conversation(
    s: _Session, *, user: str, client_key: ed25519.Ed25519PrivateKey, pinned: PublicKey, command: str
) -> _Steps[None]:
    """The whole probe as one resumable conversation (see _Session)."""
    try:
        session_id = yield from _key_exchange(s, pinned=pinned)
        channel = yield from _login_and_open(
            s, session_id=session_id, user=user, client_key=client_key, command=command
        )
        yield from _run(s, channel=channel, command=command)
        s.goodbye()
    except ProbeError:
        if not isinstance(s.p_out, _Plain):
            s.goodbye()
        raise


def _outcome(exc: BaseException, s: _Session, *, timeout: float) -> ProbeError | None:
    """The ProbeError for an exception out of a conversation, or None for one that is not ours to translate."""
    if isinstance(exc, ProbeError):
        return exc
    if isinstance(exc, MalformedError):
        return ProbeError(f"protocol error from {s.where} during {s.phase}: {exc}")
    if isinstance(exc, _ClosedError):
        return TransientProbeError(f"{s.where} closed the connection during {s.phase}")
    if isinstance(exc, TimeoutError):
        return TransientProbeError(f"{s.where} did not finish the probe within {timeout:g}s (during {s.phase})")
    if isinstance(exc, OSError):
        return TransientProbeError(f"{s.where} during {s.phase}: {exc}")
    return None


def probe(
    address: str,
    *,
    port: int,
    user: str,
    client_key: ed25519.Ed25519PrivateKey,
    pinned: PublicKey,
    timeout: float,
    command: str = "true",
) -> None:
    """One attempt: connect, kex, pinned host key, public-key auth, run `command` (exit 0 expected).

    The whole attempt, not each step, is bounded by `timeout` seconds. Raises a ProbeError subclass; retry the
    ones whose `fatal` is False."""
    where = f"{address}:{port}"
    deadline = time.monotonic() + timeout
    sock = _connect(address, port, timeout=timeout, where=where)
    s = _Session(where=where)
    steps = _conversation(s, user=user, client_key=client_key, pinned=pinned, command=command)
    failure: BaseException | None = None  # thrown into the conversation at its next step
    try:
        while True:
            try:
                if failure is None:
                    next(steps)
                else:
                    steps.throw(failure)
            except StopIteration:
                return
            failure = None
            try:  # the conversation wants more bytes: send what it queued, then read
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                sock.settimeout(remaining)
                output = s.take_output()
                if output:
                    sock.sendall(output)
                chunk = sock.recv(RECV_CHUNK)
                if chunk:
                    s.buf += chunk
                else:
                    failure = _ClosedError()
            except OSError as exc:  # TimeoutError included
                failure = exc
    except Exception as exc:
        translated = _outcome(exc, s, timeout=timeout)
        if translated is None:
            raise
        raise translated from None
    finally:
        _send_quietly(sock, s)
        sock.close()


def _send_quietly(sock: socket.socket, s: _Session) -> None:
    """The last queued packets (CLOSE, DISCONNECT), best effort and without waiting."""
    output = s.take_output()
    if output:
        with contextlib.suppress(OSError):
            sock.setblocking(False)
            sock.send(output)


def load_client_key(path: Path) -> ed25519.Ed25519PrivateKey:
    """The ed25519 client key from an unencrypted OpenSSH (or PKCS#8 PEM) private key file."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BootstrapError(f"cannot load the client key {path}: {exc.strerror or exc}") from None
    try:
        if b"OPENSSH PRIVATE KEY" in data:
            key: object = serialization.load_ssh_private_key(data, password=None)
        else:
            key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise BootstrapError(f"cannot load the client key {path}: {exc}") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise BootstrapError(f"cannot load the client key {path}: not an ed25519 key ({type(key).__name__})")
    return key
