"""The stand-in's symbol table, driven by the pinned client's own requests (replayed by the akrequests test
double): create, write, read, list and delete 1-D int64/float64/bool arrays, and a Strings-like entry."""

from __future__ import annotations

import json
from pathlib import Path

from akrequests import Session
from test_standin_server import Server, servers, start

__all__ = ["servers"]


def session(servers: list[Server], tmp_path: Path) -> Session:
    return Session(start(servers, tmp_path / "work").port)


def test_zeros_then_set_and_read_elements_as_the_client_does(servers: list[Server], tmp_path: Path) -> None:
    s = session(servers, tmp_path)
    try:
        reply = s.ok("create<int64,1>", {"shape": (5,)})
        fields = reply.split()
        assert fields[0] == "created"
        assert fields[2:] == ["int64", "5", "1", "[5]", "8"]
        assert fields[1].startswith("id_")
        assert fields[1].endswith("_1")
        assert len(fields[1]) == len("id_12345678_1")
        a = s.created("create<int64,1>", {"shape": (5,)})
        s.ok("[int]=val<int64,1>", {"array": a, "idx": 2, "value": "7", "max_bits": 0})
        assert s.ok("[int]<int64,1>", {"array": a, "idx": 2}) == "int64 7"
        assert s.ok("[int]<int64,1>", {"array": a, "idx": -1}) == "int64 0"
        assert s.to_list(a, "q") == [0, 0, 7, 0, 0]
        s.ok("set<int64,1>", {"array": a, "dtype": "int64", "val": "-3"})
        assert s.to_list(a, "q") == [-3] * 5
    finally:
        s.close()


def test_array_from_a_binary_payload_round_trips_each_dtype(servers: list[Server], tmp_path: Path) -> None:
    s = session(servers, tmp_path)
    try:
        ints = s.array("int64", "q", [1, -2, 2**62])
        floats = s.array("float64", "d", [0.5, -1e300, 3.0])
        bools = s.array("bool", "?", [True, False, True])
        assert s.to_list(ints, "q") == [1, -2, 2**62]
        assert s.to_list(floats, "d") == [0.5, -1e300, 3.0]
        assert s.to_list(bools, "?") == [True, False, True]
        assert s.ok("[int]<float64,1>", {"array": floats, "idx": 0}) == "float64 0.5"
        assert s.ok("[int]<bool,1>", {"array": bools, "idx": 1}) == "bool False"
        s.ok("[int]=val<bool,1>", {"array": bools, "idx": 1, "value": "True", "max_bits": 0})
        assert s.to_list(bools, "?") == [True, True, True]
    finally:
        s.close()


def test_info_lists_every_entry_and_delete_removes_one(servers: list[Server], tmp_path: Path) -> None:
    s = session(servers, tmp_path)
    try:
        a = s.array("int64", "q", [1, 2])
        b = s.array("float64", "d", [1.0])
        strings = s.ok("arraySegString<uint8>", {"size": 6}, payload=b"ab\x00cd\x00")
        left, right = strings.split("+")
        assert left.split()[2] == "Strings"
        assert right == "created bytes.size 6"
        c = left.split()[1]
        assert s.names() == [a.name, b.name, c]
        info = json.loads(s.ok("info", {"names": json.dumps([b.name])}))
        assert info == [
            {"name": b.name, "dtype": "float64", "size": 1, "ndim": 1, "shape": [1], "itemsize": 8, "registered": False}
        ]
        assert s.ok("delete", {"name": a.name}) == f"deleted {a.name}"
        assert s.names() == [b.name, c]
    finally:
        s.close()


def test_errors_are_arkoudas_replies(servers: list[Server], tmp_path: Path) -> None:
    s = session(servers, tmp_path)
    try:
        unknown = s.msg("[int]<int64,1>", {"array": "id_nothere_1", "idx": 0})
        assert unknown["msgType"] == "ERROR"
        assert unknown["msg"] == "Error executing command [int]<int64,1>: Error: [int]: unknown symbol: id_nothere_1"
        two_d = s.msg("create<int64,2>", {"shape": (2, 2)})
        assert two_d["msgType"] == "ERROR"
        assert two_d["msg"].startswith("Unrecognized command: create<int64,2>")
        a = s.array("int64", "q", [1])
        out_of_bounds = s.msg("[int]<int64,1>", {"array": a, "idx": 5})
        assert out_of_bounds["msgType"] == "ERROR"
        assert "out of bounds" in out_of_bounds["msg"]
        # a binary reply's error is its text alone, which the client recognizes by its "Error:" start
        data = s.binary("tondarray<int64,1>", {"array": "id_nothere_2"})
        assert data.startswith(b"Error: ")
        assert b"unknown symbol: id_nothere_2" in data
    finally:
        s.close()
