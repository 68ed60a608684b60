"""Whether a locale answers on the pod network: a TCP connect to its sshd port, the supervisor's data-plane
evidence (server.supervise has the decision table).

Why sshd and not the program's own port: every locale pod runs sshd for its whole life, before, during and
between launches, whatever the launcher (amudprun's GASNet workers, mpirun's ranks), whereas the program's ports
are chosen at launch (GASNet's are ephemeral) and differ by launcher. A connect and sshd's greeting take the same
pod-network path as the job's own traffic and need nothing from the control plane; it is no ssh login (no key):
sshd logs one line per probe (`Connection reset by <server ip> port N [preauth]`, every 5 s per locale), the
price of asking the process itself rather than the kernel. A refused connect counts as a miss too: the pod's
address answers, but its sshd (its container) is gone.

The bound (ProbePolicy): a probe of every locale each 5 s, each connect with a 3 s timeout; a locale is lost when
its probes have all missed for 20 s (5 misses in a row). 20 s rides out what a healthy locale goes through: a
kubelet restart (17 s measured, and sshd keeps answering meanwhile anyway), a CNI or conntrack hiccup, a connect
whose first SYN is lost (Linux retransmits it after 1 s and 3 s, inside one probe's timeout). It still leaves about
40 s of the 60 s goal from a real node loss to a Ready release for the replacement pod to be made, scheduled,
started and probed. The cost, said plainly: all traffic to one locale dropped for more than 20 s stops the
program, even though a job might have survived a longer drop (an MPI job rode out 60 s); a drop shorter than 20 s
never stops it.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from arkouda_bootstrap.kube.api import PodInfo

log = logging.getLogger(__name__)

MAX_PROBE_THREADS = 16


@dataclass(frozen=True)
class ProbePolicy:
    interval: float = 5.0  # seconds between two probes of a locale
    timeout: float = 3.0  # seconds one connect may take
    lost_after: float = 20.0  # seconds of nothing but misses before a locale counts as lost


@dataclass(frozen=True)
class Target:
    pod: str
    address: str
    port: int


# Sent back before closing, so sshd ends the exchange with one log line per probe ("Connection reset by <server
# ip> port N [preauth]") instead of two ("kex_exchange_identification: Connection closed by remote host" and
# "Connection closed by ..."), and says who it was.
OUR_BANNER = b"SSH-2.0-arkouda-liveness\r\n"


def tcp_connect(address: str, port: int, timeout: float) -> str | None:
    """None when sshd at `address:port` greets (its `SSH-` banner) within `timeout` seconds; else why not, in a
    few words. Nothing beyond the banners is exchanged: no key, no login."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as sock:
            greeting = sock.recv(256)
            if not greeting.startswith(b"SSH-"):
                return f"no ssh greeting (got {greeting[:40]!r})"
            sock.sendall(OUR_BANNER)
            return None
    except TimeoutError:
        return f"no answer within {timeout:g}s"
    except OSError as exc:
        return exc.strerror or str(exc)


class Liveness:
    """The miss streak of every locale (`targets` by pod name). `probe_all()` probes each once (in parallel) and
    returns the lost ones' reasons; `answers(pod)` probes one now (the supervisor asks when the control plane says
    NotReady). `connect` and `clock` are injectable: tests use a named fake network and a fake clock."""

    def __init__(
        self,
        targets: Mapping[str, Target],
        *,
        policy: ProbePolicy = ProbePolicy(),
        connect: Callable[[str, int, float], str | None] = tcp_connect,
        clock: Callable[[], float] = time.monotonic,
        kind: str = "locale",
    ) -> None:
        self.policy = policy
        self.kind = kind  # what a target is called in log lines and reasons ("locale"; nodewatch's "pod")
        self._targets = dict(targets)
        self._connect = connect
        self._clock = clock
        self._missing_since: dict[str, float] = {}  # pod -> when its first miss of the current streak began
        self._misses: dict[str, int] = {}
        self._last_error: dict[str, str] = {}
        self._lock = threading.Lock()  # the probe thread and the pod watch's NotReady check both probe

    @property
    def pods(self) -> list[str]:
        with self._lock:
            return sorted(self._targets)

    def retarget(self, targets: Mapping[str, Target]) -> None:
        """Follow another set of pods (nodewatch's change as pods come and go): a pod gone or at another address
        (a new pod under the same name) starts with no misses."""
        with self._lock:
            for pod in set(self._targets) - {p for p, t in targets.items() if self._targets.get(p) == t}:
                self._missing_since.pop(pod, None)
                self._misses.pop(pod, None)
                self._last_error.pop(pod, None)
            self._targets = dict(targets)

    def target(self, pod: str) -> Target:
        return self._targets[pod]

    def answers(self, pod: str) -> bool:
        """Probe `pod` once now; True when it answered (its miss streak ends), else the streak grows."""
        with self._lock:
            target = self._targets[pod]
        started = self._clock()
        error = self._connect(target.address, target.port, self.policy.timeout)
        with self._lock:
            if self._targets.get(pod) != target:  # retargeted meanwhile: this answer is about a pod gone
                return error is None
            if error is None:
                if self._misses.pop(pod, 0):
                    log.info("%s %s (%s) answers on the pod network again", self.kind, pod, target.address)
                self._missing_since.pop(pod, None)
                return True
            since = self._missing_since.setdefault(pod, started)
            misses = self._misses[pod] = self._misses.get(pod, 0) + 1
            self._last_error[pod] = error
        log.warning(
            "%s %s (%s:%d) did not answer: %s (miss %d, for %.0fs; lost after %gs)",
            self.kind,
            pod,
            target.address,
            target.port,
            error,
            misses,
            self._clock() - since,
            self.policy.lost_after,
        )
        return False

    def lost(self, pod: str) -> str | None:
        """Why `pod` counts as lost (its probes all missed for `lost_after` seconds), or None."""
        with self._lock:
            since = self._missing_since.get(pod)
            if since is None:
                return None
            seconds = self._clock() - since
            if seconds < self.policy.lost_after:
                return None
            misses, last = self._misses[pod], self._last_error[pod]
            target = self._targets[pod]
        return (
            f"{self.kind} {pod} does not answer on the pod network: {misses} connects to its sshd at "
            f"{target.address}:{target.port} missed over {seconds:.0f}s (last: {last})"
        )

    def probe_all(self) -> list[str]:
        """Probe every locale once; the reasons of those now lost (ordered by pod name)."""
        pods = self.pods
        if not pods:
            return []
        with ThreadPoolExecutor(max_workers=min(MAX_PROBE_THREADS, len(pods)), thread_name_prefix="liveness") as pool:
            list(pool.map(self._answers_if_followed, pods))
        return [reason for pod in pods if (reason := self.lost(pod)) is not None]

    def rounds(self, stop: threading.Event) -> Iterator[list[str]]:
        """`probe_all()` once per interval, counted from one round's start to the next, until `stop`: a round of
        misses lasts up to the connect timeout, and waiting a whole interval after it would stretch the bound (5
        misses over 20 s) to 5 over 27 s."""
        next_at = self._clock() + self.policy.interval
        while not stop.wait(max(0.0, next_at - self._clock())):
            next_at = max(next_at + self.policy.interval, self._clock())
            yield self.probe_all()

    def _answers_if_followed(self, pod: str) -> None:
        with contextlib.suppress(KeyError):  # retargeted away meanwhile
            self.answers(pod)

    def held_back(self, uids: Mapping[str, str]) -> HeldBack:
        """The locales lost now (by pod name, with the `uids` of the pods that were launched), to keep out of the
        next launch until they answer again."""
        lost = {}
        for pod in self.pods:
            if self.lost(pod) is not None and pod in uids:
                lost[pod] = (uids[pod], self.target(pod))
        return HeldBack(lost, policy=self.policy, connect=self._connect, clock=self._clock)


class HeldBack:
    """Locale pods that were lost for not answering on the pod network. The relaunch waits for each to answer
    again, or for its pod to be replaced (another uid), instead of taking it for Ready: the control plane can still
    call it Ready (its node's loss is told only after the node controller's grace, 50 s by default), and launching
    on it would fail. `reason(pod)` probes a held pod at most once per `policy.interval`."""

    def __init__(
        self,
        lost: Mapping[str, tuple[str, Target]],
        *,
        policy: ProbePolicy = ProbePolicy(),
        connect: Callable[[str, int, float], str | None] = tcp_connect,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lost = dict(lost)
        self._policy = policy
        self._connect = connect
        self._clock = clock
        self._checked: dict[str, tuple[float, str]] = {}  # pod -> when it last missed, and why

    @property
    def pods(self) -> list[str]:
        return sorted(self._lost)

    def reason(self, pod: PodInfo) -> str | None:
        """Why this pod is held back from the launch, or None (not held, replaced, or it answers now)."""
        held = self._lost.get(pod.name)
        if held is None:
            return None
        uid, target = held
        if pod.uid != uid or pod.pod_ip != target.address:
            del self._lost[pod.name]  # a new pod: it starts afresh
            return None
        now = self._clock()
        last = self._checked.get(pod.name)
        if last is None or now - last[0] >= self._policy.interval:
            error = self._connect(target.address, target.port, self._policy.timeout)
            if error is None:
                log.info("locale %s (%s) answers on the pod network again", pod.name, target.address)
                del self._lost[pod.name]
                self._checked.pop(pod.name, None)
                return None
            last = (now, error)
            self._checked[pod.name] = last
        return f"does not answer on the pod network at {target.address}:{target.port}: {last[1]}"
