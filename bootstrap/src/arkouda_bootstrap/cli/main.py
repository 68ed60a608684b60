"""Command line: argparse with an environment variable behind every flag (flags win), and every user error
turned into one line on stderr plus a non-zero exit (see errors.py for the codes). The options of each
subcommand, and how they become its settings, live in the subcommand's own module next to this one."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import NoReturn

from arkouda_bootstrap import __version__
from arkouda_bootstrap.cli import exporter, gate, keygen, locale, nodewatch, server
from arkouda_bootstrap.cli.options import LOG_LEVEL, Subcommand, Values
from arkouda_bootstrap.errors import BootstrapError, UsageError
from arkouda_bootstrap.kube.api import KubeApi, KubernetesApi

log = logging.getLogger(__name__)

PROG = "arkouda-bootstrap"

SUBCOMMANDS: dict[str, Subcommand] = {
    c.name: c
    for c in (keygen.COMMAND, locale.COMMAND, server.COMMAND, exporter.COMMAND, nodewatch.COMMAND, gate.COMMAND)
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        sub = self.prog[len(PROG) :].strip()
        raise UsageError(f"{sub}: {message}" if sub else message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Entrypoint of the Arkouda-on-Kubernetes images.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="subcommand", metavar="{" + ",".join(SUBCOMMANDS) + "}", parser_class=_Parser)
    for name, command in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=command.help, description=command.help, epilog=command.epilog)
        for opt in command.options:
            env = f" [env {opt.env}]"
            if opt.boolean:
                p.add_argument(opt.flag, dest=opt.dest, action="store_true", default=None, help=opt.help + env)
            else:
                default = f" (default {opt.default_text})" if opt.default_text else ""
                p.add_argument(opt.flag, dest=opt.dest, default=None, help=opt.help + default + env)
    return parser


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Everything after the first `--` is the command to launch, never parsed as our flags."""
    args = list(argv)
    if "--" in args:
        i = args.index("--")
        return args[:i], args[i + 1 :]
    return args, []


def setup_logging(level_name: str) -> None:
    level = logging.getLevelName(level_name.strip().upper())
    if not isinstance(level, int):
        raise UsageError(f"{LOG_LEVEL.source}: {level_name!r} is not DEBUG, INFO, WARNING or ERROR")
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True
    )
    # the client logs every request at DEBUG; keep ours readable
    logging.getLogger("kubernetes").setLevel(max(level, logging.INFO))
    logging.getLogger("urllib3").setLevel(max(level, logging.WARNING))


def dispatch(
    argv: Sequence[str],
    *,
    environ: Mapping[str, str],
    api_factory: Callable[[], KubeApi],
) -> int:
    own, command = split_command(argv)
    ns = build_parser().parse_args(own)
    if ns.subcommand is None:
        raise UsageError(f"{PROG}: choose a subcommand: {', '.join(SUBCOMMANDS)} (see --help)")
    sub = SUBCOMMANDS[ns.subcommand]
    values = Values(ns, sub.options, environ)
    setup_logging(values.required(LOG_LEVEL.dest))
    if command and not sub.takes_command:
        raise UsageError(f"{sub.name} takes no command after `--`")
    return sub.run(values, command, api_factory)


def main(
    argv: Sequence[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    api_factory: Callable[[], KubeApi] = KubernetesApi.from_environment,
) -> int:
    try:
        return dispatch(
            sys.argv[1:] if argv is None else argv,
            environ=os.environ if environ is None else environ,
            api_factory=api_factory,
        )
    except BootstrapError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


def entrypoint() -> NoReturn:
    """Console-script and `python -m` entry: run main() and leave without interpreter teardown.

    The server's locale monitor is a daemon thread that sits in a blocking watch read; tearing the interpreter
    down under it aborted the process (SIGABRT, exit 134) after a supervised program had exited 0, hiding the
    program's status from Kubernetes. Everything worth keeping is flushed first."""
    code = main()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
