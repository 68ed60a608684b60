"""The gate's health check timing (arkouda_bootstrap.gate.health) with FakeClock: when a probe goes out, when
its silence means a dead loop, and that a request in flight is never taken for one."""

from __future__ import annotations

import math

from arkouda_bootstrap.gate.health import HealthCheck, HealthPolicy
from fakes import FakeClock

POLICY = HealthPolicy(interval=10, timeout=30)


def build(policy: HealthPolicy = POLICY) -> tuple[HealthCheck, FakeClock]:
    clock = FakeClock()
    return HealthCheck(policy=policy, clock=clock), clock


def test_a_new_server_is_probed_at_once_then_after_each_quiet_interval() -> None:
    health, clock = build()
    health.reset()
    assert health.due(in_flight=0)
    health.sent()
    assert not health.due(in_flight=0)  # one probe at a time
    clock.advance(0.01)
    assert health.answered() is None
    assert not health.due(in_flight=0)
    assert health.next_due(in_flight=0) == 10
    clock.advance(9.99)
    assert not health.due(in_flight=0)
    clock.advance(0.01)
    assert health.due(in_flight=0)


def test_any_answer_of_the_server_postpones_the_next_probe() -> None:
    health, clock = build()
    clock.advance(9)
    health.answered()  # a client's reply
    clock.advance(9)
    assert not health.due(in_flight=0)
    assert health.next_due(in_flight=0) == 1


def test_no_probe_while_a_request_is_in_flight_however_long_it_runs() -> None:
    health, clock = build()
    for _ in range(100):
        clock.advance(3600)
        assert not health.due(in_flight=1)
        assert health.overdue() is None
    assert math.isinf(health.next_due(in_flight=1))
    assert health.answering
    health.answered()
    clock.advance(10)
    assert health.due(in_flight=0)


def test_a_probe_unanswered_for_the_timeout_is_reported_once_with_how_long() -> None:
    health, clock = build()
    clock.advance(10)
    health.sent()
    clock.advance(29.9)
    assert health.overdue() is None
    assert math.isclose(health.next_due(in_flight=0), 0.1)
    clock.advance(0.1)
    assert health.overdue() == 30
    assert not health.answering
    assert health.failures == 1
    assert health.overdue() is None  # the same probe is not reported twice


def test_a_client_request_queued_behind_the_probe_does_not_excuse_a_dead_loop() -> None:
    """The probe went out with nothing in flight: a request sent after it cannot be what the server is busy
    with, so the probe's timeout still counts."""
    health, clock = build()
    clock.advance(10)
    health.sent()
    clock.advance(30)
    assert health.overdue() == 30


def test_unresponsive_lasts_over_the_relaunch_until_a_new_server_answers() -> None:
    health, clock = build()
    clock.advance(10)
    health.sent()
    clock.advance(30)
    assert health.overdue() == 30
    health.reset()  # the pod was deleted; a new one comes
    clock.advance(45)
    assert not health.answering
    assert health.due(in_flight=0)
    health.sent()
    clock.advance(1)
    assert health.answered() == 76  # unresponsive since the probe went out (t=10) until now (t=86)
    assert health.answering
    assert health.answered() is None


def test_a_disabled_check_never_probes() -> None:
    health, clock = build(HealthPolicy(interval=0, timeout=30))
    health.reset()
    clock.advance(10_000)
    assert not health.due(in_flight=0)
    assert math.isinf(health.next_due(in_flight=0))
    assert health.answering
