"""`make images` is cached: right after it ran (test-images depends on images-build), building again with
unchanged inputs must not rebuild anything."""

from __future__ import annotations

import os
import subprocess

import pytest
from conftest import REPO, image_name, versions


@pytest.mark.usefixtures("arkouda_image", "mpi_image")
@pytest.mark.parametrize("name", ["arkouda", "mpi"])
def test_second_build_is_a_no_op(name: str) -> None:
    prefix, _, tag = image_name(name).rpartition(":")
    env = {
        **os.environ,
        "REPO_ROOT": str(REPO),
        "CACHE_DIR": os.environ.get("CACHE_DIR", os.path.expanduser("~/.cache/arkouda-k8s")),
        "IMAGE_PREFIX": prefix.rsplit("/", 1)[0],
        "IMAGE_TAG": tag,
        "DEBIAN_SUITE": os.environ.get("DEBIAN_SUITE", versions()["DEBIAN_SUITE"]),
    }
    res = subprocess.run(
        [str(REPO / "docker" / "images.sh"), "build", name],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert f"{image_name(name)} is up to date" in res.stdout
