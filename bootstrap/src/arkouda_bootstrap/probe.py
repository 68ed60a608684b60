"""`probe`: TCP-connect readiness check for Kubernetes probes (exit 0 when something listens)."""

from __future__ import annotations

import logging
import socket

from arkouda_bootstrap.config import ProbeSettings

log = logging.getLogger(__name__)


def tcp_probe(settings: ProbeSettings) -> bool:
    try:
        with socket.create_connection((settings.host, settings.port), timeout=settings.timeout):
            return True
    except OSError as exc:
        log.info("probe %s:%d: %s", settings.host, settings.port, exc)
        return False
