"""`locale`: prepare and exec the unprivileged sshd of a locale pod (and of the server pod's sshd container)."""

from __future__ import annotations

import logging
import os

from arkouda_bootstrap import sshd
from arkouda_bootstrap.config import LocaleSettings
from arkouda_bootstrap.identity import ensure_identity

log = logging.getLogger(__name__)


def prepare_locale(settings: LocaleSettings) -> sshd.PreparedSshd:
    ident = ensure_identity(state_dir=settings.state_dir)
    prepared = sshd.prepare(
        secret_dir=settings.secret_dir,
        state_dir=settings.state_dir,
        port=settings.port,
        tuning=settings.tuning,
        user=ident.user,
        uid=ident.uid,
        extra_env=ident.env,
        sshd=settings.sshd,
    )
    log.info(
        "sshd config %s accepted by sshd -t (port %d, user %s, StrictModes %s)",
        prepared.config,
        settings.port,
        ident.user,
        "yes" if prepared.strict_modes else "no",
    )
    return prepared


def run_locale(settings: LocaleSettings) -> None:
    """Never returns: execs `sshd -D -e` so sshd is the keep-alive and logs to stderr."""
    prepared = prepare_locale(settings)
    os.execve(prepared.argv[0], prepared.argv, prepared.env)
