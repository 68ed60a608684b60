"""The Arkouda image's server binaries: both at /opt/arkouda/bin (the same path in every pod); here they are
the stand-in, which must say so."""

from __future__ import annotations

import json
from pathlib import Path

import oci


def test_both_binaries_at_the_fixed_path(arkouda_rootfs: Path) -> None:
    for name in ("arkouda_server", "arkouda_server_real"):
        path = arkouda_rootfs / "opt/arkouda/bin" / name
        assert path.is_file(), name
        assert path.stat().st_mode & 0o111, f"{name} not executable"
    # byte-compiled at build time: the pods' root filesystem is read-only
    assert list((arkouda_rootfs / "opt/arkouda/lib/arkouda_standin/__pycache__").glob("launcher.*.pyc"))


def test_standin_names_itself_and_runs_as_uid_1000(arkouda_rootfs: Path) -> None:
    res = oci.run(arkouda_rootfs, ["/opt/arkouda/bin/arkouda_server", "--version"])
    assert res.returncode == 0, res.stderr
    assert "STAND-IN" in res.stdout
    res = oci.run(arkouda_rootfs, ["/opt/arkouda/bin/arkouda_server_real", "--version"])
    assert res.returncode == 0, res.stderr
    assert "STAND-IN" in res.stdout


def test_standin_launches_locales_inside_the_image(arkouda_rootfs: Path) -> None:
    # One container, two locales on 127.0.0.1 through a fake ssh (a test double that runs the remote
    # command with /bin/sh locally): the launch report must list both with uid 1000 and the fixed path.
    fake = arkouda_rootfs / "tmp/fake-ssh"
    fake.write_text(
        '#!/bin/sh\n[ "$1" = -V ] && exit 0\nwhile [ "${1#-}" != "$1" ]; do shift 2; done\n'
        'shift\nexec /bin/sh -c "$*"\n'
    )
    fake.chmod(0o755)
    script = (
        "arkouda_server -nl 2 --ServerPort=5555 & pid=$!; "
        "for i in $(seq 300); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 5555), 1)' "
        "2>/dev/null && break; sleep 0.2; done; "
        "PYTHONPATH=/opt/arkouda/lib python3 -m arkouda_standin.client 127.0.0.1 5555 getconfig; "
        "PYTHONPATH=/opt/arkouda/lib python3 -m arkouda_standin.client 127.0.0.1 5555 shutdown >/dev/null; "
        "wait $pid"
    )
    res = oci.run(
        arkouda_rootfs,
        ["sh", "-c", script],
        cwd="/home/arkouda",
        env={
            "PATH": "/opt/arkouda/bin:/usr/bin:/bin",
            "GASNET_SSH_SERVERS": "127.0.0.1 127.0.0.1",
            "GASNET_SSH_CMD": "/tmp/fake-ssh",
            "GASNET_MASTERIP": "127.0.0.1",
            "GASNET_SSH_REMOTE_PATH": "/opt/arkouda/bin",
        },
    )
    assert res.returncode == 0, res.stdout + res.stderr
    report_line = next(line for line in res.stdout.splitlines() if line.startswith("STANDIN-LAUNCH-REPORT "))
    report = json.loads(report_line.split(" ", 1)[1])
    assert [loc["locale"] for loc in report["locales"]] == [0, 1]
    for loc in report["locales"]:
        assert loc["uid"] == 1000
        assert loc["binary"] == "/opt/arkouda/bin/arkouda_server_real"
        assert loc["cwd"] == "/opt/arkouda/bin"
    config = json.loads(next(line for line in res.stdout.splitlines() if line.startswith("{")))
    assert config["numLocales"] == 2
    assert [c["id"] for c in config["LocaleConfigs"]] == [0, 1]


def test_standin_over_real_ssh_to_the_bootstraps_sshd(arkouda_rootfs: Path, arkouda_image: str) -> None:
    """The whole path in one container as uid 1000: the bootstrap's unprivileged sshd with fresh keys, the
    stand-in launcher over OpenSSH. It also pins down the AMUDP fact the chart must design around: the
    spawner's own ``-o 'StrictHostKeyChecking no'`` precedes GASNET_SSH_OPTIONS, so a pin in an ssh config
    file (``-F``) alone does not stop a wrong host key; an SSH_CMD wrapper that puts
    ``StrictHostKeyChecking=yes`` first does."""
    script = arkouda_rootfs / "tmp/ssh_launch.sh"
    script.write_text((Path(__file__).parent / "ssh_launch.sh").read_text())
    res = oci.run(arkouda_rootfs, ["sh", "/tmp/ssh_launch.sh"], image=arkouda_image, cwd="/home/arkouda", timeout=240)
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
    report = json.loads(next(x for x in out.splitlines() if x.startswith("STANDIN-LAUNCH-REPORT ")).split(" ", 1)[1])
    assert [(loc["locale"], loc["uid"], loc["binary"]) for loc in report["locales"]] == [
        (0, 1000, "/opt/arkouda/bin/arkouda_server_real"),
        (1, 1000, "/opt/arkouda/bin/arkouda_server_real"),
    ]
    assert all(loc["env"]["SSH_CONNECTION"].startswith("127.0.0.1 ") for loc in report["locales"])

    rc, out = cases["wrong-pin"]
    assert rc == 0, out  # the spawner's StrictHostKeyChecking no wins over the config file's yes
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in out

    rc, out = cases["wrapper"]
    assert rc == 1, out
    assert "Host key verification failed" in out
    assert "failed: ssh exited with status 255 before the locale reported" in out
