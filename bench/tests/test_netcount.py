"""The drop counters of the launch rows: /proc/net/snmp of a pod, the host's neighbour table overflows."""

from __future__ import annotations

import pytest

from arkouda_bench.netcount import Drops, launch_drops, parse_snmp, parse_table_fulls
from arkouda_bench.sshd import BenchSetupError

# ruff: noqa: E501 - /proc files as the kernel writes them

# A locale pod's /proc/net/snmp after a 64-locale launch that hit the neighbour table limit (Icmp/Tcp cut).
SNMP = """\
Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates OutTransmits
Ip: 1 64 1330 0 0 0 0 0 1330 1244 172 0 0 0 0 0 0 0 0 1244
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 386 0 3 328 2 167 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 0 0 0 0 0
"""

ARP = """\
entries  allocs   destroys hash_grows lookups  hits     res_failed rcv_probes_mcast rcv_probes_ucast periodic_gc_runs forced_gc_runs unresolved_discards table_fulls
000001ff 00001962 00001901 00000005   0000b408 00005ba8 00000491   00000000         00000000         00000a7a         00000f3c       00000000            00000f33
000001ff 00001ae6 00001948 00000003   0000bbbe 00005d31 00000460   00000000         00000000         00000000         00001328       00000000            00001315
"""


def test_snmp_names_the_columns_and_ignores_udplite() -> None:
    d = parse_snmp(SNMP)
    assert d == Drops(
        sndbuf_errors=167, out_discards=172, rcvbuf_errors=2, in_errors=3, in_datagrams=386, out_datagrams=328
    )
    # a failed send counts in both SndbufErrors and OutDiscards: the larger, not the sum
    assert (d.sender, d.receiver) == (172, 3)


def test_snmp_without_its_tables_is_an_error() -> None:
    with pytest.raises(BenchSetupError, match="Udp InDatagrams"):
        parse_snmp("Ip: Forwarding\nIp: 1\n")


def test_table_fulls_sums_the_cpus_in_hex() -> None:
    assert parse_table_fulls(ARP) == 0xF33 + 0x1315


def test_table_fulls_refuses_another_layout() -> None:
    with pytest.raises(BenchSetupError, match="header"):
        parse_table_fulls("entries allocs\n00 00\n")


def test_launch_drops_counts_a_new_pod_from_zero_and_the_pods_that_dropped() -> None:
    before = {"a": Drops(sndbuf_errors=10, out_discards=10), "b": Drops(rcvbuf_errors=1, in_errors=1)}
    after = {
        "a": Drops(sndbuf_errors=15, out_discards=15),
        "b": Drops(rcvbuf_errors=1, in_errors=1),  # nothing new
        "c": Drops(in_errors=4),  # the new server pod
    }
    total, pods = launch_drops(before, after)
    assert (total.sender, total.receiver, pods) == (5, 4, 2)
