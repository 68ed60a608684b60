"""The launch's network check (launcher arkouda): did the launch drop datagrams, and where.

The baseline costs no ssh round of its own: the pre-launch probe's session prints each host's /proc/net/snmp
after its leftover check (`baseline`, the probe's `on_counters`). When the program prints Arkouda's splash line
(`server listening on`: every locale is past GASNet's start-up), every host is read again over ssh, in parallel,
in daemon threads so the program's output keeps flowing (or, when the program fails before printing it, as it
exits); the deltas make one line (netdrops.report_line), logged
at INFO, or at WARNING with an Event `DatagramsDropped` when something was dropped, and the totals go to a file
the metrics sidecar serves. A host that cannot be read is named in the line; nothing here ever fails the launch.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from arkouda_bootstrap import netdrops
from arkouda_bootstrap.ssh import probe as sshprobe
from arkouda_bootstrap.ssh.client import MAX_PROBE_THREADS, Host

log = logging.getLogger(__name__)

# In the real Arkouda server's splash box and in the stand-in's (docker/arkouda/standin)
SPLASH = "server listening on"
# beyond each read's own bound (the session's timeout): threads still not done by then are reported as such
JOIN_SLACK = 5.0


class LaunchCheck:
    """One launch's check. `read(host)` reads a host's counters (one bounded ssh session; a ProbeError names the
    host), `emit(line)` records the Event, `totals` is where the last launch's totals are written (None: not)."""

    def __init__(
        self,
        *,
        read: Callable[[Host], netdrops.Counters],
        emit: Callable[[str], None],
        totals: Path | None,
        timeout: float,
        max_workers: int = MAX_PROBE_THREADS,
    ) -> None:
        self._read = read
        self._emit = emit
        self._totals = totals
        self._timeout = timeout
        self._max_workers = max(1, max_workers)
        self._lock = threading.Lock()
        self._baseline: dict[Host, netdrops.Counters] = {}
        self._hosts: tuple[Host, ...] = ()
        self._fired = False
        self.done = threading.Event()  # set once the report is out (tests)
        self.line: str | None = None

    def baseline(self, host: Host, counters: netdrops.Counters) -> None:
        """The probe's reading of `host` (called from the probe threads)."""
        with self._lock:
            self._baseline[host] = counters

    def launching(self, hosts: Sequence[Host]) -> None:
        """The launch's host list (the probe may have read pods that left it since)."""
        with self._lock:
            self._hosts = tuple(hosts)

    def output(self, line: str) -> None:
        """Each line the program prints: the first splash line starts the check, once."""
        if SPLASH not in line:
            return
        with self._lock:
            if self._fired or not self._hosts:
                return
            self._fired = True
        threading.Thread(target=self.run, name="launch-network-check", daemon=True).start()

    def failed(self) -> None:
        """The program failed without printing its splash line (e.g. GASNet gave up on a datagram lost ten times
        at start-up): check now, in the caller's thread, so the line is out before the server exits. Once."""
        with self._lock:
            if self._fired or not self._hosts:
                return
            self._fired = True
        self.run()

    def run(self) -> netdrops.Summary | None:
        """Read every host, report; never raises (a failed check is a log line, the program runs on)."""
        try:
            return self._check()
        except Exception:  # a diagnosis must never end the launch it diagnoses
            log.warning("launch network check failed", exc_info=True)
            return None
        finally:
            self.done.set()

    def _check(self) -> netdrops.Summary:
        with self._lock:
            hosts, baseline = self._hosts, dict(self._baseline)
        started = time.monotonic()
        after = self._read_all(hosts)
        checks = [netdrops.compare(h.pod, h.address, baseline.get(h), after[h]) for h in hosts]
        summary = netdrops.summarize(checks)
        self.line = netdrops.report_line(summary)
        log.log(
            logging.WARNING if summary.dropped else logging.INFO,
            "%s (read in %.2fs)",
            self.line,
            time.monotonic() - started,
        )
        if summary.dropped:
            self._emit(self.line)
        if self._totals is not None:
            try:
                netdrops.write_totals(self._totals, netdrops.Totals.of(summary))
            except OSError as exc:
                log.warning("cannot write the launch's network totals to %s (no metric): %s", self._totals, exc)
        return summary

    def _read_all(self, hosts: Sequence[Host]) -> dict[Host, netdrops.Counters | str]:
        """Every host's reading or why there is none, in daemon threads (a shutdown never waits for a read)."""
        results: dict[Host, netdrops.Counters | str] = {}
        todo: queue.SimpleQueue[Host] = queue.SimpleQueue()
        for host in hosts:
            todo.put(host)

        def work() -> None:
            while True:
                try:
                    host = todo.get_nowait()
                except queue.Empty:
                    return
                results[host] = self._read_one(host)

        workers = [
            threading.Thread(target=work, name=f"launch-network-check-{i}", daemon=True)
            for i in range(min(self._max_workers, len(hosts)))
        ]
        for worker in workers:
            worker.start()
        # each read ends within its timeout; a worker reads len(hosts)/workers hosts in a row
        rounds = -(-len(hosts) // max(1, len(workers)))
        deadline = time.monotonic() + rounds * self._timeout + JOIN_SLACK
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        missing = f"no reading within {rounds * self._timeout + JOIN_SLACK:g}s"
        return {h: results.get(h, f"{h.pod} ({h.address}): {missing}") for h in hosts}

    def _read_one(self, host: Host) -> netdrops.Counters | str:
        try:
            return self._read(host)
        except sshprobe.ProbeError as exc:  # names the pod and its address itself
            return str(exc)
        except Exception as exc:  # noqa: BLE001 - one host's failure is named in the report, never fatal
            return f"{host.pod} ({host.address}): {type(exc).__name__}: {exc}"
