"""The whole `server` path through the CLI, as a non-root user, against real unprivileged sshds: discovery
(FakeKube, the test double of the kube seam), the ssh probe, ssh config + wrapper, launcher environment, a
stand-in launcher (test double of amudprun: ssh-es into every host in SSH_SERVERS the way GASNet's spawner does),
exit-code propagation, lost-locale termination, Events, and an arbitrary uid without a passwd entry."""

from __future__ import annotations

import functools
import json
import os
import pwd
import time
from pathlib import Path

import pytest
from arkouda_bootstrap.cli import main as cli
from arkouda_bootstrap.kube.api import ForbiddenError, PodCondition
from arkouda_bootstrap.ssh import keys
from arkouda_bootstrap.ssh.identity import find_nss_wrapper
from conftest import LocaleSshd, free_port, start_locale, write_secret_dir
from fakes import FakeKube, Gate, make_pod
from privdrop import spawn_as, wait_exit

# Test double of amudprun: `-nl N` last, ssh into the first N hosts of SSH_SERVERS the way AMUDP's spawner
# builds the command (`<ssh_cmd> -o 'StrictHostKeyChecking no' -o 'FallBackToRsh no' <ssh_options> <host> …`):
# our wrapper's options must still win and pin the host key.
STANDIN = r"""#!/bin/sh
out="$ARKBS_OUT"
eval "nl=\${$#}"
env | grep -E '^(SSH_SERVERS|GASNET_|OMP_|ARKOUDA_SSH)' | sort > "$out.env"
i=0
for h in $SSH_SERVERS; do
  [ "$i" -ge "$nl" ] && break
  $GASNET_SSH_CMD -o 'StrictHostKeyChecking no' -o 'FallBackToRsh no' $GASNET_SSH_OPTIONS "$h" \
    "echo ok $h \$(id -un)" < /dev/null >> "$out" 2>>"$out.err" || exit 9
  if [ -n "$ARKBS_CHECK_MASTER" ]; then $GASNET_SSH_CMD -O check "$h" 2>> "$out.master"; fi
  i=$((i+1))
done
if [ -n "$ARKBS_SPLASH" ]; then echo "$ARKBS_SPLASH"; fi
if [ -n "$ARKBS_SLEEP" ] && [ ! -e "$out.slept" ]; then
  : > "$out.slept"; trap 'exit 0' TERM; sleep "$ARKBS_SLEEP" & wait
fi
exit "${ARKBS_EXIT:-0}"
"""

LOCALE_IPS = {"r-arkouda-locale-0": "127.0.0.2", "r-arkouda-locale-1": "127.0.0.3"}


def fake_cluster() -> FakeKube:
    """locale-1 Ready, locale-0 Pending until a watch event makes it Ready (API order scrambled by the fake)."""
    api = FakeKube(block=True)
    api.pods["r-arkouda-locale-1"] = make_pod("r-arkouda-locale-1", ip="127.0.0.3")
    api.pods["r-arkouda-locale-0"] = make_pod(
        "r-arkouda-locale-0",
        ip=None,
        ready=False,
        phase="Pending",
        conditions=(
            PodCondition(type="PodScheduled", status="False", message="0/1 nodes are available: 1 Insufficient cpu."),
        ),
    )
    api.script(api.event("MODIFIED", make_pod("r-arkouda-locale-0", ip="127.0.0.2")))
    return api


def run_server_as(
    *,
    uid: int,
    gid: int,
    api: FakeKube | None = None,
    base: Path,
    secret_dir: Path,
    port: int,
    extra_argv: list[str] = (),  # type: ignore[assignment]
    program_args: tuple[str, ...] = ("--ServerPort=5555",),
    env: dict[str, str] | None = None,
) -> tuple[int, str, list[dict[str, str]]]:
    api = fake_cluster() if api is None else api
    state = base / "server-state"
    state.mkdir()
    os.chown(state, uid, gid)
    standin = base / "bin" / "arkouda_server"
    standin.parent.mkdir(exist_ok=True)
    standin.write_text(STANDIN)
    standin.chmod(0o755)
    out = base / "out"
    out.mkdir()
    os.chown(out, uid, gid)
    work = base / "work"
    work.mkdir(exist_ok=True)
    os.chown(work, uid, gid)
    events_file = out / "events.json"
    argv = [
        "server",
        "--num-locales",
        "3",
        "--pod-name",
        "r-arkouda-server-0",
        "--pod-ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--secret-dir",
        str(secret_dir),
        "--state-dir",
        str(state),
        "--probe-attempts",
        "3",
        "--connect-timeout",
        "5",
        *extra_argv,
        "--",
        str(standin),
        *program_args,
    ]
    child_env = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/nonexistent",
        "POD_NAMESPACE": "ns",
        "ARKOUDA_LOCALE_SELECTOR": "app.kubernetes.io/instance=r,app.kubernetes.io/component=locale",
        "ARKBS_OUT": str(out / "ran"),
        "ARKOUDA_WORK_DIR": str(work),
        **(env or {}),
    }

    def body() -> int:
        code = cli.main(argv, environ=os.environ, api_factory=lambda: api)
        events_file.write_text(
            json.dumps([{"reason": e.reason, "type": e.type, "message": e.message} for e in api.created_events])
        )
        return code

    log = base / "server.log"
    code = wait_exit(spawn_as(uid=uid, gid=gid, env=child_env, log_path=log, fn=body))
    events = json.loads(events_file.read_text()) if events_file.exists() else []
    return code, log.read_text(), events


ServerRun = functools.partial[tuple[int, str, list[dict[str, str]]]]


@pytest.fixture
def run_server(test_user: pwd.struct_passwd, shared_dir: Path, loopback_sshd: tuple[Path, int]) -> ServerRun:
    """run_server_as as the test user in the test's directory, with the Secret of the one real sshd that answers
    for all three "pods" (127.0.0.1-3 on loopback) and fake_cluster(); a test passes its own api, Secret or port."""
    secret_dir, port = loopback_sshd
    return functools.partial(
        run_server_as, uid=test_user.pw_uid, gid=test_user.pw_gid, base=shared_dir, secret_dir=secret_dir, port=port
    )


def test_server_launches_standin_over_real_ssh_as_non_root(
    test_user: pwd.struct_passwd, shared_dir: Path, run_server: ServerRun
) -> None:
    code, log, events = run_server(env={"ARKBS_EXIT": "0"})
    assert code == 0, log
    lines = log.splitlines()
    assert (
        "1/2 locales ready; waiting for r-arkouda-locale-0 (Pending: 0/1 nodes are available: 1 Insufficient cpu)"
        in lines
    )
    assert "2/2 locales ready" in lines
    ran = (shared_dir / "out" / "ran").read_text().splitlines()
    # own IP first, then locales by ordinal; the login user is our (non-root) user on every host
    assert ran == [
        f"ok 127.0.0.1 {test_user.pw_name}",
        f"ok 127.0.0.2 {test_user.pw_name}",
        f"ok 127.0.0.3 {test_user.pw_name}",
    ]
    env = dict(line.split("=", 1) for line in (shared_dir / "out" / "ran.env").read_text().splitlines())
    assert env["SSH_SERVERS"] == "127.0.0.1 127.0.0.2 127.0.0.3"
    assert env["GASNET_MASTERIP"] == "127.0.0.1"
    assert env["GASNET_SPAWNFN"] == "S"
    # the locales' working directory is the writable work dir, never the binary's (read-only) directory
    assert env["GASNET_SSH_REMOTE_PATH"] == str(shared_dir / "work")
    assert not (shared_dir / "work" / ".arkouda" / "tokens.txt").exists()
    assert [e["reason"] for e in events] == ["LocalesReady", "Launched"]
    assert "-nl 3" in events[1]["message"]


def test_server_checks_the_launchs_datagram_counters_once_the_program_is_up(
    shared_dir: Path, run_server: ServerRun
) -> None:
    """The probe's session took the baseline, the splash line triggers the second reading of every host (one
    loopback sshd in this network namespace answers for all three), the line is logged and the totals written."""
    splash = "*    server listening on tcp://127.0.0.1:5555    *"
    code, log, events = run_server(env={"ARKBS_SPLASH": splash, "ARKBS_SLEEP": "3"})
    assert code == 0, log
    assert splash in log.splitlines()  # the program's output is still copied through
    [line] = [line for line in log.splitlines() if "launch network check:" in line]
    # nothing drops on loopback: no Event, an INFO line naming all three hosts
    assert " INFO arkouda_bootstrap.server.netcheck: launch network check: no datagram dropped on 3 hosts (" in line
    assert [e["reason"] for e in events] == ["LocalesReady", "Launched"]
    totals = json.loads((shared_dir / "server-state" / "launch" / "network.json").read_text())
    assert {k: totals[k] for k in ("hosts", "checked", "dropping", "sender", "receiver")} == {
        "hosts": 3,
        "checked": 3,
        "dropping": 0,
        "sender": 0,
        "receiver": 0,
    }


def test_server_whose_program_exits_cleanly_without_the_splash_line_reads_no_counters(
    shared_dir: Path, run_server: ServerRun
) -> None:
    code, log, _ = run_server(env={"ARKBS_EXIT": "0"})
    assert code == 0, log
    assert "launch network check" not in log
    assert not (shared_dir / "server-state" / "launch").exists()


def test_server_propagates_exit_code(run_server: ServerRun) -> None:
    code, log, _ = run_server(env={"ARKBS_EXIT": "5"})
    assert code == 5, log
    # a launch that failed before its splash line is checked as it exits
    assert "launch network check: no datagram dropped on 3 hosts (" in log


def test_server_writes_this_launchs_token_over_a_stale_one(
    test_user: pwd.struct_passwd, shared_dir: Path, loopback_sshd: tuple[Path, int], run_server: ServerRun
) -> None:
    secret_dir, _ = loopback_sshd
    with_token = shared_dir / "secret-with-token"
    write_secret_dir(with_token, {p.name: p.read_bytes() for p in secret_dir.iterdir()} | {keys.TOKEN: b"t0k3n-abc\n"})
    # Arkouda prefers <cwd>/.arkouda/tokens.txt over its environment: a file left by an earlier run must not win
    stale = shared_dir / "work" / ".arkouda"
    stale.mkdir(parents=True)
    (stale / "tokens.txt").write_text("stale-token-of-an-earlier-run\n")
    for p in (stale.parent, stale, stale / "tokens.txt"):
        os.chown(p, test_user.pw_uid, test_user.pw_gid)
    code, log, _ = run_server(secret_dir=with_token, program_args=("--ServerPort=5555", "--authenticate=true"))
    assert code == 0, log
    tokens = stale / "tokens.txt"
    assert tokens.read_text() == "t0k3n-abc\n"  # the Secret's token without its line end, as the only line
    assert tokens.stat().st_mode & 0o777 == 0o600


def test_server_refuses_a_work_dir_it_cannot_write(shared_dir: Path, run_server: ServerRun) -> None:
    readonly = shared_dir / "readonly-work"
    readonly.mkdir()
    readonly.chmod(0o555)
    code, log, events = run_server(env={"ARKOUDA_WORK_DIR": str(readonly)})
    assert code == 1, log
    assert f"working directory {readonly} (--work-dir, ARKOUDA_WORK_DIR) is not writable by uid" in log
    assert [e["reason"] for e in events] == ["LocalesReady", "WorkDirUnusable"]
    assert not (shared_dir / "out" / "ran").exists()  # nothing was launched


def test_server_terminates_program_when_a_locale_is_lost(run_server: ServerRun) -> None:
    api = fake_cluster()
    # after discovery has returned, the monitor sees locale-1 deleted
    api.script(api.event("DELETED", make_pod("r-arkouda-locale-1", ip="127.0.0.3")))
    code, log, events = run_server(api=api, extra_argv=["--max-relaunches", "0"], env={"ARKBS_SLEEP": "60"})
    assert code == 4, log
    assert "arkouda-bootstrap: error: locale pod r-arkouda-locale-1 was deleted; stopped the program" in log
    assert "0 relaunches in a row already (--max-relaunches, server.maxRelaunches)" in log
    assert [e["reason"] for e in events][-1] == "LocaleLost"
    assert events[-1]["type"] == "Warning"


# the Events of a run, a lost locale, and the relaunch in place
RELAUNCHED = ["LocalesReady", "Launched", "LocaleLost", "Relaunching", "LocalesReady", "Launched"]


def assert_two_runs_on_every_host(shared_dir: Path, test_user: pwd.struct_passwd, log: str) -> None:
    """Both runs reached every host (the server pod, locales 0 and 1) over the pinned ssh, and no other host."""
    ran = (shared_dir / "out" / "ran").read_text().splitlines()
    expected = 2 * [f"ok {ip} {test_user.pw_name}" for ip in ("127.0.0.1", "127.0.0.2", "127.0.0.3")]
    assert sorted(ran) == sorted(expected), "\n".join([*ran, log])


def test_server_relaunches_in_place_when_the_lost_locale_is_back(
    test_user: pwd.struct_passwd, shared_dir: Path, run_server: ServerRun
) -> None:
    api = fake_cluster()
    api.script(
        # once the first run has reached every host and sleeps, its monitor sees locale-1 deleted
        Gate(shared_dir / "out" / "ran.slept"),
        api.event("DELETED", make_pod("r-arkouda-locale-1", ip="127.0.0.3")),
        # seen by the second discovery: the StatefulSet's replacement is Ready
        api.event("ADDED", make_pod("r-arkouda-locale-1", ip="127.0.0.3", uid="second")),
    )
    code, log, events = run_server(
        api=api,
        env={"ARKBS_SLEEP": "60"},  # the first run waits to be stopped, the relaunched one exits 0
    )
    assert code == 0, log
    assert [e["reason"] for e in events] == RELAUNCHED
    assert "relaunching when all locales are Ready again (relaunch 1/5 in a row)" in events[3]["message"]
    # both runs reached every host over the pinned ssh
    assert_two_runs_on_every_host(shared_dir, test_user, log)


def test_server_relaunches_on_the_real_pod_and_names_an_impostor_with_the_lost_locales_labels(
    test_user: pwd.struct_passwd, shared_dir: Path, run_server: ServerRun
) -> None:
    # `kubectl debug --copy-to r-arkouda-locale-1-copy --keep-labels` during a locale loss: a pod with locale 1's
    # labels (pod-index included) that the StatefulSet does not own. It must neither enter the host list nor
    # stop the relaunch with a duplicate ordinal.
    api = fake_cluster()
    copy = make_pod(
        "r-arkouda-locale-1-copy",
        ip="127.0.0.9",
        uid="uid-copy",
        labels={"apps.kubernetes.io/pod-index": "1"},
        controller=None,
    )
    api.script(
        Gate(shared_dir / "out" / "ran.slept"),
        api.event("DELETED", make_pod("r-arkouda-locale-1", ip="127.0.0.3")),
        api.event("ADDED", copy),
        api.event("ADDED", make_pod("r-arkouda-locale-1", ip="127.0.0.3", uid="second")),
    )
    code, log, events = run_server(api=api, env={"ARKBS_SLEEP": "60", "ARKOUDA_LOCALE_STATEFULSET": "r-arkouda-locale"})
    assert code == 0, log
    named = (
        "ignoring pod r-arkouda-locale-1-copy (uid uid-copy): it carries this release's labels but is not a pod of "
        "StatefulSet r-arkouda-locale (it has no controller)"
    )
    assert named in log
    impostor = [e for e in events if e["reason"] == "ImpostorPod"]
    assert len(impostor) == 1 and impostor[0]["type"] == "Warning" and named in impostor[0]["message"], events
    assert [e["reason"] for e in events if e["reason"] != "ImpostorPod"] == RELAUNCHED
    assert_two_runs_on_every_host(shared_dir, test_user, log)  # and never on the impostor's 127.0.0.9


def test_server_probe_failure_names_host_and_pod(shared_dir: Path, run_server: ServerRun) -> None:
    other = write_secret_dir(shared_dir / "other-secret", keys.build_secret_data(release="other", with_token=False))
    code, log, events = run_server(secret_dir=other)
    assert code == 1, log
    error = [line for line in log.splitlines() if line.startswith("arkouda-bootstrap: error:")]
    assert len(error) == 1
    assert error[0].endswith(
        "ssh probe failed: pod r-arkouda-server-0 (127.0.0.1) presented a host key this release never had: "
        "a different Secret is mounted there, or something else answers on that address (+2 more hosts failed)"
    )
    assert "attempt 2/3" not in log
    assert "Traceback" not in log
    assert [e["reason"] for e in events] == ["LocalesReady", "ProbeFailed"]
    assert not (shared_dir / "out" / "ran").exists()


def test_server_probe_of_pods_not_reloaded_onto_rotated_keys_waits_until_the_deadline_and_says_so(
    shared_dir: Path, secret_data: dict[str, bytes], run_server: ServerRun
) -> None:
    """The server mounts the rotated Secret (new host key, the old one in retired_host_keys, as keygen writes it)
    while the locales' sshd keeps serving the old key: waited for until the wait deadline, then named."""
    rotated = keys.build_secret_data(release="t", with_token=False)
    rotated.update({f: secret_data[f] for f in (keys.CLIENT_KEY, keys.CLIENT_PUB, keys.AUTHORIZED_KEYS)})
    rotated[keys.RETIRED_HOST_KEYS] = keys.retire_host_key(secret_data)
    t0 = time.monotonic()
    code, log, events = run_server(
        secret_dir=write_secret_dir(shared_dir / "rotated-secret", rotated),
        extra_argv=["--timeout", "5"],
    )
    assert code == 1, log
    assert time.monotonic() - t0 < 30
    error = [line for line in log.splitlines() if line.startswith("arkouda-bootstrap: error:")]
    assert len(error) == 1
    assert error[0].endswith(
        "ssh probe failed: pod r-arkouda-server-0 (127.0.0.1) serves an older host key of this release: "
        "the keys were rotated and this pod has not reloaded them yet (+2 more hosts failed)"
    )
    assert "waiting for the pod to reload the keys" in log
    reasons = [e["reason"] for e in events]
    assert reasons.count("KeysPending") == 3  # once per host
    assert reasons[-1] == "ProbeFailed"


def test_server_prewarm_reuses_masters_and_closes_them(shared_dir: Path, run_server: ServerRun) -> None:
    code, log, _ = run_server(extra_argv=["--prewarm"], env={"ARKBS_CHECK_MASTER": "1"})
    assert code == 0, log
    assert (shared_dir / "out" / "ran.master").read_text().count("Master running") == 3
    assert list((shared_dir / "server-state" / "cm").iterdir()) == []  # masters closed after the program exited


def test_server_no_supervise_execs_the_program(shared_dir: Path, run_server: ServerRun) -> None:
    code, log, _ = run_server(extra_argv=["--no-supervise"], env={"ARKBS_EXIT": "6"})
    assert code == 6, log  # the exec'ed stand-in's own status: the bootstrap is gone
    assert len((shared_dir / "out" / "ran").read_text().splitlines()) == 3


def test_server_fails_fast_on_a_broken_secret(shared_dir: Path, run_server: ServerRun) -> None:
    broken = keys.build_secret_data(release="b", with_token=False)
    del broken[keys.KNOWN_HOSTS]  # the launcher's container holds the client side only (keys.CLIENT_FIELDS)
    secret_dir = write_secret_dir(shared_dir / "broken-secret", broken)
    api = FakeKube()  # no locale pods at all: a wait would time out; the Secret error must come first
    code, log, events = run_server(api=api, secret_dir=secret_dir)
    assert code == 1, log
    assert f"arkouda-bootstrap: error: SSH Secret mounted at {secret_dir}: field known_hosts: missing or empty" in log
    # (api.calls lives in the forked child; its progress lines would show a wait had started)
    assert "locales ready" not in log
    # `kubectl describe pod` tells the same, with a reason to search for
    assert [(e["reason"], e["type"]) for e in events] == [("SecretInvalid", "Warning")]
    assert "field known_hosts: missing or empty" in events[0]["message"]


def test_server_names_missing_rbac_in_an_event(run_server: ServerRun) -> None:
    api = FakeKube(fail_with={"list_pods": ForbiddenError(verb="list", resource="pods", namespace="ns")})
    code, log, events = run_server(api=api)
    assert code == 1, log
    assert "arkouda-bootstrap: error: missing RBAC: list pods in namespace ns" in log
    assert [(e["reason"], e["message"]) for e in events] == [("RbacMissing", "missing RBAC: list pods in namespace ns")]


def test_server_wait_timeout_lists_what_is_missing(
    test_user: pwd.struct_passwd, shared_dir: Path, secret_data: dict[str, bytes]
) -> None:
    secret_dir = write_secret_dir(shared_dir / "secret", secret_data)
    api = FakeKube(block=True)
    api.pods["r-arkouda-locale-1"] = make_pod("r-arkouda-locale-1", ip="127.0.0.3")
    code, log, events = run_server_as(
        uid=test_user.pw_uid,
        gid=test_user.pw_gid,
        api=api,
        base=shared_dir,
        secret_dir=secret_dir,
        port=free_port(),
        extra_argv=["--timeout", "1"],
    )
    assert code == 3, log
    assert (
        "arkouda-bootstrap: error: timed out after 1s: 1/2 locales ready; waiting for "
        "r-arkouda-locale-0 (not created yet)" in log
    )
    assert [e["reason"] for e in events] == ["WaitTimeout"]
    assert events[0]["type"] == "Warning"


class ScaledLocales(FakeKube):
    """A FakeKube whose locale StatefulSet's scale acts on its pods: 0 deletes them, 2 brings both Ready (the
    StatefulSet controller's part, done at once)."""

    def set_replicas(self, *, namespace: str, statefulset: str, replicas: int) -> None:
        super().set_replicas(namespace=namespace, statefulset=statefulset, replicas=replicas)
        for name in list(self.pods):
            del self.pods[name]
        if replicas == 2:
            for name, ip in LOCALE_IPS.items():
                self.pods[name] = make_pod(name, ip=ip)


def run_with_locale_0_missing(run_server: ServerRun, *, backoff: int) -> tuple[int, str, list[dict[str, str]]]:
    """The server with --timeout 1 and --release-backoff `backoff`; locale-1 Ready, locale-0 never created until
    the StatefulSet is scaled (ScaledLocales)."""
    api = ScaledLocales(block=True, replicas={"r-arkouda-locale": 2})
    api.pods["r-arkouda-locale-1"] = make_pod("r-arkouda-locale-1", ip="127.0.0.3")
    flags = ["--timeout", "1", "--locale-statefulset", "r-arkouda-locale", "--release-backoff", str(backoff)]
    return run_server(api=api, extra_argv=flags, env={"ARKBS_EXIT": "0"})


def test_server_gives_its_locales_back_after_a_wait_timeout_and_launches_once_they_come(
    run_server: ServerRun,
) -> None:
    code, log, events = run_with_locale_0_missing(run_server, backoff=1)
    assert code == 0, log
    assert [e["reason"] for e in events] == [
        "WaitTimeout",
        "LocalesReleased",
        "LocalesRequested",
        "LocalesReady",
        "Launched",
    ]
    released = events[1]["message"]
    assert "1/2 locales ready; waiting for r-arkouda-locale-0 (not created yet)" in released
    assert "scaled StatefulSet r-arkouda-locale to 0" in released
    # (the server runs in a child process: its Events, emitted after each scale succeeded, are what the test sees)
    assert "asked StatefulSet r-arkouda-locale for 2 locale pod(s) again" in events[2]["message"]
    assert "-nl 3" in events[4]["message"]


def test_server_without_a_release_backoff_exits_at_the_wait_timeout_and_keeps_the_locales(
    run_server: ServerRun,
) -> None:
    code, log, events = run_with_locale_0_missing(run_server, backoff=0)
    assert code == 3, log
    assert [e["reason"] for e in events] == ["WaitTimeout"]


ARBITRARY_UID = 1000690000


def test_arbitrary_uid_without_passwd_entry(
    shared_dir: Path, secret_data: dict[str, bytes], sshds: list[LocaleSshd]
) -> None:
    """OpenShift-style: a uid with no passwd entry runs both sshd (locale) and the server; nss_wrapper makes
    the uid resolvable as `arkouda`."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run as an arbitrary uid (CI runs as root)")
    assert find_nss_wrapper() is not None, "libnss_wrapper missing: run `make deps` (hack/apt-packages.txt)"
    with pytest.raises(KeyError):
        pwd.getpwuid(ARBITRARY_UID)
    secret_dir = write_secret_dir(shared_dir / "secret", secret_data)
    port = free_port()
    sshds.append(
        start_locale(
            uid=ARBITRARY_UID,
            gid=0,
            secret_dir=secret_dir,
            state_dir=shared_dir / "locale-state",
            port=port,
            env={"HOME": "/"},
            user="arkouda",
        )
    )
    assert (shared_dir / "locale-state" / "nss" / "passwd").read_text().startswith(f"arkouda:*:{ARBITRARY_UID}:0:")
    code, log, _ = run_server_as(
        uid=ARBITRARY_UID,
        gid=0,
        base=shared_dir,
        secret_dir=secret_dir,
        port=port,
    )
    assert code == 0, log
    ran = (shared_dir / "out" / "ran").read_text().splitlines()
    assert ran == ["ok 127.0.0.1 arkouda", "ok 127.0.0.2 arkouda", "ok 127.0.0.3 arkouda"]


def test_server_launches_with_the_client_side_of_the_secret_only(
    shared_dir: Path, loopback_sshd: tuple[Path, int], run_server: ServerRun
) -> None:
    # what the chart mounts in the server pod's `server` container: no host private key, no authorized_keys
    secret_dir, _ = loopback_sshd
    client_side = {p.name: p.read_bytes() for p in secret_dir.iterdir() if p.name in keys.CLIENT_FIELDS}
    assert set(client_side) == set(keys.CLIENT_FIELDS)
    code, log, events = run_server(secret_dir=write_secret_dir(shared_dir / "client-side", client_side))
    assert code == 0, log
    assert [e["reason"] for e in events] == ["LocalesReady", "Launched"]
