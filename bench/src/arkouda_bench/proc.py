"""CPU accounting for the processes a bench starts: reaped children (getrusage) and live ones (/proc)."""

from __future__ import annotations

import os
import resource
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    """User+system CPU seconds of every child this process has reaped so far (take deltas around a step)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def pid_cpu(pid: int, *, with_reaped_children: bool = False) -> float:
    """CPU seconds of a live process (0.0 when it is gone).

    Its own time is the scheduler's nanosecond runtime summed over its threads (/proc/<pid>/task/*/schedstat),
    because the tick-truncated utime/stime of /proc/<pid>/stat lose the few milliseconds a short-lived
    connection process spends. With `with_reaped_children` the CPU of the children it has already waited for
    is added (cutime/cstime), which is how a forking server's per-connection work is counted.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        own_ns = 0
        for task in Path(f"/proc/{pid}/task").iterdir():
            own_ns += int((task / "schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    # The command name (field 2) may contain spaces and parentheses: split after its closing ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    cutime, cstime = (int(x) for x in fields[13:15])
    return own_ns / 1e9 + (((cutime + cstime) / _TICK) if with_reaped_children else 0.0)


def live_children(pid: int) -> list[int]:
    """PIDs of the direct children a live process has now (empty when it has none or is gone)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]
