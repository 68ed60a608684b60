"""--register-service: the Service without selector and its EndpointSlice, published, marked ready, withdrawn;
a registration left by a killed job is taken over, objects arkouda-bootstrap did not make are never touched.
Against FakeKube (test double of the ServiceApi seam) and, for the requests the real client sends, the API server
test double."""

from __future__ import annotations

import threading

import pytest
from apiserver_double import MANAGED, SERVICES, SLICES, Answer, ApiServerDouble
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.kube.api import ForbiddenError
from arkouda_bootstrap.slurm import registration
from arkouda_bootstrap.slurm.registration import ServiceRegistration
from conftest import free_port
from fakes import FakeKube

KEY = ("ns", "ak")


def reg(api: FakeKube | object, **kwargs: object) -> ServiceRegistration:
    return ServiceRegistration(api=api, name="ak", namespace="ns", address="192.0.2.10", port=5555, **kwargs)  # type: ignore[arg-type]


def test_publish_ready_withdraw() -> None:
    api = FakeKube()
    r = reg(api, annotations={"arkouda-bootstrap/slurm-job-id": "7"})
    r.publish()
    service, eps = api.services[KEY], api.endpoint_slices[KEY]
    assert "selector" not in service["spec"]
    assert eps["metadata"]["labels"]["kubernetes.io/service-name"] == "ak"
    assert eps["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Service", "name": "ak", "uid": service["metadata"]["uid"]}
    ]
    assert eps["endpoints"] == [{"addresses": ["192.0.2.10"], "conditions": {"ready": False}}]
    r.mark_ready()
    assert api.endpoint_slices[KEY]["endpoints"][0]["conditions"] == {"ready": True}
    r.withdraw()
    assert api.services == {} and api.endpoint_slices == {}
    assert [c for c in api.calls if c[0].startswith("delete")] == [
        ("delete_endpoint_slice", "ak"),
        ("delete_service", "ak"),
    ]
    r.withdraw()  # once only
    assert len([c for c in api.calls if c[0].startswith("delete")]) == 2


def test_a_registration_left_by_a_killed_job_is_taken_over() -> None:
    api = FakeKube()
    old = reg(api)
    old.publish()  # never withdrawn: SIGKILL
    api.services[KEY]["spec"]["clusterIP"] = "10.96.0.9"
    new = ServiceRegistration(api=api, name="ak", namespace="ns", address="192.0.2.11", port=6000)
    new.publish()
    assert api.services[KEY]["spec"]["clusterIP"] == "10.96.0.9"  # the Service keeps its address for clients
    assert api.services[KEY]["spec"]["ports"][0]["port"] == 6000
    assert api.endpoint_slices[KEY]["endpoints"][0]["addresses"] == ["192.0.2.11"]


@pytest.mark.parametrize("kind", ["services", "endpoint_slices"])
def test_objects_not_made_by_us_are_never_touched(kind: str) -> None:
    api = FakeKube()
    foreign = {"metadata": {"name": "ak", "resourceVersion": "1", "uid": "u", "labels": {"app": "theirs"}}}
    getattr(api, kind)[KEY] = foreign
    with pytest.raises(BootstrapError) as err:
        reg(api).publish()
    assert "in namespace ns exists and was not made by arkouda-bootstrap" in str(err.value)
    assert "choose another --register-service name" in str(err.value)
    assert getattr(api, kind)[KEY] == foreign


def test_withdraw_logs_and_goes_on_when_a_delete_fails(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeKube(
        fail_with={"delete_endpoint_slice": ForbiddenError(verb="delete", resource="endpointslices", namespace="ns")}
    )
    r = reg(api)
    r.publish()
    r.withdraw()
    assert "could not delete EndpointSlice ak in namespace ns: missing RBAC" in caplog.text
    assert KEY not in api.services


@pytest.mark.parametrize(
    ("command", "port"),
    [
        (["arkouda_server", "--ServerPort=6000"], 6000),
        (["arkouda_server", "--ServerPort", "6001"], 6001),
        (["arkouda_server"], 5555),
    ],
)
def test_server_port_from_the_command(command: list[str], port: int) -> None:
    assert registration.server_port(command) == port


def test_a_bad_server_port_names_the_flag() -> None:
    with pytest.raises(BootstrapError, match="set --service-port"):
        registration.server_port(["x", "--ServerPort=http"])


def test_ready_when_listening_waits_for_the_port() -> None:
    import socket

    api = FakeKube()
    port = free_port()
    r = ServiceRegistration(api=api, name="ak", namespace="ns", address="192.0.2.10", port=port)
    r.publish()
    errors: list[BootstrapError] = []
    waiter = registration.ReadyWhenListening(r, on_error=errors.append)
    waiter.start()
    threading.Event().wait(1.0)
    assert api.endpoint_slices[KEY]["endpoints"][0]["conditions"] == {"ready": False}  # nothing listens yet
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()
        waiter._thread.join(10)
    assert api.endpoint_slices[KEY]["endpoints"][0]["conditions"] == {"ready": True}
    assert errors == []
    waiter.stop()


# -- the real client against the API server double -----------------------------------------------------------


def test_take_over_through_the_client_sends_versions_and_keeps_the_cluster_ip(apiserver: ApiServerDouble) -> None:
    existing = {
        "metadata": {"name": "ak", "resourceVersion": "41", "uid": "old", "labels": MANAGED},
        "spec": {"clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9"]},
    }
    apiserver.answer(
        Answer("POST", SERVICES, status=409, body={"kind": "Status", "reason": "AlreadyExists"}),
        Answer("GET", f"{SERVICES}/ak", body=existing),
        Answer("PUT", f"{SERVICES}/ak", body={"metadata": {"name": "ak", "uid": "old"}}),
        Answer("POST", SLICES, status=409, body={"kind": "Status", "reason": "AlreadyExists"}),
        Answer("GET", f"{SLICES}/ak", body={"metadata": {"name": "ak", "resourceVersion": "42", "labels": MANAGED}}),
        Answer("PUT", f"{SLICES}/ak", body={"metadata": {"name": "ak"}}),
    )
    reg(apiserver.api()).publish()
    assert [(s.method, s.path) for s in apiserver.seen] == [
        ("POST", SERVICES),
        ("GET", f"{SERVICES}/ak"),
        ("PUT", f"{SERVICES}/ak"),
        ("POST", SLICES),
        ("GET", f"{SLICES}/ak"),
        ("PUT", f"{SLICES}/ak"),
    ]
    service_put, slice_put = apiserver.seen[2].body or {}, apiserver.seen[5].body or {}
    assert service_put["metadata"]["resourceVersion"] == "41"
    assert service_put["spec"]["clusterIP"] == "10.96.0.9"
    assert slice_put["metadata"]["resourceVersion"] == "42"
    assert slice_put["metadata"]["ownerReferences"][0]["uid"] == "old"


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (403, {"kind": "Status"}, "missing RBAC: create services in namespace ns"),
        (
            422,
            {"kind": "Status", "message": 'Service "ak" is invalid: metadata.name: Invalid value'},
            'create services in namespace ns: refused: Service "ak" is invalid: metadata.name: Invalid value',
        ),
    ],
)
def test_client_errors_are_one_line(
    apiserver: ApiServerDouble, status: int, body: dict[str, str], message: str
) -> None:
    apiserver.answer(Answer("POST", SERVICES, status=status, body=body))
    with pytest.raises(BootstrapError) as err:
        reg(apiserver.api()).publish()
    assert str(err.value) == message


def test_delete_through_the_client_tolerates_what_is_gone(apiserver: ApiServerDouble) -> None:
    apiserver.answer(
        Answer("DELETE", f"{SLICES}/ak", status=404, body={"kind": "Status"}),
        Answer("DELETE", f"{SERVICES}/ak", body={"kind": "Status", "status": "Success"}),
    )
    api = apiserver.api()
    assert api.delete_endpoint_slice(namespace="ns", name="ak") is False
    assert api.delete_service(namespace="ns", name="ak") is True
