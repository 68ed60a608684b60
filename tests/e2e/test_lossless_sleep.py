"""global.idle.checkpoint on the three-node local cluster: a release that sleeps without forgetting.

Top to bottom against one release (3 locales, the shared volume from the local cluster's hostPath class, a short
idle timeout): arrays made through the gate survive a sleep and come back with the same values on the same client
socket, every locale having written and read its own part of the checkpoint from its own pod (the stand-in logs
each part with its host); a Strings-like object, which Arkouda does not save, keeps the release awake with a
CheckpointIncomplete Warning (the default onUnsaved: stayAwake); a numLocales change while asleep is named in
NOTES, the checkpoint is not loaded but kept, and the first client is told both sizes.

The client is a TEST DOUBLE of the pinned client's request building (as tests/images/akrequests.py): the real
client of that version is not installable here.
"""

from __future__ import annotations

import json
import logging
import re
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq
from test_shared_volume import STORAGE_CLASS, host_dir, shared_namespace

from kubehelpers import (
    CHART,
    VALUES,
    Kube,
    all_ready,
    helm,
    image_args,
    port_forward,
    ready_gate_pod,
    release_pods,
    wait_for,
)

log = logging.getLogger(__name__)

RELEASE = "ls"
SERVICE = f"{RELEASE}-arkouda-server"
SERVER_POD = f"{RELEASE}-arkouda-server-0"
MOUNT = "/shared"
CHECKPOINT = f"{RELEASE}-arkouda-gate-nl3"
IDLE_SECONDS = 10
VALUES_SET = [
    "--set", "global.idle.enabled=true",
    "--set", f"global.idle.timeoutSeconds={IDLE_SECONDS}",
    "--set", "global.idle.wake.timeoutSeconds=240",
    "--set", "global.idle.checkpoint.enabled=true",
    "--set", "global.sharedVolume.enabled=true",
    "--set", f"global.sharedVolume.storageClassName={STORAGE_CLASS}",
    "--set", "global.sharedVolume.size=1Gi",
    "--set", f"global.sharedVolume.mountPath={MOUNT}",
]
# arkouda_server_real STAND-IN: locale <i> wrote|read checkpoint part <path> (<n> bytes): host=<host> pid=<pid>
PART = re.compile(r"locale (\d+) (wrote|read) checkpoint part (\S+) \((\d+) bytes\): host=(\S+) pid=(\d+)")


class Client:
    """TEST DOUBLE of the pinned client's requests (generic_msg's envelope, BINARY payloads): one REQ socket, as
    a notebook's session keeps."""

    def __init__(self, port: int, *, timeout: float = 300) -> None:
        self.ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.sock = self.ctx.socket(zmq.REQ)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.RCVTIMEO, int(timeout * 1000))
        self.sock.connect(f"tcp://127.0.0.1:{port}")

    def close(self) -> None:
        self.sock.close(0)
        self.ctx.term()

    @staticmethod
    def envelope(cmd: str, params: dict[str, str], *, binary: bool) -> bytes:
        items = [json.dumps({"key": k, "dtype": "str", "val": v}) for k, v in params.items()]
        body = {"user": "e2e", "token": "", "cmd": cmd, "format": "BINARY" if binary else "STRING",
                "args": json.dumps(items), "size": len(items)}
        return (json.dumps(body) + ("BINARY_PAYLOAD" if binary else "")).encode()

    def msg(self, cmd: str, params: dict[str, str], payload: bytes | None = None) -> dict[str, Any]:
        if payload is None:
            self.sock.send(self.envelope(cmd, params, binary=False))
        else:
            self.sock.send_multipart([self.envelope(cmd, params, binary=True), payload])
        reply: dict[str, Any] = json.loads(self.sock.recv())
        return reply

    def array(self, dtype: str, fmt: str, values: list[Any]) -> str:
        payload = struct.pack(f"={len(values)}{fmt}", *values)
        reply = self.msg(f"array<{dtype},1>", {"dtype": dtype, "shape": json.dumps([str(len(values))]),
                                               "seg_string": "False"}, payload)
        assert reply["msgType"] == "NORMAL", reply
        return str(reply["msg"]).split()[1]  # "created <name> <dtype> ..."

    def strings(self, words: list[str]) -> str:
        payload = b"".join(w.encode() + b"\x00" for w in words)
        reply = self.msg("arraySegString<uint8>", {"dtype": "uint8", "shape": json.dumps([str(len(payload))]),
                                                   "seg_string": "True"}, payload)
        assert reply["msgType"] == "NORMAL", reply
        return str(reply["msg"]).split()[1]

    def values(self, name: str, dtype: str, fmt: str) -> list[Any]:
        self.sock.send(self.envelope(f"tondarray<{dtype},1>", {"array": name}, binary=False))
        data = self.sock.recv()
        assert not data.startswith(b"Error"), data[:300]
        return list(struct.unpack(f"={len(data) // struct.calcsize(fmt)}{fmt}", data))


INTS = [i * i - 7 for i in range(5000)]
FLOATS = [i / 3 for i in range(700)]
BOOLS = [i % 3 == 0 for i in range(300)]


@pytest.fixture(scope="module")
def ns(kube: Kube, make_namespace: Any) -> Iterator[str]:
    with shared_namespace(kube, make_namespace, prefix="ls-e2e", release=RELEASE) as name:
        yield name


def reasons(kube: Kube, ns: str, pod: str) -> list[str]:
    return [str(e.reason) for e in sorted(kube.events_for(ns, pod), key=lambda e: e.metadata.creation_timestamp)]


def message(kube: Kube, ns: str, pod: str, reason: str) -> str:
    found = [e for e in kube.events_for(ns, pod) if e.reason == reason]
    assert found, f"no {reason} Event on {pod}: {reasons(kube, ns, pod)}"
    return str(found[-1].message)


def follow_log(ns: str, pod: str, path: Path) -> subprocess.Popen[bytes]:
    """`kubectl logs -f` of the server container into `path`: its lines stay after the pod is gone."""
    out = path.open("wb")
    return subprocess.Popen(["kubectl", "-n", ns, "logs", "-f", pod, "-c", "server"], stdout=out,
                            stderr=subprocess.STDOUT)


def parts(text: str, verb: str) -> dict[int, tuple[str, str]]:
    """Locale id -> (host, path) of each checkpoint part that locale `verb` (wrote/read)."""
    return {int(m[1]): (m[5], m[3]) for m in PART.finditer(text) if m[2] == verb}


def wait_asleep(kube: Kube, ns: str) -> None:
    kube.watch_pods_until(ns, release_pods(RELEASE), lambda pods: not pods, timeout=IDLE_SECONDS + 180,
                          what="no server or locale pod (asleep)")


def test_arrays_survive_a_sleep_and_come_back_on_the_same_socket(kube: Kube, ns: str, tmp_path: Path) -> None:
    t0 = time.monotonic()
    helm("install", RELEASE, str(CHART), "-n", ns, "-f", str(VALUES / "local.yaml"), *image_args(), *VALUES_SET,
         "--wait", "--timeout", "5m", timeout=360)
    pods = kube.watch_pods_until(ns, release_pods(RELEASE), all_ready(3), timeout=60, what="3 Ready pods")
    names = sorted(p.metadata.name for p in pods)
    log.info("installed in %.1f s; pods %s on %s", time.monotonic() - t0, names,
             sorted({p.spec.node_name for p in pods}))
    gate = ready_gate_pod(kube, ns, RELEASE, timeout=60)
    with port_forward(ns, SERVICE, 5555) as port:
        ak = Client(port)
        try:
            made = {"int64": (ak.array("int64", "q", INTS), "q", INTS),
                    "float64": (ak.array("float64", "d", FLOATS), "d", FLOATS),
                    "bool": (ak.array("bool", "?", BOOLS), "?", BOOLS)}
            for dtype, (name, fmt, want) in made.items():
                assert ak.values(name, dtype, fmt) == want
            # the server that holds them (if the release slept before the first request, it woke for it): its
            # log from the start, kept after its pod is gone
            saved_log = follow_log(ns, SERVER_POD, tmp_path / "before.log")
            wait_asleep(kube, ns)
            slept_at = time.monotonic()
            saved = message(kube, ns, gate, "Checkpointed")
            log.info("Checkpointed: %s", saved)
            assert "saved 3 array(s)" in saved and f"{MOUNT}/{CHECKPOINT}" in saved
            assert "IdleDraining" in reasons(kube, ns, gate)  # the order save → scale-down: unit tests
            # the same socket, the next request: the wake, the load, then the reply
            for dtype, (name, fmt, want) in made.items():
                assert ak.values(name, dtype, fmt) == want, f"{dtype} {name} changed across the sleep"
            log.info("wake to the first reply (with the restore): %.1f s", time.monotonic() - slept_at)
        finally:
            ak.close()
    saved_log.terminate()
    restored = message(kube, ns, gate, "Restored")
    log.info("Restored: %s", restored)
    assert "Awake" in reasons(kube, ns, gate)
    # every locale wrote its part from its own pod, and read it back from its (new) own pod
    wrote = parts((tmp_path / "before.log").read_text(errors="replace"), "wrote")

    def all_read() -> dict[int, tuple[str, str]] | None:
        found = parts(kube.logs(ns, SERVER_POD, "server"), "read")
        return found if len(found) == 3 else None

    read = wait_for("every locale's read line in the server log", all_read, timeout=60)
    log.info("parts written %s, read %s", wrote, read)
    assert sorted(wrote) == sorted(read) == [0, 1, 2]
    assert sorted(host for host, _ in wrote.values()) == names, "a part was not written by its own locale's pod"
    assert len({host for host, _ in read.values()}) == 3
    assert all(path.startswith(f"{MOUNT}/{CHECKPOINT}/") for _, path in wrote.values())


def test_an_object_arkouda_does_not_save_keeps_the_release_awake_and_says_why(kube: Kube, ns: str) -> None:
    gate = ready_gate_pod(kube, ns, RELEASE, timeout=60)
    # the release may have gone back to sleep since: this request wakes it (and restores) first
    with port_forward(ns, SERVICE, 5555) as port:
        ak = Client(port)
        try:
            words = ak.strings(["sleep", "without", "forgetting"])
        finally:
            ak.close()
    deadline = time.monotonic() + IDLE_SECONDS + 120
    while reasons(kube, ns, gate).count("CheckpointIncomplete") == 0:  # Events have no watch in kubehelpers
        assert time.monotonic() < deadline, f"no CheckpointIncomplete: {reasons(kube, ns, gate)}"
        time.sleep(2)
    warning = message(kube, ns, gate, "CheckpointIncomplete")
    log.info("CheckpointIncomplete: %s", warning)
    assert f"not sleeping: Arkouda does not save {words}" in warning
    assert len(kube.pods(ns, release_pods(RELEASE))) == 3, "the release slept with an object it would lose"
    with port_forward(ns, SERVICE, 5555) as port:
        ak = Client(port)
        try:
            assert ak.msg("delete", {"name": words})["msgType"] == "NORMAL"
        finally:
            ak.close()


def test_a_numlocales_change_while_asleep_keeps_the_checkpoint_and_names_both_sizes(kube: Kube, ns: str) -> None:
    wait_asleep(kube, ns)
    upgrade = helm("upgrade", RELEASE, str(CHART), "-n", ns, "--reuse-values", "--set", "global.numLocales=2",
                   "--wait", "--timeout", "3m", timeout=240)
    assert "numLocales changes from 3 to 2: a checkpoint the gate saved at 3 locales" in upgrade.stdout
    gate = ready_gate_pod(kube, ns, RELEASE, timeout=120)  # the upgrade rolled the gate (its numLocales)
    with port_forward(ns, SERVICE, 5555) as port:
        ak = Client(port)
        try:
            reply = ak.msg("info", {"names": "__AllSymbols__"})
        finally:
            ak.close()
    log.info("the first client after the wake: %s", reply)
    assert reply["msgType"] == "ERROR"
    assert "made with 3 locales and this release now has 2" in reply["msg"]
    assert "made with 3 locales and this release now has 2" in message(kube, ns, gate, "CheckpointSizeMismatch")
    kept = host_dir(ns) / CHECKPOINT  # the volume as the nodes see it
    assert json.loads((kept / "server.md").read_text())["numLocales"] == 3, sorted(kept.iterdir())
