"""One line saying why an mpirun run failed, from the end of its output.

OpenMPI explains a failure in a multi-line box (its help-*.txt messages); a Job's status, its Events and the
container's termination message want one line. The patterns are OpenMPI 4.1's (Debian bookworm's openmpi-bin in
the mpi image), matched on the output with its line breaks folded, so a wrapped sentence still matches; anything
else falls back to the last line the program printed.

OpenMPI 4.1 does not always print the box that names the failed rank: when ranks die together (seen with every
rank of `sh -c 'kill -SEGV $$'`, and now and then with one of two) only its first box, "1 process returned a
non-zero exit code", comes out before mpirun exits. Then the line says so and reads the signal out of mpirun's
status, which it takes from the first failed process (128+N when a signal N killed it).
"""

from __future__ import annotations

import logging
import re
import signal
from collections.abc import Callable, Sequence

log = logging.getLogger(__name__)

_BOX_RULE = re.compile(r"^-{10,}$")
# (pattern on the folded text, how to say it); the first match wins, so the most specific comes first
_EXPLAINED: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (
        re.compile(r"could not access or execute an executable: Executable: (\S+) Node: (\S+)"),
        lambda m: f"{m[1]} cannot be executed on node {m[2]}: it is not in the image or not executable",
    ),
    (
        re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+) \(([^)]*)\)"),
        lambda m: f"rank {m[1]} on node {m[2]} was killed by signal {m[3]} ({m[4]})",
    ),
    (
        re.compile(r"The first process to do so was: Process name: \[\[\d+,\d+\],(\d+)\] Exit code: (\d+)"),
        lambda m: f"rank {m[1]} exited with code {m[2]}",
    ),
    (
        re.compile(r"not enough slots available in the system to satisfy the (\d+) slots"),
        lambda m: (
            f"the hostfile cannot place {m[1]} processes: not enough slots (server.mpi.slotsPerLocale per "
            "locale; check -np and the mapping options in server.mpi.mpirunArgs)"
        ),
    ),
)
# OpenMPI's first box alone (the one naming the rank did not come): how many, and no rank to name
_UNNAMED = re.compile(r"Primary job terminated normally, but (\d+) process(?:es)? returned a non-zero exit code")


def failure_reason(lines: Sequence[str], *, exit_code: int) -> str:
    """Why a run that exited with `exit_code` failed, in one line; `lines` is the end of its output."""
    folded = " ".join(line.strip() for line in lines if line.strip() and not _BOX_RULE.match(line.strip()))
    folded = re.sub(r"\s+", " ", folded)
    for pattern, say in _EXPLAINED:
        if (m := pattern.search(folded)) is not None:
            return f"mpirun exited with status {exit_code}: {say(m)}"
    if (m := _UNNAMED.search(folded)) is not None:
        count = f"{m[1]} process" if m[1] == "1" else f"{m[1]} processes"
        said = f"{count} ended with a non-zero status and OpenMPI did not name the rank{_as_signal(exit_code)}"
        return f"mpirun exited with status {exit_code}: {said}"
    last = next((ln.strip() for ln in reversed(lines) if ln.strip() and not _BOX_RULE.match(ln.strip())), "")
    if last:
        return f"the program exited with status {exit_code}; its last output line: {last[:300]}"
    return f"the program exited with status {exit_code} without output"


def _as_signal(exit_code: int) -> str:
    """What the shell convention 128+N reads as, when N is a signal; "" otherwise."""
    try:
        sig = signal.Signals(exit_code - 128)
    except ValueError:
        return ""
    return f"; {exit_code} = 128+{sig.value}: killed by signal {sig.value} ({signal.strsignal(sig) or sig.name})"
