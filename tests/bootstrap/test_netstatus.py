"""The secondary network (--network-attachment): parsing the network-status annotation Multus writes, the bounded
wait for it in discovery and for the server's own pod (FakeKube, the test double of the kube seam), the CLI checks."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest
from arkouda_bootstrap.cli import main as cli
from arkouda_bootstrap.errors import UsageError
from arkouda_bootstrap.kube import netstatus
from arkouda_bootstrap.kube.api import PodInfo, pod_from_json
from arkouda_bootstrap.kube.netstatus import (
    NETWORK_STATUS_ANNOTATION,
    Addresses,
    Attachment,
    NetworkStatusError,
    own_address,
    secondary_address,
)
from arkouda_bootstrap.server.discovery import wait_for_locales
from fakes import END, FakeClock, FakeKube, make_pod

NET = Attachment.parse("net1")


def status(*entries: Mapping[str, Any]) -> dict[str, str]:
    """The annotation as Multus v4 writes it: the default network first, then each attachment as <ns>/<name>."""
    default = {"name": "arkouda-local", "interface": "eth0", "ips": ["10.244.0.7"], "default": True}
    return {NETWORK_STATUS_ANNOTATION: json.dumps([default, *entries])}


def attached(ip: str, name: str = "ns/net1", *more_ips: str) -> dict[str, str]:
    return status({"name": name, "interface": "net1", "ips": [*more_ips, ip], "mac": "aa:bb:cc:dd:ee:ff"})


def locale(n: int, *, annotations: Mapping[str, str] | None = None, ready: bool = True) -> PodInfo:
    return make_pod(f"r-arkouda-locale-{n}", ip=f"10.244.0.{10 + n}", ready=ready, annotations=dict(annotations or {}))


# -- the annotation ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "name", "namespace"),
    [("net1", "net1", None), ("other/net-1.b", "net-1.b", "other"), (" net1 ", "net1", None)],
)
def test_attachment_names(value: str, name: str, namespace: str | None) -> None:
    assert Attachment.parse(value) == Attachment(name=name, namespace=namespace)


@pytest.mark.parametrize("value", ["Net1", "a/b/c", "net_1", "/net1", "ns/", "-net"])
def test_malformed_attachment_names_the_value(value: str) -> None:
    with pytest.raises(UsageError, match=r"ARKOUDA_NETWORK_ATTACHMENT.*not a NetworkAttachmentDefinition name"):
        Attachment.parse(value)


def test_address_on_the_attachment_not_the_default_network() -> None:
    pod = locale(1, annotations=attached("10.250.3.4"))
    assert secondary_address(pod, NET) == "10.250.3.4"
    assert pod.pod_ip == "10.244.0.11"


def test_ipv4_wins_over_an_ipv6_listed_first() -> None:
    # GASNet's host list delimiters include ':', so an IPv6 literal would break SSH_SERVERS
    assert secondary_address(locale(1, annotations=attached("10.250.3.4", "ns/net1", "fd00::4")), NET) == "10.250.3.4"


def test_attachment_of_another_namespace_is_matched_by_its_full_name() -> None:
    pod = locale(
        1, annotations=status({"name": "ns/net1", "ips": ["10.250.0.1"]}, {"name": "infra/net1", "ips": ["10.9.0.1"]})
    )
    assert secondary_address(pod, Attachment.parse("infra/net1")) == "10.9.0.1"
    assert secondary_address(pod, NET) == "10.250.0.1"


def test_bare_name_of_older_multus_is_accepted_in_the_pods_namespace_only() -> None:
    pod = locale(1, annotations=attached("10.250.0.9", name="net1"))
    assert secondary_address(pod, NET) == "10.250.0.9"
    with pytest.raises(NetworkStatusError, match="not attached to infra/net1"):
        secondary_address(pod, Attachment.parse("infra/net1"))


def test_missing_annotation_names_the_pod() -> None:
    with pytest.raises(netstatus.NetworkStatusMissingError) as info:
        secondary_address(locale(2), NET)
    assert str(info.value).startswith(f"pod r-arkouda-locale-2 has no {NETWORK_STATUS_ANNOTATION} annotation")
    assert "ns/net1" in str(info.value) and "global.network.attachment" in str(info.value)


@pytest.mark.parametrize(
    ("raw", "says"),
    [("[{", "is not JSON"), ('{"name": "ns/net1"}', "is not a list"), ('["ns/net1"]', "is not a list")],
)
def test_unparseable_annotation_names_the_pod(raw: str, says: str) -> None:
    with pytest.raises(NetworkStatusError, match=f"^pod r-arkouda-locale-1: its .*{says}") as info:
        secondary_address(locale(1, annotations={NETWORK_STATUS_ANNOTATION: raw}), NET)
    assert not isinstance(info.value, netstatus.NetworkStatusMissingError)


def test_no_entry_lists_what_the_pod_has() -> None:
    pod = locale(1, annotations=attached("10.250.0.9", name="ns/other"))
    with pytest.raises(
        NetworkStatusError, match=r"^pod r-arkouda-locale-1 is not attached to ns/net1 .*lists: arkouda-local, ns/other"
    ):
        secondary_address(pod, NET)


def test_entry_without_ipv4_says_so() -> None:
    pod = locale(1, annotations=status({"name": "ns/net1", "ips": ["fd00::1"]}))
    with pytest.raises(NetworkStatusError, match="attached to ns/net1 but has no IPv4 address there"):
        secondary_address(pod, NET)


def test_the_api_json_carries_the_annotations() -> None:
    raw = {"metadata": {"name": "p", "namespace": "ns", "annotations": attached("10.250.0.2")}, "status": {}}
    assert secondary_address(pod_from_json(raw), NET) == "10.250.0.2"
    assert pod_from_json({"metadata": {"name": "p"}}).annotations == {}


# -- discovery --------------------------------------------------------------------------------------------------


def wait(api: FakeKube, clock: FakeClock, addresses: Addresses, lines: list[str], expected: int = 2) -> list[PodInfo]:
    return wait_for_locales(
        api,
        namespace="ns",
        selector="app=x",
        expected=expected,
        timeout=600,
        report=lines.append,
        clock=clock,
        sleep=clock.sleep,
        line_interval=0,
        addresses=addresses,
    )


def test_a_ready_locale_counts_once_its_annotation_arrives() -> None:
    clock = FakeClock()
    api = FakeKube()
    api.pods = {"r-arkouda-locale-0": locale(0, annotations=attached("10.250.0.10")), "r-arkouda-locale-1": locale(1)}
    api.script(END, api.event("MODIFIED", locale(1, annotations=attached("10.250.0.11"))))
    addresses = Addresses(NET, clock=clock)
    lines: list[str] = []
    ready = wait(api, clock, addresses, lines)
    assert [addresses.address(p) for p in ready] == ["10.250.0.10", "10.250.0.11"]
    assert lines[0] == (
        "1/2 locales ready; waiting for r-arkouda-locale-1 "
        f"(Ready, waiting for its address on ns/net1 ({NETWORK_STATUS_ANNOTATION}))"
    )
    assert lines[-1] == "2/2 locales ready"


def test_a_ready_locale_without_the_annotation_fails_after_the_grace() -> None:
    clock = FakeClock()
    api = FakeKube()  # every watch ends at once: the fake clock moves 1 s per empty chunk (follow_pods' sleep)
    api.pods = {"r-arkouda-locale-0": locale(0, annotations=attached("10.250.0.10")), "r-arkouda-locale-1": locale(1)}
    with pytest.raises(NetworkStatusError) as info:
        wait(api, clock, Addresses(NET, clock=clock, grace=30), [])
    assert str(info.value).startswith(f"pod r-arkouda-locale-1 has no {NETWORK_STATUS_ANNOTATION} annotation")
    assert str(info.value).endswith("(waited 30s)")
    assert 30 <= clock.now <= 32


def test_a_wrong_annotation_fails_at_once() -> None:
    clock = FakeClock()
    api = FakeKube()
    api.pods = {"r-arkouda-locale-0": locale(0, annotations=attached("10.250.0.10", name="ns/other"))}
    with pytest.raises(NetworkStatusError, match="^pod r-arkouda-locale-0 is not attached to ns/net1"):
        wait(api, clock, Addresses(NET, clock=clock), [], expected=1)
    assert clock.now == 0


def test_the_grace_restarts_when_a_locale_goes_unready() -> None:
    clock = FakeClock()
    api = FakeKube()
    api.pods = {"r-arkouda-locale-0": locale(0)}
    addresses = Addresses(NET, clock=clock, grace=30)
    api.on_idle_watch = lambda _t: clock.advance(10)
    # Ready without the annotation for 20 s, not Ready (forgotten), Ready again for 20 s, then the annotation
    api.script(
        END,
        END,
        api.event("MODIFIED", locale(0, ready=False)),
        api.event("MODIFIED", locale(0)),
        END,
        END,
        api.event("MODIFIED", locale(0, annotations=attached("10.250.0.10"))),
    )
    ready = wait(api, clock, addresses, [], expected=1)
    assert [addresses.address(p) for p in ready] == ["10.250.0.10"]


def test_without_an_attachment_discovery_ignores_the_annotation() -> None:
    clock = FakeClock()
    api = FakeKube()
    api.pods = {"r-arkouda-locale-0": locale(0)}
    ready = wait_for_locales(
        api,
        namespace="ns",
        selector="app=x",
        expected=1,
        timeout=5,
        report=lambda _l: None,
        clock=clock,
        sleep=clock.sleep,
    )
    assert [p.pod_ip for p in ready] == ["10.244.0.10"]


# -- the server's own pod ----------------------------------------------------------------------------------------


def server_pod(annotations: Mapping[str, str] | None = None) -> PodInfo:
    return make_pod(
        "r-arkouda-server-0",
        ip="10.244.0.2",
        annotations=dict(annotations or {}),
        labels={netstatus.POD_NAME_LABEL: "r-arkouda-server-0", "app": "x"},
    )


def test_own_address_from_the_pod() -> None:
    api = FakeKube(pods={"r-arkouda-server-0": server_pod(attached("10.250.0.2"))})
    assert own_address(api, namespace="ns", pod_name="r-arkouda-server-0", attachment=NET) == "10.250.0.2"
    assert [op for op, _ in api.calls] == ["get_pod"]


def test_own_address_waits_for_the_annotation_through_a_watch_of_this_pod() -> None:
    clock = FakeClock()
    api = FakeKube(pods={"r-arkouda-server-0": server_pod()})
    api.script(END, api.event("MODIFIED", server_pod(attached("10.250.0.2"))))
    got = own_address(
        api, namespace="ns", pod_name="r-arkouda-server-0", attachment=NET, clock=clock, sleep=clock.sleep
    )
    assert got == "10.250.0.2"
    assert ("list_pods", f"{netstatus.POD_NAME_LABEL}=r-arkouda-server-0") in api.calls


def test_own_address_reads_only_this_pod_not_another_that_takes_its_labels_or_name() -> None:
    # a pod made with this pod's labels and name after it (another uid) must not lend it an address
    clock = FakeClock()
    api = FakeKube(pods={"r-arkouda-server-0": server_pod()})
    other = replace(server_pod(attached("10.250.0.66")), uid="uid-other")
    api.script(END, api.event("MODIFIED", other), api.event("MODIFIED", server_pod(attached("10.250.0.2"))))
    got = own_address(
        api, namespace="ns", pod_name="r-arkouda-server-0", attachment=NET, clock=clock, sleep=clock.sleep
    )
    assert got == "10.250.0.2"


def test_own_address_of_a_job_pod_watches_its_labels() -> None:
    clock = FakeClock()
    job_pod = make_pod("r-arkouda-server-abcde", labels={"batch.kubernetes.io/job-name": "r-run", "app": "x"})
    api = FakeKube(pods={job_pod.name: job_pod})
    api.script(END, api.event("MODIFIED", replace(job_pod, annotations=attached("10.250.0.3"))))
    got = own_address(api, namespace="ns", pod_name=job_pod.name, attachment=NET, clock=clock, sleep=clock.sleep)
    assert got == "10.250.0.3"
    assert ("list_pods", "app=x,batch.kubernetes.io/job-name=r-run") in api.calls


def test_own_address_gives_up_after_the_grace() -> None:
    clock = FakeClock()
    api = FakeKube(pods={"r-arkouda-server-0": server_pod()})
    with pytest.raises(NetworkStatusError, match=r"^pod r-arkouda-server-0 has no .* \(waited 30s\)$"):
        own_address(api, namespace="ns", pod_name="r-arkouda-server-0", attachment=NET, clock=clock, sleep=clock.sleep)
    assert 30 <= clock.now <= 31


def test_own_address_of_a_missing_pod_names_pod_name() -> None:
    with pytest.raises(NetworkStatusError, match=r"pod r-arkouda-server-0 \(this server pod\) was not found.*POD_NAME"):
        own_address(FakeKube(), namespace="ns", pod_name="r-arkouda-server-0", attachment=NET)


# -- CLI -----------------------------------------------------------------------------------------------------------

SERVER_ENV = {
    "POD_NAMESPACE": "ns",
    "ARKOUDA_NUM_LOCALES": "2",
    "ARKOUDA_LOCALE_SELECTOR": "app=x",
    "POD_NAME": "r-arkouda-server-0",
    "POD_IP": "10.244.0.2",
}


def test_cli_refuses_a_malformed_attachment_before_waiting(capsys: pytest.CaptureFixture[str]) -> None:
    api = FakeKube()
    code = cli.main(
        ["server", "--launcher", "none"],
        environ={**SERVER_ENV, "ARKOUDA_NETWORK_ATTACHMENT": "Bad_Name"},
        api_factory=lambda: api,
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ARKOUDA_NETWORK_ATTACHMENT" in err[0] and "'Bad_Name'" in err[0]
    assert api.calls == []


def test_cli_refuses_an_attachment_with_slurm_hosts(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        ["server", "--hosts-from", "slurm", "--network-attachment", "net1", "--launcher", "none"], environ={}
    )
    assert code == 2
    assert "--network-attachment (ARKOUDA_NETWORK_ATTACHMENT) needs --hosts-from kubernetes" in capsys.readouterr().err
