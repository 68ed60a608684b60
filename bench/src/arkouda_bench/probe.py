"""The server's pre-launch ssh probe (`arkouda_bootstrap.ssh.client.probe_all`, paramiko) of N hosts, against
the same sshd as the fan-out, so its client CPU per host compares with the launcher's OpenSSH cost, same run.

Client CPU is this process's own CPU over the call (every thread: the probe workers and paramiko's
transport threads); nothing else runs in the bench process meanwhile. Server CPU is counted as for the
fan-out.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from arkouda_bench.sshd import BenchSetupError, ClientKeys, SshServer
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.ssh import client as ssh
from arkouda_bootstrap.ssh import keys
from arkouda_bootstrap.ssh import probe as sshprobe

PROBE = "probe (paramiko)"
# Retries are part of what a probe costs when the one sshd sheds load, but a broken setup must fail fast.
POLICY = ssh.RetryPolicy(attempts=3, initial_delay=0.2, max_delay=1.0)


def probe_hosts(client: ClientKeys, hosts: Sequence[str]) -> None:
    """Probe every host as the bootstrap's server does (pinned host key, key auth, `true`)."""
    try:
        ssh.probe_all(
            [ssh.Host(address=h, pod=f"host-{h}") for h in hosts],
            port=client.port,
            user=client.user,
            client_key=sshprobe.load_release_client_key(client.identity),
            pinned=keys.release_pinned_host_key(client.known_hosts.read_text(encoding="utf-8")),
            timeout=10.0,
            policy=POLICY,
        )
    except BootstrapError as exc:
        raise BenchSetupError(f"probe of {len(hosts)} hosts: {exc}") from None


def measure(server: SshServer, hosts: Sequence[str]) -> tuple[float, float, float]:
    """(wall s, client CPU s, server CPU s) of one probe of every host."""
    assert server.client is not None
    server0 = server.server_cpu()
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    probe_hosts(server.client, hosts)
    wall = time.perf_counter() - t0
    client = time.process_time() - cpu0
    return wall, client, server.server_cpu() - server0
