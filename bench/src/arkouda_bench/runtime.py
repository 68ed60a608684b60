"""The Python the bootstrap runs with in the scale bench: Debian's python3, as in the images, in a venv
readable by the unprivileged bench user (the project's tools venv lives under root's home, which that user
cannot enter). Pins are the project's own (requirements-dev.txt); the venv is keyed by their hash and reused.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import subprocess
from pathlib import Path

from arkouda_bench.sshd import BenchSetupError

log = logging.getLogger(__name__)

SYSTEM_PYTHON = Path("/usr/bin/python3")
# The bootstrap's runtime dependencies, plus the profiler the bench runs it under.
RUNTIME_PACKAGES = ("kubernetes", "tenacity", "cryptography", "paramiko", "pyinstrument")
_PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s#]+)")


def runtime_pins(requirements: Path) -> list[str]:
    """`name==version` lines of requirements-dev.txt for RUNTIME_PACKAGES (each must be pinned there)."""
    pins: dict[str, str] = {}
    for line in requirements.read_text().splitlines():
        m = _PIN.match(line.strip())
        if m and m.group(1).lower() in RUNTIME_PACKAGES:
            pins[m.group(1).lower()] = f"{m.group(1)}=={m.group(2)}"
    missing = [p for p in RUNTIME_PACKAGES if p not in pins]
    if missing:
        raise BenchSetupError(f"{requirements} does not pin {', '.join(missing)} (name==version)")
    return [pins[p] for p in RUNTIME_PACKAGES]


def ensure_runtime(*, requirements: Path, home: Path) -> Path:
    """Create (once) and return the python of a root-owned, world-readable venv in the bench user's home."""
    if not SYSTEM_PYTHON.exists():
        raise BenchSetupError(f"{SYSTEM_PYTHON} missing: run 'make deps' (Debian python3, python3-venv)")
    pins = runtime_pins(requirements)
    version = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import sys; print(sys.version)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    digest = hashlib.sha256("\n".join([version, *pins]).encode()).hexdigest()[:12]
    venv = home / f"venv-{digest}"
    python = venv / "bin" / "python"
    if (venv / ".done").exists():
        return python
    log.info("creating the bootstrap runtime %s (%s)", venv, " ".join(pins))
    shutil.rmtree(venv, ignore_errors=True)
    try:
        subprocess.run(
            [str(SYSTEM_PYTHON), "-m", "venv", str(venv)], check=True, capture_output=True, text=True
        )
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *pins],
            check=True,
            capture_output=True,
            text=True,
        )
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(venv, ignore_errors=True)
        last = (exc.stderr or exc.stdout or "").strip().splitlines()
        raise BenchSetupError(
            f"could not create {venv}: {last[-1] if last else exc} (is python3-venv installed? 'make deps')"
        ) from None
    venv.chmod(0o755)
    (venv / ".done").touch()
    return python
