"""A checkpoint through the image's real GASNet job: arkouda_server -nl 3 (amudprun, udp conduit, local
spawner) in the Arkouda image with runc as uid 1000, driven by the pinned client's requests (the akrequests
test double, copied into the image): every locale's arkouda_server_real writes and reads its own part."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import oci

HERE = Path(__file__).resolve().parent
BARRIER_PID = re.compile(
    r"^arkouda_server_real STAND-IN: locale (\d+) of 3 passed the GASNet barrier.* pid=(\d+) ", re.M
)
PART = re.compile(
    r"^arkouda_server_real STAND-IN: locale (\d+) (wrote|read) checkpoint part (\S+) \((\d+) bytes\): "
    r"host=\S+ pid=(\d+)$",
    re.M,
)
DRIVER = """
import sys, time
sys.path.insert(0, "/tmp")
import zmq
from akrequests import Session

for _ in range(100):  # the server listens once the GASNet job is up
    s = Session(5555, timeout=60)
    try:
        s.ok("connect")
        break
    except zmq.Again:
        s.close()
        time.sleep(0.2)
a = s.array("int64", "q", list(range(1000)))
f = s.array("float64", "d", [0.5] * 10)
print("save:", s.ok("save_checkpoint", {"name": "cp", "path": ".akdata", "mode": "overwrite"}))
s.ok("set<int64,1>", {"array": a, "dtype": "int64", "val": "0"})
print("load:", s.ok("load_checkpoint", {"name": "cp", "path": ".akdata"}))
print("restored:", s.to_list(a, "q") == list(range(1000)), s.to_list(f, "d") == [0.5] * 10)
print("shutdown:", s.ok("shutdown"))
"""
SCRIPT = """
cd /home/arkouda
arkouda_server -nl 3 --ServerPort=5555 --logLevel=LogLevel.WARN &
python3 /tmp/ckpt-driver.py
wait $!
echo "server exit $?"
"""


def test_every_locale_writes_and_reads_its_own_part_over_gasnet(arkouda_rootfs: Path, arkouda_image: str) -> None:
    shutil.copy(HERE / "akrequests.py", arkouda_rootfs / "tmp/akrequests.py")
    (arkouda_rootfs / "tmp/ckpt-driver.py").write_text(DRIVER)
    res = oci.run(
        arkouda_rootfs,
        ["sh", "-c", SCRIPT],
        image=arkouda_image,
        cwd="/home/arkouda",
        env={"GASNET_SPAWNFN": "L", "GASNET_MASTERIP": "127.0.0.1"},
        timeout=300,
    )
    out = res.stdout + res.stderr
    assert "save: cp\n" in out, out
    assert "load: cp\n" in out, out
    assert "restored: True True\n" in out, out
    assert "server exit 0\n" in out, out
    pids = {int(m.group(1)): m.group(2) for m in BARRIER_PID.finditer(out)}
    assert sorted(pids) == [0, 1, 2], out
    parts = [m.groups() for m in PART.finditer(out)]
    for kind in ("wrote", "read"):
        int_parts = sorted((int(loc), path, pid) for loc, k, path, _, pid in parts if k == kind and "_1_LOCALE" in path)
        # the int64 array's three parts, each by the locale it belongs to, in that locale's own process
        assert [(loc, pid) for loc, _, pid in int_parts] == [(i, pids[i]) for i in range(3)], out
        assert [Path(p).name.split("_LOCALE")[1] for _, p, _ in int_parts] == [f"{i:04d}.data" for i in range(3)]
    sizes = {(int(loc), k): int(n) for loc, k, path, n, _ in parts if "_1_LOCALE" in path}
    assert sizes == {(0, "wrote"): 333 * 8, (1, "wrote"): 333 * 8, (2, "wrote"): 334 * 8} | {
        (0, "read"): 333 * 8,
        (1, "read"): 333 * 8,
        (2, "read"): 334 * 8,
    }
