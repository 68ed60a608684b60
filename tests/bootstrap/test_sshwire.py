"""sshwire, the bootstrap's own minimal SSH-2 probe client: against the real OpenSSH sshd that `locale` runs (every
cipher it speaks, each failure the user can cause), against named test-double servers that misbehave on purpose,
and unit tests of the wire encoding."""

from __future__ import annotations

import hashlib
import logging
import pwd
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from arkouda_bootstrap import keys, sshwire
from arkouda_bootstrap.errors import BootstrapError
from conftest import LocaleSshd, free_port, start_locale, write_secret_dir
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, x25519

# ----------------------------------------------------------------------------------------------------------
# helpers


def load_key(data: dict[str, bytes], tmp_path: Path, name: str = "id") -> ed25519.Ed25519PrivateKey:
    path = tmp_path / name
    path.write_bytes(data[keys.CLIENT_KEY])
    path.chmod(0o600)
    return sshwire.load_client_key(path)


def pinned_of(data: dict[str, bytes]) -> keys.PublicKey:
    return keys.pinned_host_key(data[keys.KNOWN_HOSTS].decode())


def parse_name_list(data: bytes) -> list[str]:
    """One name-list field on its own, decoded by sshwire's reader (which must consume all of it)."""
    reader = sshwire.WireReader(data, what="name-list")
    names = reader.name_list()
    reader.end()
    return names


def probe_sshd(sshd: LocaleSshd, *, key: ed25519.Ed25519PrivateKey, pinned: keys.PublicKey) -> None:
    """sshwire.probe of a real locale sshd on loopback as its user, with a 5 s deadline."""
    sshwire.probe("127.0.0.1", port=sshd.port, user=sshd.user, client_key=key, pinned=pinned, timeout=5)


def run_locale(
    user: pwd.struct_passwd, shared_dir: Path, data: dict[str, bytes], sshds: list[LocaleSshd], *args: str
) -> LocaleSshd:
    sshd = start_locale(
        uid=user.pw_uid,
        gid=user.pw_gid,
        secret_dir=write_secret_dir(shared_dir / "secret", data),
        state_dir=shared_dir / f"state-{len(sshds)}",
        port=free_port(),
        extra_args=args,
    )
    sshds.append(sshd)
    return sshd


@pytest.fixture
def locale_sshd(
    test_user: pwd.struct_passwd, shared_dir: Path, secret_data: dict[str, bytes], sshds: list[LocaleSshd]
) -> LocaleSshd:
    """The locale's sshd with the bootstrap's default tuning (curve25519-sha256 first, aes128-gcm, chacha20)."""
    return run_locale(test_user, shared_dir, secret_data, sshds)


# ----------------------------------------------------------------------------------------------------------
# real OpenSSH


@pytest.mark.sshd
@pytest.mark.parametrize("cipher", sshwire.CIPHERS)
def test_probe_succeeds_with_each_cipher_the_sshd_is_limited_to(
    cipher: str,
    test_user: pwd.struct_passwd,
    shared_dir: Path,
    secret_data: dict[str, bytes],
    sshds: list[LocaleSshd],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The server offers only `cipher`, so both directions run it: this checks the packet layer of each AEAD
    (for chacha20-poly1305 also the 16-byte counter||nonce layout handed to cryptography's ChaCha20)."""
    sshd = run_locale(test_user, shared_dir, secret_data, sshds, "--ciphers", cipher)
    assert f"Ciphers {cipher}\n" in (sshd.state_dir / "sshd_config").read_text()
    caplog.set_level(logging.DEBUG, logger="arkouda_bootstrap.sshwire")
    probe_sshd(sshd, key=load_key(secret_data, tmp_path), pinned=pinned_of(secret_data))
    assert f"kex curve25519-sha256, ciphers {cipher} / {cipher}" in caplog.text


@pytest.mark.sshd
def test_probe_runs_a_command_and_reports_its_exit_status_and_signal(
    locale_sshd: LocaleSshd, secret_data: dict[str, bytes], tmp_path: Path
) -> None:
    key = load_key(secret_data, tmp_path)
    pinned = pinned_of(secret_data)

    def run(command: str) -> None:
        sshwire.probe(
            "127.0.0.1", port=locale_sshd.port, user=locale_sshd.user, client_key=key, pinned=pinned, timeout=5,
            command=command,
        )  # fmt: skip

    run("true")
    with pytest.raises(sshwire.CommandFailedError) as failed:
        run("false")
    assert str(failed.value) == f"`false` exited 1 on 127.0.0.1:{locale_sshd.port} (check the login shell)"
    assert failed.value.fatal
    with pytest.raises(sshwire.CommandFailedError, match="killed by signal KILL"):
        run("kill -KILL $$")
    # output larger than the channel window is discarded without stalling the command
    run(f"head -c {3 * sshwire.CHANNEL_WINDOW} /dev/zero")


@pytest.mark.sshd
def test_probe_with_another_pinned_key_is_a_host_key_mismatch(
    locale_sshd: LocaleSshd, secret_data: dict[str, bytes], tmp_path: Path
) -> None:
    other = keys.parse_public_key(keys.generate_ed25519(comment="other").public_openssh, what="other")
    with pytest.raises(sshwire.HostKeyMismatchError) as err:
        probe_sshd(locale_sshd, key=load_key(secret_data, tmp_path), pinned=other)
    message = str(err.value)
    actual = pinned_of(secret_data)
    assert message == (
        f"host key mismatch: 127.0.0.1:{locale_sshd.port} presented ssh-ed25519 {actual.blob_b64[:24]}…, "
        f"pinned is {other.blob_b64[:24]}… (wrong Secret mounted?)"
    )
    assert err.value.fatal


@pytest.mark.sshd
def test_probe_with_a_client_key_not_in_authorized_keys_is_rejected(
    locale_sshd: LocaleSshd, secret_data: dict[str, bytes], tmp_path: Path
) -> None:
    wrong = keys.build_secret_data(release="other", with_token=False)
    with pytest.raises(sshwire.AuthenticationFailedError) as err:
        probe_sshd(locale_sshd, key=load_key(wrong, tmp_path), pinned=pinned_of(secret_data))
    assert str(err.value) == (
        f"public-key authentication as {locale_sshd.user} rejected by 127.0.0.1:{locale_sshd.port}; "
        "the locale's authorized_keys does not hold our client key"
    )
    assert err.value.fatal


def paramiko_outcome(*, port: int, user: str, key_path: Path, pinned: keys.PublicKey) -> str:
    """The test oracle: the same probe done with paramiko (an independent SSH implementation), its outcome
    named like sshwire's exceptions."""
    import paramiko

    transport = paramiko.Transport(socket.create_connection(("127.0.0.1", port), timeout=5))
    try:
        transport.start_client(timeout=5)
        server_key = transport.get_remote_server_key()
        if server_key.get_name() != pinned.key_type or server_key.asbytes() != pinned.blob:
            return "HostKeyMismatchError"
        try:
            transport.auth_publickey(user, paramiko.Ed25519Key.from_private_key_file(str(key_path)))
        except paramiko.AuthenticationException:
            return "AuthenticationFailedError"
        channel = transport.open_session(timeout=5)
        channel.exec_command("true")
        return "ok" if channel.recv_exit_status() == 0 else "CommandFailedError"
    finally:
        transport.close()


@pytest.mark.sshd
def test_probe_agrees_with_paramiko_on_every_outcome(
    locale_sshd: LocaleSshd, secret_data: dict[str, bytes], tmp_path: Path
) -> None:
    """Same sshd, same inputs: sshwire's outcome and paramiko's (the oracle above) agree -- success, host key
    mismatch, rejected key. Nothing about speed."""
    other_pin = keys.parse_public_key(keys.generate_ed25519(comment="other").public_openssh, what="other")
    wrong = keys.build_secret_data(release="other", with_token=False)
    cases = {
        "ok": (secret_data, pinned_of(secret_data)),
        "mismatch": (secret_data, other_pin),
        "rejected": (wrong, pinned_of(secret_data)),
    }
    results = {}
    for name, (data, pin) in cases.items():
        path = tmp_path / f"{name}.key"
        path.write_bytes(data[keys.CLIENT_KEY])
        path.chmod(0o600)
        try:
            sshwire.probe(
                "127.0.0.1", port=locale_sshd.port, user=locale_sshd.user,
                client_key=sshwire.load_client_key(path), pinned=pin, timeout=5,
            )  # fmt: skip
            ours = "ok"
        except sshwire.ProbeError as exc:
            ours = type(exc).__name__
        theirs = paramiko_outcome(port=locale_sshd.port, user=locale_sshd.user, key_path=path, pinned=pin)
        results[name] = (ours, theirs)
    assert results == {
        "ok": ("ok", "ok"),
        "mismatch": ("HostKeyMismatchError", "HostKeyMismatchError"),
        "rejected": ("AuthenticationFailedError", "AuthenticationFailedError"),
    }


@pytest.mark.sshd
def test_probe_falls_back_when_the_sshd_prefers_another_kex(
    test_user: pwd.struct_passwd,
    shared_dir: Path,
    secret_data: dict[str, bytes],
    sshds: list[LocaleSshd],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Our guessed KEX_ECDH_INIT is wrong for an sshd that lists the post-quantum exchange first: the sshd drops
    it and we send it again for the agreed curve25519-sha256@libssh.org."""
    pq = "sntrup761x25519-sha512@openssh.com,curve25519-sha256@libssh.org"
    sshd = run_locale(test_user, shared_dir, secret_data, sshds, "--kex-algorithms", pq)
    caplog.set_level(logging.DEBUG, logger="arkouda_bootstrap.sshwire")
    probe_sshd(sshd, key=load_key(secret_data, tmp_path), pinned=pinned_of(secret_data))
    assert "kex curve25519-sha256@libssh.org, ciphers aes128-gcm@openssh.com" in caplog.text


@pytest.mark.sshd
def test_probe_without_a_common_kex_names_the_values_keys(
    test_user: pwd.struct_passwd,
    shared_dir: Path,
    secret_data: dict[str, bytes],
    sshds: list[LocaleSshd],
    tmp_path: Path,
) -> None:
    sshd = run_locale(
        test_user, shared_dir, secret_data, sshds, "--kex-algorithms", "sntrup761x25519-sha512@openssh.com"
    )
    with pytest.raises(sshwire.IncompatibleAlgorithmsError) as err:
        probe_sshd(sshd, key=load_key(secret_data, tmp_path), pinned=pinned_of(secret_data))
    message = str(err.value)
    assert f"no key exchange in common with 127.0.0.1:{sshd.port}" in message
    assert "it offers sntrup761x25519-sha512@openssh.com," in message
    assert "global.sshKexAlgorithms must keep curve25519-sha256" in message
    assert "global.sshCiphers" in message
    assert "\n" not in message
    assert err.value.fatal


def test_probe_with_nothing_listening_is_transient() -> None:
    port = free_port()  # bound and released: nothing listens there now
    with pytest.raises(sshwire.TransientProbeError, match=f"connect to 127.0.0.1:{port}"):
        sshwire.probe(
            "127.0.0.1",
            port=port,
            user="nobody",
            client_key=ed25519.Ed25519PrivateKey.generate(),
            pinned=keys.PublicKey("ssh-ed25519", "AAAA"),
            timeout=2,
        )


# ----------------------------------------------------------------------------------------------------------
# test-double servers: a loopback listener whose one connection is handled by a script that misbehaves


class DoubleServer:
    """TEST DOUBLE: a fake SSH server on 127.0.0.1 that hands its first connection to `script` in a thread."""

    def __init__(self, script: Callable[[socket.socket], None]) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._script = script
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        conn, _ = self._listener.accept()
        conn.settimeout(10)
        with conn:
            try:
                self._script(conn)
            except (OSError, EOFError):
                pass  # the client hung up, which is what most scripts provoke
            except BaseException as exc:
                self.error = exc

    def close(self) -> None:
        self._thread.join(timeout=10)
        self._listener.close()
        assert self.error is None, f"the test double itself failed: {self.error!r}"


@pytest.fixture
def double() -> Iterator[Callable[[Callable[[socket.socket], None]], DoubleServer]]:
    servers: list[DoubleServer] = []

    def make(script: Callable[[socket.socket], None]) -> DoubleServer:
        servers.append(DoubleServer(script))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def recv_line(conn: socket.socket) -> bytes:
    line = b""
    while not line.endswith(b"\n"):
        chunk = conn.recv(1)
        if not chunk:
            raise EOFError
        line += chunk
    return line.rstrip(b"\r\n")


def recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def recv_plain(conn: socket.socket) -> bytes:
    """One unencrypted packet's payload."""
    length = int.from_bytes(recv_exact(conn, 4), "big")
    body = recv_exact(conn, length)
    return body[1 : length - body[0]]


def hang_up(conn: socket.socket) -> None:
    """Half-close and read until the client closes too, so the client sees a clean EOF rather than a reset."""
    conn.shutdown(socket.SHUT_WR)
    while conn.recv(65536):
        pass


def plain(payload: bytes) -> bytes:
    pad = 8 - (len(payload) + 5) % 8
    pad += 8 if pad < 4 else 0
    body = bytes((pad,)) + payload + b"\0" * pad
    return len(body).to_bytes(4, "big") + body


SERVER_VERSION = b"SSH-2.0-TestDouble"


def server_kexinit(*, kex: tuple[str, ...] = sshwire.KEX_ALGORITHMS, guess_follows: bool = False) -> bytes:
    s = sshwire.name_list
    return (
        bytes((sshwire.MSG_KEXINIT,))
        + b"\x11" * 16
        + s(kex)
        + s(("ssh-ed25519",))
        + s(("aes128-gcm@openssh.com",)) * 2
        + s(("hmac-sha2-256",)) * 2
        + s(("none",)) * 2
        + s(()) * 2
        + (b"\x01" if guess_follows else b"\0")
        + sshwire.u32(0)
    )


def probe_double(server: DoubleServer, *, timeout: float = 3, pinned: keys.PublicKey | None = None) -> None:
    sshwire.probe(
        "127.0.0.1",
        port=server.port,
        user="nobody",
        client_key=ed25519.Ed25519PrivateKey.generate(),
        pinned=pinned or keys.PublicKey("ssh-ed25519", "AAAA"),
        timeout=timeout,
    )


def test_double_without_a_banner_is_transient_within_the_deadline(double: Callable[..., DoubleServer]) -> None:
    hold = threading.Event()

    def silent(conn: socket.socket) -> None:
        hold.wait(10)  # like an sshd stuck before its banner; the client must not wait for it

    server = double(silent)
    started = time.monotonic()
    try:
        with pytest.raises(sshwire.TransientProbeError, match="did not finish the probe within 0.5s .during banner"):
            probe_double(server, timeout=0.5)
    finally:
        hold.set()
    # bounded by the probe's own deadline (generous factor: this is not a speed check)
    assert time.monotonic() - started < 5


def test_double_that_hangs_up_before_its_banner_is_transient(double: Callable[..., DoubleServer]) -> None:
    def max_startups(conn: socket.socket) -> None:
        conn.sendall(b"Exceeded MaxStartups\r\n")
        hang_up(conn)

    server = double(max_startups)
    with pytest.raises(sshwire.TransientProbeError, match="before its SSH version line after it said 'Exceeded Max"):
        probe_double(server)


def test_double_sending_an_oversized_packet_is_a_fatal_protocol_error(double: Callable[..., DoubleServer]) -> None:
    def oversized(conn: socket.socket) -> None:
        conn.sendall(SERVER_VERSION + b"\r\n" + (0x7FFFFFF8).to_bytes(4, "big") + b"\x04" + b"\0" * 64)
        recv_exact(conn, 1 << 20)  # until the client hangs up

    server = double(oversized)
    with pytest.raises(sshwire.ProbeError, match="protocol error from .* during key exchange: a packet with inv") as e:
        probe_double(server)
    assert e.value.fatal


def test_double_sending_a_truncated_kexinit_is_a_fatal_protocol_error(double: Callable[..., DoubleServer]) -> None:
    def truncated(conn: socket.socket) -> None:
        # a name-list that claims 4000 bytes inside a 40-byte packet
        conn.sendall(SERVER_VERSION + b"\r\n" + plain(bytes((20,)) + b"\0" * 16 + sshwire.u32(4000) + b"curve"))
        recv_exact(conn, 1 << 20)

    server = double(truncated)
    with pytest.raises(sshwire.ProbeError, match="KEXINIT is truncated") as e:
        probe_double(server)
    assert e.value.fatal
    assert not isinstance(e.value, sshwire.TransientProbeError)


def test_double_that_disconnects_for_load_is_transient(double: Callable[..., DoubleServer]) -> None:
    def busy(conn: socket.socket) -> None:
        reason = sshwire.u32(12) + sshwire.string(b"too many connections") + sshwire.string(b"")
        conn.sendall(SERVER_VERSION + b"\r\n" + plain(bytes((sshwire.MSG_DISCONNECT,)) + reason))
        recv_exact(conn, 1 << 20)

    server = double(busy)
    with pytest.raises(sshwire.TransientProbeError, match="disconnected during key exchange: too many connections"):
        probe_double(server)


class KexDouble:
    """TEST DOUBLE: a server that does the curve25519 exchange with its own host key. `bad_signature` signs
    something other than the exchange hash; `after_newkeys` decides what happens once both NEWKEYS are out;
    `kex` is its list (the client's guess is wrong unless curve25519-sha256 is first) and `server_guess` makes it
    send a guessed kex packet of its own, junk that the client must skip because that guess is wrong too."""

    def __init__(
        self,
        *,
        bad_signature: bool,
        after_newkeys: Callable[[socket.socket], None],
        kex: tuple[str, ...] = sshwire.KEX_ALGORITHMS,
        server_guess: bool = False,
    ) -> None:
        self.host_key = ed25519.Ed25519PrivateKey.generate()
        blob = sshwire.host_key_blob(self.host_key.public_key())
        self.pinned = keys.parse_public_key(
            self.host_key.public_key()
            .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
            .decode(),
            what="double",
        )
        assert self.pinned.blob == blob
        self.bad_signature = bad_signature
        self.after_newkeys = after_newkeys
        self.kex = kex
        self.server_guess = server_guess
        self.client_newkeys = False
        self.inits = 0  # KEX_ECDH_INIT packets received

    def __call__(self, conn: socket.socket) -> None:
        i_s = server_kexinit(kex=self.kex, guess_follows=self.server_guess)
        guessed = plain(bytes((sshwire.MSG_KEX_ECDH_REPLY,)) + b"a wrong guess") if self.server_guess else b""
        # two lines before the version (RFC 4253 4.2), which the client must skip
        conn.sendall(b"welcome to the double\r\nsecond line\r\n" + SERVER_VERSION + b"\r\n" + plain(i_s) + guessed)
        v_c = recv_line(conn)
        i_c = recv_plain(conn)
        assert i_c[0] == sshwire.MSG_KEXINIT
        init = recv_plain(conn)  # the client's guess, with its KEXINIT
        self.inits = 1
        if self.kex[0] != sshwire.KEX_ALGORITHMS[0]:  # a wrong guess: ignored, the client sends it again
            init = recv_plain(conn)
            self.inits = 2
        assert init[0] == sshwire.MSG_KEX_ECDH_INIT
        q_c = init[5:]
        ephemeral = x25519.X25519PrivateKey.generate()
        q_s = ephemeral.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        shared = ephemeral.exchange(x25519.X25519PublicKey.from_public_bytes(q_c))
        k_s = self.pinned.blob
        h = hashlib.sha256(
            b"".join(sshwire.string(x) for x in (v_c, SERVER_VERSION, i_c, i_s, k_s, q_c, q_s))
            + sshwire.mpint(int.from_bytes(shared, "big"))
        ).digest()
        signed = bytes(32) if self.bad_signature else h
        signature = sshwire.string(b"ssh-ed25519") + sshwire.string(self.host_key.sign(signed))
        reply = bytes((sshwire.MSG_KEX_ECDH_REPLY,)) + sshwire.string(k_s) + sshwire.string(q_s)
        conn.sendall(plain(reply + sshwire.string(signature)) + plain(bytes((sshwire.MSG_NEWKEYS,))))
        self.client_newkeys = recv_plain(conn) == bytes((sshwire.MSG_NEWKEYS,))
        self.after_newkeys(conn)


def test_double_with_a_wrong_signature_over_the_exchange_hash_is_a_host_key_mismatch(
    double: Callable[..., DoubleServer],
) -> None:
    forger = KexDouble(bad_signature=True, after_newkeys=lambda conn: None)
    server = double(forger)
    with pytest.raises(sshwire.HostKeyMismatchError, match="signature over the exchange hash does not verify") as e:
        probe_double(server, pinned=forger.pinned)
    assert e.value.fatal
    assert f"127.0.0.1:{server.port}" in str(e.value)
    server.close()
    assert not forger.client_newkeys  # nothing was sent after the failed check


def test_double_with_a_good_signature_gets_past_the_key_exchange(double: Callable[..., DoubleServer]) -> None:
    """The control for the test above: the same double signing the right hash is accepted, so the mismatch there
    came from the signature alone; it then hangs up, which is transient."""
    honest = KexDouble(bad_signature=False, after_newkeys=hang_up)
    server = double(honest)
    with pytest.raises(sshwire.TransientProbeError, match="closed the connection during authentication"):
        probe_double(server, pinned=honest.pinned)
    server.close()
    assert honest.client_newkeys


def test_double_sending_a_packet_with_a_bad_tag_fails_the_integrity_check(double: Callable[..., DoubleServer]) -> None:
    def forged_packet(conn: socket.socket) -> None:
        conn.sendall(sshwire.u32(16) + b"\xaa" * 32)  # aes-gcm: clear length, 16 bytes body, 16 bytes tag
        recv_exact(conn, 1 << 20)

    kex = KexDouble(bad_signature=False, after_newkeys=forged_packet)
    server = double(kex)
    with pytest.raises(sshwire.ProbeError, match="integrity check failed on packet 3 from 127.0.0.1"):
        probe_double(server, pinned=kex.pinned)


# ----------------------------------------------------------------------------------------------------------
# wire encoding


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        # RFC 4251 section 5 examples
        (0, "00000000"),
        (0x9A378F9B2E332A7, "0000000809a378f9b2e332a7"),
        (0x80, "000000020080"),
        # high bit set in the top byte gets a leading zero; no other leading zeros
        (0xFF, "0000000200ff"),
        (0x7F, "000000017f"),
        (0x0102, "000000020102"),
    ],
)
def test_mpint_encodes_as_rfc_4251_says(value: int, encoded: str) -> None:
    assert sshwire.mpint(value).hex() == encoded


def test_mpint_of_a_curve25519_secret_keeps_its_value() -> None:
    """K is the 32 secret bytes read as a big-endian number: leading zero bytes vanish, a high first byte gets a
    zero prefix."""
    high = bytes([0xC0]) + bytes(range(1, 32))
    assert sshwire.mpint(int.from_bytes(high, "big")) == sshwire.u32(33) + b"\0" + high
    leading_zeros = bytes(2) + bytes(range(1, 31))
    assert sshwire.mpint(int.from_bytes(leading_zeros, "big")) == sshwire.u32(30) + bytes(range(1, 31))
    with pytest.raises(ValueError, match="non-negative"):
        sshwire.mpint(-1)


def test_negotiation_takes_the_first_client_algorithm_the_server_has() -> None:
    client = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com")
    assert sshwire.negotiate(client, ["chacha20-poly1305@openssh.com", "aes256-gcm@openssh.com"]) == (
        "aes256-gcm@openssh.com"
    )
    assert sshwire.negotiate(client, ["aes256-gcm@openssh.com", "aes128-gcm@openssh.com"]) == "aes128-gcm@openssh.com"
    assert sshwire.negotiate(client, ["aes128-ctr"]) is None
    assert sshwire.negotiate(client, []) is None


def test_name_lists_parse_strictly() -> None:
    assert parse_name_list(sshwire.name_list(("a", "b@c.d"))) == ["a", "b@c.d"]
    assert parse_name_list(sshwire.string(b"")) == []
    for bad in (b"a,,b", b"a,", b"a b", b"\xc3\xa9", b"x" * 65):
        with pytest.raises(sshwire.MalformedError):
            parse_name_list(sshwire.string(bad))
    with pytest.raises(sshwire.MalformedError, match="truncated"):
        parse_name_list(sshwire.u32(10) + b"abc")


def test_key_derivation_extends_with_the_previous_output() -> None:
    k, h, sid = sshwire.mpint(2**255 + 19), b"\x01" * 32, b"\x02" * 32
    first = hashlib.sha256(k + h + b"C" + sid).digest()
    second = hashlib.sha256(k + h + first).digest()
    assert sshwire.derive_key(k, h, b"C", sid, 16) == first[:16]
    assert sshwire.derive_key(k, h, b"C", sid, 64) == first + second


def test_load_client_key_reads_the_keys_module_format_and_names_bad_files(tmp_path: Path) -> None:
    pair = keys.generate_ed25519(comment="c")
    good = tmp_path / "id"
    good.write_bytes(pair.private_openssh)
    key = sshwire.load_client_key(good)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    assert pair.public_openssh.startswith(public.decode())
    bad = tmp_path / "bad"
    bad.write_bytes(b"-----BEGIN OPENSSH PRIVATE KEY-----\nnot base64\n-----END OPENSSH PRIVATE KEY-----\n")
    with pytest.raises(BootstrapError, match=f"cannot load the client key {bad}"):
        sshwire.load_client_key(bad)
    with pytest.raises(BootstrapError, match=f"cannot load the client key {tmp_path / 'missing'}"):
        sshwire.load_client_key(tmp_path / "missing")


def test_double_preferring_another_kex_gets_the_guess_sent_again_and_its_own_guess_skipped(
    double: Callable[..., DoubleServer],
) -> None:
    kex = KexDouble(
        bad_signature=False,
        after_newkeys=hang_up,
        kex=("curve25519-sha256@libssh.org", "curve25519-sha256"),
        server_guess=True,
    )
    server = double(kex)
    with pytest.raises(sshwire.TransientProbeError, match="closed the connection during authentication"):
        probe_double(server, pinned=kex.pinned)
    server.close()
    assert kex.inits == 2
    assert kex.client_newkeys
