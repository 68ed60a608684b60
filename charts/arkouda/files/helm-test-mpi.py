"""helm test (mpi mode): fetch the hybrid hello output the server pod serves after mpirun succeeded and check
that every (rank, thread) line appears exactly once, with the expected sizes, over numLocales hosts.

Environment (set by templates/tests/test-pod.yaml): RESULTS_URL, EXPECTED_RANKS, EXPECTED_THREADS,
EXPECTED_HOSTS, LINE_PATTERN (tests.mpiLinePattern), TIMEOUT_SECONDS. Standard library only (the image's python3).
"""

from __future__ import annotations

import collections
import os
import re
import sys
import time
import urllib.request
from collections.abc import Mapping


def fetch(url: str, *, timeout: float) -> str:
    """The served output, retried until `timeout`; exits with one line naming the URL when it never comes."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - the release's own Service
                return str(resp.read().decode("utf-8", "replace"))
        except OSError as exc:
            if time.monotonic() > deadline:
                sys.exit(
                    f"FAIL: no MPI output at {url} ({exc}); see `kubectl logs` of the server pod, container server"
                )
            time.sleep(2)


def check(text: str, *, pattern: re.Pattern[str], ranks: int, threads: int, hosts_expected: int) -> list[str]:
    """Every problem with the output (empty when it is right); matching lines are printed."""
    seen: collections.Counter[tuple[int, int]] = collections.Counter()
    hosts: set[str] = set()
    errors: list[str] = []
    for line in text.splitlines():
        m = pattern.search(line)
        if not m:
            continue
        print(line)
        g = m.groupdict()
        seen[(int(g["rank"]), int(g["thread"]))] += 1
        if int(g["size"]) != ranks:
            errors.append(f"line reports {g['size']} processes, expected {ranks}: {line}")
        if int(g["threads"]) != threads:
            errors.append(f"line reports {g['threads']} threads, expected {threads} (server.mpi.ompThreads): {line}")
        if g.get("host"):
            hosts.add(g["host"])
    for rank in range(ranks):
        for thread in range(threads):
            n = seen[(rank, thread)]
            if n != 1:
                errors.append(f"rank {rank} thread {thread} appears {n} times, expected once")
    if "host" in pattern.groupindex and len(hosts) != hosts_expected:
        errors.append(f"ranks ran on {len(hosts)} hosts {sorted(hosts)}, expected {hosts_expected} (global.numLocales)")
    return errors


def main(environ: Mapping[str, str]) -> int:
    ranks, threads = int(environ["EXPECTED_RANKS"]), int(environ["EXPECTED_THREADS"])
    hosts = int(environ["EXPECTED_HOSTS"])
    pattern = re.compile(environ["LINE_PATTERN"])
    text = fetch(environ["RESULTS_URL"], timeout=float(environ["TIMEOUT_SECONDS"]))
    errors = check(text, pattern=pattern, ranks=ranks, threads=threads, hosts_expected=hosts)
    for e in errors:
        print("FAIL:", e)
    if errors:
        print(f"FAIL: {len(errors)} problems in the MPI output (pattern tests.mpiLinePattern)")
        return 1
    print(f"PASS: {ranks} ranks x {threads} threads, every line exactly once, on {hosts} hosts")
    return 0


if __name__ == "__main__":
    sys.exit(main(os.environ))
