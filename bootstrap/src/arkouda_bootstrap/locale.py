"""`locale`: the unprivileged sshd of a locale pod (and of the server pod's sshd container), kept on the keys of the
mounted Secret.

sshd runs as our child rather than in our place: we watch the Secret volume, and when the kubelet delivers a
changed Secret (a rotation, or a deleted Secret that keygen regenerated) we validate it, install the new copies
and SIGHUP sshd, which re-executes itself and loads the new host key (authorized_keys is read at every login).
Sessions already open — a running Arkouda locale — are separate processes and are not disturbed. An unusable new
Secret leaves the keys in use alone and is reported in one line.
"""

from __future__ import annotations

import logging
import signal
import subprocess
from collections.abc import Callable
from types import FrameType
from typing import Protocol

from arkouda_bootstrap.config import DEFAULT_CONNECT_TIMEOUT, LocaleSettings
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.ssh import client as ssh
from arkouda_bootstrap.ssh import secretwatch, sshd
from arkouda_bootstrap.ssh.identity import Identity, ensure_identity

log = logging.getLogger(__name__)

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Child(Protocol):
    """What the loop needs of the sshd process (subprocess.Popen; a test double in unit tests)."""

    pid: int

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...


def prepare_locale(
    settings: LocaleSettings, *, data: dict[str, bytes] | None = None, ident: Identity | None = None
) -> sshd.PreparedSshd:
    """Install the keys (`data`: the Secret as already read; default: read it now), write and check the sshd
    config, and the launcher's client files. Raises BootstrapError, having changed nothing in use, when the
    Secret is unusable."""
    ident = ident or ensure_identity(state_dir=settings.state_dir)
    prepared = sshd.prepare(
        secret_dir=settings.secret_dir,
        state_dir=settings.state_dir,
        port=settings.port,
        tuning=settings.tuning,
        user=ident.user,
        uid=ident.uid,
        extra_env=ident.env,
        sshd=settings.sshd,
        data=data,
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


def run_locale(settings: LocaleSettings) -> int:
    """Start `sshd -D -e` and keep it on the mounted Secret's keys until it exits; returns its exit status."""
    ident = ensure_identity(state_dir=settings.state_dir)
    data = sshd.read_secret_dir(settings.secret_dir)
    prepared = prepare_locale(settings, data=data, ident=ident)
    watch = secretwatch.SecretWatch(settings.secret_dir, installed=data)
    child = subprocess.Popen(prepared.argv, env=prepared.env, stdin=subprocess.DEVNULL)
    log.info(
        "sshd started (pid %d); checking %s for changed keys every %ds",
        child.pid,
        settings.secret_dir,
        settings.secret_poll_seconds,
    )
    return supervise_sshd(
        child,
        watch=watch,
        reload=lambda new: prepare_locale(settings, data=new, ident=ident),
        interval=settings.secret_poll_seconds,
    )


def supervise_sshd(
    child: Child,
    *,
    watch: secretwatch.SecretWatch,
    reload: Callable[[dict[str, bytes]], object],
    interval: float,
) -> int:
    """Wait for sshd; every `interval` seconds look for a changed Secret, `reload` it (install and check) and
    SIGHUP sshd. SIGTERM/SIGINT are passed on to sshd. Returns sshd's status (128+N when killed by signal N)."""

    def forward(signum: int, _frame: FrameType | None) -> None:
        child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED_SIGNALS}
    try:
        while True:
            try:
                status = child.wait(timeout=interval)
            except subprocess.TimeoutExpired:
                reload_if_changed(child, watch=watch, reload=reload)
                continue
            return 128 - status if status < 0 else status
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def reload_if_changed(
    child: Child, *, watch: secretwatch.SecretWatch, reload: Callable[[dict[str, bytes]], object]
) -> bool:
    """Install a changed, usable Secret and SIGHUP sshd; True when sshd was told to reload."""
    data = watch.changed()
    if data is None:
        return False
    try:
        reload(data)
    except BootstrapError as exc:
        watch.rejected(data, exc)
        return False
    watch.accepted(data)
    child.send_signal(signal.SIGHUP)
    log.info("the mounted SSH Secret changed (%s): installed its keys and reloaded sshd", secretwatch.describe(data))
    return True
