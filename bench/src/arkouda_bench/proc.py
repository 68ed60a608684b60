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
    """User+system CPU seconds of a live process from /proc/<pid>/stat (0.0 when it is gone).

    With `with_reaped_children` the CPU of the children it has already waited for is added (cutime/cstime),
    which is how a forking server's per-connection work is counted.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    # The command name (field 2) may contain spaces and parentheses: split after its closing ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    ticks = utime + stime + ((cutime + cstime) if with_reaped_children else 0)
    return ticks / _TICK


def live_children(pid: int) -> list[int]:
    """PIDs of the direct children a live process has now (empty when it has none or is gone)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]
