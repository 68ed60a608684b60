"""The gate's Kubernetes calls through the real client against the API server double (the scale subresource,
by name, as a JSON patch; RBAC errors as one line), and its command line (every bad value names its flag)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from apiserver_double import Answer, ApiServerDouble, serving
from arkouda_bootstrap.cli import gate as gate_cli
from arkouda_bootstrap.cli import main as cli
from arkouda_bootstrap.cli.options import COMMON, Values
from arkouda_bootstrap.config import GateSettings
from arkouda_bootstrap.errors import BootstrapError, UsageError

SCALE = "/apis/apps/v1/namespaces/ns/statefulsets/r-arkouda-locale/scale"


@pytest.fixture
def apiserver() -> Iterator[ApiServerDouble]:
    with serving() as double:
        yield double


def scale_body(replicas: int) -> dict[str, object]:
    return {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {"name": "r-arkouda-locale", "namespace": "ns"},
        "spec": {"replicas": replicas},
        "status": {"replicas": replicas},
    }


def test_replicas_are_read_and_set_through_the_scale_subresource_as_a_json_patch(apiserver: ApiServerDouble) -> None:
    apiserver.answer(
        Answer("GET", SCALE, body=scale_body(3)),
        Answer("PATCH", SCALE, body=scale_body(0)),
        Answer("GET", "/apis/apps/v1/namespaces/ns/statefulsets/gone/scale", status=404, body={"kind": "Status"}),
    )
    api = apiserver.api()
    assert api.get_replicas(namespace="ns", statefulset="r-arkouda-locale") == 3
    api.set_replicas(namespace="ns", statefulset="r-arkouda-locale", replicas=0)
    assert api.get_replicas(namespace="ns", statefulset="gone") is None
    patch = apiserver.seen[1]
    assert patch.headers["content-type"] == "application/json-patch+json"
    assert patch.body == [{"op": "replace", "path": "/spec/replicas", "value": 0}]  # type: ignore[comparison-overlap]


def test_a_forbidden_scale_names_the_missing_permission(apiserver: ApiServerDouble) -> None:
    apiserver.answer(Answer("PATCH", SCALE, status=403, body={"kind": "Status", "reason": "Forbidden"}))
    with pytest.raises(BootstrapError, match=r"^missing RBAC: patch statefulsets/scale in namespace ns$"):
        apiserver.api().set_replicas(namespace="ns", statefulset="r-arkouda-locale", replicas=1)


GOOD = {
    "POD_NAME": "r-arkouda-gate-1",
    "ARKOUDA_RELEASE_SELECTOR": "app.kubernetes.io/instance=r,app.kubernetes.io/part-of=arkouda",
    "ARKOUDA_SERVER_STATEFULSET": "r-arkouda-server",
    "ARKOUDA_LOCALE_STATEFULSET": "r-arkouda-locale",
    "ARKOUDA_NUM_LOCALES": "3",
}


def settings(env: dict[str, str], argv: list[str] | None = None) -> object:
    ns = cli.build_parser().parse_args(["gate", *(argv or [])])
    values = Values(ns, [*COMMON, *gate_cli.GATE], env)
    return gate_cli.gate_settings(values, namespace="ns")


def test_gate_settings_from_the_environment_with_defaults() -> None:
    s = settings({**GOOD, "ARKOUDA_IDLE_TIMEOUT": "30", "ARKOUDA_IDLE_CONNECTION_IS_ACTIVITY": "true"})
    assert s == GateSettings(
        namespace="ns",
        pod_name="r-arkouda-gate-1",
        release_selector=GOOD["ARKOUDA_RELEASE_SELECTOR"],
        server_statefulset="r-arkouda-server",
        locale_statefulset="r-arkouda-locale",
        num_locales=3,
        server_port=5555,
        listen_port=5555,
        metrics_port=9557,
        idle_timeout=30,
        connection_is_activity=True,
        wake_timeout=900,
        wake_backoff=60,
    )


def test_gate_settings_of_the_request_checks_and_the_health_check() -> None:
    s = settings(
        {
            **GOOD,
            "ARKOUDA_IDLE_ENABLED": "true",
            "ARKOUDA_GATE_TOKEN_FILE": "/etc/arkouda/token/token",
            "ARKOUDA_GATE_ALLOW_SHUTDOWN": "true",
            "ARKOUDA_GATE_MAX_ENVELOPE_BYTES": "65536",
            "ARKOUDA_GATE_MAX_MESSAGE_BYTES": "2147483648",
            "ARKOUDA_GATE_MAX_HELD_REQUESTS": "16",
            "ARKOUDA_GATE_HEALTH_INTERVAL": "0",
            "ARKOUDA_GATE_HEALTH_TIMEOUT": "45",
        }
    )
    assert isinstance(s, GateSettings)
    assert (s.sleep_when_idle, s.token_file, s.allow_shutdown) == (True, Path("/etc/arkouda/token/token"), True)
    assert (s.max_envelope_bytes, s.max_message_bytes, s.max_held) == (65536, 2 << 30, 16)
    assert (s.health_interval, s.health_timeout) == (0, 45)
    kueue = settings({**GOOD, "ARKOUDA_KUEUE_WORKLOAD": "r-arkouda-group", "ARKOUDA_KUEUE_QUEUE": "arkouda"})
    assert isinstance(kueue, GateSettings)
    assert (kueue.kueue_workload, kueue.kueue_queue) == ("r-arkouda-group", "arkouda")
    defaults = settings(GOOD)
    assert isinstance(defaults, GateSettings)
    assert (defaults.sleep_when_idle, defaults.token_file, defaults.allow_shutdown) == (False, None, False)
    assert (defaults.health_interval, defaults.health_timeout, defaults.max_held) == (10, 30, 256)
    assert (defaults.kueue_workload, defaults.kueue_queue) == (None, None)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ARKOUDA_IDLE_TIMEOUT": "0"}, "--idle-timeout (ARKOUDA_IDLE_TIMEOUT)"),
        ({"ARKOUDA_WAKE_TIMEOUT": "soon"}, "--wake-timeout (ARKOUDA_WAKE_TIMEOUT)"),
        ({"ARKOUDA_WAKE_BACKOFF": "-5"}, "--wake-backoff (ARKOUDA_WAKE_BACKOFF)"),
        ({"ARKOUDA_NUM_LOCALES": "0"}, "--num-locales (ARKOUDA_NUM_LOCALES)"),
        ({"ARKOUDA_SERVER_STATEFULSET": "Not_A_Name"}, "--server-statefulset (ARKOUDA_SERVER_STATEFULSET)"),
        ({"ARKOUDA_GATE_PORT": "70000"}, "--listen-port (ARKOUDA_GATE_PORT)"),
        ({"POD_NAME": ""}, "missing --pod-name (POD_NAME)"),
        ({"ARKOUDA_GATE_MAX_ENVELOPE_BYTES": "10"}, "--max-envelope-bytes (ARKOUDA_GATE_MAX_ENVELOPE_BYTES)"),
        ({"ARKOUDA_GATE_MAX_HELD_REQUESTS": "0"}, "--max-held-requests (ARKOUDA_GATE_MAX_HELD_REQUESTS)"),
        ({"ARKOUDA_GATE_HEALTH_INTERVAL": "-1"}, "--health-interval (ARKOUDA_GATE_HEALTH_INTERVAL)"),
        ({"ARKOUDA_GATE_HEALTH_TIMEOUT": "0"}, "--health-timeout (ARKOUDA_GATE_HEALTH_TIMEOUT)"),
        ({"ARKOUDA_GATE_ALLOW_SHUTDOWN": "maybe"}, "--allow-shutdown (ARKOUDA_GATE_ALLOW_SHUTDOWN)"),
        ({"ARKOUDA_KUEUE_WORKLOAD": "r-arkouda-group"}, "--kueue-workload (ARKOUDA_KUEUE_WORKLOAD) and --kueue-queue"),
        ({"ARKOUDA_KUEUE_QUEUE": "arkouda"}, "go together: set both or neither"),
        (
            {"ARKOUDA_KUEUE_WORKLOAD": "Not_A_Name", "ARKOUDA_KUEUE_QUEUE": "q"},
            "--kueue-workload (ARKOUDA_KUEUE_WORKLOAD)",
        ),
    ],
)
def test_bad_gate_values_name_their_flag_and_env(env: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        settings({**GOOD, **env})
    assert "\n" not in str(info.value)
