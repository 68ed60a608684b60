"""The gate saves before the release sleeps and loads after it wakes (gate/checkpoint.py, the SAVING and LOADING
phases of gate/sleepwake.py): the order of save, scale-down, wake, load and forwarding, the Events and what the
next client is told, against FakeServer (a test double of the server link: it records the gate's own requests
and the test answers them), MemoryStore (a test double of the shared volume), FakeKube and FakeClock."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import zmq
from arkouda_bootstrap.config import GateSettings
from arkouda_bootstrap.gate.checkpoint import CheckpointPolicy, DirectoryStore, Inspection, OnUnsaved, Record
from arkouda_bootstrap.gate.envelope import parse_reply, request_bytes
from arkouda_bootstrap.gate.idle import Traffic
from arkouda_bootstrap.gate.sleepwake import Backend, Controller, Phase, Reply
from arkouda_bootstrap.kube.api import PodRef
from arkouda_bootstrap.kube.events import EventRecorder
from fakes import FakeClock, FakeKube
from test_gate import TOKEN, ArkoudaDouble, req, running
from test_gate import listing as gate_listing
from test_gate import request as gate_request
from test_gate import server_pod as gate_server_pod
from test_gate import settings as gate_settings
from test_sleepwake import (
    LOCALE,
    SERVER,
    SETTINGS,
    FakeRequest,
    gate_pod,
    listing,
    locale_pod,
    phase_of,
    scale_calls,
    server_pod,
)

PATH = "/data"
NAME = "r-arkouda-gate-nl3"  # the release's server StatefulSet without "-server", "-gate-nl", numLocales
MIB = 1024 * 1024


@dataclass
class Sent:
    backend: Backend
    cmd: str
    params: dict[str, str]
    on_reply: Callable[[Reply], None]


@dataclass
class FakeServer:
    """Test double of the gate's link to the server: keeps the gate's own requests for the test to answer."""

    sent: list[Sent] = field(default_factory=list)

    def send_command(
        self, backend: Backend, cmd: str, params: dict[str, str], on_reply: Callable[[Reply], None]
    ) -> None:
        self.sent.append(Sent(backend, cmd, params, on_reply))

    def answer(self, message: str, *, ok: bool = True) -> None:
        self.sent[-1].on_reply(Reply(ok=ok, message=message))

    def commands(self) -> list[str]:
        return [s.cmd for s in self.sent]


@dataclass
class MemoryStore:
    """Test double of the shared volume: what a save leaves (set by the test) and the gate's record."""

    saved: Inspection | None = None
    record: Record | None = None
    inspected: list[str] = field(default_factory=list)

    def inspect(self, name: str) -> Inspection | None:
        self.inspected.append(name)
        return self.saved

    def read_record(self) -> Record | None:
        return self.record

    def write_record(self, record: Record) -> None:
        self.record = record


ARRAYS = Inspection(size_bytes=64 * MIB, entries=("id_1", "id_2"), unsaved=())
WITH_STRINGS = Inspection(size_bytes=64 * MIB, entries=("id_1", "id_2", "id_3"), unsaved=("id_3",))


@dataclass
class Rig:
    ctl: Controller
    api: FakeKube
    clock: FakeClock
    server: FakeServer
    store: MemoryStore
    traffic: Traffic

    def arrive(self, client: FakeRequest) -> None:
        """A client request as the gate takes it: counted in flight (until answered), then to the controller."""
        self.traffic.request_started()
        self.ctl.request_arrived(client)

    def events(self) -> list[tuple[str, str]]:
        return [(e.reason, e.type) for e in self.api.created_events]

    def message(self, reason: str) -> str:
        return next(e.message for e in reversed(self.api.created_events) if e.reason == reason)

    def awake(self) -> None:
        self.ctl.on_pods(listing(server_pod(), locale_pod(0), locale_pod(1), gate_pod()))
        self.ctl.step()

    def idle(self) -> None:
        self.clock.advance(60)
        self.ctl.step()

    def gone(self) -> None:
        self.ctl.on_pods(listing(gate_pod()))
        self.ctl.step()

    def woken_by(self, client: FakeRequest) -> None:
        """A client request to the sleeping release; the pods come back Ready."""
        self.arrive(client)
        self.ctl.step()
        assert phase_of(self.ctl) is Phase.WAKING
        self.clock.advance(20)
        self.ctl.on_pods(listing(server_pod(uid="new"), locale_pod(0), locale_pod(1), gate_pod()))
        self.ctl.step()


def rig(
    *,
    num_locales: int = 3,
    on_unsaved: OnUnsaved = OnUnsaved.STAY_AWAKE,
    store: MemoryStore | None = None,
    server: int = 1,
    locale: int = 2,
) -> Rig:
    settings: GateSettings = replace(SETTINGS, num_locales=num_locales)
    api = FakeKube(replicas={SERVER: server, LOCALE: locale})
    clock = FakeClock()
    traffic = Traffic(clock=clock)
    store = store if store is not None else MemoryStore(saved=ARRAYS)
    policy = CheckpointPolicy(
        path=PATH, release="r-arkouda", num_locales=num_locales, on_unsaved=on_unsaved, timeout=600
    )
    ctl = Controller(
        settings=settings,
        scale=api,
        events=EventRecorder(api, PodRef(namespace="ns", name=settings.pod_name, uid="g")),
        traffic=traffic,
        clock=clock,
        checkpoint=policy,
        store=store,
    )
    fake = FakeServer()
    ctl.commands = fake
    ctl.start()
    return Rig(ctl, api, clock, fake, store, traffic)


def slept(r: Rig) -> None:
    """Awake → idle → saved → scaled to 0 → asleep."""
    r.awake()
    r.idle()
    r.clock.advance(3)
    r.server.answer(NAME)
    r.ctl.step()
    r.gone()
    assert phase_of(r.ctl) is Phase.ASLEEP


def test_idle_saves_under_its_own_name_and_scales_to_zero_only_after_the_reply() -> None:
    r = rig()
    r.awake()
    r.idle()
    assert phase_of(r.ctl) is Phase.SAVING
    assert [(s.cmd, s.params, s.backend.host) for s in r.server.sent] == [
        ("save_checkpoint", {"name": NAME, "path": PATH, "mode": "overwrite"}, "10.1.0.7")
    ]
    r.clock.advance(500)  # a long save: still nothing scaled
    r.ctl.step()
    assert scale_calls(r.api) == [] and phase_of(r.ctl) is Phase.SAVING
    r.server.answer(NAME)
    r.ctl.step()
    assert phase_of(r.ctl) is Phase.DRAINING
    assert scale_calls(r.api) == [f"{SERVER}=0", f"{LOCALE}=0"]
    assert r.events() == [("Checkpointed", "Normal"), ("IdleDraining", "Normal")]
    assert r.message("Checkpointed") == f"saved 2 array(s), 64.0 MiB in 500.0 s to {PATH}/{NAME}"
    assert r.store.record == Record(name=NAME, num_locales=3, saved=True, size_bytes=64 * MIB)


def test_a_request_during_the_save_is_held_then_forwarded_and_the_release_stays_awake() -> None:
    r = rig()
    r.awake()
    r.idle()
    client = FakeRequest(received_at=r.clock())
    r.arrive(client)
    assert client.forwarded == [] and r.ctl.held == [client]  # the server is busy saving: it would wait anyway
    r.server.answer(NAME)
    r.ctl.step()
    assert client.forwarded == [("10.1.0.7", 5555)]
    assert phase_of(r.ctl) is Phase.AWAKE and scale_calls(r.api) == []
    assert r.store.record is None  # no sleep, nothing to load later


def test_the_wake_loads_before_any_held_request_is_forwarded() -> None:
    r = rig()
    slept(r)
    client = FakeRequest(received_at=r.clock())
    r.woken_by(client)
    assert phase_of(r.ctl) is Phase.LOADING
    assert [(s.cmd, s.params) for s in r.server.sent[1:]] == [("load_checkpoint", {"name": NAME, "path": PATH})]
    assert client.forwarded == [] and client.failed == []
    r.clock.advance(4)
    r.server.answer(NAME)
    r.ctl.step()
    assert client.forwarded == [("10.1.0.7", 5555)]
    assert phase_of(r.ctl) is Phase.AWAKE
    assert [e for e, _ in r.events()][-2:] == ["Awake", "Restored"]
    assert r.message("Restored") == f"loaded the checkpoint {PATH}/{NAME} (64.0 MiB) in 4.0 s"


def test_a_gate_restarted_while_asleep_still_loads_what_the_last_sleep_saved() -> None:
    store = MemoryStore(record=Record(name=NAME, num_locales=3, saved=True, size_bytes=MIB))
    r = rig(store=store, server=0, locale=0)
    r.gone()
    r.woken_by(FakeRequest(received_at=r.clock()))
    assert r.server.commands() == ["load_checkpoint"]


def test_a_failed_load_is_a_warning_and_the_held_client_is_told_what_was_lost() -> None:
    r = rig()
    slept(r)
    first, later = FakeRequest(received_at=r.clock()), FakeRequest(received_at=r.clock(), session=b"other")
    r.woken_by(first)
    r.server.answer("Loading a checkpoint failed: file not found", ok=False)
    r.ctl.step()
    assert first.forwarded == [] and len(first.failed) == 1
    assert f"loading the checkpoint {PATH}/{NAME} failed" in first.failed[0]
    assert "file not found" in first.failed[0] and "the checkpoint is kept" in first.failed[0]
    assert ("RestoreFailed", "Warning") in r.events()
    r.arrive(later)  # told once: the next request goes through
    assert later.forwarded == [("10.1.0.7", 5555)]


def test_without_a_waiting_client_the_next_one_is_told() -> None:
    r = rig()
    slept(r)
    r.arrive(FakeRequest(received_at=r.clock()))
    r.ctl.step()
    r.ctl.on_pods(listing(server_pod(uid="new"), locale_pod(0), locale_pod(1), gate_pod()))
    r.ctl.held.clear()  # its client gave up before the load ended
    r.ctl.step()
    r.server.answer("boom", ok=False)
    r.ctl.step()
    late = FakeRequest(received_at=r.clock())
    r.arrive(late)
    assert late.forwarded == [] and "boom" in late.failed[0]


def test_an_object_arkouda_does_not_save_keeps_the_release_awake_by_default_and_says_why() -> None:
    r = rig(store=MemoryStore(saved=WITH_STRINGS))
    r.awake()
    r.idle()
    r.server.answer(NAME)
    r.ctl.step()
    assert phase_of(r.ctl) is Phase.AWAKE and scale_calls(r.api) == []
    assert r.events() == [("CheckpointIncomplete", "Warning")]
    message = r.message("CheckpointIncomplete")
    assert "not sleeping: Arkouda does not save id_3" in message
    assert "global.idle.checkpoint.onUnsaved=sleep" in message
    # no save again until a client comes back
    r.clock.advance(3600)
    r.ctl.step()
    assert r.server.commands() == ["save_checkpoint"]
    traffic_touch(r)
    r.idle()
    assert r.server.commands() == ["save_checkpoint", "save_checkpoint"]


def traffic_touch(r: Rig) -> None:
    """A client request forwarded and answered."""
    client = FakeRequest(received_at=r.clock())
    r.arrive(client)
    assert client.forwarded
    r.traffic.request_ended()


def test_sleeping_without_unsaved_objects_tells_the_next_client_which_were_lost() -> None:
    r = rig(store=MemoryStore(saved=WITH_STRINGS), on_unsaved=OnUnsaved.SLEEP)
    r.awake()
    r.idle()
    r.server.answer(NAME)
    r.ctl.step()
    assert phase_of(r.ctl) is Phase.DRAINING
    assert [e for e, _ in r.events()] == ["CheckpointIncomplete", "Checkpointed", "IdleDraining"]
    assert r.store.record is not None and r.store.record.unsaved == ("id_3",)
    r.gone()
    client = FakeRequest(received_at=r.clock())
    r.woken_by(client)
    r.server.answer('Loading a checkpoint is not implemented for entry "id_3"', ok=False)
    r.ctl.step()
    assert "Arkouda did not save id_3 before the sleep" in client.failed[0]


def test_a_failed_save_keeps_the_release_awake_by_default() -> None:
    r = rig()
    r.awake()
    r.idle()
    r.server.answer("No space left on device", ok=False)
    r.ctl.step()
    assert phase_of(r.ctl) is Phase.AWAKE and scale_calls(r.api) == []
    assert r.events() == [("CheckpointFailed", "Warning")]
    assert "No space left on device" in r.message("CheckpointFailed")
    assert "nothing is lost" in r.message("CheckpointFailed")


def test_a_failed_save_with_sleep_never_loads_an_older_checkpoint_and_tells_the_client() -> None:
    older = Record(name=NAME, num_locales=3, saved=True, size_bytes=MIB)
    r = rig(store=MemoryStore(saved=ARRAYS, record=older), on_unsaved=OnUnsaved.SLEEP)
    r.awake()
    r.idle()
    r.server.answer("No space left on device", ok=False)
    r.ctl.step()
    assert phase_of(r.ctl) is Phase.DRAINING
    r.gone()
    client = FakeRequest(received_at=r.clock())
    r.woken_by(client)
    assert r.server.commands() == ["save_checkpoint"]  # no load
    assert "the save before the sleep failed (Arkouda answered: No space left on device)" in client.failed[0]
    assert ("RestoreFailed", "Warning") in r.events()


def test_a_save_without_a_reply_is_given_up_and_its_late_reply_changes_nothing() -> None:
    r = rig()
    r.awake()
    r.idle()
    late = r.server.sent[-1]
    r.clock.advance(600)
    r.ctl.step()
    assert phase_of(r.ctl) is Phase.AWAKE and scale_calls(r.api) == []
    assert "no reply to save_checkpoint within 600 s" in r.message("CheckpointFailed")
    late.on_reply(Reply(ok=True, message=NAME))
    r.ctl.step()
    assert phase_of(r.ctl) is Phase.AWAKE and scale_calls(r.api) == []


def test_a_checkpoint_of_another_size_is_not_loaded_is_kept_and_named_with_both_sizes() -> None:
    made_at_3 = Record(name=NAME, num_locales=3, saved=True, size_bytes=MIB)
    store = MemoryStore(saved=ARRAYS, record=made_at_3)
    r = rig(num_locales=4, store=store, server=0, locale=0)  # helm upgrade to 4 locales while asleep
    r.gone()
    client = FakeRequest(received_at=r.clock())
    r.woken_by(client)
    assert r.server.commands() == []
    assert ("CheckpointSizeMismatch", "Warning") in r.events()
    for text in (r.message("CheckpointSizeMismatch"), client.failed[0]):
        assert "made with 3 locales and this release now has 4" in text
        assert f"ak.load_checkpoint('{NAME}', path='{PATH}')" in text
    assert store.record == made_at_3  # kept
    r.traffic.request_ended()  # the gate answered it
    # the next sleep at 4 locales saves under another name: the checkpoint made at 3 is not overwritten
    r.idle()
    assert r.server.sent[-1].params["name"] == "r-arkouda-gate-nl4"


def test_directory_store_reads_arkoudas_layout(tmp_path: Path) -> None:
    policy = CheckpointPolicy(path=str(tmp_path), release="r-arkouda", num_locales=2)
    ck = tmp_path / policy.name
    ck.mkdir()
    (ck / "server.md").write_text(json.dumps({"serverid": "id_x_", "numLocales": 2}))
    (ck / "id_a.md").write_text("{}\n")
    (ck / "id_a_LOCALE0000.data").write_bytes(b"x" * 100)
    (ck / "id_a_LOCALE0001.data").write_bytes(b"x" * 50)
    (ck / "id_b.md").write_text("{}\n")  # a bigint array: one .bin per locale, counted from 1
    (ck / "id_b.loc1.bin").write_bytes(b"y" * 10)
    (ck / "id_s.md").write_text("{}\n")  # a Strings entry: metadata, no data file
    store = DirectoryStore(policy)
    found = store.inspect(policy.name)
    assert found is not None
    assert found.entries == ("id_a", "id_b", "id_s") and found.unsaved == ("id_s",)
    assert found.size_bytes == sum(f.stat().st_size for f in ck.iterdir())
    assert store.inspect("missing") is None
    assert store.read_record() is None
    record = Record(name=policy.name, num_locales=2, saved=True, unsaved=("id_s",), size_bytes=150)
    store.write_record(record)
    assert DirectoryStore(policy).read_record() == record
    (tmp_path / ".r-arkouda-gate.json").write_text("not json")
    assert store.read_record() is None


def test_the_gates_own_requests_carry_arkoudas_parameter_list() -> None:
    raw = request_bytes("save_checkpoint", user="arkouda-gate", token=b"t", params={"name": "n", "path": "/d"})
    body = json.loads(raw)
    assert (body["cmd"], body["token"], body["size"], body["format"]) == ("save_checkpoint", "t", 2, "STRING")
    assert [json.loads(item) for item in json.loads(body["args"])] == [
        {"key": "name", "dtype": "str", "val": "n"},
        {"key": "path", "dtype": "str", "val": "/d"},
    ]
    assert json.loads(request_bytes("ruok", user="u", token=None)) | {"token": ""} == {
        "user": "u",
        "token": "",
        "cmd": "ruok",
        "format": "STRING",
        "args": "",
        "size": -1,
    }


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"msg": "n", "msgType": "NORMAL"}', (True, "n")),
        (b'{"msg": "bad", "msgType": "ERROR"}', (False, "bad")),
        (b"Error: binary", (False, "an unreadable reply: b'Error: binary'")),
    ],
)
def test_replies_are_read_as_arkouda_writes_them(raw: bytes, expected: tuple[bool, str]) -> None:
    assert parse_reply(raw) == expected


# -- the same through the gate on loopback: its own requests go over its link to the server ----------------------


class CheckpointDouble(ArkoudaDouble):
    """ArkoudaDouble that also keeps every request's JSON body (the gate's own save and load included)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        super().__init__()

    def _answer(self, frames: list[zmq.Frame]) -> bool:
        self.bodies.append(json.loads(frames[0].bytes))
        return super()._answer(frames)


def wait_until(what: str, done: Callable[[], bool], *, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_through_the_gate_save_scale_down_wake_load_then_the_client_request(tmp_path: Path) -> None:
    name = "r-arkouda-gate-nl2"  # what the server would have written at save_checkpoint
    (tmp_path / name).mkdir()
    (tmp_path / name / "server.md").write_text('{"serverid": "id_x_", "numLocales": 2}')
    (tmp_path / name / "id_a.md").write_text("{}")
    (tmp_path / name / "id_a_LOCALE0000.data").write_bytes(b"x" * 1000)
    token = tmp_path / "token"
    token.write_bytes(TOKEN)
    arkouda = CheckpointDouble()
    s = gate_settings(
        server_port=arkouda.port,
        sleep_when_idle=True,
        idle_timeout=0.3,
        checkpoint_path=str(tmp_path),
        token_file=token,
    )
    try:
        with running(s, pods=gate_listing(gate_server_pod())) as gate, req(gate.gate.port) as sock:
            wait_until("the idle release scaled to 0", lambda: gate.api.replicas[SERVER] == 0)
            save = arkouda.bodies[-1]
            assert (save["cmd"], save["user"], save["token"]) == ("save_checkpoint", "arkouda-gate", TOKEN.decode())
            params = {json.loads(i)["key"]: json.loads(i)["val"] for i in json.loads(save["args"])}
            assert params == {"name": name, "path": str(tmp_path), "mode": "overwrite"}
            assert gate.reasons()[:2] == ["Checkpointed", "IdleDraining"]
            gate.pods(gate_listing())
            sock.send(gate_request("getconfig", token=TOKEN.decode()))
            wait_until("the wake", lambda: gate.api.replicas[SERVER] == 1)
            gate.pods(gate_listing(gate_server_pod(uid="woken")))
            assert json.loads(sock.recv())["msgType"] == "NORMAL"
            # the load went first, then the client's request
            assert [b["cmd"] for b in arkouda.bodies] == ["save_checkpoint", "load_checkpoint", "getconfig"]
            assert "Restored" in gate.reasons()
    finally:
        arkouda.close()
