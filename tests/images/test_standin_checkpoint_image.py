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
import sys
sys.path.insert(0, "/tmp")
from akrequests import connected_session

s = connected_session(5555)  # the server listens once the GASNet job is up
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
# A test double of per-pod volumes: AMUDP's custom spawner (GASNET_SPAWNFN=C, GASNET_CSPAWN_CMD) starts each
# locale's arkouda_server_real in a directory of its own (its rank forced by GASNET_WORKER_RANK, as the
# bootstrap's ssh wrapper forces it), so the relative checkpoint path is a different filesystem tree per locale.
PODS = """
n=$1; shift
i=0
while [ "$i" -lt "$n" ]; do
  mkdir -p "/home/arkouda/pod$i"
  (cd "/home/arkouda/pod$i" && GASNET_WORKER_RANK=$i exec "$@") &
  i=$((i + 1))
done
"""
PER_POD_DRIVER = """
import sys
sys.path.insert(0, "/tmp")
from akrequests import connected_session

s = connected_session(5555)  # the server listens once the GASNet job is up
a = s.array("int64", "q", [1, 2, 3])
print("save:", s.msg("save_checkpoint", {"name": "cp", "path": ".akdata", "mode": "overwrite"})["msg"])
print("name:", a.name)
print("shutdown:", s.ok("shutdown"))
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


def test_per_pod_directories_fail_the_save_on_locale_1_as_arkouda_fails(
    arkouda_rootfs: Path, arkouda_image: str
) -> None:
    shutil.copy(HERE / "akrequests.py", arkouda_rootfs / "tmp/akrequests.py")
    (arkouda_rootfs / "tmp/ckpt-driver.py").write_text(PER_POD_DRIVER)
    (arkouda_rootfs / "tmp/pods.sh").write_text(PODS)
    res = oci.run(
        arkouda_rootfs,
        ["sh", "-c", SCRIPT],
        image=arkouda_image,
        cwd="/home/arkouda",
        env={"GASNET_SPAWNFN": "C", "GASNET_CSPAWN_CMD": "sh /tmp/pods.sh %N %C", "GASNET_MASTERIP": "127.0.0.1"},
        timeout=300,
    )
    out = res.stdout + res.stderr
    name = re.search(r"^name: (\S+)$", out, re.M)
    assert name is not None, out
    part = f".akdata/cp/{name.group(1)}_LOCALE0001.data"
    assert (
        f"save: Error executing command save_checkpoint: Failed to open local file '{part}'. "
        "Detail: [errno 2] No such file or directory\n"
    ) in out, out
    # locale 0 wrote its part in its own directory, locale 1 failed in its own, and said so in the log
    assert f"locale 0 wrote checkpoint part .akdata/cp/{name.group(1)}_LOCALE0000.data" in out, out
    assert f"locale 1: checkpoint part {part} failed: Failed to open local file" in out, out
    assert (arkouda_rootfs / f"home/arkouda/pod0/{part.replace('0001', '0000')}").is_file()
    assert not (arkouda_rootfs / "home/arkouda/pod1/.akdata").exists()
    assert "server exit 0\n" in out, out
