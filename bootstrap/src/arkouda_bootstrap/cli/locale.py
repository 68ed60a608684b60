"""`locale`: its options and the LocaleSettings built from them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from arkouda_bootstrap import config
from arkouda_bootstrap.cli.options import SSH, Opt, Subcommand, Values, ssh_tuning
from arkouda_bootstrap.config import LocaleSettings
from arkouda_bootstrap.kube.api import KubeApi

LOCALE = [
    *SSH,
    Opt(
        "secret_poll",
        "--secret-poll-seconds",
        "ARKOUDA_SECRET_POLL_SECONDS",
        "seconds between checks of the mounted Secret; changed keys are installed and sshd reloaded",
        config.DEFAULT_SECRET_POLL_SECONDS,
        doc="seconds between checks of the mounted Secret for changed keys",
    ),
]


def locale_settings(v: Values) -> LocaleSettings:
    return LocaleSettings(
        secret_dir=v.path("secret_dir"),
        state_dir=v.path("state_dir"),
        port=v.port(),
        tuning=ssh_tuning(v),
        secret_poll_seconds=v.integer("secret_poll", minimum=1, maximum=3600),
    )


def run(v: Values, command: Sequence[str], api_factory: Callable[[], KubeApi]) -> int:
    from arkouda_bootstrap.locale import run_locale

    return run_locale(locale_settings(v))


COMMAND = Subcommand(
    name="locale",
    help="run the unprivileged sshd and reload it with changed keys (locale pods, server pod's sshd)",
    epilog="Runs `sshd -D -e` as its child (sshd logs to stderr), forwards SIGTERM/SIGINT to it and exits with its "
    "status; a changed mounted Secret is validated, installed and loaded into sshd with SIGHUP.",
    tables={"locale": LOCALE},
    run=run,
)
