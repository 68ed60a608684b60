"""helm test (arkouda mode): connect as a client does and check the server runs global.numLocales locales.

Two clients, and the output says which one ran:
- the Arkouda client, when the image has it (a full build installs it into /opt/arkouda/python): ak.connect()
  then ak.get_config();
- otherwise the replay of the pinned client's ak.connect() requests (connect, getconfig, getRegistrationConfig,
  with every field the client reads checked), which the stand-in image ships as arkouda_standin.client. It is a
  replay of the real client's requests, valid against a real arkouda_server too, not the client itself.
With neither, the test fails and says what the image lacks.

Environment (templates/tests/test-pod.yaml): ARKOUDA_HOST, ARKOUDA_PORT, EXPECTED_LOCALES, TIMEOUT_SECONDS;
the token, when server.authenticate, at /etc/arkouda/token/token (the key Secret's `token`, no line end); with
global.scheduling.queueName also KUEUE_WORKLOAD, KUEUE_QUEUE and SERVER_POD (helm_test_kube.py: a release waiting
in its Kueue queue fails the test at once with Kueue's reason instead of at the deadline).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # helm_test_kube.py, beside this script
from helm_test_kube import api_getter, namespace, server_pod_queue_reason

ARKOUDA_PYTHON = Path("/opt/arkouda/python/bin/python")
REPLAY_LIB = Path("/opt/arkouda/lib")
TOKEN_FILE = Path("/etc/arkouda/token/token")
RETRY_SECONDS = 3.0

Connect = Callable[[str, int, "str | None", float], dict[str, Any]]


class UnreachableError(Exception):
    """The server did not answer (yet): retried until the deadline."""


def read_token(path: Path) -> str | None:
    return path.read_text(encoding="utf-8").strip() if path.exists() else None


def connect_with_arkouda(host: str, port: int, token: str | None, timeout: float) -> dict[str, Any]:
    import arkouda as ak  # type: ignore[import-not-found]  # noqa: PLC0415 - only in a full image

    try:
        ak.connect(host, port, timeout=int(timeout), access_token=token)
    except (ConnectionError, RuntimeError) as exc:
        raise UnreachableError(str(exc)) from exc
    try:
        config: dict[str, Any] = ak.get_config()
        return config
    finally:
        ak.disconnect()


def connect_with_replay(host: str, port: int, token: str | None, timeout: float) -> dict[str, Any]:
    from arkouda_standin.client import HandshakeError, handshake  # noqa: PLC0415 - on REPLAY_LIB

    try:
        return dict(handshake(host=host, port=port, token=token, user="helm-test", timeout=timeout).config)
    except HandshakeError as exc:
        if "no reply" in str(exc):
            raise UnreachableError(str(exc)) from exc
        raise


def choose_client() -> tuple[str, Connect]:
    replay_lib = REPLAY_LIB
    if importlib.util.find_spec("arkouda") is not None:
        return "the Arkouda client (ak.connect, ak.get_config)", connect_with_arkouda
    if (replay_lib / "arkouda_standin" / "client.py").exists():
        sys.path.insert(0, str(replay_lib))
        return (
            "the replay of the pinned client's ak.connect() requests (arkouda_standin.client; this image has no "
            "Arkouda client)",
            connect_with_replay,
        )
    sys.exit(
        f"FAIL: the image has neither the Arkouda client ({ARKOUDA_PYTHON}) nor {replay_lib}/arkouda_standin: "
        "set global.image to the project's arkouda image"
    )


def check(config: Mapping[str, Any], *, expected: int) -> list[str]:
    got = int(config["numLocales"])
    names = [lc.get("name") for lc in config.get("LocaleConfigs", [])]
    print(f"server {config.get('serverHostname')} numLocales={got} locales={names}")
    errors = []
    if got != expected:
        errors.append(f"numLocales is {got}, expected {expected} (global.numLocales)")
    if names and len(set(names)) != expected:
        errors.append(f"{len(set(names))} distinct locale hosts {names}, expected {expected}")
    return errors


def queue_check(environ: Mapping[str, str]) -> Callable[[], str | None]:
    """With a queue: says whether the server pod waits in its Kueue queue, in Kueue's words; else never."""
    if not environ.get("KUEUE_WORKLOAD"):
        return lambda: None
    get, ns, server = api_getter(), namespace(), environ["SERVER_POD"]
    return lambda: server_pod_queue_reason(get, ns=ns, pod_name=server, environ=environ)


def main(environ: Mapping[str, str], *, queued: Callable[[], str | None] | None = None) -> int:
    if (
        importlib.util.find_spec("arkouda") is None
        and ARKOUDA_PYTHON.exists()
        and sys.executable != str(ARKOUDA_PYTHON)
    ):
        os.execv(ARKOUDA_PYTHON, [str(ARKOUDA_PYTHON), *sys.argv])  # noqa: S606 - the image's client venv
    host, port = environ["ARKOUDA_HOST"], int(environ["ARKOUDA_PORT"])
    expected, timeout = int(environ["EXPECTED_LOCALES"]), float(environ["TIMEOUT_SECONDS"])
    token = read_token(TOKEN_FILE)
    what, connect = choose_client()
    queued = queued or queue_check(environ)
    if (why := queued()) is not None:
        print(f"FAIL: {why}")
        return 1
    print(f"connecting to {host}:{port} with {what}{' and the release token' if token else ''}")
    deadline = time.monotonic() + timeout
    while True:
        try:
            config = connect(host, port, token, min(30.0, timeout))
            break
        except UnreachableError as exc:
            if (why := queued()) is not None:  # woken from a sleep into a full queue
                print(f"FAIL: {why}")
                return 1
            if time.monotonic() > deadline:
                print(f"FAIL: no answer from {host}:{port} within {timeout:g}s: {exc}")
                return 1
            time.sleep(RETRY_SECONDS)
        except Exception as exc:  # noqa: BLE001 - any other failure is the answer: report it in one line
            print(f"FAIL: {host}:{port}: {exc}")
            return 1
    errors = check(config, expected=expected)
    for e in errors:
        print("FAIL:", e)
    if errors:
        return 1
    print(f"PASS: numLocales == {expected}")
    return 0


if __name__ == "__main__":
    sys.exit(main(os.environ))
