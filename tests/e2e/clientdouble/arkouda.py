"""TEST DOUBLE of the `arkouda` client package, for running NOTES.txt's pasted `python3 -c "import arkouda as
ak; ak.connect(...)"` line here: the client of the pinned release is not installable on this machine (PyPI has
only 2020.7.7). `connect` replays the exact requests of the pinned client's ak.connect() with the stand-in's
replay client (docker/arkouda/standin/lib/arkouda_standin/client.py), so the pasted line, the shell expansion of
its token and the port-forward are real; only the client library is replaced, and it says so."""

from __future__ import annotations

import sys
from typing import Any

from arkouda_standin.client import handshake

_config: dict[str, Any] = {}


def connect(server: str, port: int, timeout: float = 10, access_token: str | None = None) -> None:
    print("arkouda TEST DOUBLE (e2e): replaying the pinned client's ak.connect() requests", file=sys.stderr)
    result = handshake(host=server, port=int(port), token=access_token, user="e2e", timeout=float(timeout))
    _config.clear()
    _config.update(result.config)


def get_config() -> dict[str, Any]:
    return dict(_config)
