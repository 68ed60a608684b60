"""What Arkouda v2025.01.13 does before it answers its first request (src/ServerDaemon.chpl ``run``,
src/Security.chpl, src/FileIO.chpl): the ``.arkouda`` directory, the token, the connection-info file and the
splash message.

* ``<cwd>/.arkouda`` is created at every start (``try! mkdir(parents=true)``), with or without
  ``--authenticate``; when that fails the whole program halts.
* With ``--authenticate``: if ``.arkouda/tokens.txt`` exists, its last line with surrounding whitespace
  stripped is the token; when that is empty (or the file does not exist) the token is ``ARKOUDA_SERVER_TOKEN``
  verbatim (a trailing newline stays part of it), else 31 random letters and digits, and that token is
  appended to ``tokens.txt`` as a new line. A ``tokens.txt`` left by an earlier run therefore wins over the
  environment.
* ``--serverConnectionInfo`` (default ``$ARKOUDA_SERVER_CONNECTION_INFO``): ``<host> <port> <url>`` written at
  start, removed at the end.
"""

from __future__ import annotations

import logging
import os
import secrets
import string
from pathlib import Path

from .options import ServerOptions

log = logging.getLogger(__name__)

TOKEN_ALPHABET = string.digits + string.ascii_uppercase + string.ascii_lowercase
# Security.chpl's generateToken(len=32) samples len-1 characters.
TOKEN_LENGTH = 31


class HaltError(Exception):
    """Arkouda would halt the whole program here (an error nobody catches); the message is what it prints."""


def init_arkouda_directory(cwd: Path) -> Path:
    directory = cwd / ".arkouda"
    if not directory.is_dir():
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            # Chapel's try! prints the uncaught FileSystem error; the wording of its tail is approximate.
            raise HaltError(
                f"uncaught {type(exc).__name__}: {exc.strerror} (in mkdir with path {str(directory)!r}); "
                f"Arkouda creates .arkouda in its working directory {cwd} at every start: make it writable"
            ) from None
    return directory


def _last_line(path: Path) -> str:
    # FileIO.getLineFromFile(path, -1): the last '\n'-separated line, then string.strip().
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines[-1].strip(" \t\r\n") if lines else ""


def arkouda_token(arkouda_dir: Path, env: dict[str, str]) -> tuple[str, str]:
    """Security.getArkoudaToken → (token, where it came from)."""
    tokens = arkouda_dir / "tokens.txt"
    try:
        if tokens.exists():
            token = _last_line(tokens)
            if token:
                return token, f"last line of {tokens}"
        token = env.get("ARKOUDA_SERVER_TOKEN", "")
        source = "ARKOUDA_SERVER_TOKEN"
        if not token:
            token = "".join(secrets.choice(TOKEN_ALPHABET) for _ in range(TOKEN_LENGTH))
            source = "generated"
        with tokens.open("a", encoding="utf-8") as f:
            f.write(token + "\n")
    except OSError as exc:
        raise HaltError(f"uncaught {type(exc).__name__}: {exc.strerror} ({tokens})") from None
    return token, source


def connect_url(hostname: str, port: int, token: str) -> str:
    return f"tcp://{hostname}:{port}?token={token}" if token else f"tcp://{hostname}:{port}"


def write_connection_info(options: ServerOptions, *, hostname: str, url: str) -> None:
    if options.server_connection_info:
        Path(options.server_connection_info).write_text(f"{hostname} {options.server_port} {url}\n", encoding="utf-8")


def remove_connection_info(options: ServerOptions) -> None:
    if options.server_connection_info:
        try:
            os.remove(options.server_connection_info)
        except OSError as exc:
            log.error("The serverConnectionInfo file was not removed: %s", exc)


def splash(*, url: str, version: str, chpl_version: str, mem_track: bool, mem_limit: int, mem_used: int) -> list[str]:
    """The lines of Arkouda's star box around 'server listening on <url>' (printServerSplashMessage)."""

    def even(msg: str) -> str:
        return msg + " " if len(msg) % 2 else msg

    def padded(msg: str, width: int) -> str:
        pad = " " * ((width - len(msg)) // 2 - 1)
        return f"*{pad} {even(msg)} {pad}*"

    pad = " " * 25
    server = f"{pad} {even(f'server listening on {url}')} {pad}"
    rows = [f"*{server}*", padded(f"arkouda server version = {version}", len(server))]
    rows.append(padded(f"built with chapel version{chpl_version}", len(server)))
    if mem_track:
        rows.append(padded(f"memory limit = {mem_limit}", len(server)))
        rows.append(padded(f"bytes of memory used = {mem_used}", len(server)))
    stars = "*" * (len(server) + 2)
    blank = f"*{' ' * len(server)}*"
    return ["", "", stars, stars, blank, *rows, blank, stars, stars, "", ""]
