"""Noticing a changed SSH Secret in its volume, for the sshd of every pod (`locale`) and the server's probe.

The kubelet rewrites a mounted Secret in place when it changes (a rotation, or a deleted Secret that keygen
regenerated): within its sync period, about a minute, every pod sees the new files. Copies taken at start do not
follow, so whoever holds copies checks the volume and re-installs them; an unusable new Secret never replaces
usable keys in use.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.ssh import keys, sshd

if TYPE_CHECKING:
    from arkouda_bootstrap.ssh.probe import ProbeKeys

log = logging.getLogger(__name__)


def describe(data: Mapping[str, bytes]) -> str:
    """What a Secret is, for a log line: its rotation id when it has one, and a short digest."""
    rotation = data.get(keys.ROTATION_ID, b"").decode("utf-8", errors="replace").strip()
    return f"{'rotation ' + rotation + ', ' if rotation else ''}digest {keys.fingerprint(data)[:12]}"


class SecretWatch:
    """The mounted Secret compared with the one whose copies are in use.

    `changed()` hands over a new Secret once; the caller installs it and calls `accepted`, or `rejected` when it
    is unusable, so the same bad Secret is reported in one line, not at every check."""

    def __init__(self, secret_dir: Path, *, installed: Mapping[str, bytes]) -> None:
        self.secret_dir = secret_dir
        self._installed = keys.fingerprint(installed)
        self._rejected: str | None = None
        self._unreadable: str | None = None

    def changed(self) -> dict[str, bytes] | None:
        """The mounted Secret when it differs from the one in use and was not rejected before, else None."""
        try:
            data = sshd.read_secret_dir(self.secret_dir)
        except BootstrapError as exc:
            if str(exc) != self._unreadable:
                log.error("kept the SSH keys in use: %s", exc)
                self._unreadable = str(exc)
            return None
        self._unreadable = None
        digest = keys.fingerprint(data)
        if digest in (self._installed, self._rejected):
            return None
        return data

    def accepted(self, data: Mapping[str, bytes]) -> None:
        self._installed = keys.fingerprint(data)
        self._rejected = None

    def rejected(self, data: Mapping[str, bytes], why: BootstrapError) -> None:
        self._rejected = keys.fingerprint(data)
        log.error("kept the SSH keys in use; the changed Secret is unusable: %s", why)


class MountedKeys:
    """The server's copies of the mounted Secret (its client side, keys.CLIENT_FIELDS) for its probe (and the
    launcher's ssh config, which points at the copies), re-installed when the volume changes. Thread-safe: every
    probe thread asks for the current keys before each attempt; the volume is read at most once per
    `min_interval` seconds."""

    def __init__(
        self,
        *,
        secret_dir: Path,
        state_dir: Path,
        min_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._state_dir = state_dir
        self._source = f"SSH Secret mounted at {secret_dir}"
        data = sshd.read_secret_dir(secret_dir)
        self.paths = sshd.install_data(data, source=self._source, state_dir=state_dir, required=keys.CLIENT_FIELDS)
        self._watch = SecretWatch(secret_dir, installed=data)
        self._lock = threading.Lock()
        self._min_interval = min_interval
        self._clock = clock
        self._checked = clock()
        self._keys = self._load()

    def _load(self) -> ProbeKeys:
        from arkouda_bootstrap.ssh import probe as sshprobe

        return sshprobe.ProbeKeys(
            client_key=sshprobe.load_release_client_key(self.paths.client_key),
            pinned=keys.release_pinned_host_key(self.paths.known_hosts.read_text(encoding="utf-8")),
            retired=tuple(sshprobe.read_retired_host_keys(self.paths.directory)),
            release_id=self.paths.release_id,
        )

    def current(self) -> ProbeKeys:
        with self._lock:
            now = self._clock()
            if now - self._checked < self._min_interval:
                return self._keys
            self._checked = now
            data = self._watch.changed()
            if data is None:
                return self._keys
            try:
                self.paths = sshd.install_data(
                    data, source=self._source, state_dir=self._state_dir, required=keys.CLIENT_FIELDS
                )
                self._keys = self._load()
            except BootstrapError as exc:
                self._watch.rejected(data, exc)
                return self._keys
            self._watch.accepted(data)
            log.info("the mounted SSH Secret changed (%s): probing with its keys from now on", describe(data))
            return self._keys
