"""Events are attached to the server pod and never fail the run (FakeKube is the kube seam's test double)."""

from __future__ import annotations

import logging

import pytest
from arkouda_bootstrap.config import ServerSettings
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.kube.api import ForbiddenError, PodRef
from arkouda_bootstrap.kube.events import EventRecorder, Reason
from arkouda_bootstrap.server.main import _own_uid
from fakes import FakeKube, make_pod

POD = PodRef(namespace="ns", name="r-arkouda-server-0", uid="u0")


def test_reasons_and_types() -> None:
    api = FakeKube()
    rec = EventRecorder(api, POD)
    for reason in Reason:
        rec.emit(reason, f"msg {reason.value}")
    assert [(e.reason, e.type) for e in api.created_events] == [
        ("LocalesReady", "Normal"),
        ("KeysPending", "Normal"),
        ("ProbeFailed", "Warning"),
        ("Launched", "Normal"),
        ("LocaleLost", "Warning"),
        ("LocaleNotReady", "Normal"),
        ("Relaunching", "Normal"),
        ("WaitTimeout", "Warning"),
        ("ImpostorPod", "Warning"),
        ("RunSucceeded", "Normal"),
        ("RunFailed", "Warning"),
        ("LocalesReleased", "Normal"),
        ("LocalesKept", "Warning"),
        ("LocalesRequested", "Normal"),
        ("NodeLost", "Warning"),
        ("KueueWorkloadDeleted", "Warning"),
        ("SecretInvalid", "Warning"),
        ("RbacMissing", "Warning"),
        ("WorkDirUnusable", "Warning"),
        ("IdleDraining", "Normal"),
        ("Asleep", "Normal"),
        ("Waking", "Normal"),
        ("Awake", "Normal"),
        ("WakeTimeout", "Warning"),
        ("WakeQueued", "Normal"),
        ("QuotaReleased", "Normal"),
        ("Queued", "Normal"),
        ("ServerUnresponsive", "Warning"),
        ("ServerAnswering", "Normal"),
        ("Checkpointed", "Normal"),
        ("Restored", "Normal"),
        ("CheckpointIncomplete", "Warning"),
        ("CheckpointFailed", "Warning"),
        ("RestoreFailed", "Warning"),
        ("CheckpointSizeMismatch", "Warning"),
        ("SecondaryNetworkMissing", "Warning"),
        ("LeftoversEnded", "Normal"),
        ("DatagramsDropped", "Warning"),
        ("ApiOutage", "Warning"),
    ]
    assert all(e.pod == POD for e in api.created_events)


def test_on_error_turns_a_refusal_into_an_event_and_reraises() -> None:
    api = FakeKube()
    rec = EventRecorder(api, POD)
    with pytest.raises(BootstrapError, match="field known_hosts"), rec.on_error(Reason.SECRET_INVALID):
        raise BootstrapError("SSH Secret mounted at /etc/arkouda/ssh: field known_hosts: missing or empty")
    with (
        pytest.raises(BootstrapError, match="timed out"),
        rec.on_error(Reason.RBAC_MISSING, of=ForbiddenError),
    ):
        raise BootstrapError("timed out")  # not an RBAC refusal: no RbacMissing Event
    with pytest.raises(ForbiddenError), rec.on_error(Reason.RBAC_MISSING, of=ForbiddenError):
        raise ForbiddenError(verb="list", resource="pods", namespace="ns")
    with rec.on_error(Reason.SECRET_INVALID):
        pass
    assert [(e.reason, e.type, e.message) for e in api.created_events] == [
        ("SecretInvalid", "Warning", "SSH Secret mounted at /etc/arkouda/ssh: field known_hosts: missing or empty"),
        ("RbacMissing", "Warning", "missing RBAC: list pods in namespace ns"),
    ]


def test_failed_event_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    api = FakeKube(fail_with={"create_event": ForbiddenError(verb="create", resource="events", namespace="ns")})
    EventRecorder(api, POD).emit(Reason.LAUNCHED, "x")
    assert "could not emit event Launched on pod r-arkouda-server-0: missing RBAC: create events" in caplog.text


def test_an_event_once_as_a_key_is_recorded_once_whoever_records_it(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    api = FakeKube()
    for _ in range(2):  # two nodewatch replicas that reached the same verdict
        EventRecorder(api, POD).emit(Reason.NODE_LOST, "force-deleted", once_as="nodelost-u0")
    EventRecorder(api, POD).emit(Reason.NODE_LOST, "another pod under the name", once_as="nodelost-u1")
    assert [e.message for e in api.created_events] == ["force-deleted", "another pod under the name"]
    assert api.event_names == {"r-arkouda-server-0.nodelost-u0", "r-arkouda-server-0.nodelost-u1"}
    assert not caplog.records  # the second of two is no failure


def settings() -> ServerSettings:
    return ServerSettings(
        namespace="ns", num_locales=1, selector="a=b", pod_name="r-arkouda-server-0", pod_ip="10.0.0.1"
    )


def test_own_uid_is_best_effort(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeKube()
    api.pods["r-arkouda-server-0"] = make_pod("r-arkouda-server-0", uid="abc")
    assert _own_uid(api, settings()) == "abc"
    assert _own_uid(FakeKube(), settings()) == ""
    forbidden = FakeKube(fail_with={"get_pod": ForbiddenError(verb="get", resource="pods", namespace="ns")})
    caplog.set_level(logging.WARNING)
    assert _own_uid(forbidden, settings()) == ""
    assert "missing RBAC: get pods" in caplog.text
