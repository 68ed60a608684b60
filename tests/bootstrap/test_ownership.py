"""kube.ownership: only the pods of the release's StatefulSets (controller UID) count, whatever their labels; every
follower of the release's pods applies it (discovery, the locale monitor, nodewatch)."""

from __future__ import annotations

import pytest
from arkouda_bootstrap.kube.api import OwnerRef, PodInfo, pod_from_json
from arkouda_bootstrap.kube.ownership import OwnedBy
from arkouda_bootstrap.server.discovery import WaitTimeoutError, wait_for_locales
from fakes import FakeClock, FakeKube, fake_statefulset_uid, make_pod

LOCALE = "r-arkouda-locale"
LABELS = {"app.kubernetes.io/instance": "r", "app.kubernetes.io/component": "locale"}


def impostor(name: str, *, uid: str = "uid-impostor") -> PodInfo:
    """A pod wearing a locale's labels and name pattern, made by hand (kubectl debug --copy-to --keep-labels)."""
    return make_pod(name, uid=uid, labels=LABELS, controller=None, ip="10.9.9.9")


def owned_by(api: FakeKube, named: list[tuple[str, str]]) -> OwnedBy:
    return OwnedBy(
        api,
        namespace="ns",
        statefulsets=[LOCALE],
        on_impostor=lambda pod, msg: named.append((pod.name, msg)),
    )


def test_pod_json_carries_its_controller_reference() -> None:
    pod = pod_from_json(
        {
            "metadata": {
                "name": f"{LOCALE}-0",
                "ownerReferences": [
                    {"kind": "ConfigMap", "name": "x", "uid": "u1"},
                    {
                        "kind": "StatefulSet",
                        "name": LOCALE,
                        "uid": "u2",
                        "controller": True,
                    },
                ],
            }
        }
    )
    assert pod.controller == OwnerRef(kind="StatefulSet", name=LOCALE, uid="u2")
    assert pod_from_json({"metadata": {"name": "p", "ownerReferences": [{"kind": "X", "uid": "u"}]}}).controller is None


def test_a_pod_of_the_statefulset_counts_and_a_labelled_impostor_is_named_once() -> None:
    api, named = FakeKube(), list[tuple[str, str]]()
    owned = owned_by(api, named)
    assert owned(make_pod(f"{LOCALE}-0", labels=LABELS))
    assert not owned(impostor(f"{LOCALE}-1"))
    assert not owned(impostor(f"{LOCALE}-1"))  # the same pod again: not named again
    other_sts = make_pod("x-0", controller=OwnerRef(kind="StatefulSet", name="other", uid="u-other"))
    assert not owned(other_sts)
    assert [n for n, _ in named] == [f"{LOCALE}-1", "x-0"]
    assert named[0][1] == (
        f"ignoring pod {LOCALE}-1 (uid uid-impostor): it carries this release's labels but is not a pod of "
        f"StatefulSet {LOCALE} (it has no controller); delete it or take the release's labels off it"
    )
    assert "its controller is StatefulSet other (uid u-other)" in named[1][1]
    assert api.calls.count(("get_statefulset_uid", LOCALE)) == 1


def test_a_recreated_statefulset_is_read_again_once_and_a_stale_uid_is_refused() -> None:
    api, named = FakeKube(), list[tuple[str, str]]()
    owned = owned_by(api, named)
    api.statefulset_uids[LOCALE] = "uid-new"  # deleted and created again since the first read
    new = make_pod(
        f"{LOCALE}-0",
        controller=OwnerRef(kind="StatefulSet", name=LOCALE, uid="uid-new"),
    )
    assert owned(new)
    assert owned(new)
    assert api.calls.count(("get_statefulset_uid", LOCALE)) == 2
    # a pod still naming the old StatefulSet's uid (an orphan kept by --cascade=orphan) is not ours any more
    old = make_pod(
        f"{LOCALE}-1",
        controller=OwnerRef(kind="StatefulSet", name=LOCALE, uid=fake_statefulset_uid(LOCALE)),
    )
    assert not owned(old)
    assert not owned(old)
    assert api.calls.count(("get_statefulset_uid", LOCALE)) == 3  # once per foreign owner uid, not per look
    assert [n for n, _ in named] == [f"{LOCALE}-1"]


def test_discovery_launches_on_the_real_pod_and_names_the_impostor_that_shares_its_ordinal() -> None:
    # An impostor with ordinal 1 used to end the wait ("same ordinal ... more than one StatefulSet") or enter the
    # host list; with the filter it is named and ignored.
    api, named = FakeKube(), list[tuple[str, str]]()
    api.pods[f"{LOCALE}-0"] = make_pod(f"{LOCALE}-0", ip="10.0.0.1", labels=LABELS)
    api.pods["copy"] = impostor(f"{LOCALE}-1")
    api.script(api.event("ADDED", make_pod(f"{LOCALE}-1", ip="10.0.0.2", labels=LABELS)))
    lines: list[str] = []
    pods = wait_for_locales(
        api,
        namespace="ns",
        selector="s=1",
        expected=2,
        timeout=60,
        report=lines.append,
        keep=owned_by(api, named),
    )
    assert [(p.name, p.pod_ip) for p in pods] == [
        (f"{LOCALE}-0", "10.0.0.1"),
        (f"{LOCALE}-1", "10.0.0.2"),
    ]
    assert [n for n, _ in named] == [f"{LOCALE}-1"]
    assert lines[0] == f"1/2 locales ready; waiting for {LOCALE}-1 (not created yet)"


def test_an_impostor_alone_never_counts_as_a_ready_locale() -> None:
    clock = FakeClock()
    api, named = FakeKube(on_idle_watch=clock.advance), list[tuple[str, str]]()
    api.pods["copy"] = impostor(f"{LOCALE}-0")
    with pytest.raises(
        WaitTimeoutError,
        match=r"0/1 locales ready; waiting for ordinal 0 \(not created yet\)",
    ):
        wait_for_locales(
            api,
            namespace="ns",
            selector="s=1",
            expected=1,
            timeout=5,
            report=print,
            clock=clock,
            keep=owned_by(api, named),
        )
    assert len(named) == 1
