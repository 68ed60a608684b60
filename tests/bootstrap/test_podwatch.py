"""follow_pods, the list-then-watch loop every pod follower shares, and PodCache, the pods it leaves (driven by
FakeKube, the named test double of the kube seam, and a fake clock)."""

from __future__ import annotations

import itertools
import logging
import threading

import pytest
from arkouda_bootstrap.kube.api import ApiUnavailableError, ForbiddenError, PodEvent, PodList
from arkouda_bootstrap.kube.podwatch import ChunkEnded, PodCache, follow_pods
from arkouda_bootstrap.kube.retry import Deadline
from fakes import END, FakeClock, FakeKube, GoneError, make_pod


def kinds(items: list[PodList | PodEvent | ChunkEnded]) -> list[str]:
    out = []
    for item in items:
        if isinstance(item, PodList):
            out.append(f"list@{item.resource_version}")
        elif isinstance(item, ChunkEnded):
            out.append(f"end@{item.resource_version}")
        else:
            assert item.pod is not None
            out.append(f"{item.type} {item.pod.name}")
    return out


def test_list_then_changes_then_chunk_ends_then_relist_after_410() -> None:
    api = FakeKube()
    api.pods["r-0"] = make_pod("r-0")
    bookmark = PodEvent(type="BOOKMARK", pod=None, resource_version="1500")
    api.script(api.event("MODIFIED", make_pod("r-0", ready=False)), bookmark, END, GoneError("too old"))
    clock = FakeClock()
    followed = follow_pods(api, namespace="ns", selector="s=1", chunk_seconds=10, clock=clock, sleep=clock.sleep)
    items = list(itertools.islice(followed, 5))
    assert kinds(items) == ["list@100", "MODIFIED r-0", "end@1500", "list@100", "end@100"]
    watches = [arg for op, arg in api.calls if op == "watch_pods"]
    # the second watch resumes from the bookmark's version; after the 410 the watch starts from the new list's
    assert watches == ["100", "1500", "100"]


def test_a_deadline_cuts_the_watch_requests_and_ends_the_iteration() -> None:
    api = FakeKube()
    clock = FakeClock()
    seconds: list[int] = []

    def server_timeout(timeout: int) -> None:  # each watch lasts its full timeout_seconds
        seconds.append(timeout)
        clock.sleep(timeout)

    api.on_idle_watch = server_timeout
    followed = follow_pods(
        api,
        namespace="ns",
        selector="s=1",
        chunk_seconds=10,
        deadline=Deadline(25.0, clock=clock),
        clock=clock,
        sleep=clock.sleep,
    )
    assert kinds(list(followed)) == ["list@100", "end@100", "end@100", "end@100"]
    assert seconds == [10, 10, 5]


def test_watches_that_end_at_once_wait_a_second_in_between() -> None:
    api = FakeKube()
    clock = FakeClock()
    followed = follow_pods(
        api,
        namespace="ns",
        selector="s=1",
        chunk_seconds=10,
        deadline=Deadline(3.0, clock=clock),
        clock=clock,
        sleep=clock.sleep,
    )
    assert kinds(list(followed)) == ["list@100", "end@100", "end@100", "end@100"]
    assert clock.now == 3.0


def test_the_cache_holds_the_listed_pods_and_replays_the_changes_by_name() -> None:
    api = FakeKube()
    cache = PodCache(keep=lambda pod: pod.name.startswith("r-"))
    assert not cache.listed
    cache.apply(PodList(pods=(make_pod("r-0"), make_pod("r-1"), make_pod("other")), resource_version="1"))
    assert cache.listed and sorted(cache.pods) == ["r-0", "r-1"]
    cache.apply(api.event("MODIFIED", make_pod("r-0", ready=False)))
    cache.apply(api.event("DELETED", make_pod("r-1")))
    cache.apply(api.event("ADDED", make_pod("r-2")))
    cache.apply(api.event("ADDED", make_pod("other")))  # not kept
    cache.apply(PodEvent(type="BOOKMARK", pod=None, resource_version="1500"))
    cache.apply(ChunkEnded(resource_version="1500"))
    assert sorted(cache.pods) == ["r-0", "r-2"]
    assert not cache.pods["r-0"].ready
    # a new list (after a 410) replaces everything: a pod deleted while the watch was expired is gone
    cache.apply(PodList(pods=(make_pod("r-2"),), resource_version="2000"))
    assert sorted(cache.pods) == ["r-2"]


# -- the one retry policy (kube.retry) inside the follow loop ------------------------------------------------


def refused(what: str) -> ApiUnavailableError:
    return ApiUnavailableError(f"cannot reach the Kubernetes API to {what}: [Errno 111] Connection refused")


def test_refusals_timeouts_5xx_and_a_410_are_ridden_out_and_the_watch_resumes_where_it_was(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    api = FakeKube()
    api.pods["r-0"] = make_pod("r-0")
    api.fail_next["list_pods"] = [refused("list pods"), ApiUnavailableError("list pods: read timed out")]
    first, second, third = (api.event("MODIFIED", make_pod(f"r-{i}")) for i in range(3))
    api.script(
        first,
        ApiUnavailableError("watch pods in namespace ns failed: HTTP 503 Service Unavailable"),
        refused("watch pods"),
        ApiUnavailableError("watch pods in namespace ns failed: HTTP 500 Internal Server Error"),
        second,
        END,
        GoneError("too old"),
        third,
        END,
    )
    clock = FakeClock()
    followed = follow_pods(api, namespace="ns", selector="s=1", chunk_seconds=10, clock=clock, sleep=clock.sleep)
    items = list(itertools.islice(followed, 7))
    assert kinds(items) == [
        "list@100",
        "MODIFIED r-0",
        "MODIFIED r-1",
        "end@1002",
        "list@100",
        "MODIFIED r-2",
        "end@1003",
    ]
    # a failed watch resumes from the last version it delivered; only the 410 lists again
    assert [arg for op, arg in api.calls if op == "watch_pods"] == ["100", "1001", "1001", "1001", "1002", "100"]
    assert [op for op, _ in api.calls].count("list_pods") == 4  # two refused, one, one after the 410
    assert clock.slept == [1.0, 2.0, 1.0, 2.0, 4.0]  # attempts count from 1 again for every request
    retries = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert len(retries) == 5
    assert retries[1].startswith("pods s=1 in namespace ns: attempt 2 failed: list pods: read timed out;")
    assert "the API has been unreachable for 1s; attempt 3 in 2.0s" in retries[1]
    assert retries[4].startswith(
        "pods s=1 in namespace ns: attempt 3 failed: watch pods in namespace ns failed: HTTP 500"
    )
    assert "the API has been unreachable for 3s; attempt 4 in 4.0s" in retries[4]
    assert next(followed) is not None  # and it goes on


def test_without_a_deadline_an_unreachable_api_is_retried_for_ever_with_capped_pauses() -> None:
    api = FakeKube()
    api.fail_next["list_pods"] = [refused("list pods") for _ in range(12)]
    clock = FakeClock()
    followed = follow_pods(api, namespace="ns", selector="s=1", chunk_seconds=10, clock=clock, sleep=clock.sleep)
    assert kinds([next(followed)]) == ["list@100"]
    assert clock.slept == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0, 30.0, 30.0, 30.0]


class RecordingListener:
    """Test double of kube.retry.OutageListener: keeps what it is told."""

    def __init__(self) -> None:
        self.told: list[str] = []

    def began(self, *, error: BaseException) -> None:
        self.told.append(f"began: {error}")

    def ended(self, *, seconds: float, error: BaseException) -> None:
        self.told.append(f"ended after {seconds:g}s: {error}")


def test_an_outage_longer_than_the_deadline_is_waited_out_and_moves_the_deadline_by_its_length() -> None:
    api = FakeKube()
    api.fail_next["list_pods"] = [refused("list pods") for _ in range(8)]
    clock = FakeClock()
    deadline, listener = Deadline(10.0, clock=clock), RecordingListener()
    followed = follow_pods(
        api,
        namespace="ns",
        selector="s=1",
        chunk_seconds=10,
        deadline=deadline,
        clock=clock,
        sleep=clock.sleep,
        listener=listener,
    )
    assert kinds([next(followed)]) == ["list@100"]
    assert clock.now == 121.0  # 1 + 2 + 4 + 8 + 16 + 30 + 30 + 30: far past the 10 s
    assert deadline.excluded == 121.0 and deadline.at == 131.0 and not deadline.passed()
    error = "cannot reach the Kubernetes API to list pods: [Errno 111] Connection refused"
    assert listener.told == [
        f"began: {error}",
        f"ended after 121s: {error}",
    ]  # once each, not per attempt


def test_an_outage_that_begins_after_the_deadline_passed_raises_its_error() -> None:
    api = FakeKube()
    api.fail_with["list_pods"] = refused("list pods")
    clock = FakeClock()
    deadline = Deadline(10.0, clock=clock)
    clock.advance(12)
    followed = follow_pods(
        api,
        namespace="ns",
        selector="s=1",
        chunk_seconds=10,
        deadline=deadline,
        clock=clock,
        sleep=clock.sleep,
    )
    with pytest.raises(ApiUnavailableError, match="Connection refused"):
        next(followed)
    assert [op for op, _ in api.calls].count("list_pods") == 1


def test_each_outage_in_a_watch_is_told_once_when_it_begins_and_once_when_the_api_answers() -> None:
    api = FakeKube()
    api.script(
        api.event("ADDED", make_pod("r-0")),
        refused("watch pods"),
        ApiUnavailableError("watch pods: read timed out"),
        ApiUnavailableError("watch pods in namespace ns failed: HTTP 503 Service Unavailable"),
        END,  # a watch that ends without an event answers too
        GoneError("too old"),
        ApiUnavailableError("watch pods in namespace ns failed: HTTP 500 Internal Server Error"),
        api.event("ADDED", make_pod("r-1")),
    )
    api.fail_next["list_pods"] = [refused("list pods") for _ in range(2)]
    clock, listener = FakeClock(), RecordingListener()
    followed = follow_pods(
        api,
        namespace="ns",
        selector="s=1",
        chunk_seconds=10,
        clock=clock,
        sleep=clock.sleep,
        listener=listener,
    )
    items = list(itertools.islice(followed, 5))
    assert kinds(items) == [
        "list@100",
        "ADDED r-0",
        "end@1001",
        "list@100",
        "ADDED r-1",
    ]
    assert listener.told == [
        "began: cannot reach the Kubernetes API to list pods: [Errno 111] Connection refused",
        "ended after 3s: cannot reach the Kubernetes API to list pods: [Errno 111] Connection refused",
        "began: cannot reach the Kubernetes API to watch pods: [Errno 111] Connection refused",
        "ended after 7s: cannot reach the Kubernetes API to watch pods: [Errno 111] Connection refused",
        "began: watch pods in namespace ns failed: HTTP 500 Internal Server Error",
        "ended after 1s: watch pods in namespace ns failed: HTTP 500 Internal Server Error",
    ]
    # the watch resumed where it was after each outage; only the 410 listed again
    assert [arg for op, arg in api.calls if op == "watch_pods"] == [
        "100",
        "1001",
        "1001",
        "1001",
        "1001",
        "100",
        "100",
    ]
    assert kinds([next(followed)]) == ["end@1002"]  # and it goes on


def test_a_stop_during_an_outage_ends_the_iteration_quietly() -> None:
    api = FakeKube()
    api.fail_with["list_pods"] = refused("list pods")
    stop = threading.Event()
    followed = follow_pods(
        api, namespace="ns", selector="s=1", chunk_seconds=10, sleep=lambda _s: stop.set(), stop=stop
    )
    assert list(followed) == []


def test_errors_no_retry_can_fix_are_raised_at_once() -> None:
    api = FakeKube()
    api.script(ForbiddenError(verb="watch", resource="pods", namespace="ns"))
    sleeps: list[float] = []
    followed = follow_pods(api, namespace="ns", selector="s=1", chunk_seconds=10, sleep=sleeps.append)
    assert kinds([next(followed)]) == ["list@100"]
    with pytest.raises(ForbiddenError, match="^missing RBAC: watch pods in namespace ns$"):
        next(followed)
    assert sleeps == []


def test_closing_the_iteration_in_the_middle_of_a_watch_ends_it() -> None:
    """The consumer stops at an event (it yields from inside a tenacity attempt): closing must neither retry
    nor raise."""
    api = FakeKube()
    api.script(api.event("ADDED", make_pod("r-0")), api.event("ADDED", make_pod("r-1")))
    followed = follow_pods(api, namespace="ns", selector="s=1", chunk_seconds=10, sleep=lambda _s: None)
    assert kinds([next(followed), next(followed)]) == ["list@100", "ADDED r-0"]
    followed.close()
    assert [op for op, _ in api.calls] == ["list_pods", "watch_pods"]
    assert api.watch_script.qsize() == 1
