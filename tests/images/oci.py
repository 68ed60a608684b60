"""Run a locally built image without a container engine: buildah mounts the image's root filesystem in a
throwaway working container, runc runs a process on it (an OCI bundle made with ``runc spec``)."""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def sh(*args: str, timeout: float = 120) -> str:
    return subprocess.run(list(args), check=True, capture_output=True, text=True, timeout=timeout).stdout


def image_config(image: str) -> dict[str, Any]:
    info = json.loads(sh("buildah", "inspect", "--type", "image", image))
    cfg: dict[str, Any] = info["OCIv1"]["config"]
    return cfg


def image_rootfs(image: str) -> dict[str, Any]:
    """The image's layer list (``type``, ``diff_ids`` bottom up)."""
    info = json.loads(sh("buildah", "inspect", "--type", "image", image))
    rootfs: dict[str, Any] = info["OCIv1"]["rootfs"]
    return rootfs


@contextlib.contextmanager
def mounted(image: str) -> Iterator[Path]:
    """The image's root filesystem (a writable overlay on a working container removed afterwards)."""
    ctr = sh("buildah", "from", "--pull-never", "--name", f"imgtest-{uuid.uuid4().hex[:8]}", image).strip()
    try:
        yield Path(sh("buildah", "mount", ctr).strip())
    finally:
        subprocess.run(["buildah", "umount", ctr], check=False, capture_output=True)
        subprocess.run(["buildah", "rm", ctr], check=False, capture_output=True)


def run(
    rootfs: Path,
    args: list[str],
    *,
    uid: int = 1000,
    gid: int = 1000,
    env: dict[str, str] | None = None,
    image: str | None = None,
    cwd: str = "/",
    hostname: str = "imgtest",
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run ``args`` in ``rootfs`` with runc as uid:gid (new namespaces, loopback-only network).

    The environment is the image's own (``Env`` of ``image``'s config, as a container runtime sets it) when
    ``image`` is given, else a plain PATH; ``env`` is laid over it."""
    with tempfile.TemporaryDirectory(prefix="imgtest-bundle-") as bundle:
        subprocess.run(["runc", "spec", "--bundle", bundle], check=True)
        spec_path = Path(bundle) / "config.json"
        spec = json.loads(spec_path.read_text())
        base_env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/home/arkouda",
            "TERM": "dumb",
        }
        if image is not None:
            base_env.update(kv.split("=", 1) for kv in image_config(image).get("Env", []))
        base_env.update(env or {})
        spec["process"].update(
            {
                "terminal": False,
                "args": args,
                "cwd": cwd,
                "user": {"uid": uid, "gid": gid},
                "env": [f"{k}={v}" for k, v in base_env.items()],
            }
        )
        spec["root"] = {"path": str(rootfs), "readonly": False}
        spec["hostname"] = hostname
        spec_path.write_text(json.dumps(spec))
        cid = f"imgtest-{uuid.uuid4().hex[:8]}"
        try:
            return subprocess.run(
                ["runc", "run", "--bundle", bundle, cid],
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        finally:
            subprocess.run(["runc", "delete", "--force", cid], check=False, capture_output=True)
