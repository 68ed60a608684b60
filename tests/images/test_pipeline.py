"""`make images` is cached: right after it ran (test-images depends on images-build), building again with
unchanged inputs must not rebuild anything, GASNet and the runtime base included; both images are built on the
runtime base's layers; a GASNet archive that is not the pinned release is refused in one line naming
GASNET_ARCHIVE."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, image_name, versions

import oci


def images_env() -> dict[str, str]:
    prefix, _, tag = image_name("arkouda").rpartition(":")
    return {
        **os.environ,
        "REPO_ROOT": str(REPO),
        "CACHE_DIR": os.environ.get("CACHE_DIR", os.path.expanduser("~/.cache/arkouda-k8s")),
        "IMAGE_PREFIX": prefix.rsplit("/", 1)[0],
        "IMAGE_TAG": tag,
        "DEBIAN_SUITE": os.environ.get("DEBIAN_SUITE", versions()["DEBIAN_SUITE"]),
    }


def images_sh(*args: str) -> subprocess.CompletedProcess[str]:
    """docker/images.sh with the test's image settings; its exit status is for the caller to check."""
    return subprocess.run(
        [str(REPO / "docker" / "images.sh"), *args],
        env=images_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.usefixtures("arkouda_image", "mpi_image")
@pytest.mark.parametrize("name", ["arkouda", "mpi"])
def test_second_build_is_a_no_op(name: str) -> None:
    res = images_sh("build", name)
    assert res.returncode == 0, res.stderr
    assert f"{image_name(name)} is up to date" in res.stdout


def runtime_image() -> str:
    prefix, _, tag = image_name("arkouda").rpartition(":")
    return f"{prefix.rsplit('/', 1)[0]}/runtime:{tag}"


def layers(image: str) -> list[str]:
    diff_ids: list[str] = oci.image_rootfs(image)["diff_ids"]
    return diff_ids


@pytest.mark.usefixtures("arkouda_image", "mpi_image")
@pytest.mark.parametrize("name", ["arkouda", "mpi"])
def test_both_images_start_from_the_one_runtime_base(name: str) -> None:
    """The user, sshd, tini and bootstrap layers are the runtime base's own, shared, not a copy per image."""
    base = layers(runtime_image())
    assert layers(image_name(name))[: len(base)] == base


@pytest.mark.usefixtures("arkouda_image", "mpi_image")
def test_second_runtime_build_is_a_no_op() -> None:
    res = images_sh("runtime")
    assert res.returncode == 0, res.stderr
    assert f"{runtime_image()} is up to date" in res.stdout


@pytest.mark.usefixtures("arkouda_image")
def test_gasnet_build_is_cached_by_its_inputs_hash() -> None:
    gasnet = f"{images_env()['IMAGE_PREFIX']}/gasnet-udp:{versions()['GASNET_VERSION']}"
    label = subprocess.run(
        [
            "buildah",
            "inspect",
            "--type",
            "image",
            "--format",
            '{{ index .OCIv1.Config.Labels "io.arkouda-k8s.inputs" }}',
            gasnet,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert len(label) == 16, label
    res = images_sh("gasnet")
    assert res.returncode == 0, res.stderr
    assert f"{gasnet} is up to date (inputs {label})" in res.stdout


@pytest.mark.parametrize("content", [None, b"not the GASNet release"])
def test_a_missing_or_wrong_gasnet_archive_names_gasnet_archive(tmp_path: Path, content: bytes | None) -> None:
    archive = tmp_path / "GASNet.tar.gz"
    if content is not None:
        archive.write_bytes(content)
    # a private staging copy: the repository's staged archive must stay as it is
    repo = tmp_path / "repo"
    (repo / "hack").mkdir(parents=True)
    (repo / "hack" / "versions.env").write_text((REPO / "hack" / "versions.env").read_text())
    res = subprocess.run(
        [str(REPO / "docker" / "images.sh"), "gasnet"],
        env={**images_env(), "REPO_ROOT": str(repo), "GASNET_ARCHIVE": str(archive)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"images: GASNET_ARCHIVE={archive}")
    assert ("no such file" if content is None else f"not {versions()['GASNET_SHA256']}") in lines[0]
