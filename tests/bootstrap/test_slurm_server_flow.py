"""The whole `server --hosts-from slurm` path through the CLI, as a non-root user, against a real unprivileged sshd
answering for three "nodes" (127.0.0.1-3 on loopback): the host list from a Slurm job's environment (batch host
first), the user's own key and a site known_hosts pinning each node, the probe, the launcher's files and
environment, the stand-in launcher (test double of amudprun) reaching every node over the pinned ssh, and
--register-service against the API server test double, withdrawn at SIGTERM (what scancel sends)."""

from __future__ import annotations

import importlib
import importlib.abc
import json
import os
import pwd
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from apiserver_double import MANAGED, SERVICES, SLICES, TOKEN, Answer, ApiServerDouble
from arkouda_bootstrap.cli import main as cli
from arkouda_bootstrap.ssh import keys
from conftest import free_port
from privdrop import spawn_as, wait_exit
from test_server_flow import STANDIN

# The child runs as the test user, who cannot read the venv under /root: what the Slurm path and
# --register-service load must already be imported here (privdrop.preimport covers the pod path).
for _module in (
    "arkouda_bootstrap.slurm.hosts",
    "arkouda_bootstrap.slurm.userkeys",
    "arkouda_bootstrap.slurm.registration",
    "kubernetes.client",
    "kubernetes.config",
    "kubernetes.client.api.core_v1_api",
    "kubernetes.client.api.discovery_v1_api",
):
    importlib.import_module(_module)

NODELIST = "127.0.0.[2-3],127.0.0.1"  # the batch host (127.0.0.1) last in Slurm's order, first in ours
SLURM_CONF = "ClusterName=t\nSlurmctldHost=localhost\nNodeName=localhost CPUs=1\nPartitionName=p Nodes=localhost\n"

# Test double of mpirun: records the hostfile and the OpenMPI variables it would read.
MPI_STANDIN = r"""#!/bin/sh
cat "$ARKOUDA_HOSTFILE" > "$ARKBS_OUT.hostfile"
env | grep -E '^(OMPI_MCA_|PRTE_MCA_|SSH_SERVERS)' | sort > "$ARKBS_OUT.env"
"""

# A server that listens on its --ServerPort until SIGTERM (the registration waits for the port).
LISTENER = r"""
import signal, socket, sys
port = int(sys.argv[1].split("=", 1)[1])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen()
signal.pause()
"""


class _NoKubernetes(importlib.abc.MetaPathFinder):
    """Import hook for the child: the Slurm path must never import the kubernetes client."""

    def find_spec(self, fullname: str, path: object, target: object = None) -> None:
        if fullname == "kubernetes" or fullname.startswith("kubernetes."):
            raise ImportError(f"the Slurm path imported {fullname}")


def forbid_kubernetes() -> None:
    for name in [m for m in sys.modules if m == "kubernetes" or m.startswith("kubernetes.")]:
        del sys.modules[name]
    sys.meta_path.insert(0, _NoKubernetes())


def host_pub(secret: dict[str, bytes]) -> str:
    return " ".join(secret[keys.HOST_PUB].decode().split()[:2])


class Job:
    """A fake Slurm job's node: the user's ~/.ssh, the site's known_hosts, TMPDIR and the job's environment."""

    def __init__(self, *, base: Path, user: pwd.struct_passwd, secret: dict[str, bytes], port: int) -> None:
        self.base, self.user, self.port = base, user, port
        self.ssh_dir = base / "home-ssh"
        self.ssh_dir.mkdir(mode=0o700)
        (self.ssh_dir / "id_ed25519").write_bytes(secret[keys.CLIENT_KEY])
        (self.ssh_dir / "id_ed25519").chmod(0o600)
        self.pin(secret, hosts=("127.0.0.1", "127.0.0.2", "127.0.0.3"))
        self.tmp = base / "tmp"
        self.out = base / "out"
        for d in (self.tmp, self.out):
            d.mkdir()
        conf = base / "slurm.conf"
        conf.write_text(SLURM_CONF)
        conf.chmod(0o644)
        for p in (self.ssh_dir, *self.ssh_dir.iterdir(), self.tmp, self.out):
            os.chown(p, user.pw_uid, user.pw_gid)
        self.env = {
            "PATH": "/usr/bin:/bin",
            "HOME": "/nonexistent",
            "TMPDIR": str(self.tmp),
            "SLURM_CONF": str(conf),
            "SLURM_JOB_ID": "4242",
            "SLURM_JOB_NODELIST": NODELIST,
            "SLURM_TASKS_PER_NODE": "2,1,3",
            "SLURMD_NODENAME": "127.0.0.1",
            "ARKBS_OUT": str(self.out / "ran"),
        }

    def pin(self, secret: dict[str, bytes], *, hosts: tuple[str, ...]) -> None:
        names = ",".join(f"[{h}]:{self.port}" for h in hosts)
        (self.ssh_dir / "known_hosts").write_text(f"{names} {host_pub(secret)}\n")

    @property
    def state_dir(self) -> Path:
        return self.tmp / f"arkouda-bootstrap-{self.user.pw_uid}-4242"

    def program(self, text: str, name: str = "arkouda_server") -> Path:
        path = self.base / "bin" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
        return path

    def start(self, argv: list[str], *, env: dict[str, str] | None = None, kubernetes: bool = False) -> int:
        full = ["server", "--ssh-dir", str(self.ssh_dir), "--port", str(self.port), "--probe-attempts", "3", *argv]
        result = self.out / "kubernetes-imported"

        def body() -> int:
            if not kubernetes:
                forbid_kubernetes()
            try:
                return cli.main(full, environ=os.environ)
            finally:
                result.write_text(str(any(m.startswith("kubernetes") for m in sys.modules)))

        child_env = {**self.env, **(env or {})}
        return spawn_as(uid=self.user.pw_uid, gid=self.user.pw_gid, env=child_env, log_path=self.log, fn=body)

    @property
    def log(self) -> Path:
        return self.base / "server.log"

    def run(self, argv: list[str], *, env: dict[str, str] | None = None) -> tuple[int, str]:
        code = wait_exit(self.start(argv, env=env))
        return code, self.log.read_text()


@pytest.fixture
def job(
    test_user: pwd.struct_passwd, shared_dir: Path, secret_data: dict[str, bytes], loopback_sshd: tuple[Path, int]
) -> Job:
    # one real sshd answers for the three "nodes"; the job's user logs in with the key in its own ~/.ssh
    _, port = loopback_sshd
    return Job(base=shared_dir, user=test_user, secret=secret_data, port=port)


def env_file(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_arkouda_over_the_allocation_batch_host_first(job: Job) -> None:
    standin = job.program(STANDIN)
    code, log = job.run(["--", str(standin), "--ServerPort=5555"], env={"ARKOUDA_HOSTS_FROM": "slurm"})
    assert code == 0, log
    assert "batch host 127.0.0.1 (127.0.0.1) first: 127.0.0.1 127.0.0.2 127.0.0.3" in log
    assert "ssh probe: all 3 hosts answered" in log
    ran = (job.out / "ran").read_text().splitlines()
    assert ran == [f"ok 127.0.0.{i} {job.user.pw_name}" for i in (1, 2, 3)]
    env = env_file(job.out / "ran.env")
    assert env["SSH_SERVERS"] == env["GASNET_SSH_SERVERS"] == "127.0.0.1 127.0.0.2 127.0.0.3"
    assert env["GASNET_MASTERIP"] == "127.0.0.1"
    assert env["ARKOUDA_SSH_CONFIG"] == str(job.state_dir / "ssh_config")
    config = (job.state_dir / "ssh_config").read_text()
    assert f"IdentityFile {job.ssh_dir / 'id_ed25519'}" in config
    assert f"UserKnownHostsFile {job.ssh_dir / 'known_hosts'}" in config
    assert "StrictHostKeyChecking yes" in config
    assert job.state_dir.stat().st_mode & 0o777 == 0o700
    assert (job.out / "kubernetes-imported").read_text() == "False"


def test_mpi_slots_follow_the_task_layout(job: Job) -> None:
    standin = job.program(MPI_STANDIN, "mpirun")
    code, log = job.run(["--hosts-from", "slurm", "--launcher", "mpi", "--", str(standin), "-np", "6"])
    assert code == 0, log
    # SLURM_TASKS_PER_NODE=2,1,3 is in the nodelist's order (.2, .3, .1); the batch host moves first with its 3
    assert (job.out / "ran.hostfile").read_text() == "127.0.0.1 slots=3\n127.0.0.2 slots=2\n127.0.0.3 slots=1\n"
    env = env_file(job.out / "ran.env")
    assert env["OMPI_MCA_plm"] == "rsh" and env["PRTE_MCA_plm"] == "ssh"
    assert env["OMPI_MCA_plm_rsh_agent"] == str(job.state_dir / "bin" / "ssh")


def test_a_node_missing_from_known_hosts_is_refused_before_launch(job: Job, secret_data: dict[str, bytes]) -> None:
    job.pin(secret_data, hosts=("127.0.0.1", "127.0.0.2"))
    standin = job.program(STANDIN)
    code, log = job.run(["--hosts-from", "slurm", "--", str(standin)])
    assert code == 1, log
    errors = [line for line in log.splitlines() if line.startswith("arkouda-bootstrap: error:")]
    assert errors == [
        f"arkouda-bootstrap: error: ssh probe failed: host [127.0.0.3]:{job.port} is not pinned in "
        f"{job.ssh_dir / 'known_hosts'} (--known-hosts, ARKOUDA_SSH_KNOWN_HOSTS): add its ssh-ed25519 host key "
        "(your site's ssh_known_hosts has it); nothing is trusted on first use"
    ]
    assert not (job.out / "ran").exists()


def test_a_node_with_another_host_key_is_refused(job: Job, secret_data: dict[str, bytes]) -> None:
    other = keys.build_secret_data(release="other", with_token=False)
    lines = [
        f"[127.0.0.1]:{job.port},[127.0.0.3]:{job.port} {host_pub(secret_data)}",
        f"[127.0.0.2]:{job.port} {host_pub(other)}",
    ]
    site = job.base / "ssh_known_hosts"
    site.write_text("\n".join(lines) + "\n")
    site.chmod(0o644)
    code, log = job.run(["--hosts-from", "slurm", "--known-hosts", str(site), "--", str(job.program(STANDIN))])
    assert code == 1, log
    assert (
        f"arkouda-bootstrap: error: ssh probe failed: host 127.0.0.2 presented a host key that {site} does not pin "
        f"for [127.0.0.2]:{job.port}: the node was reinstalled" in log
    )
    assert "Traceback" not in log


def test_num_locales_must_match_the_allocation(job: Job) -> None:
    code, log = job.run(["--hosts-from", "slurm", "--num-locales", "4", "--", str(job.program(STANDIN))])
    assert code == 2, log
    assert "--num-locales (ARKOUDA_NUM_LOCALES) is 4 but the job has 3 nodes" in log


# -- --register-service ------------------------------------------------------------------------------------


def kubeconfig(path: Path, port: int) -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "d", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": TOKEN}}],
                "contexts": [{"name": "c", "context": {"cluster": "d", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    path.chmod(0o644)
    return path


def wait_seen(double: ApiServerDouble, method: str, path: str, *, seconds: float = 30) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for seen in double.seen:
            if (seen.method, seen.path) == (method, path):
                return seen
        time.sleep(0.05)
    raise AssertionError(f"no {method} {path} within {seconds}s: {[(s.method, s.path) for s in double.seen]}")


def test_register_service_publishes_while_running_and_withdraws_at_sigterm(
    job: Job, apiserver: ApiServerDouble
) -> None:
    apiserver.answer(
        Answer("POST", SERVICES, status=201, body={"metadata": {"name": "ak", "uid": "svc-uid", "labels": MANAGED}}),
        Answer(
            "POST", SLICES, status=201, body={"metadata": {"name": "ak", "resourceVersion": "7", "labels": MANAGED}}
        ),
        Answer("GET", f"{SLICES}/ak", body={"metadata": {"name": "ak", "resourceVersion": "7", "labels": MANAGED}}),
        Answer("PUT", f"{SLICES}/ak", body={"metadata": {"name": "ak", "resourceVersion": "8"}}),
        Answer("DELETE", f"{SLICES}/ak", body={"kind": "Status", "status": "Success"}),
        Answer("DELETE", f"{SERVICES}/ak", body={"kind": "Status", "status": "Success"}),
    )
    server_port = free_port()
    listener = job.program(f"#!/bin/sh\nexec python3 -c '{LISTENER}' \"$@\"\n", "listener")
    pid = job.start(
        [
            "--hosts-from",
            "slurm",
            "--launcher",
            "none",
            "--register-service",
            "ak",
            "--kube-namespace",
            "ns",
            "--kubeconfig",
            str(kubeconfig(job.base / "kubeconfig", apiserver.port)),
            "--host-ip",
            "192.0.2.10",  # documentation address: only ever sent as data to the double
            "--",
            str(listener),
            f"--ServerPort={server_port}",
        ],
        env={"SLURM_JOB_NODELIST": "127.0.0.1", "SLURM_TASKS_PER_NODE": "1"},
        kubernetes=True,  # only --register-service talks to an API server
    )
    try:
        wait_seen(apiserver, "PUT", f"{SLICES}/ak")
    except AssertionError:
        os.kill(pid, signal.SIGKILL)
        wait_exit(pid)
        raise AssertionError(job.log.read_text()) from None
    os.kill(pid, signal.SIGTERM)  # scancel
    code = wait_exit(pid)
    log = job.log.read_text()
    assert code == 128 + signal.SIGTERM, log  # the listener's own status: killed by the forwarded SIGTERM
    calls = [(s.method, s.path) for s in apiserver.seen]
    assert calls == [
        ("POST", SERVICES),
        ("POST", SLICES),
        ("GET", f"{SLICES}/ak"),
        ("PUT", f"{SLICES}/ak"),
        ("DELETE", f"{SLICES}/ak"),
        ("DELETE", f"{SERVICES}/ak"),
    ], log
    service, created, marked = (apiserver.seen[i].body or {} for i in (0, 1, 3))
    assert "selector" not in service["spec"]
    assert service["spec"]["ports"] == [
        {"name": "arkouda", "port": server_port, "targetPort": server_port, "protocol": "TCP"}
    ]
    assert service["metadata"]["annotations"] == {
        "arkouda-bootstrap/host": "127.0.0.1",
        "arkouda-bootstrap/slurm-job-id": "4242",
    }
    assert created["metadata"]["labels"]["kubernetes.io/service-name"] == "ak"
    assert created["metadata"]["ownerReferences"][0]["uid"] == "svc-uid"
    assert created["endpoints"] == [{"addresses": ["192.0.2.10"], "conditions": {"ready": False}}]
    assert marked["endpoints"] == [{"addresses": ["192.0.2.10"], "conditions": {"ready": True}}]
    assert marked["metadata"]["resourceVersion"] == "7"
    assert created["ports"] == [{"name": "arkouda", "port": server_port, "protocol": "TCP"}]
    assert created["addressType"] == "IPv4"
    assert "Service ak in namespace ns is ready: 192.0.2.10" in log


def test_any_key_pinned_for_a_node_is_accepted_as_ssh_does(job: Job, secret_data: dict[str, bytes]) -> None:
    other = keys.build_secret_data(release="other", with_token=False)
    hosts = ",".join(f"[127.0.0.{i}]:{job.port}" for i in (1, 2, 3))
    # the wrong key first: the probe must go on to the second one, as OpenSSH's client would
    (job.ssh_dir / "known_hosts").write_text(
        f"[127.0.0.2]:{job.port} {host_pub(other)}\n{hosts} {host_pub(secret_data)}\n"
    )
    code, log = job.run(["--hosts-from", "slurm", "--", str(job.program(STANDIN))])
    assert code == 0, log
    assert len((job.out / "ran").read_text().splitlines()) == 3
