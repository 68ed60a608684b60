"""The idle decision (arkouda_bootstrap.gate.idle) with FakeClock: no sleeps, the clock moves only when told."""

from __future__ import annotations

import pytest
from arkouda_bootstrap.gate.idle import IdlePolicy, Traffic, idle_verdict, next_backoff
from fakes import FakeClock

POLICY = IdlePolicy(timeout_seconds=60)


def verdict(
    traffic: Traffic,
    clock: FakeClock,
    *,
    policy: IdlePolicy = POLICY,
    ready: bool = True,
) -> float | None:
    return idle_verdict(policy=policy, traffic=traffic.snapshot(), now=clock(), server_ready=ready).remaining


def test_quiet_time_counts_down_from_the_last_request_or_reply() -> None:
    clock = FakeClock()
    traffic = Traffic(clock=clock)
    clock.advance(20)
    assert verdict(traffic, clock) == 40
    traffic.request_started()
    clock.advance(1)
    traffic.request_ended()  # the reply: nothing in flight, the quiet time starts again here
    clock.advance(59)
    assert verdict(traffic, clock) == 1
    clock.advance(1)
    assert verdict(traffic, clock) == 0
    clock.advance(100)
    assert verdict(traffic, clock) == 0


def test_a_request_in_flight_is_never_idle_however_long_it_takes() -> None:
    clock = FakeClock()
    traffic = Traffic(clock=clock)
    traffic.request_started()
    for _ in range(10):
        clock.advance(3600)
        result = idle_verdict(policy=POLICY, traffic=traffic.snapshot(), now=clock(), server_ready=True)
        assert result.remaining is None
        assert result.why == "1 request(s) in flight"
    traffic.request_ended()
    assert verdict(traffic, clock) == 60  # the reply is activity: the full timeout again
    clock.advance(60)
    assert verdict(traffic, clock) == 0


def test_requests_of_several_clients_are_counted_until_each_is_answered() -> None:
    clock = FakeClock()
    traffic = Traffic(clock=clock)
    traffic.request_started()
    traffic.request_started()
    traffic.request_ended()
    assert traffic.snapshot().in_flight == 1
    assert verdict(traffic, clock) is None
    traffic.request_ended()
    traffic.request_ended()  # an answer the gate gave twice never goes below zero
    assert traffic.in_flight == 0


def test_a_connection_opening_or_closing_is_not_activity() -> None:
    """A notebook that stays connected (or a ZeroMQ reconnect) neither wakes nor keeps awake the release."""
    clock = FakeClock()
    traffic = Traffic(clock=clock)
    clock.advance(59)
    traffic.connection_opened()
    traffic.connection_opened()
    traffic.connection_closed()
    assert verdict(traffic, clock) == 1
    assert traffic.snapshot().open_connections == 1


def test_an_open_connection_keeps_the_release_awake_only_when_asked() -> None:
    clock = FakeClock()
    traffic = Traffic(clock=clock)
    traffic.connection_opened()
    clock.advance(600)
    assert verdict(traffic, clock) == 0
    notebooks = IdlePolicy(timeout_seconds=60, connection_is_activity=True)
    result = idle_verdict(policy=notebooks, traffic=traffic.snapshot(), now=clock(), server_ready=True)
    assert (result.remaining, result.why) == (None, "1 client connection(s) open")
    traffic.connection_closed()
    traffic.connection_closed()
    assert traffic.snapshot().open_connections == 0


def test_a_server_that_is_not_ready_is_never_idle() -> None:
    clock = FakeClock()
    traffic = Traffic(clock=clock)
    clock.advance(10_000)
    result = idle_verdict(policy=POLICY, traffic=traffic.snapshot(), now=clock(), server_ready=False)
    assert result.remaining is None
    assert "not Ready" in result.why


def test_touch_restarts_the_quiet_time_and_never_moves_it_back() -> None:
    clock = FakeClock()
    traffic = Traffic(clock=clock)
    clock.advance(50)
    traffic.touch()
    assert verdict(traffic, clock) == 60
    assert traffic.last_activity == 50


@pytest.mark.parametrize(
    ("failures", "expected"),
    [(0, 0.0), (1, 60.0), (2, 120.0), (3, 240.0), (10, 3600.0), (1000, 3600.0)],
)
def test_wake_backoff_doubles_up_to_its_cap(failures: int, expected: float) -> None:
    assert next_backoff(base_seconds=60, failures=failures) == expected
