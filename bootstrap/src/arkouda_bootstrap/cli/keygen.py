"""`keygen`: its options and the KeygenSettings built from them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from arkouda_bootstrap import config
from arkouda_bootstrap.cli.options import Opt, Subcommand, Values
from arkouda_bootstrap.config import KeygenSettings
from arkouda_bootstrap.errors import UsageError
from arkouda_bootstrap.kube.api import KubeApi, resolve_namespace

SECRET_SUFFIX = "-arkouda-ssh"

KEYGEN = [
    Opt(
        "secret_name",
        "--secret-name",
        "ARKOUDA_SSH_SECRET",
        f"name of the SSH Secret (<release>{SECRET_SUFFIX})",
        unset="(required)",
        doc=f"Secret name, normally `<release>{SECRET_SUFFIX}`",
    ),
    Opt(
        "release",
        "--release",
        "ARKOUDA_RELEASE",
        "Helm release (labels; default: from --secret-name)",
        unset=f"derived from `<release>{SECRET_SUFFIX}`",
        doc="release name for the labels",
    ),
    Opt(
        "with_token",
        "--with-token",
        "ARKOUDA_WITH_TOKEN",
        "also store a random Arkouda auth token",
        boolean=True,
        doc="also store `token` (and require it in an existing Secret)",
    ),
    Opt(
        "rotation_id",
        "--rotation-id",
        "ARKOUDA_SSH_ROTATION_ID",
        "replace the keys (and token) once per new id: the id is recorded in the Secret, and the same id again "
        "(a replayed `helm upgrade --reuse-values`) changes nothing",
        unset="(none)",
        doc="replace the keys once per new id (1\N{EN DASH}63 of `A-Za-z0-9-_.`)",
    ),
    Opt(
        "delete",
        "--delete",
        "ARKOUDA_SSH_DELETE",
        "delete the Secret (post-delete hook)",
        boolean=True,
        doc="delete the Secret",
    ),
    Opt(
        "test_objects",
        "--test-objects",
        "ARKOUDA_TEST_OBJECTS",
        "with --delete: also delete the helm test Pod and ConfigMap of this name (Helm leaves test hooks behind)",
        unset="(none)",
        doc="with `--delete`: also delete the helm test Pod and ConfigMap of this name (Helm leaves test hooks behind)",
    ),
    Opt(
        "keygen_job",
        "--keygen-job",
        "ARKOUDA_KEYGEN_JOB",
        "with --delete: first delete the keygen Job of this name and its pods (an interrupted helm client leaves it)",
        unset="(none)",
        doc="with `--delete`: first delete the keygen Job of this name and its pods (an interrupted helm client "
        "leaves it)",
    ),
    Opt(
        "kueue_workload",
        "--kueue-workload",
        "ARKOUDA_KUEUE_WORKLOAD",
        "with --delete: first delete the release's Kueue Workload of this name (its pod group): Kueue keeps the "
        "group's pods and its quota until the Workload is gone; without (mpi job mode, before a run): delete it "
        "only if Kueue finished it, else the next run's pods would join the finished group and stay gated",
        unset="(none)",
        doc="the release's Kueue Workload: with `--delete` deleted (Kueue keeps the group's pods and quota until it "
        "is gone); without, deleted only if Kueue finished it (the last mpi job mode run's group)",
    ),
]


def keygen_settings(v: Values, *, namespace: str) -> KeygenSettings:
    secret_name = v.parsed("secret_name", config.parse_name)
    release = v.raw("release")
    if not release:
        if not secret_name.endswith(SECRET_SUFFIX):
            raise UsageError(f"missing {v.source('release')}: cannot derive it from {secret_name}")
        release = secret_name[: -len(SECRET_SUFFIX)]
    raw_rotation, ro = v.raw("rotation_id"), v.opt("rotation_id")
    rotation_id = config.parse_rotation_id(raw_rotation, flag=ro.flag, env=ro.env) if raw_rotation else None
    delete = v.boolean("delete")
    if rotation_id and delete:
        raise UsageError(f"{ro.flag} and {v.opt('delete').flag} exclude each other")
    test_objects, to = v.raw("test_objects"), v.opt("test_objects")
    if test_objects:
        if not delete:
            raise UsageError(f"{to.source} needs {v.opt('delete').flag} (it is part of the uninstall clean-up)")
        test_objects = config.parse_name(test_objects, flag=to.flag, env=to.env)
    keygen_job, kj = v.raw("keygen_job"), v.opt("keygen_job")
    if keygen_job:
        if not delete:
            raise UsageError(f"{kj.source} needs {v.opt('delete').flag} (it is part of the uninstall clean-up)")
        keygen_job = config.parse_name(keygen_job, flag=kj.flag, env=kj.env)
    workload, kw = v.raw("kueue_workload"), v.opt("kueue_workload")
    if workload:
        workload = config.parse_name(workload, flag=kw.flag, env=kw.env)
    return KeygenSettings(
        namespace=namespace,
        secret_name=secret_name,
        release=release,
        with_token=v.boolean("with_token"),
        rotation_id=rotation_id,
        delete=delete,
        test_objects=test_objects or None,
        keygen_job=keygen_job or None,
        kueue_workload=workload or None,
    )


def run(v: Values, command: Sequence[str], api_factory: Callable[[], KubeApi]) -> int:
    from arkouda_bootstrap.keygen import run_keygen

    # validate the flags first, so a bad flag is reported before a missing namespace
    keygen = replace(keygen_settings(v, namespace=""), namespace=resolve_namespace(v.raw("namespace")))
    print(run_keygen(api_factory(), keygen), flush=True)
    return 0


COMMAND = Subcommand(
    name="keygen",
    help="create/validate/rotate/delete the release's SSH Secret (Helm hook)",
    epilog="Exits 0 when the Secret was created or already valid; an invalid Secret is an error naming the field.",
    tables={"keygen": KEYGEN},
    run=run,
)
