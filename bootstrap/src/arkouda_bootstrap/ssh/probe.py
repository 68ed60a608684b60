"""One probe attempt of one locale over SSH, with paramiko: TCP connect, key exchange, the host key compared with
the pinned one, public-key auth, `true` run and its exit status checked. The retries live in `ssh.probe_host`.

Before a launch the same session also ends what a previous launch left running on the host (`end_leftovers`, the
program path): a server pod lost with its node vanishes without FIN or RST, so the workers it started over ssh on
the surviving locales are never told and would run (and hold their memory) next to the relaunched ones. It then
prints the host's /proc/net/snmp, the baseline of the launch's network check (netdrops), which `read_counters`
reads again once the program is up, in a session of the same kind.

Every failure is a ProbeError whose message names the pod and its address; `TransientProbeError`s are worth
retrying (nothing listens yet, a dropped connection), `KeysPendingError`s too, for longer (a pod of this release
that has not reloaded a changed Secret yet), the others are not.

paramiko is imported on first use, not with this module: `locale` imports `ssh` for its client config and
starts faster without it.
"""

from __future__ import annotations

import contextlib
import logging
import shlex
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from arkouda_bootstrap import netdrops
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.ssh.keys import KEY_TYPE, RETIRED_HOST_KEYS, PublicKey, banner_release_id, retired_host_keys

if TYPE_CHECKING:
    import paramiko

log = logging.getLogger(__name__)

COMMAND = "true"
# Prints the host's /proc/net/snmp with shell builtins only (no cat in the image needed, no fork). The file is
# tested before it is opened (a failed redirection is a shell error, handled differently from shell to shell):
# a host without it prints nothing and exits 0, so it never fails the probe; it just has no baseline.
SNMP_SCRIPT = (
    f'if [ -r {netdrops.SNMP_PATH} ]; then while IFS= read -r l; do printf "%s\\n" "$l"; done <{netdrops.SNMP_PATH}; fi'
)
# Ends every process of ours whose executable is the program (`-ef`: same file, following /proc/<pid>/exe; other
# users' processes fail the test), then prints how many, then the counters (SNMP_SCRIPT). Only shell builtins, so
# one pass over /proc costs no fork per process, and our own shell (whose exe is the shell) can never match.
# SIGKILL: a GASNet worker whose master is gone has nobody to finish a graceful exit with.
LEFTOVERS_SCRIPT = (
    'n=0; for d in /proc/[0-9]*; do if [ "$d/exe" -ef {program} ] && kill -KILL "${{d#/proc/}}" 2>/dev/null; '
    'then n=$((n + 1)); fi; done; echo "ended=$n"; ' + SNMP_SCRIPT.replace("{", "{{").replace("}", "}}")
)
# The one key exchange the locales' sshd offers by default (config.DEFAULT_KEX lists it under both its names;
# paramiko knows the @libssh.org one). Offering nothing else keeps a costlier exchange from being negotiated.
KEX_ALGORITHMS = ("curve25519-sha256@libssh.org",)
HOST_KEY_ALGORITHMS = (KEY_TYPE,)
# paramiko's own order puts aes-ctr with an HMAC first; the locales offer AES-GCM (config.DEFAULT_CIPHERS), which
# needs no separate MAC. The others stay available for an sshd tuned to them.
PREFERRED_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")
DISCONNECT_BY_APPLICATION = 11  # RFC 4253 11.1
KEYS_HINT = (
    "global.sshKexAlgorithms must keep curve25519-sha256 and global.sshCiphers one of "
    "aes128-gcm@openssh.com,aes256-gcm@openssh.com,aes128-ctr,aes256-ctr"
)


class ProbeError(Exception):
    """Base of the probe outcomes; `fatal` ones are not retried."""

    fatal = True


class TransientProbeError(ProbeError):
    """Nothing listening yet, a dropped connection, a timeout: worth retrying."""

    fatal = False


class KeysPendingError(TransientProbeError):
    """A pod of this release serves other keys of this release than ours: it (or we) has not reloaded the changed
    Secret yet, which the kubelet delivers within about a minute. Retried until the wait deadline."""


class RetiredHostKeyError(KeysPendingError):
    """The pod serves a host key this release had before a rotation (the Secret's retired_host_keys)."""


class OtherSecretHostKeyError(KeysPendingError):
    """The pod names this release in its SSH version line but serves a host key our Secret does not know: a
    Secret of this release that was deleted and regenerated, or one newer than our own copy."""


class HostKeyMismatchError(ProbeError):
    pass


@dataclass(frozen=True)
class ProbeKeys:
    """What one attempt checks against: our client key, the pinned host key, the release's retired host keys and
    its release id (None for a Secret written before keygen recorded one)."""

    client_key: paramiko.PKey
    pinned: PublicKey
    retired: Sequence[PublicKey] = ()
    release_id: str | None = None


class AuthenticationFailedError(ProbeError):
    pass


class CommandFailedError(ProbeError):
    pass


class IncompatibleAlgorithmsError(ProbeError):
    pass


def _quiet_paramiko() -> None:
    # paramiko's transport thread logs every failed connection at ERROR with a traceback; the probe reports each
    # failure itself in one line, so those stay out of the server's log unless someone asked for them.
    library = logging.getLogger("paramiko")
    if library.level == logging.NOTSET:
        library.setLevel(logging.CRITICAL)


class _QuickAckSocket(socket.socket):
    """A socket that acknowledges what it read at once. sshd sets no TCP_NODELAY on a non-interactive session:
    after auth it sends its hostkeys-00 GLOBAL_REQUEST (nothing to answer), and Nagle then holds the
    CHANNEL_OPEN_CONFIRMATION until our ACK, which the kernel delays by 40 ms. paramiko waits for that
    confirmation before it sends the exec, so every probe paid the 40 ms (our earlier client pipelined the open
    behind the auth instead). Linux falls back to delayed ACKs on its own, hence the option after every read."""

    @classmethod
    def adopt(cls, sock: socket.socket) -> socket.socket:
        if _TCP_QUICKACK is None:
            return sock
        timeout = sock.gettimeout()
        adopted = cls(sock.family, sock.type, sock.proto, fileno=sock.detach())
        adopted.settimeout(timeout)
        return adopted

    def recv(self, bufsize: int, flags: int = 0, /) -> bytes:
        data = super().recv(bufsize, flags)
        if data and _TCP_QUICKACK is not None:
            # an error here means the connection is going away; the next read reports it
            with contextlib.suppress(OSError):
                self.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK, 1)
        return data


_TCP_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)


@dataclass(frozen=True)
class Probed:
    """What one successful attempt found: how many leftovers it ended and, with `end_leftovers`, the host's
    counters (None when its /proc/net/snmp could not be read: the launch's check then has no baseline there)."""

    ended: int = 0
    counters: netdrops.Counters | None = None


def probe(
    address: str,
    *,
    pod: str,
    port: int,
    user: str,
    client_key: paramiko.PKey,
    pinned: PublicKey,
    retired: Sequence[PublicKey] = (),
    release_id: str | None = None,
    timeout: float,
    end_leftovers: str | None = None,
) -> Probed:
    """One attempt, bounded as a whole by `timeout` seconds. Raises a ProbeError subclass on failure.

    With `end_leftovers` (the absolute path of the program a launch starts on every host) the command first ends
    our processes running that program, then prints the host's counters; returns how many it ended and them."""
    keys = ProbeKeys(client_key=client_key, pinned=pinned, retired=tuple(retired), release_id=release_id)
    where = f"pod {pod} ({address})"
    if not end_leftovers:
        shown = f"`{COMMAND}`"
        session(address, pod=pod, port=port, user=user, keys=keys, timeout=timeout, command=COMMAND, shown=shown)
        return Probed()
    output = session(
        address,
        pod=pod,
        port=port,
        user=user,
        keys=keys,
        timeout=timeout,
        command=leftovers_command(end_leftovers),
        shown="the leftover check",
        read_output=True,
    )
    ended = _ended(output, where=where)
    try:
        counters: netdrops.Counters | None = netdrops.parse_snmp(output.decode("ascii", "replace"))
    except netdrops.CountersError as exc:
        log.info("%s: no baseline for the launch's network check: %s", where, exc)
        counters = None
    return Probed(ended=ended, counters=counters)


def read_counters(
    address: str, *, pod: str, port: int, user: str, keys: ProbeKeys, timeout: float
) -> netdrops.Counters:
    """The host's /proc/net/snmp counters, in one session like a probe's (same checks, same bound)."""
    output = session(
        address,
        pod=pod,
        port=port,
        user=user,
        keys=keys,
        timeout=timeout,
        command=SNMP_SCRIPT,
        shown=f"the read of {netdrops.SNMP_PATH}",
        read_output=True,
    )
    try:
        return netdrops.parse_snmp(output.decode("ascii", "replace"))
    except netdrops.CountersError as exc:
        raise CommandFailedError(f"pod {pod} ({address}): {exc}") from None


def session(
    address: str,
    *,
    pod: str,
    port: int,
    user: str,
    keys: ProbeKeys,
    timeout: float,
    command: str,
    shown: str,
    read_output: bool = False,
) -> bytes:
    """Run `command` on the host and check it exited 0, bounded as a whole by `timeout` seconds: TCP connect, key
    exchange, the host key compared with the pinned one, public-key auth, exec. Returns its stdout when
    `read_output` (else b""). `shown` names the command in error messages. Raises a ProbeError subclass."""
    import paramiko

    _quiet_paramiko()
    where = f"pod {pod} ({address})"
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((address, port), timeout=timeout)
    except OSError as exc:
        raise TransientProbeError(f"{where}: cannot connect to port {port}: {exc.strerror or exc}") from None
    # small request/reply exchanges: do not let Nagle hold our packets back for the server's delayed ACK
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock = _QuickAckSocket.adopt(sock)
    transport = paramiko.Transport(sock)
    options = transport.get_security_options()
    options.kex = KEX_ALGORITHMS
    options.key_types = HOST_KEY_ALGORITHMS
    options.ciphers = (*PREFERRED_CIPHERS, *(c for c in options.ciphers if c not in PREFERRED_CIPHERS))
    transport.banner_timeout = timeout
    transport.auth_timeout = timeout
    # paramiko bounds the handshake, auth and channel open, but not the wait for the exec reply: closing the
    # transport at the deadline wakes every waiter.
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        transport.close()

    watchdog = threading.Timer(timeout, expire)
    watchdog.daemon = True
    phase = "key exchange"
    try:
        watchdog.start()
        transport.start_client(timeout=timeout)
        _check_host_key(
            transport.get_remote_server_key(),
            where=where,
            pinned=keys.pinned,
            retired=keys.retired,
            release_id=keys.release_id,
            remote_version=transport.remote_version,
        )
        phase = "authentication"
        try:
            transport.auth_publickey(user, keys.client_key)
        except paramiko.AuthenticationException:
            if expired.is_set() or not transport.is_active():
                raise
            raise AuthenticationFailedError(
                f"{where} rejected public-key authentication as {user}: "
                "the locale's authorized_keys does not hold our client key"
            ) from None
        phase = f"running {shown}"
        channel = transport.open_session(timeout=max(0.0, deadline - time.monotonic()))
        try:
            channel.exec_command(command)
        except paramiko.SSHException:
            if expired.is_set() or not transport.is_active():
                raise
            raise CommandFailedError(f"{where} refused to exec {shown} (check the login shell)") from None
        # the output comes in stdout, which sshd may still be forwarding after it sent the exit status
        output = _read_to_eof(channel, deadline) if read_output else b""
        if not channel.status_event.wait(max(0.0, deadline - time.monotonic())):
            raise TimeoutError
        status = channel.exit_status
        if expired.is_set():
            raise TimeoutError
        if status == -1:
            raise CommandFailedError(f"{shown} ended without an exit status on {where} (check the login shell)")
        if status != 0:
            raise CommandFailedError(f"{shown} exited {status} on {where} (check the login shell)")
        _disconnect(transport)
        return output
    except ProbeError:
        raise
    except paramiko.ssh_exception.IncompatiblePeer as exc:
        raise IncompatibleAlgorithmsError(f"{where}: {exc}; {KEYS_HINT}") from None
    except (paramiko.SSHException, EOFError, OSError) as exc:
        if expired.is_set() or isinstance(exc, TimeoutError):
            raise TransientProbeError(
                f"{where} did not finish the probe within {timeout:g}s (during {phase})"
            ) from None
        raise _translate(exc, transport.get_exception(), where=where, phase=phase) from None
    finally:
        watchdog.cancel()
        # paramiko closes the socket while its thread still waits in recv() there, which keeps the connection
        # (and the locale's sshd session) open until that wait times out, 0.1 s later; a shutdown ends it now.
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        transport.close()


def _read_to_eof(channel: paramiko.Channel, deadline: float) -> bytes:
    """stdout until the remote end closes it; a socket timeout (TimeoutError) at the deadline."""
    chunks: list[bytes] = []
    while True:
        channel.settimeout(max(0.001, deadline - time.monotonic()))
        data = channel.recv(4096)
        if not data:
            return b"".join(chunks)
        chunks.append(data)


def leftovers_command(program: str) -> str:
    """The POSIX sh command that ends our processes running `program`, prints `ended=<count>`, then the host's
    /proc/net/snmp."""
    return LEFTOVERS_SCRIPT.format(program=shlex.quote(program))


def _ended(output: bytes, *, where: str) -> int:
    for line in output.decode("utf-8", "replace").splitlines():
        if line.startswith("ended=") and line[len("ended=") :].isdigit():
            return int(line[len("ended=") :])
    raise CommandFailedError(
        f"the leftover check printed no count on {where} (check the login shell: it must be a POSIX sh): "
        f"{output[:200]!r}"
    )


def _disconnect(transport: paramiko.Transport) -> None:
    """Say goodbye (SSH_MSG_DISCONNECT, "by application") before closing: paramiko's close only drops the
    connection, and an sshd whose session ends that way spends ≈4 ms more CPU on it (measured, bench/README.md)."""
    import paramiko
    from paramiko.common import cMSG_DISCONNECT

    message = paramiko.Message()
    message.add_byte(cMSG_DISCONNECT)
    message.add_int(DISCONNECT_BY_APPLICATION)
    message.add_string("probe done")
    message.add_string("")  # language tag
    # the probe has succeeded already; a connection that breaks now changes nothing
    with contextlib.suppress(paramiko.SSHException, EOFError, OSError):
        transport.packetizer.send_message(message)


def _translate(exc: BaseException, cause: BaseException | None, *, where: str, phase: str) -> ProbeError:
    """The ProbeError for a failure paramiko reported; `cause` is what its transport thread saw, if anything."""
    seen = cause if cause is not None else exc
    text = str(seen)
    if "Signature verification" in text:
        return HostKeyMismatchError(
            f"{where} presented this release's host key but could not sign with it: it does not hold the private "
            "key, so something else answers on that address"
        )
    if isinstance(seen, (EOFError, OSError)) or "banner" in text or "No existing session" in text:
        # the sshd closed or reset the connection (still starting, or shedding load), or never sent its banner
        detail = f": {text}" if text and isinstance(seen, OSError) else ""
        return TransientProbeError(f"{where} closed the connection during {phase}{detail}")
    return ProbeError(f"{where}: SSH failed during {phase}: {text or type(seen).__name__}")


def _check_host_key(
    presented: paramiko.PKey,
    *,
    where: str,
    pinned: PublicKey,
    retired: Sequence[PublicKey],
    release_id: str | None = None,
    remote_version: str = "",
) -> None:
    """paramiko has verified the key's signature over the exchange; here the key itself must be the pinned one."""
    explain_host_key(
        presented.asbytes(), where=where, pinned=pinned, retired=retired, release_id=release_id, banner=remote_version
    )


def explain_host_key(
    blob: bytes,
    *,
    where: str,
    pinned: PublicKey,
    retired: Sequence[PublicKey],
    release_id: str | None,
    banner: str,
) -> None:
    """Return when `blob` is the pinned host key; otherwise raise the error that says what the mismatch means.

    An older key of this release (from the Secret, so trusted) or a pod that names this release in its version
    line means: wait, it has not reloaded the changed Secret yet. A key the release never had, from a host that
    does not name it, means a wrong Secret or another service on that address: fail now. The version line is
    not authenticated, but believing it can only make the probe wait, until the deadline; no key is trusted
    because of it."""
    if blob == pinned.blob:
        return
    if any(blob == old.blob for old in retired):
        raise RetiredHostKeyError(
            f"{where} serves an older host key of this release: the keys were rotated and this pod has not "
            "reloaded them yet"
        )
    if release_id is not None and banner_release_id(banner) == release_id:
        raise OtherSecretHostKeyError(
            f"{where} serves a host key of another Secret of this release: the Secret was deleted and regenerated "
            "(or changed) and that pod or this one has not reloaded it yet"
        )
    raise HostKeyMismatchError(
        f"{where} presented a host key this release never had: a different Secret is mounted there, or something "
        "else answers on that address"
    )


def read_retired_host_keys(secret_dir: Path) -> list[PublicKey]:
    """The release's earlier host keys from the mounted Secret; none before the first rotation (no such file)."""
    path = secret_dir / RETIRED_HOST_KEYS
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        # only the wording of a host key mismatch depends on it: never a reason to stop
        log.warning("cannot read %s (a host key mismatch cannot tell a rotated key from a foreign one): %s", path, exc)
        return []
    return retired_host_keys(text)


def load_release_client_key(path: Path) -> paramiko.PKey:
    """The release's ed25519 client key (keygen's, mounted from its Secret) from an unencrypted OpenSSH private
    key file."""
    import paramiko

    _quiet_paramiko()
    try:
        return paramiko.Ed25519Key.from_private_key_file(str(path))
    except OSError as exc:
        raise BootstrapError(f"cannot load the client key {path}: {exc.strerror or exc}") from None
    except (paramiko.SSHException, ValueError) as exc:
        raise BootstrapError(f"cannot load the client key {path}: not an unencrypted ed25519 key ({exc})") from None
