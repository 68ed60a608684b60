"""CLI: env fallbacks (flags win), one-line errors with exit codes, and the installed entrypoints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from arkouda_bootstrap import config
from arkouda_bootstrap.cli import exporter as exporter_cli
from arkouda_bootstrap.cli import locale as locale_cli
from arkouda_bootstrap.cli import main as cli
from arkouda_bootstrap.cli import server as server_cli
from arkouda_bootstrap.cli.options import COMMON, Values
from arkouda_bootstrap.config import Launcher
from arkouda_bootstrap.errors import EXIT_USAGE, UsageError
from arkouda_bootstrap.kube.api import KubeApi
from fakes import FakeKube

REPO = Path(__file__).resolve().parents[2]

SERVER_ENV = {
    "ARKOUDA_NUM_LOCALES": "3",
    "ARKOUDA_LOCALE_SELECTOR": "app.kubernetes.io/instance=rel,app.kubernetes.io/component=locale",
    "POD_NAME": "rel-arkouda-server-0",
    "POD_IP": "10.1.0.5",
    "POD_NAMESPACE": "ns",
}


def server(argv: list[str], environ: dict[str, str]) -> config.ServerSettings:
    own, command = cli.split_command(["server", *argv])
    ns = cli.build_parser().parse_args(own)
    values = Values(ns, server_cli.COMMAND.options, environ)
    return server_cli.server_settings(values, namespace="ns", command=command)


def test_server_from_env_with_defaults() -> None:
    s = server(["--", "/opt/arkouda/bin/arkouda_server", "--ServerPort=5555"], SERVER_ENV)
    assert s.num_locales == 3
    assert s.pod_ip == "10.1.0.5"
    assert s.port == 2222
    assert s.timeout == 600
    assert s.launcher is Launcher.ARKOUDA
    assert s.supervise and not s.prewarm
    assert s.secret_dir == Path("/etc/arkouda/ssh") and s.state_dir == Path("/run/arkouda")
    assert s.command == ("/opt/arkouda/bin/arkouda_server", "--ServerPort=5555")
    assert s.tuning.kex_algorithms == "curve25519-sha256,curve25519-sha256@libssh.org"


def test_the_cli_defaults_are_the_settings_defaults() -> None:
    """Every default the CLI applies is config's own: unset flags give exactly the dataclasses' defaults."""
    s = server([], SERVER_ENV)
    assert s == config.ServerSettings(
        namespace="ns", num_locales=3, selector=s.selector, pod_name="rel-arkouda-server-0", pod_ip="10.1.0.5"
    )
    ns = cli.build_parser().parse_args(["exporter"])
    assert (
        exporter_cli.exporter_settings(Values(ns, [*COMMON, *exporter_cli.EXPORTER], {})) == config.ExporterSettings()
    )
    ns = cli.build_parser().parse_args(["locale"])
    assert locale_cli.locale_settings(Values(ns, [*COMMON, *locale_cli.LOCALE], {})) == config.LocaleSettings()


def test_flags_win_over_env_and_command_flags_are_not_ours() -> None:
    env = dict(
        SERVER_ENV, ARKOUDA_SSH_PORT="2000", ARKOUDA_LAUNCHER="mpi", ARKOUDA_SSH_PREWARM="true", OMP_NUM_THREADS="2"
    )
    s = server(["--port", "3000", "--no-supervise", "--", "mpirun", "--port", "9"], env)
    assert s.port == 3000
    assert s.launcher is Launcher.MPI
    assert s.prewarm and not s.supervise
    assert s.omp_threads == 2
    assert s.command == ("mpirun", "--port", "9")


@pytest.mark.parametrize(
    ("env", "argv", "message"),
    [
        ({"ARKOUDA_NUM_LOCALES": "0"}, [], "--num-locales (ARKOUDA_NUM_LOCALES): 0 is less than 1"),
        ({"ARKOUDA_NUM_LOCALES": "three"}, [], "--num-locales (ARKOUDA_NUM_LOCALES): 'three' is not an integer"),
        ({"POD_IP": ""}, [], "missing --pod-ip (POD_IP)"),
        ({"POD_IP": "10.0.0.300"}, [], "--pod-ip (POD_IP): '10.0.0.300' is not an IP address"),
        ({"ARKOUDA_SSH_PORT": "70000"}, [], "--port (ARKOUDA_SSH_PORT): 70000 is greater than 65535"),
        ({"ARKOUDA_LAUNCHER": "slurm"}, [], "--launcher (ARKOUDA_LAUNCHER): 'slurm' is not one of arkouda, mpi, none"),
        ({"ARKOUDA_WAIT_TIMEOUT": "-1"}, [], "--timeout (ARKOUDA_WAIT_TIMEOUT): '-1' must be greater than 0"),
        (
            {"ARKOUDA_LOCALE_SELECTOR": "locale"},
            [],
            "--selector (ARKOUDA_LOCALE_SELECTOR): 'locale' is not a label selector",
        ),
        ({"ARKOUDA_SSH_KEX": "curve25519 sha256;"}, [], "--kex-algorithms (ARKOUDA_SSH_KEX)"),
        ({"ARKOUDA_SSH_PREWARM": "maybe"}, [], "--prewarm (ARKOUDA_SSH_PREWARM): 'maybe' is not a boolean"),
        ({"OMP_NUM_THREADS": "0"}, [], "--omp-threads (OMP_NUM_THREADS): 0 is less than 1"),
    ],
)
def test_bad_server_input_names_flag_and_env(env: dict[str, str], argv: list[str], message: str) -> None:
    with pytest.raises(UsageError) as err:
        server(argv, dict(SERVER_ENV, **env))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def run_main(
    argv: list[str], environ: dict[str, str], capsys: pytest.CaptureFixture[str], api: KubeApi | None = None
) -> tuple[int, str, str]:
    code = cli.main(argv, environ=environ, api_factory=lambda: api or FakeKube())
    out, err = capsys.readouterr()
    return code, out, err


def test_main_errors_are_one_line_with_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["server"], {}, capsys)
    assert code == EXIT_USAGE
    assert (
        err == "arkouda-bootstrap: error: missing --num-locales (ARKOUDA_NUM_LOCALES): "
        "number of locales incl. this server (>= 1)\n"
    )
    code, _, err = run_main(["server", "--bogus"], {}, capsys)
    assert (code, err) == (EXIT_USAGE, "arkouda-bootstrap: error: unrecognized arguments: --bogus\n")
    code, _, err = run_main([], {}, capsys)
    assert code == EXIT_USAGE and err.count("\n") == 1
    code, _, err = run_main(["locale", "--", "x"], {}, capsys)
    assert (code, err) == (EXIT_USAGE, "arkouda-bootstrap: error: locale takes no command after `--`\n")
    code, _, err = run_main(["keygen", "--secret-name", "x", "--log-level", "LOUD"], {}, capsys)
    assert code == EXIT_USAGE and "--log-level (ARKOUDA_LOG_LEVEL): 'LOUD'" in err


def test_keygen_through_main(capsys: pytest.CaptureFixture[str]) -> None:
    api = FakeKube()
    env = {"POD_NAMESPACE": "ns", "ARKOUDA_SSH_SECRET": "rel-arkouda-ssh", "ARKOUDA_WITH_TOKEN": "true"}
    code, out, _ = run_main(["keygen"], env, capsys, api)
    assert (code, out) == (0, "created Secret rel-arkouda-ssh in namespace ns\n")
    data, labels = api.secrets[("ns", "rel-arkouda-ssh")]
    assert labels["app.kubernetes.io/instance"] == "rel"  # derived from the Secret name
    assert "token" in data
    code, out, _ = run_main(["keygen"], env, capsys, api)
    assert code == 0 and "unchanged" in out
    code, _, err = run_main(["keygen", "--secret-name", "custom"], {"POD_NAMESPACE": "ns"}, capsys, api)
    assert code == EXIT_USAGE and "missing --release (ARKOUDA_RELEASE)" in err
    code, _, err = run_main(["keygen", "--rotation-id", "r1", "--delete"], env, capsys, api)
    assert code == EXIT_USAGE and "exclude each other" in err
    code, _, err = run_main(["keygen", "--test-objects", "rel-arkouda-test"], env, capsys, api)
    assert code == EXIT_USAGE and "--test-objects (ARKOUDA_TEST_OBJECTS) needs --delete" in err
    code, _, err = run_main(["keygen", "--delete", "--kueue-workload", "Not_A_Name"], env, capsys, api)
    assert code == EXIT_USAGE and "--kueue-workload (ARKOUDA_KUEUE_WORKLOAD)" in err
    code, _, err = run_main(["keygen", "--rotation-id", "not ok!"], env, capsys, api)
    assert code == EXIT_USAGE and "--rotation-id (ARKOUDA_SSH_ROTATION_ID): 'not ok!' is not a rotation id" in err


def test_keygen_rbac_error_through_main(capsys: pytest.CaptureFixture[str]) -> None:
    from arkouda_bootstrap.errors import BootstrapError

    api = FakeKube(fail_with={"get_secret": BootstrapError("missing RBAC: get secrets in namespace ns")})
    code, _, err = run_main(["keygen", "--secret-name", "r-arkouda-ssh", "--namespace", "ns"], {}, capsys, api)
    assert (code, err) == (1, "arkouda-bootstrap: error: missing RBAC: get secrets in namespace ns\n")


def test_locale_missing_secret_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(
        ["locale", "--secret-dir", str(tmp_path / "none"), "--state-dir", str(tmp_path / "state")], {}, capsys
    )
    assert code == 1
    assert err.startswith("arkouda-bootstrap: error: SSH Secret not mounted:")
    assert err.count("\n") == 1


@pytest.mark.parametrize("entry", [["-m", "arkouda_bootstrap"]])
def test_python_m_entrypoint(entry: list[str]) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO / "bootstrap" / "src"))
    result = subprocess.run([sys.executable, *entry, "--version"], capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0
    assert result.stdout.strip() == "arkouda-bootstrap 0.1.0"
    result = subprocess.run([sys.executable, *entry, "server"], capture_output=True, text=True, env=env, check=False)
    assert result.returncode == EXIT_USAGE
    assert "Traceback" not in result.stderr


def test_entrypoint_exits_with_mains_status_without_interpreter_teardown(tmp_path: Path) -> None:
    """The console script leaves through os._exit with main()'s status (a daemon monitor thread blocked in a
    watch read made the normal teardown abort with SIGABRT after the program had succeeded)."""
    script = (
        "import sys, threading, time\n"
        "from arkouda_bootstrap.cli import main as cli\n"
        "threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n"
        "cli.main = lambda: 7\n"
        "print('flushed before exit', end='')\n"
        "cli.entrypoint()\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 7, proc.stderr
    assert proc.stdout == "flushed before exit"
