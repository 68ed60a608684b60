"""The stand-in's save_checkpoint / load_checkpoint against ../shared/reference/arkouda-facts.md ("Checkpoints")
and Arkouda v2026.07.15's src/CheckpointMsg.chpl: layout, modes, error texts, and every locale writing and
reading its own part (through the LocaleJobDouble test double of the GASNet side; the image test runs the
real one)."""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from akrequests import ArrayRef, Session
from localejob import LocaleJobDouble
from test_standin_server import LOCALES, Server, servers, spawn

__all__ = ["servers"]

N = len(LOCALES)  # 3 locales


class Job:
    def __init__(self, server: Server, job: LocaleJobDouble, session: Session) -> None:
        self.server = server
        self.job = job
        self.s = session


def launch(servers: list[Server], cwd: Path, locale_dirs: list[Path] | None = None) -> Job:
    cwd.mkdir(parents=True, exist_ok=True)
    dirs = locale_dirs or [cwd] * N
    job = LocaleJobDouble(dirs)
    server = spawn(cwd, env={"ARKOUDA_STANDIN_PARTS_FDS": job.env_value}, pass_fds=job.child_fds)
    job.start()
    servers.append(server)
    assert server.listening.wait(20), server.output
    return Job(server, job, Session(server.port))


@pytest.fixture
def shared(servers: list[Server], tmp_path: Path) -> Iterator[Job]:
    j = launch(servers, tmp_path / "shared")
    yield j
    j.s.close()


def save(s: Session, **args: str) -> dict[str, object]:
    return s.msg("save_checkpoint", {"name": "", "path": ".akdata", "mode": "overwrite", **args})


def load(s: Session, name: str, path: str = ".akdata") -> dict[str, object]:
    return s.msg("load_checkpoint", {"name": name, "path": path})


def ints(s: Session, values: list[int]) -> ArrayRef:
    return s.array("int64", "q", values)


def test_layout_is_arkoudas_and_each_locale_writes_its_block(shared: Job) -> None:
    s, cwd = shared.s, shared.server.cwd
    a = ints(s, list(range(10)))
    b = s.array("float64", "d", [0.5, -2.0])
    c = s.array("bool", "?", [True, False, True, True])
    reply = save(s)
    assert reply["msgType"] == "NORMAL"
    serverid = str(reply["msg"])  # an empty name is the server id, id_<8 random>_
    assert serverid.startswith("id_")
    assert serverid.endswith("_")
    assert a.name == serverid + "1"
    cp = cwd / ".akdata" / serverid
    assert json.loads((cp / "server.md").read_text()) == {"serverid": serverid, "numLocales": N}
    lines = (cp / f"{a.name}.md").read_text().splitlines()
    assert [json.loads(x) for x in lines] == [
        {"entryName": a.name, "entryType": "PrimitiveTypedArraySymEntry"},
        {"dtype": "int64", "size": 10, "ndim": 1, "numTargetLocales": N, "numChunks": N},
        # Block distribution: 3, 3, 4; the recorded name is the full path used at save time
        *(
            {"filename": f".akdata/{serverid}/{a.name}_LOCALE{i:04d}.data", "numElems": n}
            for i, n in enumerate([3, 3, 4])
        ),
    ]
    # each locale wrote its own part (and only its own), in its own working directory
    wrote = sorted((loc, Path(p).name) for loc, kind, p in shared.job.done if kind == "wrote")
    for entry in (a, b, c):
        assert [x for x in wrote if x[1].startswith(entry.name + "_")] == [
            (i, f"{entry.name}_LOCALE{i:04d}.data") for i in range(N)
        ]
    assert struct.unpack("=4q", (cp / f"{a.name}_LOCALE0002.data").read_bytes()) == (6, 7, 8, 9)
    assert sorted(p.name for p in cp.iterdir()) == sorted(
        ["server.md", *(f"{e.name}.md" for e in (a, b, c))]
        + [f"{e.name}_LOCALE{i:04d}.data" for e in (a, b, c) for i in range(N)]
    )


def test_load_restores_the_saved_values_under_the_saved_names(shared: Job) -> None:
    s = shared.s
    a = ints(s, list(range(7)))
    f = s.array("float64", "d", [1.25, 2.5, -3.0])
    assert save(s, name="cp")["msg"] == "cp"
    s.ok("[int]=val<int64,1>", {"array": a, "idx": 3, "value": "99", "max_bits": 0})
    s.ok("set<float64,1>", {"array": f, "dtype": "float64", "val": "0.0"})
    s.ok("delete", {"name": f.name})
    reply = load(s, "cp")
    assert reply == {**reply, "msgType": "NORMAL", "msg": "cp"}
    assert s.to_list(a, "q") == list(range(7))
    assert s.to_list(f, "d") == [1.25, 2.5, -3.0]
    assert sorted(s.names()) == sorted([a.name, f.name])
    read = sorted({(loc, Path(p).name) for loc, kind, p in shared.job.done if kind == "read"})
    assert [x for x in read if x[1].startswith(a.name + "_")] == [(i, f"{a.name}_LOCALE{i:04d}.data") for i in range(N)]


def test_modes_error_preserve_previous_and_overwrite(shared: Job) -> None:
    s, cwd = shared.s, shared.server.cwd
    ints(s, [1, 2, 3])
    assert save(s, name="cp")["msgType"] == "NORMAL"
    refused = save(s, name="cp", mode="error")
    assert refused["msgType"] == "ERROR"
    assert refused["msg"] == (
        "Error executing command save_checkpoint: A file already exists in .akdata/cp. If you want to overwrite, "
        'use `mode="overwrite"`, which will delete the file'
    )
    (cwd / ".akdata/cp/marker").write_text("old")
    assert save(s, name="cp", mode="preserve_previous")["msgType"] == "NORMAL"
    assert (cwd / ".akdata/cp.prev/marker").read_text() == "old"
    assert not (cwd / ".akdata/cp/marker").exists()
    (cwd / ".akdata/cp/marker2").write_text("x")
    assert save(s, name="cp", mode="overwrite")["msgType"] == "NORMAL"
    assert not (cwd / ".akdata/cp/marker2").exists()
    assert (cwd / ".akdata/cp.prev/marker").exists()


def test_only_the_last_directory_level_is_created(shared: Job) -> None:
    ints(shared.s, [1])
    reply = save(shared.s, name="cp", path="no/such/parent")
    assert reply["msgType"] == "ERROR"
    assert "No such file or directory" in str(reply["msg"])
    assert save(shared.s, name="cp", path="fresh")["msgType"] == "NORMAL"
    assert (shared.server.cwd / "fresh/cp/server.md").is_file()


def test_a_different_num_locales_cannot_load(shared: Job) -> None:
    s, cwd = shared.s, shared.server.cwd
    a = ints(s, [5, 6])
    save(s, name="cp")
    md = cwd / ".akdata/cp/server.md"
    md.write_text(json.dumps({"serverid": "id_x_", "numLocales": N + 1}) + "\n")
    s.ok("[int]=val<int64,1>", {"array": a, "idx": 0, "value": "0", "max_bits": 0})
    reply = load(s, "cp")
    assert reply["msgType"] == "ERROR"
    assert reply["msg"] == (
        "Error executing command load_checkpoint: Attempting to load a checkpoint that was made with a "
        f"different number of locales ({N + 1}) than the current execution ({N})"
    )
    assert s.to_list(a, "q") == [0, 6]  # nothing was loaded
    assert md.exists()  # and the checkpoint is kept


def test_an_unsaved_kind_gets_its_md_and_makes_the_load_fail_after_the_entries_before_it(shared: Job) -> None:
    s, cwd = shared.s, shared.server.cwd
    a = ints(s, [1, 2, 3])
    strings = s.ok("arraySegString<uint8>", {"size": 3}, payload=b"ab\x00").split()[1]
    b = ints(s, [4, 5])
    assert save(s, name="cp")["msgType"] == "NORMAL"  # saving skips it silently, as Arkouda does
    cp = cwd / ".akdata/cp"
    assert (cp / f"{strings}.md").read_text().splitlines() == [
        json.dumps({"entryName": strings, "entryType": "SegStringSymEntry"}, separators=(", ", ":"))
    ]
    assert not list(cp.glob(f"{strings}_LOCALE*"))
    for ref in (a, b):
        s.ok("set<int64,1>", {"array": ref, "dtype": "int64", "val": "0"})
    reply = load(s, "cp")
    assert reply["msgType"] == "ERROR"
    assert reply["msg"] == (
        f"Error executing command load_checkpoint: Loading a checkpoint is not implemented for entry {strings} "
        f"which is a SegStringSymEntry with metadata file .akdata/cp/{strings}.md"
    )
    # glob order: <id>_1.md was loaded before <id>_2.md (the Strings) failed; <id>_3.md was not
    assert s.to_list(a, "q") == [1, 2, 3]
    assert s.to_list(b, "q") == [0, 0]


def test_missing_directories_are_error_replies(shared: Job) -> None:
    assert load(shared.s, "cp", path="nowhere") == {
        **load(shared.s, "cp", path="nowhere"),
        "msgType": "ERROR",
        "msg": "The base checkpoint directory not found: nowhere",
    }
    (shared.server.cwd / ".akdata").mkdir()
    reply = load(shared.s, "nothing")
    assert reply["msgType"] == "ERROR"
    assert reply["msg"] == "The checkpoint directory not found: .akdata/nothing"


def test_metadata_errors_name_the_file(shared: Job) -> None:
    s, cwd = shared.s, shared.server.cwd
    a = ints(s, [1, 2, 3])
    save(s, name="cp")
    md = cwd / f".akdata/cp/{a.name}.md"
    lines = md.read_text().splitlines()
    md.write_text("\n".join(lines[:2]) + "\n")  # no chunk lines
    reply = load(s, "cp")
    assert reply["msg"] == (
        f"Error executing command load_checkpoint: could not read chunk 1 metadata from .akdata/cp/{a.name}.md"
    )
    md.write_text(lines[0] + "\n" + lines[1].replace('"size"', '"junk"') + "\n")
    assert "field 'size' not found" in str(load(s, "cp")["msg"])


def test_per_pod_volumes_fail_the_save_on_the_other_locales(servers: list[Server], tmp_path: Path) -> None:
    """Each locale its own directory (as each pod its own volume): locale 0 creates the checkpoint directory in
    its own filesystem only, so locale 1 cannot create its part, as Arkouda fails on such a volume."""
    dirs = [tmp_path / f"pod{i}" for i in range(N)]
    for d in dirs:
        d.mkdir()
    j = launch(servers, dirs[0], dirs)
    try:
        ints(j.s, [1, 2, 3])
        reply = save(j.s, name="cp")
        assert reply["msgType"] == "ERROR"
        part = f".akdata/cp/{j.s.names()[0]}_LOCALE0001.data"
        assert reply["msg"] == (
            f"Error executing command save_checkpoint: Failed to open local file '{part}'. "
            "Detail: [errno 2] No such file or directory"
        )
        assert [(loc, kind) for loc, kind, _ in j.job.done] == [(0, "wrote")]
    finally:
        j.s.close()


def test_per_pod_volumes_fail_the_load_on_the_locale_whose_part_is_elsewhere(
    servers: list[Server],
    tmp_path: Path,
) -> None:
    """The checkpoint exists only in locale 0's filesystem (a wake onto pods whose volumes are their own): the
    load fails when locale 1 opens its part."""
    dirs = [tmp_path / f"pod{i}" for i in range(N)]
    for d in dirs:
        d.mkdir()
    first = launch(servers, tmp_path / "shared")
    try:
        a = ints(first.s, [1, 2, 3])
        save(first.s, name="cp")
    finally:
        first.s.close()
    shutil.copytree(tmp_path / "shared/.akdata", dirs[0] / ".akdata")
    j = launch(servers, dirs[0], dirs)
    try:
        reply = load(j.s, "cp")
        assert reply["msgType"] == "ERROR"
        assert reply["msg"] == (
            "Error executing command load_checkpoint: Failed to open local file "
            f"'.akdata/cp/{a.name}_LOCALE0001.data'. Detail: [errno 2] No such file or directory"
        )
        assert [(loc, kind) for loc, kind, _ in j.job.done] == [(0, "read")]
    finally:
        j.s.close()


def test_without_the_gasnet_job_a_checkpoint_fails_and_says_why(servers: list[Server], tmp_path: Path) -> None:
    server = spawn(tmp_path / "alone")
    servers.append(server)
    assert server.listening.wait(20)
    s = Session(server.port)
    try:
        ints(s, [1])
        reply = save(s)
        assert reply["msgType"] == "ERROR"
        assert "no GASNet job to reach locale 0 (ARKOUDA_STANDIN_PARTS_FDS unset)" in str(reply["msg"])
    finally:
        s.close()
