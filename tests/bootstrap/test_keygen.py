"""keygen against FakeKube (test double of the kube seam): create once, idempotent, never overwrite silently."""

from __future__ import annotations

import pytest
from arkouda_bootstrap.config import KeygenSettings
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.keygen import JOB_GONE_TIMEOUT_SECONDS, WORKLOAD_GONE_TIMEOUT_SECONDS, run_keygen
from arkouda_bootstrap.kube.api import ForbiddenError, PodCondition
from arkouda_bootstrap.ssh import keys
from fakes import FakeKube, make_pod

S = KeygenSettings(namespace="ns", secret_name="rel-arkouda-ssh", release="rel")


def test_creates_secret_with_labels() -> None:
    api = FakeKube()
    assert run_keygen(api, S) == "created Secret rel-arkouda-ssh in namespace ns"
    data, labels = api.secrets[("ns", "rel-arkouda-ssh")]
    assert labels == {"app.kubernetes.io/instance": "rel", "app.kubernetes.io/managed-by": "arkouda-bootstrap"}
    keys.validate_secret_data(data, source="x")
    assert keys.TOKEN not in data


def test_second_run_changes_nothing() -> None:
    api = FakeKube()
    run_keygen(api, S)
    before = api.secrets[("ns", "rel-arkouda-ssh")]
    assert "unchanged" in run_keygen(api, S)
    assert api.secrets[("ns", "rel-arkouda-ssh")] == before
    assert [c for c in api.calls if c[0] in ("create_secret", "replace_secret")] == [
        ("create_secret", "rel-arkouda-ssh")
    ]


def test_invalid_existing_secret_is_an_error_naming_the_field_and_is_kept() -> None:
    api = FakeKube()
    run_keygen(api, S)
    data, _labels = api.secrets[("ns", "rel-arkouda-ssh")]
    data[keys.HOST_KEY] = b"broken"
    with pytest.raises(BootstrapError, match="Secret rel-arkouda-ssh in namespace ns: field ssh_host_ed25519_key"):
        run_keygen(api, S)
    assert api.secrets[("ns", "rel-arkouda-ssh")][0][keys.HOST_KEY] == b"broken"


def test_with_token_on_existing_secret_without_token_names_the_field() -> None:
    api = FakeKube()
    run_keygen(api, S)
    with pytest.raises(BootstrapError, match="field token"):
        run_keygen(api, KeygenSettings(namespace="ns", secret_name="rel-arkouda-ssh", release="rel", with_token=True))


def test_rotate_replaces_keys_and_keeps_token() -> None:
    api = FakeKube()
    run_keygen(api, KeygenSettings(namespace="ns", secret_name="rel-arkouda-ssh", release="rel", with_token=True))
    old = dict(api.secrets[("ns", "rel-arkouda-ssh")][0])
    old[keys.HOST_KEY] = b"broken"  # rotation also repairs
    api.secrets[("ns", "rel-arkouda-ssh")] = (old, {})
    msg = run_keygen(
        api, KeygenSettings(namespace="ns", secret_name="rel-arkouda-ssh", release="rel", rotation_id="r1")
    )
    assert msg.startswith("rotated")
    new, labels = api.secrets[("ns", "rel-arkouda-ssh")]
    assert new[keys.CLIENT_KEY] != old[keys.CLIENT_KEY]
    assert new[keys.TOKEN] == old[keys.TOKEN]
    keys.validate_secret_data(new, source="x", require_token=True)
    assert labels["app.kubernetes.io/managed-by"] == "arkouda-bootstrap"


def test_a_rotation_happens_once_per_id() -> None:
    api = FakeKube()
    settings = KeygenSettings(namespace="ns", secret_name="rel-arkouda-ssh", release="rel", with_token=True)
    run_keygen(api, settings)
    first = dict(api.secrets[("ns", "rel-arkouda-ssh")][0])
    assert first[keys.TOKEN].strip() == first[keys.TOKEN]  # no line end: clients send it verbatim
    rotate = KeygenSettings(
        namespace="ns", secret_name="rel-arkouda-ssh", release="rel", with_token=True, rotation_id="2026-12-01"
    )
    assert run_keygen(api, rotate).startswith("rotated Secret rel-arkouda-ssh in namespace ns (rotation 2026-12-01")
    rotated = dict(api.secrets[("ns", "rel-arkouda-ssh")][0])
    assert rotated[keys.HOST_KEY] != first[keys.HOST_KEY]
    assert rotated[keys.TOKEN] != first[keys.TOKEN]  # the token rotates with the keys
    assert rotated[keys.ROTATION_ID] == b"2026-12-01"
    # the old host key is remembered, so a locale that still serves it is recognised as not yet rolled
    old_host = keys.parse_public_key(first[keys.HOST_PUB].decode(), what="old")
    assert keys.retired_host_keys(rotated[keys.RETIRED_HOST_KEYS].decode()) == [old_host]
    # `helm upgrade --reuse-values` replays the same id: nothing changes, however often
    for _ in range(2):
        assert run_keygen(api, rotate) == (
            "Secret rel-arkouda-ssh in namespace ns exists and is valid; unchanged "
            "(rotation 2026-12-01 was already done)"
        )
        assert api.secrets[("ns", "rel-arkouda-ssh")][0] == rotated
    # and an upgrade without an id leaves the rotated keys alone too
    run_keygen(api, settings)
    assert api.secrets[("ns", "rel-arkouda-ssh")][0] == rotated


def test_a_lost_secret_is_recreated_with_the_current_rotation_recorded() -> None:
    api = FakeKube()
    rotate = KeygenSettings(namespace="ns", secret_name="rel-arkouda-ssh", release="rel", rotation_id="r2")
    assert run_keygen(api, rotate) == "created Secret rel-arkouda-ssh in namespace ns"
    created = dict(api.secrets[("ns", "rel-arkouda-ssh")][0])
    assert "unchanged" in run_keygen(api, rotate)
    assert api.secrets[("ns", "rel-arkouda-ssh")][0] == created


def test_delete() -> None:
    api = FakeKube()
    run_keygen(api, S)
    d = KeygenSettings(namespace="ns", secret_name="rel-arkouda-ssh", release="rel", delete=True)
    assert run_keygen(api, d) == "deleted Secret rel-arkouda-ssh in namespace ns"
    assert run_keygen(api, d) == "Secret rel-arkouda-ssh in namespace ns already absent"


def test_delete_also_removes_the_helm_test_objects_helm_leaves_behind() -> None:
    api = FakeKube()
    run_keygen(api, S)
    api.pods["rel-arkouda-test"] = make_pod("rel-arkouda-test")
    api.config_maps[("ns", "rel-arkouda-test")] = {"test.py": "..."}
    d = KeygenSettings(
        namespace="ns", secret_name="rel-arkouda-ssh", release="rel", delete=True, test_objects="rel-arkouda-test"
    )
    assert run_keygen(api, d) == (
        "deleted Secret rel-arkouda-ssh in namespace ns; test Pod rel-arkouda-test deleted; "
        "test ConfigMap rel-arkouda-test deleted"
    )
    assert not api.pods
    assert not api.config_maps
    assert run_keygen(api, d) == (
        "Secret rel-arkouda-ssh in namespace ns already absent; test Pod rel-arkouda-test already absent; "
        "test ConfigMap rel-arkouda-test already absent"
    )


def test_rbac_error_propagates_as_one_line() -> None:
    api = FakeKube(fail_with={"get_secret": ForbiddenError(verb="get", resource="secrets", namespace="ns")})
    with pytest.raises(BootstrapError, match="^missing RBAC: get secrets in namespace ns$"):
        run_keygen(api, S)


def test_concurrent_creation_is_accepted_when_valid() -> None:
    api = FakeKube()
    other = FakeKube()
    run_keygen(other, S)
    winner = other.secrets[("ns", "rel-arkouda-ssh")]

    # the Secret appears between our get (absent) and our create (409)
    original_get = api.get_secret
    calls = {"n": 0}

    def get_secret(*, namespace: str, name: str) -> dict[str, bytes] | None:
        calls["n"] += 1
        if calls["n"] == 1:
            api.secrets[(namespace, name)] = winner
            return None
        return original_get(namespace=namespace, name=name)

    api.get_secret = get_secret  # type: ignore[method-assign]
    assert (
        run_keygen(api, S) == "Secret rel-arkouda-ssh in namespace ns was created concurrently and is valid; unchanged"
    )
    assert api.secrets[("ns", "rel-arkouda-ssh")] == winner


def test_delete_first_removes_a_keygen_job_an_interrupted_helm_client_left() -> None:
    api = FakeKube()
    run_keygen(api, S)
    api.pods["rel-arkouda-keygen-abcde"] = make_pod("rel-arkouda-keygen-abcde")
    api.jobs[("ns", "rel-arkouda-keygen")] = "rel-arkouda-keygen-abcde"
    d = KeygenSettings(
        namespace="ns", secret_name="rel-arkouda-ssh", release="rel", delete=True, keygen_job="rel-arkouda-keygen"
    )
    assert run_keygen(api, d) == (
        "keygen Job rel-arkouda-keygen deleted; deleted Secret rel-arkouda-ssh in namespace ns"
    )
    assert not api.jobs and not api.pods
    # the Job and its pod gone before the Secret: a keygen pod still running must not re-create what was deleted
    ops = [op for op, _ in api.calls]
    assert ops.index("delete_job") < ops.index("wait_job_gone") < ops.index("delete_secret")
    assert run_keygen(api, d) == (
        "keygen Job rel-arkouda-keygen already absent; Secret rel-arkouda-ssh in namespace ns already absent"
    )


def test_delete_fails_in_one_line_when_the_left_keygen_pod_does_not_end() -> None:
    api = FakeKube()
    run_keygen(api, S)
    api.pods["rel-arkouda-keygen-abcde"] = make_pod("rel-arkouda-keygen-abcde")
    api.jobs[("ns", "rel-arkouda-keygen")] = "rel-arkouda-keygen-abcde"
    api.stuck_jobs.add(("ns", "rel-arkouda-keygen"))
    d = KeygenSettings(
        namespace="ns",
        secret_name="rel-arkouda-ssh",
        release="rel",
        delete=True,
        keygen_job="rel-arkouda-keygen",
        test_objects="rel-arkouda-test",
    )
    with pytest.raises(BootstrapError) as err:
        run_keygen(api, d)
    # everything else was deleted; the line says what is left and the command that finishes the job
    assert ("ns", "rel-arkouda-ssh") not in api.secrets
    assert ("delete_pod", "rel-arkouda-test") in api.calls
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(
        f"keygen Job rel-arkouda-keygen still has a pod after {JOB_GONE_TIMEOUT_SECONDS} s; "
        "deleted Secret rel-arkouda-ssh in namespace ns;"
    )
    assert "kubectl -n ns get pods -l batch.kubernetes.io/job-name=rel-arkouda-keygen" in message
    assert message.endswith("run `kubectl -n ns delete secret rel-arkouda-ssh --ignore-not-found`")


def test_delete_also_removes_the_release_s_kueue_workload() -> None:
    # Kueue keeps the pod group's pods and quota until its Workload is gone; already gone (or no Kueue) is fine
    api = FakeKube(kueue_workloads={("ns", "rel-arkouda-group"): {"uid-a"}})
    run_keygen(api, S)
    d = KeygenSettings(
        namespace="ns", secret_name="rel-arkouda-ssh", release="rel", delete=True, kueue_workload="rel-arkouda-group"
    )
    assert run_keygen(api, d) == (
        "Kueue Workload rel-arkouda-group deleted; deleted Secret rel-arkouda-ssh in namespace ns"
    )
    assert not api.kueue_workloads
    assert run_keygen(api, d) == (
        "Kueue Workload rel-arkouda-group already absent; Secret rel-arkouda-ssh in namespace ns already absent"
    )


def test_a_missing_rbac_verb_on_the_workload_is_named() -> None:
    denied = ForbiddenError(verb="delete", resource="workloads.kueue.x-k8s.io", namespace="ns")
    api = FakeKube(fail_with={"delete_kueue_workload": denied})
    d = KeygenSettings(
        namespace="ns", secret_name="rel-arkouda-ssh", release="rel", delete=True, kueue_workload="rel-arkouda-group"
    )
    with pytest.raises(BootstrapError, match="^missing RBAC: delete workloads.kueue.x-k8s.io in namespace ns$"):
        run_keygen(api, d)


def test_before_a_run_only_a_finished_workload_is_deleted() -> None:
    """mpi job mode: the last run's finished group would take the next run's pods in and never ungate them."""
    key = ("ns", "rel-arkouda-group")
    k = KeygenSettings(namespace="ns", secret_name="rel-arkouda-ssh", release="rel", kueue_workload=key[1])
    running = FakeKube(kueue_workloads={key: {"uid-a"}})
    running.kueue_conditions[key] = (PodCondition(type="Admitted", status="True"),)
    assert run_keygen(running, k) == "created Secret rel-arkouda-ssh in namespace ns"
    assert key in running.kueue_workloads  # admitted, not finished: a run goes on, its group stays
    done = FakeKube(kueue_workloads={key: {"uid-a"}})
    done.kueue_conditions[key] = (PodCondition(type="Finished", status="True", reason="Succeeded"),)
    assert run_keygen(done, k) == (
        "created Secret rel-arkouda-ssh in namespace ns; Kueue Workload rel-arkouda-group of the last run "
        "(Succeeded) deleted"
    )
    assert key not in done.kueue_workloads
    assert ("delete_kueue_workload", "rel-arkouda-group") in done.calls
    assert run_keygen(FakeKube(), k) == "created Secret rel-arkouda-ssh in namespace ns"  # none yet, or no Kueue


def test_a_finished_workload_that_does_not_go_fails_the_hook_naming_it() -> None:
    key = ("ns", "rel-arkouda-group")
    k = KeygenSettings(namespace="ns", secret_name="rel-arkouda-ssh", release="rel", kueue_workload=key[1])
    stuck = FakeKube(kueue_workloads={key: {"uid-a"}}, stuck_workloads={key})
    stuck.kueue_conditions[key] = (PodCondition(type="Finished", status="True", reason="Succeeded"),)
    with pytest.raises(BootstrapError) as err:
        run_keygen(stuck, k)
    assert str(err.value).startswith(
        f"Kueue Workload rel-arkouda-group of the last run is still there {WORKLOAD_GONE_TIMEOUT_SECONDS} s after its "
        "delete (is Kueue's controller running?"
    )
    assert "kubectl -n ns get workload rel-arkouda-group" in str(err.value)
