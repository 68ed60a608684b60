"""Make the current uid resolvable for sshd and ssh when it has no passwd entry (OpenShift's arbitrary uids).

sshd looks up the login user with getpwnam() and the ssh client refuses to run ("No user exists for uid N")
without a passwd entry. When getpwuid(getuid()) fails we write a passwd and a group file into the state dir and
preload libnss_wrapper (Debian package libnss-wrapper) with NSS_WRAPPER_PASSWD/NSS_WRAPPER_GROUP pointing at
them; the returned environment is given to sshd, ssh and the launched program.
"""

from __future__ import annotations

import grp
import logging
import os
import pwd
from dataclasses import dataclass, field
from pathlib import Path

from arkouda_bootstrap.errors import BootstrapError

log = logging.getLogger(__name__)

NSS_WRAPPER_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/libnss_wrapper.so",
    "/usr/lib/aarch64-linux-gnu/libnss_wrapper.so",
    "/usr/lib64/libnss_wrapper.so",
    "/usr/lib/libnss_wrapper.so",
)
FALLBACK_USER = "arkouda"


@dataclass(frozen=True)
class Identity:
    user: str
    uid: int
    gid: int
    home: str
    env: dict[str, str] = field(default_factory=dict)  # extra environment (nss_wrapper) or empty


def find_nss_wrapper(candidates: tuple[str, ...] = NSS_WRAPPER_CANDIDATES) -> str | None:
    for path in candidates:
        if os.path.exists(path):
            return path
    return None


def passwd_line(*, user: str, uid: int, gid: int, home: str, shell: str = "/bin/sh") -> str:
    """A passwd(5) line; the password field is `*` (no password, not locked)."""
    for value in (user, home, shell):
        if ":" in value or "\n" in value:
            raise BootstrapError(f"cannot write a passwd entry: {value!r} contains ':' or a newline")
    return f"{user}:*:{uid}:{gid}:arkouda-bootstrap generated:{home}:{shell}\n"


def group_line(*, name: str, gid: int) -> str:
    return f"{name}:x:{gid}:\n"


def ensure_identity(
    *,
    state_dir: Path,
    uid: int | None = None,
    gid: int | None = None,
    nss_wrapper: str | None = None,
    lookup: bool = True,
) -> Identity:
    """Return who we are; when the uid has no passwd entry, set up nss_wrapper files under `state_dir/nss`.

    `lookup=False` skips getpwuid (tests use it to force the nss_wrapper path for a uid that has an entry)."""
    uid = os.getuid() if uid is None else uid
    gid = os.getgid() if gid is None else gid
    if lookup:
        try:
            entry = pwd.getpwuid(uid)
        except KeyError:
            pass
        else:
            return Identity(user=entry.pw_name, uid=uid, gid=entry.pw_gid, home=entry.pw_dir)
    library = nss_wrapper or find_nss_wrapper()
    if library is None:
        raise BootstrapError(
            f"uid {uid} has no passwd entry and libnss_wrapper is not installed "
            "(install Debian package libnss-wrapper in the image or run as a uid that exists)"
        )
    user = os.environ.get("USER") or FALLBACK_USER
    home = os.environ.get("HOME") or "/"
    try:
        group_name = grp.getgrgid(gid).gr_name
    except KeyError:
        group_name = user
    nss_dir = state_dir / "nss"
    nss_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
    passwd_file = nss_dir / "passwd"
    group_file = nss_dir / "group"
    passwd_file.write_text(passwd_line(user=user, uid=uid, gid=gid, home=home), encoding="utf-8")
    group_file.write_text(group_line(name=group_name, gid=gid), encoding="utf-8")
    passwd_file.chmod(0o644)
    group_file.chmod(0o644)
    preload = os.environ.get("LD_PRELOAD", "")
    env = {
        "LD_PRELOAD": f"{library} {preload}".strip() if library not in preload else preload,
        "NSS_WRAPPER_PASSWD": str(passwd_file),
        "NSS_WRAPPER_GROUP": str(group_file),
        "USER": user,
        "LOGNAME": user,
    }
    log.info("uid %d has no passwd entry: using nss_wrapper with %s (user %s)", uid, passwd_file, user)
    return Identity(user=user, uid=uid, gid=gid, home=home, env=env)
