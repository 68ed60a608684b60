"""The option machinery of the command line: one `Opt` per flag (its flag, environment variable, default and
help, in one place), the subcommand record, and `Values`, which resolves flag, then env var, then default.

A default is the value itself, taken from config's constants or a settings class, never a string copy: the
argparse help, the resolved value and the README's flag tables (cli/docs.py) all read it from the `Opt`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from arkouda_bootstrap import config
from arkouda_bootstrap.config import SshTuning
from arkouda_bootstrap.errors import UsageError

if TYPE_CHECKING:
    from arkouda_bootstrap.kube.api import KubeApi

T = TypeVar("T")

# A default as the program uses it (a StrEnum member is a str); rendered by `Opt.default_text`.
Default = str | int | float | Path | None


@dataclass(frozen=True)
class Opt:
    """One option. `unset` (README only) says what an option without a default means when it is not given;
    `doc` (README only, markdown) replaces `help` in the README's table where the README says more."""

    dest: str
    flag: str
    env: str
    help: str
    default: Default = None
    boolean: bool = False
    unset: str = ""
    doc: str = ""

    @property
    def source(self) -> str:
        """How error messages name the option: `--flag (ENV)`."""
        return config.source(self.flag, self.env)

    @property
    def default_text(self) -> str | None:
        """The default as a user writes it (and as it is parsed when the option is not given)."""
        if self.default is None:
            return None
        return f"{self.default:g}" if isinstance(self.default, float) else str(self.default)


class Values:
    """Flag value, else env var, else default; raw strings handed to config's validators."""

    def __init__(self, ns: argparse.Namespace, opts: Sequence[Opt], environ: Mapping[str, str]) -> None:
        self._ns = ns
        self._opts = {o.dest: o for o in opts}
        self._environ = environ

    @property
    def environ(self) -> Mapping[str, str]:
        return self._environ

    def opt(self, dest: str) -> Opt:
        return self._opts[dest]

    def source(self, dest: str) -> str:
        return self._opts[dest].source

    def raw(self, dest: str) -> str | None:
        opt = self._opts[dest]
        value = getattr(self._ns, dest, None)
        if value is True:
            return "true"
        if value is not None and value is not False:
            return str(value)
        if self._environ.get(opt.env, "").strip():
            return self._environ[opt.env]
        return opt.default_text

    def given(self, dest: str) -> bool:
        """Set by flag or env var (not just defaulted)."""
        opt = self._opts[dest]
        value = getattr(self._ns, dest, None)
        return (value is not None and value is not False) or bool(self._environ.get(opt.env, "").strip())

    def required(self, dest: str) -> str:
        value = self.raw(dest)
        if value is None or not value.strip():
            opt = self._opts[dest]
            raise UsageError(f"missing {opt.source}: {opt.help}")
        return value.strip()

    def parsed(self, dest: str, parse: Callable[..., T]) -> T:
        """The required value through one of config's `parse_*(value, *, flag, env)` validators."""
        opt = self._opts[dest]
        return parse(self.required(dest), flag=opt.flag, env=opt.env)

    def optional(self, dest: str, parse: Callable[..., T]) -> T | None:
        """Like `parsed`, but None when the option is unset or blank."""
        value = self.raw(dest)
        if value is None or not value.strip():
            return None
        opt = self._opts[dest]
        return parse(value, flag=opt.flag, env=opt.env)

    def boolean(self, dest: str) -> bool:
        opt = self._opts[dest]
        return config.parse_bool(self.raw(dest) or "", flag=opt.flag, env=opt.env)

    def integer(self, dest: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
        opt = self._opts[dest]
        return config.parse_int(self.required(dest), flag=opt.flag, env=opt.env, minimum=minimum, maximum=maximum)

    def number(self, dest: str) -> float:
        return self.parsed(dest, config.parse_float)

    def port(self, dest: str = "port") -> int:
        return self.parsed(dest, config.parse_port)

    def path(self, dest: str) -> Path:
        return Path(self.required(dest))


# What a subcommand runs: its resolved options, the command after `--` and the Kubernetes API seam.
Runner = Callable[[Values, Sequence[str], Callable[[], "KubeApi"]], int]


@dataclass(frozen=True)
class Subcommand:
    """A subcommand: its one-line help, epilog, and its options as the README's tables group them (table id ->
    options, in order; cli/docs.py writes each between `<!-- options:ID -->` markers)."""

    name: str
    help: str
    epilog: str
    tables: Mapping[str, Sequence[Opt]]
    run: Runner
    takes_command: bool = False

    @property
    def options(self) -> list[Opt]:
        return [*COMMON, *(opt for table in self.tables.values() for opt in table)]


DEFAULT_LOG_LEVEL = "INFO"

LOG_LEVEL = Opt(
    "log_level",
    "--log-level",
    "ARKOUDA_LOG_LEVEL",
    "DEBUG, INFO, WARNING or ERROR",
    DEFAULT_LOG_LEVEL,
    doc="`DEBUG`, `INFO`, `WARNING`, `ERROR`; logs go to stderr",
)
NAMESPACE = Opt(
    "namespace",
    "--namespace",
    "POD_NAMESPACE",
    "namespace (default: the pod's service account namespace)",
    unset="the service account's namespace file",
    doc="namespace of the pods, the Secret and the StatefulSets (`keygen`, `server`, `nodewatch`, `gate`)",
)
COMMON = [LOG_LEVEL, NAMESPACE]
COMMON_TABLE = "common"

# The sshd's (and the server's ssh client's) options, shared by `locale` and `server`.
SSH = [
    Opt(
        "secret_dir",
        "--secret-dir",
        "ARKOUDA_SSH_DIR",
        "where the SSH Secret is mounted",
        config.DEFAULT_SECRET_DIR,
        doc="where the SSH Secret is mounted (read-only is fine)",
    ),
    Opt(
        "state_dir",
        "--state-dir",
        "ARKOUDA_STATE_DIR",
        "writable state dir (emptyDir; server --hosts-from slurm: $TMPDIR/arkouda-bootstrap-<uid>-<job id>)",
        config.DEFAULT_STATE_DIR,
        doc="writable dir (emptyDir) for keys, config, pid",
    ),
    Opt("port", "--port", "ARKOUDA_SSH_PORT", "sshd port", config.DEFAULT_SSH_PORT),
    Opt(
        "kex",
        "--kex-algorithms",
        "ARKOUDA_SSH_KEX",
        "OpenSSH KexAlgorithms list",
        config.DEFAULT_KEX,
        doc="sshd `KexAlgorithms`",
    ),
    Opt(
        "ciphers",
        "--ciphers",
        "ARKOUDA_SSH_CIPHERS",
        "OpenSSH Ciphers list",
        config.DEFAULT_CIPHERS,
        doc="sshd `Ciphers`",
    ),
]


def ssh_tuning(v: Values) -> SshTuning:
    return SshTuning(
        kex_algorithms=v.parsed("kex", config.parse_algorithms),
        ciphers=v.parsed("ciphers", config.parse_algorithms),
    )
