"""server.giveback: after a wait timeout the locale StatefulSet goes to 0, the server waits a randomized back-off,
then asks for its locales again (FakeKube's scale subresource, a fake sleep and a seeded random source)."""

from __future__ import annotations

import random

import pytest
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.kube.api import ApiUnavailableError
from arkouda_bootstrap.server.giveback import PROGRESS_SECONDS, GiveBack
from fakes import FakeKube

STS = "r-arkouda-locale"


class Recorder:
    def __init__(self, api: FakeKube) -> None:
        self.api = api
        self.log: list[tuple[str, str]] = []  # (what, detail) in the order things happened

    def sleep(self, seconds: float) -> None:
        self.log.append(("sleep", f"{seconds:g} at replicas={self.api.replicas[STS]}"))

    def give_back(self, *, backoff: float = 60.0, seed: int = 1) -> GiveBack:
        return GiveBack(
            api=self.api,
            namespace="ns",
            statefulset=STS,
            replicas=2,
            backoff=backoff,
            emit_released=lambda m: self.log.append(("LocalesReleased", m)),
            emit_requested=lambda m: self.log.append(("LocalesRequested", m)),
            report=lambda line: self.log.append(("report", line)),
            sleep=self.sleep,
            rng=random.Random(seed),  # noqa: S311 - a back-off jitter, not a secret
        )


def test_release_scales_to_zero_waits_a_randomized_backoff_then_asks_again() -> None:
    api = FakeKube(replicas={STS: 2})
    rec = Recorder(api)
    expected_wait = 60.0 * (1.0 + random.Random(1).random())  # noqa: S311 - the same seed as give_back()
    rec.give_back().release_and_wait(
        "timed out after 600s: 1/2 locales ready; waiting for r-arkouda-locale-1 (Pending)"
    )
    assert [c for c in api.calls if c[0] == "set_replicas"] == [
        ("set_replicas", f"{STS}=0"),
        ("set_replicas", f"{STS}=2"),
    ]
    assert api.replicas[STS] == 2
    released = [m for kind, m in rec.log if kind == "LocalesReleased"]
    assert len(released) == 1
    assert released[0].startswith("timed out after 600s: 1/2 locales ready; waiting for r-arkouda-locale-1 (Pending)")
    assert f"scaled StatefulSet {STS} to 0" in released[0]
    assert f"again in {expected_wait:.0f}s (round 1)" in released[0]
    # the whole back-off is slept with the locales at 0, in steps of at most PROGRESS_SECONDS with a line each
    sleeps = [d for kind, d in rec.log if kind == "sleep"]
    assert all(d.endswith("at replicas=0") for d in sleeps)
    slept = [float(d.split()[0]) for d in sleeps]
    assert sum(slept) == pytest.approx(expected_wait)
    assert max(slept) <= PROGRESS_SECONDS
    kinds = [kind for kind, _ in rec.log]
    assert kinds.index("LocalesReleased") < kinds.index("sleep") < kinds.index("LocalesRequested")
    assert kinds[-1] == "LocalesRequested"
    assert f"asked StatefulSet {STS} for 2 locale pod(s) again" in rec.log[-1][1]


def test_the_backoff_is_between_once_and_twice_the_setting_and_differs_between_servers() -> None:
    waits = []
    for seed in range(20):
        api = FakeKube(replicas={STS: 2})
        rec = Recorder(api)
        rec.give_back(backoff=10.0, seed=seed).release_and_wait("timed out")
        waits.append(sum(float(d.split()[0]) for kind, d in rec.log if kind == "sleep"))
    assert all(10.0 <= w <= 20.0 for w in waits)
    assert len({round(w, 3) for w in waits}) > 10


def test_rounds_are_counted() -> None:
    api = FakeKube(replicas={STS: 2})
    rec = Recorder(api)
    gb = rec.give_back(backoff=1.0)
    gb.release_and_wait("timed out")
    gb.release_and_wait("timed out")
    released = [m for kind, m in rec.log if kind == "LocalesReleased"]
    assert "(round 1)" in released[0] and "(round 2)" in released[1]


def test_restore_at_start_only_when_a_previous_server_left_the_locales_at_zero() -> None:
    api = FakeKube(replicas={STS: 2})
    rec = Recorder(api)
    rec.give_back().restore_if_released()
    assert not [c for c in api.calls if c[0] == "set_replicas"] and not rec.log
    api.replicas[STS] = 0
    rec.give_back().restore_if_released()
    assert api.replicas[STS] == 2
    assert rec.log[-1][0] == "LocalesRequested"
    assert "was at 0 replicas (released by a previous server)" in rec.log[-1][1]


def test_an_api_outage_while_scaling_is_waited_out() -> None:
    api = FakeKube(
        replicas={STS: 2},
        fail_next={"set_replicas": [ApiUnavailableError("connection refused")] * 2},
    )
    rec = Recorder(api)
    rec.give_back(backoff=1.0).release_and_wait("timed out")
    assert [c for c in api.calls if c[0] == "set_replicas"][-2:] == [
        ("set_replicas", f"{STS}=0"),
        ("set_replicas", f"{STS}=2"),
    ]
    assert api.replicas[STS] == 2


def test_a_refused_scale_is_raised_with_its_message() -> None:
    api = FakeKube(
        replicas={STS: 2},
        fail_with={"set_replicas": BootstrapError("patch statefulsets/scale: forbidden")},
    )
    rec = Recorder(api)
    with pytest.raises(BootstrapError, match="forbidden"):
        rec.give_back().release_and_wait("timed out")
    assert not [kind for kind, _ in rec.log if kind == "LocalesReleased"]
