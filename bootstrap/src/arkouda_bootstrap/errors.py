"""The one exception type that the CLI turns into a single line on stderr and a non-zero exit."""

from __future__ import annotations

# Exit codes (documented in bootstrap/README.md).
EXIT_USAGE = 2  # bad flag / env value
EXIT_FAILURE = 1  # a runtime failure the user can fix (RBAC, Secret, sshd config, probe)
EXIT_TIMEOUT = 3  # locales not ready before the deadline
EXIT_LOCALE_LOST = 4  # a locale pod went away while the program ran


class BootstrapError(Exception):
    """A failure the user can act on; `str(err)` is the one line printed, `exit_code` the process status."""

    def __init__(self, message: str, *, exit_code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class UsageError(BootstrapError):
    """A bad flag or environment value; names the flag and its env var."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=EXIT_USAGE)
