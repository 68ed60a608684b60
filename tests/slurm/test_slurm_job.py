"""docs/slurm/arkouda.sbatch on a real Slurm (hack/slurm/up.sh: munged, slurmctld and two slurmd, i.e. two nodes
named 127.0.0.1 and 127.0.0.2 on this host): submitted by an unprivileged user with two nodes of two tasks, the job
runs `arkouda-bootstrap server --hosts-from slurm` with the stand-in arkouda_server (GASNet's real amudprun,
one locale per node over ssh through a real sshd pinned by host key); a client's getconfig is answered with
numLocales 2; scancel ends it: the program gets SIGTERM and nothing of the job is left.

What scancel does here is what it does on any site with proctrack/linuxproc: SIGTERM to every process of the batch
script at once, amudprun included. amudprun has no handler and dies (status 143); the locales notice the master
is gone and end, and the stand-in server on locale 0 gets SIGTERM from there (as Arkouda's locales would be torn
down by GASNet). Its own output can no longer reach the job's output (it travelled through amudprun), so its
clean stop shows as the connection-info file (ARKOUDA_SERVER_CONNECTION_INFO), which it removes only on a clean
exit (a SIGKILL or a halt leaves it)."""

from __future__ import annotations

import json
import pwd
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurmjob import (
    RUNTIME,
    ArkoudaJob,
    SlurmSite,
    arkouda_job,
    shared_dir,  # noqa: F401 - fixture
    slurm_site,
    test_user,  # noqa: F401 - fixture
    user_processes,
)

TASKS = 2


@pytest.fixture(scope="module")
def site() -> Iterator[SlurmSite]:
    with slurm_site() as running:
        yield running


@pytest.fixture
def job(site: SlurmSite, test_user: pwd.struct_passwd, shared_dir: Path) -> Iterator[ArkoudaJob]:  # noqa: F811
    info = shared_dir / "work" / "connection-info"
    with arkouda_job(
        site, user=test_user, base=shared_dir, env_extra={"ARKOUDA_SERVER_CONNECTION_INFO": str(info)}
    ) as made:
        yield made


def wait_gone(path: Path, *, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    return not path.exists()


def test_the_documented_batch_script_runs_arkouda_and_scancel_stops_it(job: ArkoudaJob, site: SlurmSite) -> None:
    nodes = len(site.nodes)
    assert nodes >= 2, f"hack/slurm/up.sh started {site.nodes}: the test wants a multi-node allocation"
    job.submit(nodes=nodes, tasks=TASKS)
    # the launch report: Slurm's own expansion, the batch host first, the stand-in started through amudprun
    report = job.wait_output(rf"^slurm: {nodes} nodes \((.*)\); batch host (\S+) \((\S+)\) first: (.*)$").groups()
    env = dict(item.split("=", 1) for item in report[0].split("; ")[0].split())
    assert report[0].endswith("; expanded by scontrol")
    assert env["SLURM_TASKS_PER_NODE"] == f"{TASKS}(x{nodes})"
    assert report[1] == env["SLURMD_NODENAME"]
    hosts = report[3].split()
    assert hosts[0] == report[1]
    assert sorted(hosts) == site.nodes
    launched = job.wait_output(rf"^launched (\S+) (.*) on {nodes} hosts \(arkouda\); pid (\d+)$")
    assert launched.group(1) == f"/tmp/arkouda-{job.job_id}/arkouda_server"  # the sbcast copy
    assert f"-nl {nodes}" in launched.group(2)
    job.wait_output(rf"ssh probe: all {nodes} hosts answered")
    job.wait_output(rf"STAND-IN.*{nodes} locales from the GASNet job")
    # every locale ran on its own node, reached over ssh at that node's address, in the bootstrap's order
    gasnet = json.loads(job.wait_output(r"^ARKOUDA-STANDIN-GASNET-LOCALES (.*)$").group(1))
    assert [locale["sshAddress"] for locale in gasnet["locales"]] == hosts
    assert gasnet["spawner"]["GASNET_SSH_SERVERS"] == " ".join(hosts)

    answer = job.client(expect_locales=nodes)
    assert answer.strip().splitlines()[-1] == f"numLocales={nodes}"
    # the server's own log in the job's output: getconfig asked and answered
    job.wait_output(r">>> 'getconfig'")
    job.wait_output(r"<<< getconfig took")
    assert site.job_state(job.job_id) == "RUNNING"
    info = job.base / "work" / "connection-info"
    assert info.read_text().split()[1] == str(job.server_port)

    job.scancel()
    state = job.wait_finished()
    out = job.text()
    assert state == "CANCELLED", out
    pid = launched.group(3)
    # the program (arkouda_server, i.e. amudprun) got SIGTERM and the bootstrap saw it end, then ended itself.
    # Slurm signals every process of the step, in an order of its own: the bootstrap forwards the signal only when
    # it hears it before the program ends (one run in CI heard it after), so the forwarding line is not asserted
    # here; test_supervise.py checks the forwarding itself.
    assert f"pid {pid} exited with status 143" in out, out
    assert wait_gone(info, seconds=15), f"the stand-in server did not stop cleanly: {info} is still there\n{out}"
    assert "Traceback" not in out, out

    def of_this_job(cmd: str) -> bool:
        return str(RUNTIME) in cmd or f"arkouda-{job.job_id}" in cmd

    assert user_processes(job.user.pw_uid, keep=lambda cmd: not of_this_job(cmd)) == []


def test_a_job_without_pinned_host_key_fails_in_one_line(job: ArkoudaJob) -> None:
    (job.base / "ssh" / "known_hosts").write_text("")
    job.submit(nodes=1, tasks=1)
    state = job.wait_finished(timeout=90)
    out = job.text()
    assert state == "FAILED", out
    errors = [line for line in out.splitlines() if line.startswith("arkouda-bootstrap: error:")]
    assert len(errors) == 1, out
    assert "is not pinned in" in errors[0] and "nothing is trusted on first use" in errors[0], out
