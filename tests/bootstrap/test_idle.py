"""The idle decision (arkouda_bootstrap.gate.idle) with FakeClock: no sleeps, the clock moves only when told."""

from __future__ import annotations

import pytest
from arkouda_bootstrap.gate.idle import IdlePolicy, Traffic, idle_verdict, next_backoff
from fakes import FakeClock

POLICY = IdlePolicy(timeout_seconds=60)


def verdict(traffic: Traffic, clock: FakeClock, *, policy: IdlePolicy = POLICY, ready: bool = True) -> float | None:
    return idle_verdict(policy=policy, traffic=traffic.snapshot(), now=clock(), server_ready=ready).remaining


def test_quiet_time_counts_down_from_the_last_traffic() -> None:
    clock = FakeClock()
    traffic = Traffic(clock=clock)
    clock.advance(20)
    assert verdict(traffic, clock) == 40
    conn = traffic.opened()
    traffic.client_sent(conn)
    clock.advance(1)
    traffic.server_sent(conn)  # the reply: nothing in flight, the quiet time starts again here
    clock.advance(59)
    assert verdict(traffic, clock) == 1
    clock.advance(1)
    assert verdict(traffic, clock) == 0
    clock.advance(100)
    assert verdict(traffic, clock) == 0


def test_a_request_in_flight_is_never_idle_however_long_it_takes() -> None:
    clock = FakeClock()
    traffic = Traffic(clock=clock)
    conn = traffic.opened()
    traffic.client_sent(conn)
    for _ in range(10):
        clock.advance(3600)
        result = idle_verdict(policy=POLICY, traffic=traffic.snapshot(), now=clock(), server_ready=True)
        assert result.remaining is None
        assert result.why == "1 request(s) in flight"
    traffic.server_sent(conn)
    assert verdict(traffic, clock) == 60  # the reply is traffic: the full timeout again
    clock.advance(60)
    assert verdict(traffic, clock) == 0


def test_more_request_bytes_after_a_partial_reply_are_in_flight_again() -> None:
    clock = FakeClock()
    traffic = Traffic(clock=clock)
    conn = traffic.opened()
    traffic.client_sent(conn)
    traffic.server_sent(conn)
    assert not traffic.in_flight(conn)
    traffic.client_sent(conn)
    assert traffic.in_flight(conn)
    assert traffic.snapshot().in_flight == 1


def test_a_closed_connection_has_nothing_in_flight() -> None:
    clock = FakeClock()
    traffic = Traffic(clock=clock)
    conn = traffic.opened()
    traffic.client_sent(conn)
    clock.advance(5)
    traffic.closed(conn)  # the client went away: its request no longer holds the release
    assert traffic.snapshot().in_flight == 0
    assert verdict(traffic, clock) == 60
    traffic.server_sent(conn)  # a late byte of a closed connection changes nothing but the clock
    assert traffic.snapshot().open_connections == 0


def test_an_open_connection_keeps_the_release_awake_only_when_asked() -> None:
    clock = FakeClock()
    traffic = Traffic(clock=clock)
    traffic.opened()
    clock.advance(600)
    assert verdict(traffic, clock) == 0
    notebooks = IdlePolicy(timeout_seconds=60, connection_is_activity=True)
    result = idle_verdict(policy=notebooks, traffic=traffic.snapshot(), now=clock(), server_ready=True)
    assert (result.remaining, result.why) == (None, "1 client connection(s) open")


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
    ("failures", "expected"), [(0, 0.0), (1, 60.0), (2, 120.0), (3, 240.0), (10, 3600.0), (1000, 3600.0)]
)
def test_wake_backoff_doubles_up_to_its_cap(failures: int, expected: float) -> None:
    assert next_backoff(base_seconds=60, failures=failures) == expected
