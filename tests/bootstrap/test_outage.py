"""kube.outage and kube.retry's outage bookkeeping: one line when an API outage begins, one line and one Event
`ApiOutage` with its length when the API answers again; the Deadline that outages move (FakeKube, FakeClock)."""

from __future__ import annotations

import pytest
from arkouda_bootstrap.kube.api import ApiUnavailableError, PodRef
from arkouda_bootstrap.kube.events import EventRecorder
from arkouda_bootstrap.kube.outage import OutageNotice
from arkouda_bootstrap.kube.ownership import OwnedBy
from arkouda_bootstrap.kube.retry import ApiRetry, Deadline
from fakes import FakeClock, FakeKube, make_pod

POD = PodRef(namespace="ns", name="r-arkouda-server-0", uid="uid-server")
REFUSED = ApiUnavailableError("cannot reach the Kubernetes API to get pods: [Errno 111] Connection refused")


def test_an_outage_is_one_line_when_it_begins_and_a_line_and_an_event_with_its_length_when_it_ends() -> None:
    api, clock, lines = FakeKube(), FakeClock(), list[str]()
    api.fail_next["get_pod"] = [REFUSED, ApiUnavailableError("get pods: HTTP 503 Service Unavailable"), REFUSED]
    notice = OutageNotice(doing="the server waits", report=lines.append, emit=EventRecorder(api, POD).emit)
    retry = ApiRetry("pod r-arkouda-server-0", clock=clock, sleep=clock.sleep, listener=notice)
    api.pods["r-arkouda-server-0"] = make_pod("r-arkouda-server-0")
    assert retry.call(lambda: api.get_pod(namespace="ns", name="r-arkouda-server-0")) is not None
    assert lines == [
        f"the Kubernetes API is unreachable ({REFUSED}); the server waits until it answers",
        "the Kubernetes API answers again after 7s",
    ]
    assert [(e.reason, e.type, e.message) for e in api.created_events] == [
        (
            "ApiOutage",
            "Warning",
            f"the Kubernetes API was unreachable for 7s ({REFUSED}); the server waits meanwhile, and resumed",
        )
    ]
    assert not retry.unreachable


def test_the_non_blocking_path_tells_the_same_outage_once() -> None:
    clock, lines = FakeClock(), list[str]()
    retry = ApiRetry("scaling", clock=clock, listener=OutageNotice(doing="the gate waits", report=lines.append))
    assert [retry.pause_after(REFUSED) for _ in range(3)] == [1.0, 2.0, 4.0]
    clock.advance(10)
    retry.request_succeeded()
    assert lines == [
        f"the Kubernetes API is unreachable ({REFUSED}); the gate waits until it answers",
        "the Kubernetes API answers again after 10s",
    ]


def test_a_deadline_cannot_pass_during_an_outage_and_moves_by_its_length() -> None:
    clock = FakeClock()
    deadline = Deadline.after(10, clock=clock)
    clock.advance(4)
    deadline.pause(since=4)
    clock.advance(100)
    assert not deadline.passed() and deadline.left() == 6
    deadline.resume()
    assert deadline.at == 110 and deadline.excluded == 100
    clock.advance(6)
    assert deadline.passed()
    # an outage that begins after it passed does not bring it back
    deadline.pause(since=clock.now)
    clock.advance(50)
    assert deadline.passed()


@pytest.mark.parametrize("failures", [1, 12])
def test_ownership_waits_out_an_outage_before_its_first_read(failures: int) -> None:
    api, clock = FakeKube(), FakeClock()
    api.fail_next["get_statefulset_uid"] = [REFUSED for _ in range(failures)]
    owned = OwnedBy(
        api, namespace="ns", statefulsets=["r-arkouda-locale"], retry=ApiRetry("sts", clock=clock, sleep=clock.sleep)
    )
    assert owned(make_pod("r-arkouda-locale-0"))
    assert api.calls.count(("get_statefulset_uid", "r-arkouda-locale")) == failures + 1
