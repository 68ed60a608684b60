"""`locale`: prepare and exec the unprivileged sshd of a locale pod (and of the server pod's sshd container)."""

from __future__ import annotations

import logging
import os

from arkouda_bootstrap import ssh, sshd
from arkouda_bootstrap.config import DEFAULT_CONNECT_TIMEOUT, LocaleSettings
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
    # The launcher's ssh wrapper and client config at the same paths as in the server pod. mpirun passes its
    # OMPI_MCA_plm_rsh_agent (our wrapper's path) to every orted it starts, and orted refuses to start when that
    # path does not exist on its host, even with tree spawn off; it also lets a locale reach its peers the
    # same pinned way if a launcher ever spawns from there.
    ssh.write_client_files(
        state_dir=settings.state_dir,
        user=ident.user,
        port=settings.port,
        identity_file=prepared.keys.client_key,
        known_hosts=prepared.keys.known_hosts,
        tuning=settings.tuning,
        connect_timeout=DEFAULT_CONNECT_TIMEOUT,
        prewarm=False,
        wrapper_env=ident.env,
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
