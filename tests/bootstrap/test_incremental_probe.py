"""ssh.IncrementalProbe: probes start when a host is submitted, finish() waits for exactly the final hosts.

The probe function here is a test double (it records calls and fails on request); the real paramiko probe
against a real sshd is covered by test_real_ssh.py and test_server_flow.py."""

from __future__ import annotations

import threading

import pytest
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.ssh import client as ssh
from arkouda_bootstrap.ssh import probe as sshprobe


class RecordingProbe:
    """Test double of ssh.probe_host: records hosts, raises the error configured for an address."""

    def __init__(self, failures: dict[str, BaseException] | None = None) -> None:
        self.failures = failures or {}
        self.calls: list[ssh.Host] = []
        self.lock = threading.Lock()
        self.started = threading.Event()

    def __call__(self, host: ssh.Host) -> None:
        with self.lock:
            self.calls.append(host)
        self.started.set()
        if host.address in self.failures:
            raise self.failures[host.address]


def test_submit_starts_the_probe_before_finish_and_only_once() -> None:
    probe = RecordingProbe()
    a = ssh.Host(address="10.0.0.1", pod="r-0")
    with ssh.IncrementalProbe(probe, max_workers=4) as prober:
        prober.submit(a)
        assert probe.started.wait(5), "the probe did not start before finish()"
        prober.submit(a)
        prober.finish([a, ssh.Host(address="10.0.0.2", pod="r-1")])
    assert sorted(h.address for h in probe.calls) == ["10.0.0.1", "10.0.0.2"]


def test_a_failed_probe_of_a_pod_that_left_the_host_list_does_not_fail_the_launch() -> None:
    gone = ssh.Host(address="10.0.0.1", pod="r-1")
    again = ssh.Host(address="10.0.0.7", pod="r-1")  # the same locale, recreated with a new IP
    probe = RecordingProbe({"10.0.0.1": sshprobe.TransientProbeError("connect to 10.0.0.1:2222: refused")})
    with ssh.IncrementalProbe(probe, max_workers=2) as prober:
        prober.submit(gone)
        prober.finish([ssh.Host(address="10.0.0.0", pod="r-0"), again])
    assert again in probe.calls


def test_finish_names_the_first_failing_host_in_host_order_and_counts_the_rest() -> None:
    hosts = [ssh.Host(address=f"10.0.0.{i}", pod=f"r-{i}") for i in range(4)]
    probe = RecordingProbe(
        {
            "10.0.0.3": sshprobe.HostKeyMismatchError("pod r-3 (10.0.0.3) presented a host key this release never had"),
            "10.0.0.1": sshprobe.AuthenticationFailedError("pod r-1 (10.0.0.1) rejected public-key authentication"),
            "10.0.0.2": RuntimeError("a bug"),
        }
    )
    with ssh.IncrementalProbe(probe, max_workers=4) as prober:
        for host in reversed(hosts):
            prober.submit(host)
        with pytest.raises(BootstrapError) as info:
            prober.finish(hosts)
    # a probe outcome names its pod and address itself
    assert str(info.value) == (
        "ssh probe failed: pod r-1 (10.0.0.1) rejected public-key authentication (+2 more hosts failed)"
    )
    with ssh.IncrementalProbe(probe, max_workers=4) as prober, pytest.raises(BootstrapError) as info:
        prober.finish(hosts[2:])
    # anything else gets the host named and the exception's type
    assert str(info.value) == "ssh probe of 10.0.0.2 (pod r-2) failed: RuntimeError: a bug (+1 more hosts failed)"


def test_close_drops_queued_probes_and_never_waits_for_running_ones() -> None:
    release, started = threading.Event(), threading.Event()

    def blocking(host: ssh.Host) -> None:
        started.set()
        release.wait(10)

    prober = ssh.IncrementalProbe(blocking, max_workers=1)
    running, queued = ssh.Host(address="10.0.0.1", pod="r-0"), ssh.Host(address="10.0.0.2", pod="r-1")
    prober.submit(running)
    assert started.wait(10)
    prober.submit(queued)
    prober.close()  # returns at once although the one worker is busy
    release.set()
    assert prober._futures[queued].cancelled()
    assert prober._futures[running].result(timeout=10) is None
