"""Give the locale pods back when they do not all come, so that two releases never hold each other's nodes.

Two releases that each need most of a cluster can each get part of their locale pods: without this, both servers
wait `--timeout`, exit, restart and wait again while their Running locale pods keep their nodes, and neither ever
starts. After a wait timeout the server scales its locale StatefulSet to 0 (its scale subresource, the one way the
bootstrap scales), so every pod it got is deleted and frees its node, waits a randomized back-off (between once and
twice `--release-backoff`: two releases that timed out together do not ask again together), then asks for the
locales again and waits once more. The same happens at start when a previous server left the StatefulSet at 0
(it was stopped during its back-off).

Limits (docs/node-loss.md has them for users): this is a retreat, not a queue. Which release wins the next round
is up to the scheduler; a release whose pods can never all fit retreats and asks again forever (each round named
in a `WaitTimeout` and a `LocalesReleased` Event); the pods of a release are not admitted together, so one that
waits still holds its nodes until its own timeout. All-or-nothing admission is Kueue's (the chart's README).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from arkouda_bootstrap.kube.api import ScaleApi
from arkouda_bootstrap.kube.retry import ApiRetry

log = logging.getLogger(__name__)

# a progress line at least this often while the back-off lasts
PROGRESS_SECONDS = 30.0


@dataclass
class GiveBack:
    """The locale StatefulSet of one server: released after a wait timeout, asked for again after a back-off."""

    api: ScaleApi
    namespace: str
    statefulset: str
    replicas: int  # the locale pods the release runs with (numLocales - 1)
    backoff: float  # seconds; the wait is uniform in [backoff, 2 * backoff]
    emit_released: Callable[[str], None]
    emit_requested: Callable[[str], None]
    report: Callable[[str], None]
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)
    rounds: int = 0

    def _retry(self, what: str) -> ApiRetry:
        return ApiRetry(f"{what} of StatefulSet {self.statefulset} in namespace {self.namespace}", sleep=self.sleep)

    def restore_if_released(self) -> None:
        """At start: a previous server stopped during its back-off left the locales at 0; ask for them again."""
        current = self._retry("the scale").call(
            lambda: self.api.get_replicas(namespace=self.namespace, statefulset=self.statefulset)
        )
        if current == 0 and self.replicas > 0:
            self._request(f"StatefulSet {self.statefulset} was at 0 replicas (released by a previous server)")

    def release_and_wait(self, reason: str) -> None:
        """After a wait timeout (`reason`, its last progress line): locales to 0, the back-off, locales back."""
        self.rounds += 1
        self._retry("scaling to 0").call(
            lambda: self.api.set_replicas(namespace=self.namespace, statefulset=self.statefulset, replicas=0)
        )
        wait = self.backoff * (1.0 + self.rng.random())
        message = (
            f"{reason}; scaled StatefulSet {self.statefulset} to 0 so that none of its pods holds a node another "
            f"release may need; asking for {self.replicas} locale pod(s) again in {wait:.0f}s (round {self.rounds})"
        )
        self.report(message)
        self.emit_released(message)
        left = wait
        while left > 0:
            step = min(left, PROGRESS_SECONDS)
            self.sleep(step)
            left -= step
            if left > 0:
                self.report(f"locales released; asking for them again in {left:.0f}s")
        self._request(f"back-off of {wait:.0f}s over (round {self.rounds})")

    def _request(self, why: str) -> None:
        self._retry("scaling up").call(
            lambda: self.api.set_replicas(
                namespace=self.namespace, statefulset=self.statefulset, replicas=self.replicas
            )
        )
        message = f"{why}: asked StatefulSet {self.statefulset} for {self.replicas} locale pod(s) again"
        self.report(message)
        self.emit_requested(message)
