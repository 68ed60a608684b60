"""Datagrams a launch dropped, from each host's `/proc/net/snmp`: the counters, their per-host deltas, the one
report line, and the last launch's totals as a small JSON file (written by `server`, served by `exporter`).

GASNet's udp conduit (AMUDP) treats a datagram the kernel refuses to send (ENOBUFS) like one lost on the wire and
resends it only after its timeout (0.1 s, doubling), so a few drops at first contact cost the launch seconds and
look like a slow cluster. The kernel counts them per network namespace, i.e. per pod: a sender's failed neighbour
(ARP) entry shows in `Udp: SndbufErrors` and `Ip: OutDiscards`, a full receive buffer in `Udp: RcvbufErrors`
(also counted in `InErrors`). Here and in `exporter` only: no paramiko, no Kubernetes client.
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

log = logging.getLogger(__name__)

SNMP_PATH = "/proc/net/snmp"
# (section, field) of /proc/net/snmp for each Counters attribute
FIELDS = {
    "out_discards": ("Ip", "OutDiscards"),
    "in_datagrams": ("Udp", "InDatagrams"),
    "out_datagrams": ("Udp", "OutDatagrams"),
    "in_errors": ("Udp", "InErrors"),
    "rcvbuf_errors": ("Udp", "RcvbufErrors"),
    "sndbuf_errors": ("Udp", "SndbufErrors"),
}
MOST = 3  # hosts named as dropping the most
UNCHECKED_SHOWN = 3  # hosts named as not checked, before "+N more"
RESEND_NOTE = (
    "GASNet resends a dropped datagram only after its timeout (0.1 s, doubling), so drops slow the launch by seconds"
)
SENDER_HINT = (
    "sender-side drops on a bridge pod network are most often the node's neighbour table overflowing (kernel log "
    "'neighbor table overflow'): raise net.ipv4.neigh.default.gc_thresh1/2/3 on the nodes (docs/launch-at-scale.md)"
)
RECEIVER_HINT = (
    "receiver-side drops are full socket buffers: AMUDP asks for 4 MiB, capped by net.core.rmem_max on the nodes"
)


class CountersError(ValueError):
    """Text that is not a /proc/net/snmp with the counters we need."""


@dataclass(frozen=True)
class Counters:
    """The counters of one network namespace that tell a dropped datagram; a difference of two readings is a
    Counters too (`after.minus(before)`)."""

    out_discards: int = 0
    in_datagrams: int = 0
    out_datagrams: int = 0
    in_errors: int = 0
    rcvbuf_errors: int = 0
    sndbuf_errors: int = 0

    def minus(self, before: Counters) -> Counters:
        return Counters(**{f.name: getattr(self, f.name) - getattr(before, f.name) for f in fields(self)})

    @property
    def went_back(self) -> bool:
        """A delta with a counter that decreased: not the same network namespace (a new pod sandbox)."""
        return any(getattr(self, f.name) < 0 for f in fields(self))

    @property
    def sender(self) -> int:
        # one refused datagram is counted in both: the larger is the count, not the sum
        return max(self.sndbuf_errors, self.out_discards)

    @property
    def receiver(self) -> int:
        # InErrors includes RcvbufErrors
        return max(self.rcvbuf_errors, self.in_errors)

    @property
    def dropped(self) -> int:
        return self.sender + self.receiver


def parse_snmp(text: str) -> Counters:
    """/proc/net/snmp: per section a line of field names, then a line of values, both prefixed `<Section>:`.
    Other lines (the leftover check's `ended=N`) are ignored. CountersError names what is missing."""
    names: dict[str, list[str]] = {}
    values: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        section, colon, rest = line.partition(":")
        if not colon or not section.isalpha():
            continue
        words = rest.split()
        if section not in names:
            names[section] = words
        elif section not in values:
            values[section] = dict(zip(names[section], words, strict=False))
    counters: dict[str, int] = {}
    missing: list[str] = []
    for attribute, (section, name) in FIELDS.items():
        raw = values.get(section, {}).get(name)
        if raw is None or not raw.isdigit():
            missing.append(f"{section} {name}")
            continue
        counters[attribute] = int(raw)
    if missing:
        raise CountersError(f"no {', '.join(missing)} in {SNMP_PATH}: {text[:120]!r}")
    return Counters(**counters)


def read_local(path: str = SNMP_PATH) -> Counters:
    """This process's network namespace (tests, and a reading without ssh)."""
    return parse_snmp(Path(path).read_text(encoding="ascii"))


@dataclass(frozen=True)
class HostCheck:
    """One host of the launch: its delta, or why it was not checked (`problem`, a phrase naming the host)."""

    pod: str
    address: str
    delta: Counters | None = None
    problem: str = ""

    @property
    def name(self) -> str:
        return f"{self.pod} ({self.address})"


def compare(pod: str, address: str, before: Counters | None, after: Counters | str) -> HostCheck:
    """`after` is the reading after the launch, or why it failed (a phrase that names the host)."""
    if isinstance(after, str):
        return HostCheck(pod, address, problem=after)
    if before is None:
        return HostCheck(pod, address, problem=f"{pod} ({address}): no baseline")
    delta = after.minus(before)
    if delta.went_back:
        return HostCheck(pod, address, problem=f"{pod} ({address}): counters went back (a new pod sandbox?)")
    return HostCheck(pod, address, delta=delta)


@dataclass(frozen=True)
class Summary:
    """A launch's check over all its hosts. `sender` and `receiver` are the sums of each host's own count (the
    larger of its two counters on that side), so `dropped` is the sum of the hosts' `dropped`; `total`, the sum
    of each counter over the hosts, is the detail the line shows."""

    hosts: int
    checked: int
    dropping: int
    total: Counters
    sender: int = 0
    receiver: int = 0
    most: tuple[HostCheck, ...] = ()
    unchecked: tuple[HostCheck, ...] = ()

    @property
    def dropped(self) -> int:
        return self.sender + self.receiver


def summarize(checks: Sequence[HostCheck]) -> Summary:
    deltas = [c.delta for c in checks if c.delta is not None]
    total = Counters(**{f.name: sum(getattr(d, f.name) for d in deltas) for f in fields(Counters)})
    dropping = sorted(
        (c for c in checks if c.delta is not None and c.delta.dropped > 0),
        key=lambda c: -c.delta.dropped if c.delta is not None else 0,
    )
    return Summary(
        hosts=len(checks),
        checked=len(deltas),
        dropping=len(dropping),
        total=total,
        # each host's own count, summed: one host's drops in SndbufErrors and another's in OutDiscards are both
        # drops, which the larger of the two per-field sums would undercount
        sender=sum(d.sender for d in deltas),
        receiver=sum(d.receiver for d in deltas),
        most=tuple(dropping[:MOST]),
        unchecked=tuple(c for c in checks if c.delta is None),
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def report_line(summary: Summary) -> str:
    """The one line of the launch's network check (log, Event)."""
    t = summary.total
    of = str(summary.hosts) if summary.checked == summary.hosts else f"{summary.checked} of {summary.hosts}"
    if summary.checked == 0:
        head = f"launch network check: none of {_plural(summary.hosts, 'host')} could be checked"
    elif summary.dropped == 0:
        head = (
            f"launch network check: no datagram dropped on {of} hosts (udp out {t.out_datagrams}, in {t.in_datagrams})"
        )
    else:
        most = ", ".join(f"{c.name} {c.delta.dropped}" for c in summary.most if c.delta is not None)
        more = ", ..." if summary.dropping > len(summary.most) else ""
        among = str(summary.hosts) if summary.checked == summary.hosts else f"{summary.checked} checked"
        head = (
            f"launch network check: {_plural(summary.dropped, 'datagram')} dropped on {summary.dropping} of "
            f"{among} hosts (sender: SndbufErrors {t.sndbuf_errors}, OutDiscards "
            f"{t.out_discards}; receiver: RcvbufErrors {t.rcvbuf_errors}, InErrors {t.in_errors}); "
            f"most: {most}{more}"
        )
    notes = []
    if summary.dropped:
        notes.append(RESEND_NOTE)
        if summary.sender:
            notes.append(SENDER_HINT)
        if summary.receiver:
            notes.append(RECEIVER_HINT)
    line = ": ".join([head, *notes])
    if summary.unchecked:
        # last: an Event's message is cut at 1024 characters, and the hosts matter less than the hint
        shown = "; ".join(c.problem for c in summary.unchecked[:UNCHECKED_SHOWN])
        extra = len(summary.unchecked) - UNCHECKED_SHOWN
        line += f"; not checked: {shown}" + (f"; +{extra} more" if extra > 0 else "")
    return line


# ----------------------------------------------------------------------------------------------------------
# the totals file: the last launch's check, for the exporter's gauges


@dataclass(frozen=True)
class Totals:
    """What the exporter serves: the last launch's drops by side and its host counts, and when it was checked."""

    sender: int
    receiver: int
    hosts: int
    checked: int
    dropping: int
    checked_at: float  # Unix time

    @classmethod
    def of(cls, summary: Summary, *, now: float | None = None) -> Totals:
        return cls(
            sender=summary.sender,
            receiver=summary.receiver,
            hosts=summary.hosts,
            checked=summary.checked,
            dropping=summary.dropping,
            checked_at=time.time() if now is None else now,
        )


def write_totals(path: Path, totals: Totals) -> None:
    """Atomically (a temp file in the same directory, renamed): a scrape never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({f.name: getattr(totals, f.name) for f in fields(totals)}, sort_keys=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text + "\n")
        # the exporter runs as another container, maybe under another uid of the pod's group
        Path(temp).chmod(0o644)
        Path(temp).replace(path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def read_totals(path: Path) -> Totals | None:
    """None when there is no file yet (no launch checked); ValueError for a file that is not what we write (a
    non-finite number too: json takes Infinity, NaN and 1e999, which int() refuses with an OverflowError)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    data = json.loads(text)
    if not isinstance(data, Mapping):
        raise ValueError(f"{path}: not a JSON object")
    values: dict[str, float] = {}
    for f in fields(Totals):
        value = data.get(f.name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"{path}: field {f.name} is {value!r}, not a finite number")
        values[f.name] = value
    return Totals(
        sender=int(values["sender"]),
        receiver=int(values["receiver"]),
        hosts=int(values["hosts"]),
        checked=int(values["checked"]),
        dropping=int(values["dropping"]),
        checked_at=float(values["checked_at"]),
    )
