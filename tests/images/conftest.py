"""Fixtures for the image tests: image names from hack/versions.env (the Makefile exports them too)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STANDIN_LIB = REPO / "docker" / "arkouda" / "standin" / "lib"
sys.path.insert(0, str(STANDIN_LIB))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import oci  # noqa: E402


def versions() -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (REPO / "hack" / "versions.env").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def image_name(name: str) -> str:
    v = versions()
    prefix = os.environ.get("IMAGE_PREFIX", v["IMAGE_PREFIX"])
    tag = os.environ.get("IMAGE_TAG", v["IMAGE_TAG"])
    return f"{prefix}/{name}:{tag}"


def _require_image(image: str) -> None:
    for tool in ("buildah", "runc"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} not found; run 'make deps'")
    if os.geteuid() != 0:
        pytest.fail("the image tests run buildah and runc as root")
    found = subprocess.run(["buildah", "inspect", "--type", "image", image], capture_output=True, check=False)
    if found.returncode != 0:
        pytest.fail(f"image {image} not built; run 'make images'")


@pytest.fixture(scope="session")
def arkouda_image() -> str:
    image = image_name("arkouda")
    _require_image(image)
    return image


@pytest.fixture(scope="session")
def mpi_image() -> str:
    image = image_name("mpi")
    _require_image(image)
    return image


@pytest.fixture(scope="module")
def arkouda_rootfs(arkouda_image: str) -> Iterator[Path]:
    with oci.mounted(arkouda_image) as root:
        yield root


@pytest.fixture(scope="module")
def mpi_rootfs(mpi_image: str) -> Iterator[Path]:
    with oci.mounted(mpi_image) as root:
        yield root
