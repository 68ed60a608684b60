"""follow_pods, the list-then-watch loop every pod follower shares, and PodCache, the pods it leaves (driven by
FakeKube, the named test double of the kube seam, and a fake clock)."""

from __future__ import annotations

import itertools

from arkouda_bootstrap.kube.api import PodEvent, PodList
from arkouda_bootstrap.kube.podwatch import ChunkEnded, PodCache, follow_pods
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
        api, namespace="ns", selector="s=1", chunk_seconds=10, deadline=25.0, clock=clock, sleep=clock.sleep
    )
    assert kinds(list(followed)) == ["list@100", "end@100", "end@100", "end@100"]
    assert seconds == [10, 10, 5]


def test_watches_that_end_at_once_wait_a_second_in_between() -> None:
    api = FakeKube()
    clock = FakeClock()
    followed = follow_pods(
        api, namespace="ns", selector="s=1", chunk_seconds=10, deadline=3.0, clock=clock, sleep=clock.sleep
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
