"""`server --network-attachment` end to end against a real unprivileged sshd: every host, the server's own pod
included, is probed and launched at its address from the network-status annotation, never at its pod IP (the
pod IPs here are TEST-NET addresses nothing answers on); a pod without the attachment fails in one line with a
SecondaryNetworkMissing Event."""

from __future__ import annotations

import json
import pwd
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from arkouda_bootstrap.kube.api import PodEvent, PodInfo, PodList
from arkouda_bootstrap.kube.netstatus import NETWORK_STATUS_ANNOTATION, POD_NAME_LABEL
from fakes import FakeKube, make_pod
from test_server_flow import run_server_as

pytestmark = pytest.mark.sshd

SERVER = "r-arkouda-server-0"


def status(ip: str, name: str = "ns/net1") -> dict[str, str]:
    default = {"name": "arkouda-local", "interface": "eth0", "ips": ["192.0.2.99"], "default": True}
    return {NETWORK_STATUS_ANNOTATION: json.dumps([default, {"name": name, "interface": "net1", "ips": [ip]}])}


@dataclass
class FakeKubeWithServerPod(FakeKube):
    """Test double: FakeKube, plus the server's own pod, which only get_pod and a watch of the
    statefulset.kubernetes.io/pod-name selector see (FakeKube's list ignores selectors, and the server pod's
    ordinal 0 would clash with locale-0's)."""

    server: PodInfo | None = None

    def get_pod(self, *, namespace: str, name: str) -> PodInfo | None:
        self._check("get_pod", name)
        return self.server if self.server is not None and name == self.server.name else self.pods.get(name)

    def list_pods(self, *, namespace: str, selector: str) -> PodList:
        if selector.startswith(POD_NAME_LABEL + "="):
            self._check("list_pods", selector)
            return PodList(pods=(self.server,) if self.server else (), resource_version=str(self.list_rv))
        return super().list_pods(namespace=namespace, selector=selector)

    def watch_pods(
        self, *, namespace: str, selector: str, resource_version: str, timeout_seconds: int
    ) -> Iterator[PodEvent]:
        if selector.startswith(POD_NAME_LABEL + "="):
            return iter(())
        return super().watch_pods(
            namespace=namespace, selector=selector, resource_version=resource_version, timeout_seconds=timeout_seconds
        )


def cluster_on_net1(*, locale1_status: dict[str, str]) -> FakeKubeWithServerPod:
    api = FakeKubeWithServerPod(server=make_pod(SERVER, ip="192.0.2.1", annotations=status("127.0.0.4")))
    api.pods["r-arkouda-locale-0"] = make_pod("r-arkouda-locale-0", ip="192.0.2.2", annotations=status("127.0.0.2"))
    api.pods["r-arkouda-locale-1"] = make_pod("r-arkouda-locale-1", ip="192.0.2.3", annotations=locale1_status)
    return api


def run_on_net1(
    user: pwd.struct_passwd, base: Path, sshd: tuple[Path, int], *, locale1_status: dict[str, str]
) -> tuple[int, str, list[dict[str, str]]]:
    """`server --network-attachment net1` as `user`; one real sshd (all addresses, conftest's loopback_sshd)
    answers for every "pod" at 127.0.0.x."""
    secret_dir, port = sshd
    return run_server_as(
        uid=user.pw_uid,
        gid=user.pw_gid,
        api=cluster_on_net1(locale1_status=locale1_status),
        base=base,
        secret_dir=secret_dir,
        port=port,
        extra_argv=["--network-attachment", "net1"],
    )


def test_hosts_and_master_ip_are_the_secondary_addresses(
    test_user: pwd.struct_passwd, shared_dir: Path, loopback_sshd: tuple[Path, int]
) -> None:
    code, log, events = run_on_net1(test_user, shared_dir, loopback_sshd, locale1_status=status("127.0.0.3"))
    assert code == 0, log
    ran = (shared_dir / "out" / "ran").read_text().splitlines()
    assert ran == [f"ok 127.0.0.{i} {test_user.pw_name}" for i in (4, 2, 3)]
    env = dict(line.split("=", 1) for line in (shared_dir / "out" / "ran.env").read_text().splitlines())
    assert env["SSH_SERVERS"] == "127.0.0.4 127.0.0.2 127.0.0.3"
    assert env["GASNET_MASTERIP"] == "127.0.0.4"
    assert [e["reason"] for e in events] == ["LocalesReady", "Launched"]
    assert events[0]["message"] == (
        f"2 locales ready; hosts: {SERVER}=127.0.0.4 r-arkouda-locale-0=127.0.0.2 r-arkouda-locale-1=127.0.0.3"
    )


def test_a_locale_not_on_the_attachment_is_one_line_and_an_event(
    test_user: pwd.struct_passwd, shared_dir: Path, loopback_sshd: tuple[Path, int]
) -> None:
    other = status("127.0.0.3", name="ns/other")
    code, log, events = run_on_net1(test_user, shared_dir, loopback_sshd, locale1_status=other)
    assert code == 1, log
    errors = [line for line in log.splitlines() if line.startswith("arkouda-bootstrap: error:")]
    assert errors == [
        f"arkouda-bootstrap: error: pod r-arkouda-locale-1 is not attached to ns/net1 (its {NETWORK_STATUS_ANNOTATION} "
        "lists: arkouda-local, ns/other): check the NetworkAttachmentDefinition's name and namespace "
        "(--network-attachment (ARKOUDA_NETWORK_ATTACHMENT, global.network.attachment))"
    ]
    assert [(e["reason"], e["type"]) for e in events] == [("SecondaryNetworkMissing", "Warning")]
    assert "r-arkouda-locale-1" in events[0]["message"]
    assert not (shared_dir / "out" / "ran").exists()
