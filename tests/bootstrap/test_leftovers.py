"""Before a launch the probe ends what a previous launch left on a host: a real sshd started by `locale` as the
non-root test user, a stand-in for the launched program (a copy of `sleep` under the program's path) left running
over ssh the way amudprun's workers are, then the server's probe (sshprobe / ssh.probe_host) with end_leftovers."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import paramiko
import pytest
from arkouda_bootstrap import netdrops
from arkouda_bootstrap.config import Launcher
from arkouda_bootstrap.server import launch
from arkouda_bootstrap.ssh import client as ssh
from arkouda_bootstrap.ssh import keys
from arkouda_bootstrap.ssh import probe as sshprobe

FAST = ssh.RetryPolicy(attempts=3, initial_delay=0.1, max_delay=0.2)


@pytest.fixture
def programs(shared_dir: Path) -> Path:
    """shared_dir/bin with two copies of sleep: arkouda_server_real (the program) and other_real (not it)."""
    bin_dir = shared_dir / "bin"
    bin_dir.mkdir()
    sleep = shutil.which("sleep")
    assert sleep is not None
    for name in ("arkouda_server_real", "other_real"):
        shutil.copy(sleep, bin_dir / name)
        (bin_dir / name).chmod(0o755)
    return bin_dir


@dataclass(frozen=True)
class Access:
    """How the tests reach the loopback sshd as the test user: its port, the client key, the pinned host key."""

    port: int
    user: str
    key: paramiko.PKey
    pinned: keys.PublicKey


@pytest.fixture
def access(
    loopback_sshd: tuple[Path, int], test_user: pwd.struct_passwd, secret_data: dict[str, bytes], tmp_path: Path
) -> Access:
    path = tmp_path / "id"
    path.write_bytes(secret_data[keys.CLIENT_KEY])
    path.chmod(0o600)
    return Access(
        port=loopback_sshd[1],
        user=test_user.pw_name,
        key=sshprobe.load_release_client_key(path),
        pinned=keys.release_pinned_host_key(secret_data[keys.KNOWN_HOSTS].decode()),
    )


def _probe(access: Access, *, end_leftovers: str | None = None) -> sshprobe.Probed:
    return sshprobe.probe(
        "127.0.0.1",
        pod="arkouda-locale-1",
        port=access.port,
        user=access.user,
        client_key=access.key,
        pinned=access.pinned,
        timeout=5,
        end_leftovers=end_leftovers,
    )


def _start_over_ssh(access: Access, program: Path) -> int:
    """Starts `program 300` detached over an ssh session (as amudprun's spawner leaves a worker whose master is
    gone), returns its pid; the session ends, the program keeps running."""
    client = paramiko.SSHClient()
    client.get_host_keys().add(
        f"[127.0.0.1]:{access.port}",
        keys.KEY_TYPE,
        paramiko.PKey.from_type_string(keys.KEY_TYPE, access.pinned.blob),
    )
    client.connect(
        "127.0.0.1", port=access.port, username=access.user, pkey=access.key, look_for_keys=False, allow_agent=False
    )
    try:
        _, stdout, _ = client.exec_command(f"{program} 300 </dev/null >/dev/null 2>&1 & echo $!", timeout=10)
        pid = int(stdout.read().decode().strip())
        assert stdout.channel.recv_exit_status() == 0
    finally:
        client.close()
    return pid


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper does not count: it holds no memory)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _gone_within(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _alive(pid)


@pytest.fixture
def cleanup() -> Iterator[list[int]]:
    pids: list[int] = []
    yield pids
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_probe_ends_leftovers_of_the_program_only_and_its_own_session_succeeds(
    access: Access,
    programs: Path,
    cleanup: list[int],
) -> None:
    program = programs / "arkouda_server_real"
    leftovers = [_start_over_ssh(access, program) for _ in range(2)]
    other = _start_over_ssh(access, programs / "other_real")
    # the same program of another user (root here): not ours to end, and the test user cannot anyway
    foreign = subprocess.Popen([str(program), "300"])
    cleanup += [*leftovers, other, foreign.pid]
    assert all(_alive(pid) for pid in cleanup)

    def probe() -> int:
        return _probe(access, end_leftovers=str(program)).ended

    # the probe returns (its own command exited 0, so its session survived) with the count it ended
    assert probe() == 2
    assert all(_gone_within(pid) for pid in leftovers)
    assert _alive(other)
    assert _alive(foreign.pid)
    assert foreign.poll() is None
    # nothing left the second time
    assert probe() == 0
    foreign.kill()
    foreign.wait()


def test_probe_host_reports_the_ended_leftovers(
    access: Access,
    programs: Path,
    cleanup: list[int],
) -> None:
    program = programs / "arkouda_server_real"
    cleanup.append(_start_over_ssh(access, program))
    heard: list[tuple[ssh.Host, int]] = []
    keys_now = sshprobe.ProbeKeys(client_key=access.key, pinned=access.pinned)
    host = ssh.Host("127.0.0.1", "arkouda-locale-1")
    for _ in range(2):  # the second probe finds nothing and says nothing
        ssh.probe_host(
            host,
            port=access.port,
            user=access.user,
            keys=lambda: keys_now,
            timeout=5,
            policy=FAST,
            end_leftovers=str(program),
            on_leftovers=lambda h, n: heard.append((h, n)),
        )
    assert heard == [(host, 1)]
    assert _gone_within(cleanup[0])


def test_probe_without_end_leftovers_leaves_the_program_running(
    access: Access,
    programs: Path,
    cleanup: list[int],
) -> None:
    """The Slurm path probes without it: a node there may run another job of the same user."""
    cleanup.append(_start_over_ssh(access, programs / "arkouda_server_real"))
    assert _probe(access) == sshprobe.Probed(ended=0, counters=None)
    assert _alive(cleanup[0])


def test_the_leftover_command_is_posix_sh_and_counts_only_matching_processes(tmp_path: Path) -> None:
    """The command itself under dash (the images' /bin/sh), without ssh: our own shell never matches, even for
    a program path with a space and a quote in it."""
    sleep = shutil.which("sleep")
    assert sleep is not None
    program = tmp_path / "it's a program_real"
    shutil.copy(sleep, program)
    program.chmod(0o755)
    child = subprocess.Popen([str(program), "300"])
    try:
        out = subprocess.run(
            ["/bin/sh", "-c", sshprobe.leftovers_command(str(program))], capture_output=True, text=True, check=True
        )
        assert out.stdout.splitlines()[0] == "ended=1"
        assert child.wait(timeout=5) == -signal.SIGKILL
        again = subprocess.run(
            ["/bin/sh", "-c", sshprobe.leftovers_command(str(program))], capture_output=True, text=True, check=True
        )
        assert again.stdout.splitlines()[0] == "ended=0"
        # then the host's /proc/net/snmp (sh builtins only): the same table as a read of it now, whose counters
        # can only have grown since (they move all the time: never compared byte for byte)
        printed = again.stdout.split("\n", 1)[1]
        live = Path(netdrops.SNMP_PATH).read_text()
        assert _table(printed) == _table(live)
        assert not netdrops.parse_snmp(live).minus(netdrops.parse_snmp(printed)).went_back
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def _table(snmp: str) -> list[str]:
    """/proc/net/snmp without its values: the field-name lines whole, each value line's section only."""
    lines = snmp.splitlines()
    return [line if i % 2 == 0 else line.split(":", 1)[0] for i, line in enumerate(lines)]


POSIX_SHELLS = {
    "sh": ["/bin/sh"],
    "dash": ["dash"],
    "bash --posix": ["bash", "--posix"],
    "busybox sh": ["busybox", "sh"],
    "yash -o posixlycorrect": ["yash", "-o", "posixlycorrect"],
    "posh": ["posh"],
}


@pytest.mark.parametrize("shell", POSIX_SHELLS)
def test_the_counters_script_is_quiet_and_succeeds_without_the_file_in_every_posix_shell(
    shell: str, tmp_path: Path
) -> None:
    """A host without /proc/net/snmp: nothing printed, exit 0 (no probe failed for it); with the file: its table.
    Under strace (where it can trace): the missing file is tested, never opened (a failed redirection is a shell
    error, which a strict shell may end on)."""
    argv = POSIX_SHELLS[shell]
    if shutil.which(argv[0]) is None:
        pytest.skip(f"no {argv[0]} here")
    missing = sshprobe.SNMP_SCRIPT.replace(netdrops.SNMP_PATH, str(tmp_path / "no-snmp"))
    out = subprocess.run([*argv, "-c", missing], capture_output=True, text=True, check=False, timeout=30)
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")
    present = subprocess.run([*argv, "-c", sshprobe.SNMP_SCRIPT], capture_output=True, text=True, check=True)
    assert _table(present.stdout) == _table(Path(netdrops.SNMP_PATH).read_text())
    strace = shutil.which("strace")
    if strace is None:
        return
    trace = tmp_path / "trace"
    traced = subprocess.run(
        [strace, "-f", "-e", "trace=open,openat", "-o", str(trace), *argv, "-c", missing],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    if traced.returncode != 0:  # no ptrace here (a container without SYS_PTRACE)
        return
    assert "no-snmp" not in trace.read_text()


def test_remote_program_is_the_launchers_real_binary_for_arkouda_only(tmp_path: Path) -> None:
    assert launch.remote_program(Launcher.ARKOUDA, ["/opt/arkouda/bin/arkouda_server", "--x"]) == (
        "/opt/arkouda/bin/arkouda_server_real"
    )
    # a bare name is where PATH finds it, as the launcher runs it
    sh = shutil.which("sh")
    assert sh is not None
    assert launch.remote_program(Launcher.ARKOUDA, ["sh"]) == os.path.abspath(sh) + "_real"
    assert launch.remote_program(Launcher.MPI, ["/usr/bin/mpirun", "prog"]) is None
    assert launch.remote_program(Launcher.NONE, []) is None


def test_the_probe_hands_the_hosts_counters_to_on_counters(access: Access, programs: Path) -> None:
    """The loopback sshd shares this network namespace: the counters the probe read lie between two local
    readings taken around it."""
    heard: list[tuple[ssh.Host, netdrops.Counters]] = []
    keys_now = sshprobe.ProbeKeys(client_key=access.key, pinned=access.pinned)
    host = ssh.Host("127.0.0.1", "arkouda-locale-1")
    before = netdrops.read_local()
    ssh.probe_host(
        host,
        port=access.port,
        user=access.user,
        keys=lambda: keys_now,
        timeout=5,
        policy=FAST,
        end_leftovers=str(programs / "arkouda_server_real"),
        on_counters=lambda h, c: heard.append((h, c)),
    )
    later = netdrops.read_local()
    [(who, counters)] = heard
    assert who == host
    assert not counters.minus(before).went_back
    assert not later.minus(counters).went_back
    # and the same once the program is up, in a session of its own
    again = sshprobe.read_counters(
        "127.0.0.1", pod="arkouda-locale-1", port=access.port, user=access.user, keys=keys_now, timeout=5
    )
    assert not again.minus(later).went_back
    assert not netdrops.read_local().minus(again).went_back


def test_an_unreadable_counters_file_leaves_the_probe_as_it_was(
    access: Access, programs: Path, cleanup: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No baseline for that host, and the leftover check still works and still succeeds."""
    monkeypatch.setattr(
        sshprobe, "LEFTOVERS_SCRIPT", sshprobe.LEFTOVERS_SCRIPT.replace(netdrops.SNMP_PATH, "/proc/net/no-such-file")
    )
    cleanup.append(_start_over_ssh(access, programs / "arkouda_server_real"))
    assert _probe(access, end_leftovers=str(programs / "arkouda_server_real")) == sshprobe.Probed(ended=1)
    heard: list[netdrops.Counters] = []
    ssh.probe_host(
        ssh.Host("127.0.0.1", "arkouda-locale-1"),
        port=access.port,
        user=access.user,
        keys=lambda: sshprobe.ProbeKeys(client_key=access.key, pinned=access.pinned),
        timeout=5,
        policy=FAST,
        end_leftovers=str(programs / "arkouda_server_real"),
        on_counters=lambda _, c: heard.append(c),
    )
    assert heard == []


def test_reading_counters_from_a_host_that_prints_none_names_it(
    access: Access, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sshprobe, "SNMP_SCRIPT", "echo nothing here")
    keys_now = sshprobe.ProbeKeys(client_key=access.key, pinned=access.pinned)
    with pytest.raises(sshprobe.CommandFailedError, match=r"pod arkouda-locale-1 \(127.0.0.1\): no Ip OutDiscards"):
        sshprobe.read_counters(
            "127.0.0.1", pod="arkouda-locale-1", port=access.port, user=access.user, keys=keys_now, timeout=5
        )
