"""netdrops: /proc/net/snmp parsed (a real sample from a Linux 6 host), per-host deltas, the one report line for
each outcome, and the totals file the exporter reads."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from arkouda_bootstrap import netdrops
from arkouda_bootstrap.netdrops import Counters

# `cat /proc/net/snmp` on the development VM (kernel 6.x: Ip has OutTransmits, Udp has MemErrors)
SAMPLE = """\
Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers \
OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates \
OutTransmits
Ip: 1 64 9348812 0 0 256965 0 0 9091790 9046397 7 0 0 2181690 49788 0 49788 0 2181690 10634900
Icmp: InMsgs InErrors InCsumErrors InDestUnreachs InTimeExcds InParmProbs InSrcQuenchs InRedirects InEchos \
InEchoReps InTimestamps InTimestampReps InAddrMasks InAddrMaskReps OutMsgs OutErrors OutRateLimitGlobal \
OutRateLimitHost OutDestUnreachs OutTimeExcds OutParmProbs OutSrcQuenchs OutRedirects OutEchos OutEchoReps \
OutTimestamps OutTimestampReps OutAddrMasks OutAddrMaskReps
Icmp: 835 4 0 835 0 0 0 0 0 0 0 0 0 0 1505 0 0 56 1505 0 0 0 0 0 0 0 0 0 0
IcmpMsg: InType3 OutType3
IcmpMsg: 835 1505
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs \
OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 75419 60672 13330 27557 158 9088305 9835696 40011 0 42446 0
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 2650 0 3 2655 1 5 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 0 0 0 0 0
"""

SNDBUF_HINT = "raise net.ipv4.neigh.default.gc_thresh1/2/3 on the nodes (docs/launch-at-scale.md)"


def test_parse_takes_the_udp_and_ip_counters_not_udplites() -> None:
    assert netdrops.parse_snmp(SAMPLE) == Counters(
        out_discards=7, in_datagrams=2650, out_datagrams=2655, in_errors=3, rcvbuf_errors=1, sndbuf_errors=5
    )


def test_parse_skips_the_leftover_checks_count_before_it() -> None:
    assert netdrops.parse_snmp("ended=2\n" + SAMPLE).in_datagrams == 2650


def test_this_hosts_own_file_parses() -> None:
    counters = netdrops.read_local()
    assert counters.out_datagrams >= 0
    assert not counters.went_back


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("ended=0\n", "no Ip OutDiscards, Udp InDatagrams"),
        (SAMPLE.replace("Udp: 2650 0 3 2655 1 5 0 0 0\n", ""), "no Udp InDatagrams, Udp OutDatagrams"),
        (SAMPLE.replace(" SndbufErrors ", " Other "), "no Udp SndbufErrors in /proc/net/snmp"),
    ],
)
def test_parse_names_what_is_missing(text: str, says: str) -> None:
    with pytest.raises(netdrops.CountersError, match=says):
        netdrops.parse_snmp(text)


BASE = Counters(out_discards=10, in_datagrams=100, out_datagrams=100, in_errors=2, rcvbuf_errors=1, sndbuf_errors=4)


def after(**more: int) -> Counters:
    return Counters(**{k: getattr(BASE, k) + more.get(k, 0) for k in netdrops.FIELDS})


def test_a_delta_counts_one_refused_datagram_once_on_each_side() -> None:
    delta = after(sndbuf_errors=5, out_discards=6, rcvbuf_errors=2, in_errors=3).minus(BASE)
    # a datagram refused for want of a neighbour is in SndbufErrors and OutDiscards: the larger, not the sum
    assert (delta.sender, delta.receiver, delta.dropped) == (6, 3, 9)


def test_no_drop_on_every_host() -> None:
    checks = [
        netdrops.compare(f"ak-locale-{i}", f"10.0.0.{i}", BASE, after(in_datagrams=40 + i, out_datagrams=50))
        for i in range(3)
    ]
    assert netdrops.report_line(netdrops.summarize(checks)) == (
        "launch network check: no datagram dropped on 3 hosts (udp out 150, in 123)"
    )


def test_sender_drops_name_the_hosts_and_the_neighbour_table() -> None:
    checks = [
        netdrops.compare("ak-server-0", "10.0.0.1", BASE, after(sndbuf_errors=168, out_discards=168)),
        netdrops.compare("ak-locale-1", "10.0.0.2", BASE, after(out_datagrams=9)),
        netdrops.compare("ak-locale-2", "10.0.0.3", BASE, after(sndbuf_errors=94, out_discards=94)),
        netdrops.compare("ak-locale-3", "10.0.0.4", BASE, after(sndbuf_errors=100, out_discards=101)),
        netdrops.compare("ak-locale-4", "10.0.0.5", BASE, after(sndbuf_errors=1, out_discards=1)),
    ]
    summary = netdrops.summarize(checks)
    assert (summary.dropped, summary.dropping, summary.checked) == (364, 4, 5)
    assert netdrops.report_line(summary) == (
        "launch network check: 364 datagrams dropped on 4 of 5 hosts (sender: SndbufErrors 363, OutDiscards 364; "
        "receiver: RcvbufErrors 0, InErrors 0); most: ak-server-0 (10.0.0.1) 168, ak-locale-3 (10.0.0.4) 101, "
        "ak-locale-2 (10.0.0.3) 94, ...: GASNet resends a dropped datagram only after its timeout (0.1 s, "
        "doubling), so drops slow the launch by seconds: sender-side drops on a bridge pod network are most often "
        "the node's neighbour table overflowing (kernel log 'neighbor table overflow'): " + SNDBUF_HINT
    )


def test_the_totals_add_up_each_hosts_own_count_not_the_larger_per_field_sum() -> None:
    """One host's refusals show in SndbufErrors only, another's in OutDiscards only: 5 + 7 datagrams were
    dropped, not max(5, 7). The headline, the `most:` list and the totals the metrics serve agree."""
    checks = [
        netdrops.compare("ak-locale-1", "10.0.0.2", BASE, after(sndbuf_errors=5)),
        netdrops.compare("ak-locale-2", "10.0.0.3", BASE, after(out_discards=7)),
        netdrops.compare("ak-locale-3", "10.0.0.4", BASE, after(rcvbuf_errors=2)),
        netdrops.compare("ak-locale-4", "10.0.0.5", BASE, after(in_errors=3)),
    ]
    summary = netdrops.summarize(checks)
    assert (summary.sender, summary.receiver, summary.dropped) == (12, 5, 17)
    line = netdrops.report_line(summary)
    assert line.startswith(
        "launch network check: 17 datagrams dropped on 4 of 4 hosts (sender: SndbufErrors 5, OutDiscards 7; "
        "receiver: RcvbufErrors 2, InErrors 3); most: ak-locale-2 (10.0.0.3) 7, ak-locale-1 (10.0.0.2) 5, "
        "ak-locale-4 (10.0.0.5) 3, ...: GASNet resends"
    )
    totals = netdrops.Totals.of(summary, now=0.0)
    assert (totals.sender, totals.receiver) == (12, 5)


def test_receiver_drops_point_at_the_socket_buffers_not_the_neighbour_table() -> None:
    checks = [
        netdrops.compare("ak-locale-1", "10.0.0.2", BASE, after(rcvbuf_errors=2, in_errors=2)),
        netdrops.compare("ak-locale-2", "10.0.0.3", BASE, after()),
    ]
    line = netdrops.report_line(netdrops.summarize(checks))
    assert line.startswith(
        "launch network check: 2 datagrams dropped on 1 of 2 hosts (sender: SndbufErrors 0, OutDiscards 0; "
        "receiver: RcvbufErrors 2, InErrors 2); most: ak-locale-1 (10.0.0.2) 2: GASNet resends"
    )
    assert line.endswith(
        "receiver-side drops are full socket buffers: AMUDP asks for 4 MiB, capped by net.core.rmem_max on the nodes"
    )
    assert "neighbour" not in line


def test_a_host_without_baseline_or_reading_is_named_and_not_counted() -> None:
    checks = [
        netdrops.compare("ak-server-0", "10.0.0.1", None, after(sndbuf_errors=50)),
        netdrops.compare("ak-locale-1", "10.0.0.2", BASE, "pod ak-locale-1 (10.0.0.2): cannot connect to port 2222"),
        netdrops.compare("ak-locale-2", "10.0.0.3", BASE, after(out_datagrams=4, in_datagrams=5)),
    ]
    summary = netdrops.summarize(checks)
    assert (summary.hosts, summary.checked, summary.dropped) == (3, 1, 0)
    assert netdrops.report_line(summary) == (
        "launch network check: no datagram dropped on 1 of 3 hosts (udp out 4, in 5); not checked: "
        "ak-server-0 (10.0.0.1): no baseline; pod ak-locale-1 (10.0.0.2): cannot connect to port 2222"
    )


def test_drops_with_an_unchecked_host_keep_the_hint_before_the_list() -> None:
    checks = [
        netdrops.compare("ak-locale-1", "10.0.0.2", BASE, after(sndbuf_errors=3, out_discards=3)),
        netdrops.compare("ak-locale-2", "10.0.0.3", None, after()),
    ]
    line = netdrops.report_line(netdrops.summarize(checks))
    assert line.startswith("launch network check: 3 datagrams dropped on 1 of 1 checked hosts (")
    assert line.endswith(SNDBUF_HINT + "; not checked: ak-locale-2 (10.0.0.3): no baseline")


def test_counters_that_went_back_are_another_sandbox_not_a_check() -> None:
    check = netdrops.compare("ak-locale-1", "10.0.0.2", BASE, replace(BASE, out_datagrams=3))
    assert check.delta is None
    assert check.problem == "ak-locale-1 (10.0.0.2): counters went back (a new pod sandbox?)"


def test_no_host_readable_at_all() -> None:
    checks = [netdrops.compare(f"p{i}", f"10.0.0.{i}", None, after()) for i in range(5)]
    assert netdrops.report_line(netdrops.summarize(checks)) == (
        "launch network check: none of 5 hosts could be checked; not checked: p0 (10.0.0.0): no baseline; "
        "p1 (10.0.0.1): no baseline; p2 (10.0.0.2): no baseline; +2 more"
    )


def test_totals_file_round_trip_and_nothing_left_beside_it(tmp_path: Path) -> None:
    path = tmp_path / "launch" / "network.json"
    assert netdrops.read_totals(path) is None
    checks = [
        netdrops.compare("a", "10.0.0.1", BASE, after(sndbuf_errors=7, out_discards=7, in_errors=1)),
        netdrops.compare("b", "10.0.0.2", None, after()),
    ]
    totals = netdrops.Totals.of(netdrops.summarize(checks), now=1765000000.5)
    netdrops.write_totals(path, totals)
    assert netdrops.read_totals(path) == netdrops.Totals(
        sender=7, receiver=1, hosts=2, checked=1, dropping=1, checked_at=1765000000.5
    )
    assert [p.name for p in path.parent.iterdir()] == ["network.json"]
    assert path.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[]", "not a JSON object"),
        ('{"sender": "x"}', "field sender is 'x', not a finite number"),
        ("{", "Expecting property name"),
        # json takes these (int() of the first two raises OverflowError, not ValueError)
        ('{"sender": Infinity}', "field sender is inf, not a finite number"),
        ('{"sender": 1, "receiver": 1e999}', "field receiver is inf, not a finite number"),
        ('{"sender": NaN}', "field sender is nan, not a finite number"),
    ],
)
def test_a_totals_file_we_did_not_write_is_refused(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "network.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=says):
        netdrops.read_totals(path)
