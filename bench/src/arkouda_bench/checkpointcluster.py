"""Lossless sleep on the local three-node cluster (global.idle.checkpoint, a ReadWriteMany volume of the local
cluster's hostPath class, hack/cluster/shared-storage.sh): how long the gate's save before a sleep and its
load after a wake take for 64 MiB and 512 MiB of arrays across 3 locales, and what the load adds to a
client's wait.

One release with the checkpoint (and memory limits that hold 512 MiB), one without, both values/local.yaml
with `global.idle.timeoutSeconds` = IDLE_SECONDS. Per size and repeat, through `kubectl port-forward` to the
client Service (the gate), one REQ session of Arkouda's own requests: `connect`, ARRAYS x `create<float64,1>`
+ `set` (filled, so every byte is written and read), then it closes; the release sleeps after the save (the
gate's `Checkpointed` Event gives the save's seconds, measured by the gate around Arkouda's
`save_checkpoint`); a new session's `connect` wakes it (its reply comes after the load: connect → first reply,
the gate's `Restored` Event gives the load's seconds); `info` must list the arrays at their sizes; they are
deleted. The release without the checkpoint gives the same wake without a load, in the same run.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zmq

from arkouda_bench.cluster import Cluster, Watcher, workload
from arkouda_bench.results import Row
from arkouda_bench.sshd import BenchSetupError

log = logging.getLogger(__name__)

GROUP = "lossless sleep on 3 nodes (3 locales, shared volume)"
IDLE_SECONDS = 5
ARRAYS = 4  # the size is split over this many float64 arrays
SIZES_MIB = (64, 512)
STORAGE_CLASS = "arkouda-shared-hostpath"  # hack/cluster/shared-storage.sh
MOUNT = "/shared"
# memory for 512 MiB of arrays on the locales (and the save's buffers), above values/local.yaml's 512Mi
MEMORY_LIMIT = "2Gi"
_SECONDS = re.compile(r" in ([0-9]+(?:\.[0-9]+)?) s\b")


def event_seconds(message: str) -> float:
    """The seconds of a `Checkpointed` ("saved … in 1.2 s to …") or `Restored` ("loaded … in 0.8 s")
    message."""
    m = _SECONDS.search(message)
    if m is None:
        raise BenchSetupError(f"no 'in <seconds> s' in the gate's Event message: {message!r}")
    return float(m.group(1))


class Session:
    """One REQ socket speaking Arkouda's request envelope (the client's generic_msg), as a notebook's."""

    def __init__(self, port: int, *, timeout: float = 600) -> None:
        self.ctx: Any = zmq.Context()
        self.sock: Any = self.ctx.socket(zmq.REQ)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.RCVTIMEO, int(timeout * 1000))
        self.sock.connect(f"tcp://127.0.0.1:{port}")

    def close(self) -> None:
        self.sock.close(0)
        self.ctx.term()

    def msg(self, cmd: str, params: dict[str, str] | None = None) -> str:
        items = [json.dumps({"key": k, "dtype": "str", "val": v}) for k, v in (params or {}).items()]
        body = {"user": "bench", "token": "", "cmd": cmd, "format": "STRING", "args": json.dumps(items),
                "size": len(items)}  # fmt: skip
        self.sock.send(json.dumps(body).encode())
        reply = json.loads(self.sock.recv())
        if reply.get("msgType") == "ERROR":
            raise BenchSetupError(f"{cmd} answered with an error: {str(reply.get('msg'))[:300]}")
        return str(reply.get("msg"))

    def make_arrays(self, total_mib: int) -> list[str]:
        n = total_mib * (1 << 20) // 8 // ARRAYS
        names = []
        for i in range(ARRAYS):
            created = self.msg("create<float64,1>", {"shape": json.dumps([str(n)])})
            name = created.split()[1]  # "created <name> float64 ..."
            self.msg("set<float64,1>", {"array": name, "dtype": "float64", "val": str(i + 0.5)})
            names.append(name)
        return names

    def sizes(self) -> dict[str, int]:
        """Name → element count of every array in the server's symbol table."""
        return {e["name"]: int(e["size"]) for e in json.loads(self.msg("info", {"names": "__AllSymbols__"}))}


class Release:
    def __init__(self, cl: Cluster, ns: str, name: str) -> None:
        self.cl, self.ns, self.name = cl, ns, name

    def _gate_messages(self, events: dict[str, Any], reason: str) -> list[str]:
        """The messages of the `reason` Events on this release's gate pods
        (`<release>-arkouda-gate-<hash>-<id>`), oldest first."""
        prefix = f"{self.name}-arkouda-gate-"
        found = [e for e in events.values() if e.reason == reason and e.involved_object.kind == "Pod"
                 and e.involved_object.name.startswith(prefix)]  # fmt: skip
        found.sort(key=lambda e: (e.metadata.creation_timestamp, e.metadata.name))
        return [str(e.message) for e in found]

    def gate_events(self, reason: str) -> list[str]:
        listed = self.cl.core.list_namespaced_event(self.ns).items
        return self._gate_messages({e.metadata.name: e for e in listed}, reason)

    def wait_event(self, reason: str, *, after: int, timeout: float, containing: str = "") -> str:
        """The message of the first `reason` Event on the gate beyond the `after` already seen that contains
        `containing` (an empty table's save after the previous repeat is not this repeat's); list, then
        watch."""
        hit = threading.Event()
        found: list[str] = []

        def on_event(events: dict[str, Any], _t: float) -> None:
            fresh = [m for m in self._gate_messages(events, reason)[after:] if containing in m]
            if fresh and not hit.is_set():
                found.append(fresh[0])
                hit.set()

        w = Watcher(self.cl.core.list_namespaced_event, self.ns, on_event)
        try:
            if not hit.wait(timeout):
                raise BenchSetupError(
                    f"no new {reason} Event containing {containing!r} on the gate of {self.name} "
                    f"after {timeout:.0f} s"
                )
        finally:
            w.stop()
        return found[0]

    def wait_asleep(self) -> None:
        self.cl.wait_pods(self.ns, lambda pods: not workload(pods), timeout=IDLE_SECONDS + 300,
                          what=f"no server or locale pod of {self.name}")  # fmt: skip

    def session(self, body: Callable[[Session], None]) -> None:
        with self.cl.port_forward(self.ns, f"svc/{self.name}-arkouda-server", 5555) as port:
            s = Session(port)
            try:
                body(s)
            finally:
                s.close()


def _first_reply(rel: Release, then: Callable[[Session], None]) -> float:
    took: list[float] = []

    def body(s: Session) -> None:
        began = time.monotonic()
        s.msg("connect")
        took.append(time.monotonic() - began)
        then(s)

    rel.session(body)
    return took[0]


def _storage(repo_root: Path, *args: str) -> None:
    subprocess.run([str(repo_root / "hack" / "cluster" / "shared-storage.sh"), *args], check=True,
                   capture_output=True, text=True, timeout=300)  # fmt: skip


def run(*, kubeconfig: Path, repo_root: Path, repeats: int, command: str) -> list[Row]:
    cl = Cluster.connect(kubeconfig=kubeconfig, repo_root=repo_root)
    ns = cl.namespace(f"bench-ckpt-{uuid.uuid4().hex[:6]}")
    with_ckpt = Release(cl, ns, "ckpt")
    plain = Release(cl, ns, "plain")
    common = [
        "-n", ns, "-f", str(cl.values("local.yaml")), "--set", "tests.enabled=false",
        "--set", "global.idle.enabled=true", "--set", f"global.idle.timeoutSeconds={IDLE_SECONDS}",
        "--set", "global.idle.wake.timeoutSeconds=300",
        "--set", f"locale.resources.limits.memory={MEMORY_LIMIT}",
        "--set", f"server.resources.limits.memory={MEMORY_LIMIT}", "--wait", "--timeout", "5m",
    ]  # fmt: skip
    save: dict[int, list[float]] = {m: [] for m in SIZES_MIB}
    load: dict[int, list[float]] = {m: [] for m in SIZES_MIB}
    wake_load: dict[int, list[float]] = {m: [] for m in SIZES_MIB}
    wake_plain: list[float] = []
    try:
        _storage(repo_root, "up")
        _storage(repo_root, "claim", ns, "ckpt-arkouda-shared", "4Gi")
        cl.helm(
            "install", "ckpt", str(cl.chart), *common, "--set", "global.idle.checkpoint.enabled=true",
            "--set", "global.sharedVolume.enabled=true",
            "--set", f"global.sharedVolume.storageClassName={STORAGE_CLASS}",
            "--set", "global.sharedVolume.size=4Gi", "--set", f"global.sharedVolume.mountPath={MOUNT}",
        )  # fmt: skip
        for mib in SIZES_MIB:
            for i in range(repeats):
                saved_before = len(with_ckpt.gate_events("Checkpointed"))
                made: list[str] = []

                def make(s: Session, made: list[str] = made, mib: int = mib) -> None:
                    made.extend(s.make_arrays(mib))

                with_ckpt.session(make)
                saved = with_ckpt.wait_event(
                    "Checkpointed", after=saved_before, timeout=600, containing=f"saved {ARRAYS} array(s)"
                )
                save[mib].append(event_seconds(saved))
                with_ckpt.wait_asleep()
                restored_before = len(with_ckpt.gate_events("Restored"))

                def check_and_delete(s: Session, made: list[str] = made, mib: int = mib) -> None:
                    sizes = s.sizes()
                    want = mib * (1 << 20) // 8 // ARRAYS
                    if any(sizes.get(name) != want for name in made):
                        raise BenchSetupError(
                            f"after the wake the arrays are {sizes}, expected {made} of {want}"
                        )
                    for name in made:
                        s.msg("delete", {"name": name})

                wake_load[mib].append(_first_reply(with_ckpt, check_and_delete))
                load[mib].append(
                    event_seconds(with_ckpt.wait_event("Restored", after=restored_before, timeout=60))
                )
                log.info(
                    "checkpoint %d MiB, repeat %d: save %.1f s, load %.1f s, wake → first reply %.1f s (%s)",
                    mib, i + 1, save[mib][-1], load[mib][-1], wake_load[mib][-1], saved,
                )  # fmt: skip
                # the empty table's save: the next repeat starts from a sleeping release
                with_ckpt.wait_asleep()
        cl.helm("uninstall", "ckpt", "-n", ns, "--wait", "--timeout", "3m")
        cl.helm("install", "plain", str(cl.chart), *common)
        plain.wait_asleep()
        for i in range(repeats):
            wake_plain.append(_first_reply(plain, lambda s: None))
            plain.wait_asleep()
            log.info("no checkpoint, repeat %d: wake → first reply %.1f s", i + 1, wake_plain[-1])
    finally:
        cl.drop_namespace(ns)
        _storage(repo_root, "release", ns)
    note = (
        f"values/local.yaml (numLocales 3) on 3 nodes, {ARRAYS} float64 arrays, "
        f"idle timeout {IDLE_SECONDS} s, "
        "hostPath ReadWriteMany class"
    )
    rows: list[Row] = []
    for mib in SIZES_MIB:
        rows += [
            Row.measured(group=GROUP, case=f"{mib} MiB", metric="save before the sleep (gate's Checkpointed)",
                         unit="s", command=command, values=save[mib], note=note),
            Row.measured(group=GROUP, case=f"{mib} MiB", metric="load after the wake (gate's Restored)",
                         unit="s", command=command, values=load[mib], note=note),
            Row.measured(group=GROUP, case=f"{mib} MiB", metric="client connect → first reply, with the load",
                         unit="s", command=command, values=wake_load[mib], note=note),
        ]  # fmt: skip
    rows.append(
        Row.measured(group=GROUP, case="no checkpoint", metric="client connect → first reply, no load",
                     unit="s", command=command, values=wake_plain,
                     note=note + "; the same release without the checkpoint"),
    )  # fmt: skip
    return rows


def not_run_rows(reason: str, command: str) -> list[Row]:
    return [
        Row.not_run(group=GROUP, case=f"{mib} MiB", metric="save, load, connect → first reply",
                    command=command, reason=reason)
        for mib in SIZES_MIB
    ]  # fmt: skip
