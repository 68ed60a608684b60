"""The locales' working directory and Arkouda's start-up files in it (`<work dir>/.arkouda/tokens.txt`).

amudprun's ssh spawner runs every locale as `cd <GASNET_SSH_REMOTE_PATH> ; <program>`, and Arkouda creates
`<cwd>/.arkouda` at every start and halts when it cannot, so the directory must be writable at the same path in
every pod. With `--authenticate` Arkouda takes the last line of `.arkouda/tokens.txt` before its environment,
so a file left by an earlier run would silently win over a rotated token: before every launch the bootstrap
writes that file with the token from the key Secret (the one source of truth), or removes it when the server
runs without authentication.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.ssh import keys

log = logging.getLogger(__name__)

ARKOUDA_DIR = ".arkouda"
TOKENS_FILE = "tokens.txt"
AUTHENTICATE_FLAGS = ("--authenticate", "--authenticate=true")


def wants_authentication(command: Sequence[str]) -> bool:
    """Arkouda's `--authenticate` config flag, in the two spellings Chapel accepts for `true`."""
    return any(arg in AUTHENTICATE_FLAGS for arg in command)


def read_token(secret_dir: Path) -> str:
    """The Arkouda token from the mounted key Secret, without the line end a hand-made Secret may carry."""
    path = secret_dir / keys.TOKEN
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BootstrapError(
            f"the server runs with --authenticate but the key Secret mounted at {secret_dir} has no field "
            f"{keys.TOKEN} (chart: keygen adds it on the next `helm upgrade` with server.authenticate=true)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BootstrapError(f"cannot read the Arkouda token {path}: {exc}") from None
    token = raw.strip()
    if not token or any(ch.isspace() for ch in token):
        raise BootstrapError(
            f"key Secret field {keys.TOKEN} ({path}) must be one word without spaces or line breaks inside; "
            "clients send it verbatim"
        )
    return token


def prepare(work_dir: Path, *, token: str | None) -> Path:
    """Check the directory is writable, then leave exactly this launch's token file in `.arkouda`.

    Returns the token file's path (absent when `token` is None)."""
    if not work_dir.is_dir():
        raise BootstrapError(
            f"working directory {work_dir} (--work-dir, ARKOUDA_WORK_DIR) does not exist: every locale runs "
            "there and Arkouda creates .arkouda/ in it; mount a writable volume at that path"
        )
    if not os.access(work_dir, os.W_OK | os.X_OK):
        raise BootstrapError(
            f"working directory {work_dir} (--work-dir, ARKOUDA_WORK_DIR) is not writable by uid {os.getuid()}: "
            "Arkouda halts at start when it cannot create .arkouda/ there; mount a writable volume at that path"
        )
    arkouda_dir = work_dir / ARKOUDA_DIR
    arkouda_dir.mkdir(mode=0o700, exist_ok=True)
    tokens = arkouda_dir / TOKENS_FILE
    if token is None:
        with contextlib.suppress(FileNotFoundError):
            tokens.unlink()
            log.info("removed %s left by an earlier run (the server runs without --authenticate)", tokens)
        return tokens
    partial = tokens.with_name(TOKENS_FILE + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    partial.replace(tokens)
    log.info("wrote this launch's Arkouda token to %s (from the key Secret)", tokens)
    return tokens
