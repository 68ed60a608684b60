"""The launch's network check (launcher arkouda): did the launch drop datagrams, and where.

The baseline costs no ssh round of its own: the pre-launch probe's session prints each host's /proc/net/snmp
after its leftover check (`baseline`, the probe's `on_counters`). When the program prints Arkouda's splash line
(`server listening on`: every locale is past GASNet's start-up), every host is read again over ssh, in parallel,
in the check's own thread so the program's output keeps flowing; the deltas make one line
(netdrops.report_line), logged at INFO, or at WARNING with an Event `DatagramsDropped` when something was dropped,
and the totals go to a file the metrics sidecar serves. A host that cannot be read is named in the line; nothing
here ever fails the launch.

When the launch is over, `finish` is the one place the check ends, before the server returns or relaunches:
it waits for a running check (within the read bound), so a program that exits right after its splash line is
still checked; it runs the check itself when the program failed before that line (the launch most worth
diagnosing); and on a lost locale it cancels the check first, so a check never reads pods being replaced or
reports into the next launch. After `finish` the check emits and writes nothing.
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
# beyond each read's own bound (the session's timeout): hosts not read by then are reported as such; `finish`
# waits this much longer for the Event and the file
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
        self._lock = threading.Lock()  # guards the fields below
        self._changed = threading.Condition(self._lock)  # a reading arrived, or the check was cancelled
        self._baseline: dict[Host, netdrops.Counters] = {}
        self._hosts: tuple[Host, ...] = ()
        self._fired = False  # a check started (or can no longer start: the launch is over)
        self._thread: threading.Thread | None = None
        self._cancelled = False  # emit nothing, write nothing, stop waiting for the reads
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
        """Each line the program prints: the first splash line starts the check in its thread, once."""
        if SPLASH not in line:
            return
        with self._lock:
            if self._fired or not self._hosts:
                return
            self._fired = True
            # started under the lock: `finish` sees either no check or this thread
            self._thread = threading.Thread(target=self.run, name="launch-network-check", daemon=True)
            self._thread.start()

    def finish(self, *, failed: bool = False, lost: bool = False) -> None:
        """The launch is over: called before the server returns or relaunches. `lost`: a locale was lost (a
        relaunch may follow): a running check is cancelled. `failed`: the program failed by itself; if it never
        printed its splash line (e.g. GASNet gave up on a datagram lost ten times at start-up), the check runs
        now, here. A running check is waited for, within the read bound. Afterwards nothing of this check is
        emitted or written, and no check starts."""
        if lost:
            self.cancel()
        with self._lock:
            run_here = failed and not lost and not self._fired and bool(self._hosts)
            self._fired = True
            thread, hosts = self._thread, len(self._hosts)
        if run_here:
            self.run()
        elif thread is not None:
            bound = self._read_bound(hosts) + JOIN_SLACK  # the reads, then room for the Event and the file
            thread.join(bound)
            if thread.is_alive():
                log.warning("launch network check not done within %gs: given up (no Event, no metrics)", bound)
        self.cancel()

    def cancel(self) -> None:
        """From now on the check emits and writes nothing, and stops waiting for its reads."""
        with self._changed:
            self._cancelled = True
            self._changed.notify_all()

    def _live(self) -> bool:
        with self._lock:
            return not self._cancelled

    def run(self) -> netdrops.Summary | None:
        """Read every host, report; never raises (a failed check is a log line, the program runs on). None when
        the check failed or was cancelled."""
        try:
            return self._check()
        except Exception:  # a diagnosis must never end the launch it diagnoses
            log.warning("launch network check failed", exc_info=True)
            return None
        finally:
            self.done.set()

    def _check(self) -> netdrops.Summary | None:
        with self._lock:
            hosts, baseline = self._hosts, dict(self._baseline)
        started = time.monotonic()
        after = self._read_all(hosts)
        if not self._live():
            log.info("launch network check cancelled: its launch is over (no line, Event or metrics)")
            return None
        checks = [netdrops.compare(h.pod, h.address, baseline.get(h), after[h]) for h in hosts]
        summary = netdrops.summarize(checks)
        self.line = netdrops.report_line(summary)
        log.log(
            logging.WARNING if summary.dropped else logging.INFO,
            "%s (read in %.2fs)",
            self.line,
            time.monotonic() - started,
        )
        if summary.dropped and self._live():
            self._emit(self.line)
        if self._totals is not None and self._live():
            try:
                netdrops.write_totals(self._totals, netdrops.Totals.of(summary))
            except OSError as exc:
                log.warning("cannot write the launch's network totals to %s (no metric): %s", self._totals, exc)
        return summary

    def _read_bound(self, hosts: int) -> float:
        """How long reading `hosts` hosts may take: each read ends within its timeout, and a worker reads
        hosts/workers of them in a row."""
        rounds = -(-hosts // max(1, min(self._max_workers, hosts)))
        return rounds * self._timeout + JOIN_SLACK

    def _read_all(self, hosts: Sequence[Host]) -> dict[Host, netdrops.Counters | str]:
        """Every host's reading or why there is none, in daemon threads (a shutdown never waits for a read), until
        all are in, the read bound passes or the check is cancelled."""
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
                reading = self._read_one(host)
                with self._changed:
                    results[host] = reading
                    self._changed.notify_all()

        for i in range(min(self._max_workers, len(hosts))):
            threading.Thread(target=work, name=f"launch-network-check-{i}", daemon=True).start()
        bound = self._read_bound(len(hosts))
        with self._changed:
            self._changed.wait_for(lambda: self._cancelled or len(results) == len(hosts), timeout=bound)
            got = dict(results)
        missing = f"no reading within {bound:g}s"
        return {h: got.get(h, f"{h.pod} ({h.address}): {missing}") for h in hosts}

    def _read_one(self, host: Host) -> netdrops.Counters | str:
        try:
            return self._read(host)
        except sshprobe.ProbeError as exc:  # names the pod and its address itself
            return str(exc)
        except Exception as exc:  # noqa: BLE001 - one host's failure is named in the report, never fatal
            return f"{host.pod} ({host.address}): {type(exc).__name__}: {exc}"
