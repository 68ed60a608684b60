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

import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

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
    ) -> None:
        self.policy = policy
        self._targets = dict(targets)
        self._connect = connect
        self._clock = clock
        self._missing_since: dict[str, float] = {}  # pod -> when its first miss of the current streak began
        self._misses: dict[str, int] = {}
        self._last_error: dict[str, str] = {}
        self._lock = threading.Lock()  # the probe thread and the pod watch's NotReady check both probe

    @property
    def pods(self) -> list[str]:
        return sorted(self._targets)

    def target(self, pod: str) -> Target:
        return self._targets[pod]

    def answers(self, pod: str) -> bool:
        """Probe `pod` once now; True when it answered (its miss streak ends), else the streak grows."""
        target = self._targets[pod]
        started = self._clock()
        error = self._connect(target.address, target.port, self.policy.timeout)
        with self._lock:
            if error is None:
                if self._misses.pop(pod, 0):
                    log.info("locale %s (%s) answers on the pod network again", pod, target.address)
                self._missing_since.pop(pod, None)
                return True
            self._missing_since.setdefault(pod, started)
            self._misses[pod] = self._misses.get(pod, 0) + 1
            self._last_error[pod] = error
        log.warning(
            "locale %s (%s:%d) did not answer: %s (miss %d, for %.0fs; lost after %gs)",
            pod,
            target.address,
            target.port,
            error,
            self._misses[pod],
            self._clock() - self._missing_since[pod],
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
            f"locale {pod} does not answer on the pod network: {misses} connects to its sshd at "
            f"{target.address}:{target.port} missed over {seconds:.0f}s (last: {last})"
        )

    def probe_all(self) -> list[str]:
        """Probe every locale once; the reasons of those now lost (ordered by pod name)."""
        pods = self.pods
        if not pods:
            return []
        with ThreadPoolExecutor(max_workers=min(MAX_PROBE_THREADS, len(pods)), thread_name_prefix="liveness") as pool:
            list(pool.map(self.answers, pods))
        return [reason for pod in pods if (reason := self.lost(pod)) is not None]
