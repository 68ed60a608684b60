"""The Arkouda image's server side: GASNet-EX's real udp conduit and amudprun, and the stand-in for Arkouda's two
binaries at /opt/arkouda/bin (the same path in every pod): arkouda_server runs amudprun like Chapel's
generated launcher, arkouda_server_real is a C GASNet client that starts the Python stand-in server on locale 0.
Everything runs in the image with runc as uid 1000."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import oci

BIN = "/opt/arkouda/bin"
AMUDPRUN = "/opt/gasnet/bin/amudprun"
TESTGASNET = "/opt/gasnet/tests/testgasnet"
LOCALES_LINE = "ARKOUDA-STANDIN-GASNET-LOCALES "
BARRIER = re.compile(
    r"^arkouda_server_real STAND-IN: locale (\d+) of (\d+) passed the GASNet barrier after exchanging active "
    r"messages with (\d+) locale\(s\): host=(\S+) pid=(\d+) uid=(\d+) ssh=(\S+)$",
    re.M,
)
# A test double for Arkouda's server program on locale 0 (ARKOUDA_STANDIN_SERVER): prints what it was given.
PLACEHOLDER = (
    '#!/bin/sh\necho "placeholder args: $*"\necho "placeholder numLocales: $ARKOUDA_STANDIN_NUMLOCALES"\n'
    'echo "placeholder locales: $ARKOUDA_STANDIN_LOCALES"\necho "placeholder token: $ARKOUDA_SERVER_TOKEN"\n'
    'echo "placeholder cwd: $(pwd)"\n[ -z "${PLACEHOLDER_SLEEP:-}" ] || exec sleep "$PLACEHOLDER_SLEEP"\n'
    "exit ${PLACEHOLDER_STATUS:-0}\n"
)


def locales_report(out: str) -> dict[str, Any]:
    line = next(x for x in out.splitlines() if x.startswith(LOCALES_LINE))
    report: dict[str, Any] = json.loads(line[len(LOCALES_LINE) :])
    return report


def placeholder(rootfs: Path) -> str:
    path = rootfs / "tmp/placeholder-server"
    path.write_text(PLACEHOLDER)
    path.chmod(0o755)
    return "/tmp/placeholder-server"


def test_programs_at_their_fixed_paths(arkouda_rootfs: Path) -> None:
    for path in (f"{BIN}/arkouda_server", f"{BIN}/arkouda_server_real", AMUDPRUN, TESTGASNET):
        f = arkouda_rootfs / path.lstrip("/")
        assert f.is_file(), path
        assert f.stat().st_mode & 0o111, f"{path} not executable"
        assert f.read_bytes()[:4] == b"\x7fELF", f"{path} is not a compiled program"
    assert (arkouda_rootfs / "opt/arkouda/bin/arkouda_standin_server").is_file()
    # the compilers stay in the build stage
    assert not (arkouda_rootfs / "usr/bin/gcc").exists()
    assert not (arkouda_rootfs / "opt/gasnet/include").exists()


def test_standin_names_itself_and_runs_as_uid_1000(arkouda_rootfs: Path) -> None:
    for name in ("arkouda_server", "arkouda_server_real"):
        res = oci.run(arkouda_rootfs, [f"{BIN}/{name}", "--version"])
        assert res.returncode == 0, res.stderr
        assert "STAND-IN" in res.stdout
    res = oci.run(arkouda_rootfs, [f"{BIN}/arkouda_server_real", "--version"])
    assert "GASNet-EX 2024.5.0" in res.stdout
    res = oci.run(arkouda_rootfs, [f"{BIN}/arkouda_server", "--ServerPort=5555"])
    assert res.returncode == 2
    assert "Specify number of locales via -nl" in res.stderr


def test_gasnet_is_built_with_forced_posix_realtime_timers(arkouda_rootfs: Path) -> None:
    # GASNet stamps its build configuration into every program linked with it.
    for path in (f"{BIN}/arkouda_server_real", TESTGASNET):
        data = (arkouda_rootfs / path.lstrip("/")).read_bytes()
        config = re.search(rb"\$GASNetConfig: ([^$]*) \$", data)
        assert config, f"{path} has no $GASNetConfig"
        fields = config.group(1).decode().split(",")
        assert "timers_forced_posixrt" in fields, fields
        assert "CONDUIT=UDP(UDP-3.20/REFERENCE-2024.5)" in fields, fields
        assert "THREADMODEL=PAR" in fields, fields
        assert "SEGMENT=EVERYTHING" in fields, fields
        assert b"--enable-force-posix-realtime" in data


def test_gasnets_own_test_passes_with_the_local_spawner(arkouda_rootfs: Path, arkouda_image: str) -> None:
    res = oci.run(
        arkouda_rootfs,
        ["amudprun", "-np", "2", TESTGASNET],
        image=arkouda_image,
        cwd="/home/arkouda",
        env={"GASNET_SPAWNFN": "L", "GASNET_MASTERIP": "127.0.0.1"},
        timeout=300,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "node 0/2 done." in res.stdout
    assert "node 1/2 done." in res.stdout
    assert "FAIL" not in res.stdout + res.stderr


def test_launcher_runs_amudprun_and_every_locale_passes_the_barrier(arkouda_rootfs: Path, arkouda_image: str) -> None:
    server = placeholder(arkouda_rootfs)
    res = oci.run(
        arkouda_rootfs,
        ["arkouda_server", "-nl", "3", "--ServerPort=5555", "--logLevel=INFO"],
        image=arkouda_image,
        cwd="/home/arkouda",
        env={
            "GASNET_SPAWNFN": "L",
            "GASNET_MASTERIP": "127.0.0.1",
            "ARKOUDA_STANDIN_SERVER": server,
            "ARKOUDA_SERVER_TOKEN": "t0ken",
            "PLACEHOLDER_STATUS": "7",
        },
        timeout=300,
    )
    out = res.stdout
    # the job ends with the server's exit status, the way gasnet_exit ends a GASNet job
    assert res.returncode == 7, out + res.stderr
    passed = {int(m.group(1)): m for m in BARRIER.finditer(out)}
    assert sorted(passed) == [0, 1, 2], out
    for m in passed.values():
        assert (m.group(2), m.group(3), m.group(6)) == ("3", "2", "1000")
    report = locales_report(out)
    assert report["numLocales"] == 3
    assert [(loc["id"], loc["uid"], loc["pid"]) for loc in report["locales"]] == [
        (i, 1000, int(passed[i].group(5))) for i in range(3)
    ]
    # the server on locale 0 gets the user's arguments (Chapel's -nl consumed), numLocales from GASNet and the
    # launcher's environment (the ssh spawner would not give it otherwise: Chapel's -E options carry it)
    assert "placeholder args: --ServerPort=5555 --logLevel=INFO\n" in out
    assert "placeholder numLocales: 3\n" in out
    table = json.loads(out.split("placeholder locales: ", 1)[1].splitlines()[0])
    assert [sorted(t) for t in table] == [sorted(["id", "name", "pid", "uid", "numPUs", "physicalMemory"])] * 3
    assert [t["pid"] for t in table] == [loc["pid"] for loc in report["locales"]]
    assert "placeholder token: t0ken\n" in out
    assert "placeholder cwd: /home/arkouda\n" in out
    assert "the server exited with status 7; ending the GASNet job with it" in out


def test_a_dead_locale_ends_the_gasnet_job_and_the_server(arkouda_rootfs: Path, arkouda_image: str) -> None:
    server = placeholder(arkouda_rootfs)
    script = (
        "arkouda_server -nl 2 >/tmp/job.log 2>&1 & pid=$!; "
        "for i in $(seq 600); do grep -q 'placeholder cwd' /tmp/job.log && break; sleep 0.1; done; "
        "victim=$(sed -n 's/.*locale 1 of 2 passed the GASNet barrier.* pid=\\([0-9]*\\) .*/\\1/p' /tmp/job.log); "
        'echo "victim=$victim"; kill -KILL "$victim"; rc=0; wait $pid || rc=$?; echo "job rc=$rc"; sleep 1; '
        "ps -eo args | grep -E '^(sleep 300|/opt/arkouda/bin/arkouda_server_real)' || echo 'no process left'; "
        "cat /tmp/job.log"
    )
    res = oci.run(
        arkouda_rootfs,
        ["sh", "-c", script],
        image=arkouda_image,
        cwd="/home/arkouda",
        env={
            "GASNET_SPAWNFN": "L",
            "GASNET_MASTERIP": "127.0.0.1",
            "ARKOUDA_STANDIN_SERVER": server,
            "PLACEHOLDER_SLEEP": "300",
        },
        timeout=300,
    )
    out = res.stdout
    assert re.search(r"^victim=\d+$", out, re.M), out
    rc = int(re.search(r"^job rc=(\d+)$", out, re.M).group(1))  # type: ignore[union-attr]
    assert rc != 0, out  # GASNet aborts the job when a node's connection drops
    assert "no process left" in out, out


def test_launch_over_real_ssh_to_the_bootstraps_sshd(arkouda_rootfs: Path, arkouda_image: str) -> None:
    """The whole path in one container as uid 1000: the bootstrap's unprivileged sshd with fresh keys, the real
    amudprun's ssh spawner, the stand-in server answering the client replay. It also pins down the AMUDP fact
    the chart designs around: amudprun adds ``-o 'StrictHostKeyChecking no'`` for OpenSSH before
    GASNET_SSH_OPTIONS, so a pin in an ssh config file (``-F``) alone does not stop a wrong host key; the
    bootstrap's wrapper, which puts ``StrictHostKeyChecking=yes`` first, does."""
    script = arkouda_rootfs / "tmp/ssh_launch.sh"
    script.write_text((Path(__file__).parent / "ssh_launch.sh").read_text())
    res = oci.run(arkouda_rootfs, ["sh", "/tmp/ssh_launch.sh"], image=arkouda_image, cwd="/home/arkouda", timeout=500)
    assert res.returncode == 0, res.stdout + res.stderr
    cases: dict[str, tuple[int, str]] = {}
    section: list[str] = []
    for line in res.stdout.splitlines():
        if line.startswith("=== "):
            name, status = line[4:].split(" rc=")
            cases[name] = (int(status), "\n".join(section))
            section = []
        else:
            section.append(line)
    assert set(cases) == {"pinned", "wrong-pin", "wrapper"}, res.stdout

    rc, out = cases["pinned"]
    assert rc == 0, out
    passed = sorted((int(m.group(1)), m.group(6), m.group(7)) for m in BARRIER.finditer(out))
    assert passed == [(0, "1000", "127.0.0.1"), (1, "1000", "127.0.0.1")], out  # both started through sshd
    report = locales_report(out)
    assert [loc["sshAddress"] for loc in report["locales"]] == ["127.0.0.1", "127.0.0.1"]
    # what amudprun was given, as locale 0 received it through Chapel's -E options
    assert report["spawner"]["GASNET_SSH_CMD"] == "/bin/sh /tmp/state/gasnet-ssh-pinned"
    assert report["spawner"]["GASNET_SSH_OPTIONS"] == "-F /tmp/pinned.conf"
    assert report["spawner"]["GASNET_MASTERIP"] == "127.0.0.1"
    assert "client: numLocales=2" in out

    rc, out = cases["wrong-pin"]
    assert rc == 0, out  # the spawner's StrictHostKeyChecking no wins over the config file's yes
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in out

    rc, out = cases["wrapper"]
    assert rc != 0, out
    assert "Host key verification failed" in out
    assert not BARRIER.search(out), out
