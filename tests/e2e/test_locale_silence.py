"""A locale that stops answering on the pod network while its node stays Ready (docs/node-loss.md, the supervisor's
decision table, row 9): every packet in or out of one locale pod is dropped inside the pod's own network namespace
(`hack/cluster/pod-net.sh`), as a firewall rule or a broken CNI on one pod would do. Its node keeps reporting, so
the control plane marks nothing lost and nodewatch must not act; only the server's probe can tell.

- a drop shorter than the probe's bound (20 s) stops nothing: the same program (pid, `Launched` count), no
  `LocaleLost`;
- a longer one stops the program with `LocaleLost` naming the data plane's evidence; the server then waits, its
  progress line naming the locale that does not answer, and does not launch while the drop lasts; once the drop is
  removed it relaunches with the same locale pod (no pod replaced, no `NodeLost`).

Not disruptive: only this module's own pod loses its traffic, so it runs beside the others in phase 1.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kubehelpers import CHART, REPO_ROOT, VALUES, Kube, all_ready, helm, image_args, release_pods, run, wait_for

RELEASE = "ls"
SERVER_POD = f"{RELEASE}-arkouda-server-0"
LOCALE_POD = f"{RELEASE}-arkouda-locale-1"
RELEASE_SEL = release_pods(RELEASE)
POD_NET = REPO_ROOT / "hack" / "cluster" / "pod-net.sh"
# the rule's bound (server/liveness.py) is 20 s of misses, probed every 5 s
SHORT_DROP_SECONDS = 8
LONG_DROP_SECONDS = 40
HELD = f"{LOCALE_POD} (does not answer on the pod network"


@pytest.fixture(scope="module")
def ns(make_namespace: Any) -> str:
    if not POD_NET.is_file():
        pytest.skip(f"dropping a pod's traffic needs {POD_NET.relative_to(REPO_ROOT)} (the local cluster's scripts)")
    if os.geteuid() != 0:
        pytest.skip("dropping a pod's traffic enters its network namespace: root only")
    name: str = make_namespace("ls-e2e")
    return name


@pytest.fixture
def dropped(ns: str) -> Iterator[Callable[[], None]]:
    """Drop the locale pod's traffic; the test restores it, and the fixture does whatever happens."""
    def restore() -> None:
        run([str(POD_NET), "restore", ns, LOCALE_POD], timeout=60)

    run([str(POD_NET), "drop", ns, LOCALE_POD], timeout=60)
    yield restore
    run([str(POD_NET), "restore", ns, LOCALE_POD], timeout=60, check=False)


def messages(kube: Kube, ns: str, name: str, reason: str) -> list[str]:
    return [str(e.message) for e in kube.events_for(ns, name) if e.reason == reason]


def program_pid(kube: Kube, ns: str) -> int:
    launched = messages(kube, ns, SERVER_POD, "Launched")
    m = re.search(r"; pid (\d+)$", launched[-1])
    assert m, launched[-1]
    return int(m.group(1))


def alive_in_server(ns: str, pid: int) -> bool:
    return run(["kubectl", "-n", ns, "exec", SERVER_POD, "-c", "server", "--", "test", "-d", f"/proc/{pid}"],
               timeout=60, check=False).returncode == 0


def server_log(kube: Kube, ns: str) -> str:
    return kube.logs(ns, SERVER_POD, "server")


def describe(kube: Kube, ns: str) -> Callable[[], str]:
    def text() -> str:
        events = [f"{e.involved_object.name}: {e.reason}: {e.message}"
                  for e in kube.core.list_namespaced_event(ns).items
                  if e.reason in ("LocaleLost", "NodeLost", "Relaunching", "Launched", "LocalesReady", "WaitTimeout")]
        return f"{kube.describe_pods(ns, RELEASE_SEL)}\n" + "\n".join(events[-15:]) + \
            "\nserver log:\n" + server_log(kube, ns)[-3000:]

    return text


def test_install(kube: Kube, ns: str) -> None:
    helm("install", RELEASE, str(CHART), "-n", ns, "-f", str(VALUES / "local.yaml"), *image_args(),
         "--wait", "--timeout", "8m", timeout=600)
    kube.watch_pods_until(ns, RELEASE_SEL, all_ready(3), timeout=120, what="3 Ready pods of the release")
    wait_for("the first launch", lambda: messages(kube, ns, SERVER_POD, "Launched"), timeout=180,
             describe=describe(kube, ns))


def test_a_drop_shorter_than_the_bound_stops_nothing(kube: Kube, ns: str,
                                                     dropped: Callable[[], None]) -> None:
    pid, launches = program_pid(kube, ns), len(messages(kube, ns, SERVER_POD, "Launched"))
    t0 = time.monotonic()
    time.sleep(SHORT_DROP_SECONDS)
    dropped()
    # a stop needs 5 misses 20 s apart; the streak ends at the first answer after the drop (<= 5 s later), so
    # 25 s after the drop began a stop would have come
    time.sleep(max(0.0, t0 + 25 - time.monotonic()))
    assert messages(kube, ns, SERVER_POD, "LocaleLost") == [], describe(kube, ns)()
    assert len(messages(kube, ns, SERVER_POD, "Launched")) == launches
    assert alive_in_server(ns, pid), f"pid {pid} of the program is gone\n{describe(kube, ns)()}"


def test_a_longer_drop_stops_the_program_and_the_release_waits_for_that_locale(
        kube: Kube, ns: str, dropped: Callable[[], None]) -> None:
    t0 = time.monotonic()
    launches = len(messages(kube, ns, SERVER_POD, "Launched"))
    uid = kube.core.read_namespaced_pod(LOCALE_POD, ns).metadata.uid
    [lost] = wait_for("LocaleLost", lambda: messages(kube, ns, SERVER_POD, "LocaleLost"), timeout=90,
                      describe=describe(kube, ns))
    stopped = time.monotonic() - t0
    assert f"locale {LOCALE_POD} does not answer on the pod network" in lost, lost
    wait_for("the wait's progress line naming the silent locale", lambda: HELD in server_log(kube, ns), timeout=60,
             describe=describe(kube, ns))
    time.sleep(max(0.0, t0 + LONG_DROP_SECONDS - time.monotonic()))
    assert len(messages(kube, ns, SERVER_POD, "Launched")) == launches, "launched while the locale did not answer"
    dropped()
    restored = time.monotonic() - t0
    wait_for("the relaunch once the locale answers",
             lambda: len(messages(kube, ns, SERVER_POD, "Launched")) > launches, timeout=180,
             describe=describe(kube, ns))
    kube.watch_pods_until(ns, RELEASE_SEL, all_ready(3), timeout=120, what="3 Ready pods of the release")
    print(f"\ntraffic of {LOCALE_POD} dropped: LocaleLost after {stopped:.0f}s, drop removed at {restored:.0f}s, "
          f"relaunched at {time.monotonic() - t0:.0f}s\n  {lost}\n  "
          + "\n  ".join(line for line in server_log(kube, ns).splitlines() if HELD in line)[-1500:])
    assert kube.core.read_namespaced_pod(LOCALE_POD, ns).metadata.uid == uid, "the locale pod was replaced"
    assert all(e.reason != "NodeLost" for e in kube.core.list_namespaced_event(ns).items)


def test_uninstall(kube: Kube, ns: str) -> None:
    helm("uninstall", RELEASE, "-n", ns, "--wait", "--timeout", "3m", timeout=240)
