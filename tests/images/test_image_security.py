"""Both runtime images: the user, the entrypoint and the absence of keys, passwords and sudo that
docs/interfaces.md promises (checked on the images `make images` built)."""

from __future__ import annotations

import json
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import oci

IMAGES = ["arkouda_image", "mpi_image"]
KEY_DIRS = ("etc/ssh", "home", "root", "opt/arkouda", "run/arkouda")
KEY_DIR_RE = re.compile(r"^(\./)?(etc/ssh|home|root|opt/arkouda|run/arkouda)/")


@pytest.fixture(params=IMAGES, scope="module")
def image(request: pytest.FixtureRequest) -> str:
    name: str = request.getfixturevalue(request.param)
    return name


@pytest.fixture(scope="module")
def rootfs(image: str) -> Iterator[Path]:
    with oci.mounted(image) as root:
        yield root


def test_config_runs_as_uid_1000_with_tini_and_the_bootstrap(image: str) -> None:
    cfg = oci.image_config(image)
    assert cfg.get("User") == "1000:1000"
    assert cfg.get("Entrypoint") == ["tini", "--", "arkouda-bootstrap"]
    assert cfg.get("WorkingDir") == "/home/arkouda"


def test_user_arkouda_has_no_password_and_is_not_locked(rootfs: Path) -> None:
    passwd = {line.split(":")[0]: line.split(":") for line in (rootfs / "etc/passwd").read_text().splitlines()}
    assert passwd["arkouda"][2:4] == ["1000", "1000"]
    assert passwd["arkouda"][5] == "/home/arkouda"
    shadow = {line.split(":")[0]: line.split(":") for line in (rootfs / "etc/shadow").read_text().splitlines()}
    # '*': no password usable, but not locked ('!'), which sshd with UsePAM no would refuse for pubkey too.
    assert shadow["arkouda"][1] == "*"
    group = {line.split(":")[0]: line.split(":") for line in (rootfs / "etc/group").read_text().splitlines()}
    assert group["arkouda"][2] == "1000"
    for admin in ("sudo", "wheel", "admin"):
        if admin in group:
            assert "arkouda" not in group[admin][3].split(",")


def test_no_sudo(rootfs: Path) -> None:
    for path in ("usr/bin/sudo", "usr/sbin/sudo", "bin/sudo", "etc/sudoers"):
        assert not (rootfs / path).exists(), path


def test_no_private_keys_or_host_keys(rootfs: Path) -> None:
    found: list[str] = []
    for top in KEY_DIRS:
        base = rootfs / top
        if not base.exists():
            continue
        for path in base.rglob("*"):
            if path.is_file() and not path.is_symlink():
                with path.open("rb") as f:
                    if b"PRIVATE KEY" in f.read(1 << 16):
                        found.append(str(path.relative_to(rootfs)))
    assert found == []
    assert list((rootfs / "etc/ssh").glob("ssh_host_*")) == []
    assert not (rootfs / "home/arkouda/.ssh").exists()
    assert not (rootfs / "root/.ssh").exists()


def test_tools_on_path(rootfs: Path) -> None:
    for tool in ("usr/bin/tini", "usr/sbin/sshd", "usr/bin/ssh", "usr/bin/python3", "usr/local/bin/arkouda-bootstrap"):
        path = rootfs / tool
        while path.is_symlink():  # absolute links point into the image, not the host
            target = path.readlink()
            path = rootfs / str(target).lstrip("/") if target.is_absolute() else path.parent / target
        assert path.is_file(), tool
    assert list((rootfs / "usr/lib").glob("*/libnss_wrapper.so")), "libnss-wrapper missing"
    state = (rootfs / "run/arkouda").stat()
    assert (state.st_uid, state.st_gid) == (1000, 1000)


def test_tini_is_pid_1_and_the_bootstrap_runs_as_uid_1000(rootfs: Path, image: str) -> None:
    # The image's entrypoint (tini) started as the runtime would: it must be PID 1, the child uid 1000.
    res = oci.run(rootfs, ["tini", "--", "sh", "-c", "cat /proc/1/comm; id -u; id -g"], image=image)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["tini", "1000", "1000"]
    res = oci.run(rootfs, ["tini", "--", "arkouda-bootstrap", "--help"], image=image)
    assert res.returncode == 0, res.stderr
    assert "usage" in res.stdout.lower()


def test_no_key_in_any_layer(image: str, tmp_path: Path) -> None:
    # A file deleted by a later layer is still readable in the layer that added it: scan every layer blob,
    # not just the merged filesystem (openssh-server's postinst generates host keys during apt-get install).
    oci.sh("buildah", "push", "--quiet", "--disable-compression", image, f"oci:{tmp_path}", timeout=300)
    index = json.loads((tmp_path / "index.json").read_text())
    blob = tmp_path / "blobs" / "sha256"
    manifest = json.loads((blob / index["manifests"][0]["digest"].split(":", 1)[1]).read_text())
    found: list[str] = []
    assert manifest["layers"]
    for layer in manifest["layers"]:
        with tarfile.open(blob / layer["digest"].split(":", 1)[1], mode="r:*") as tar:
            for member in tar:
                base = member.name.rsplit("/", 1)[-1]
                if base.startswith(("ssh_host_", ".wh.ssh_host_")):
                    found.append(f"{layer['digest'][:19]}:{member.name}")
                elif member.isfile() and KEY_DIR_RE.match(member.name):
                    f = tar.extractfile(member)
                    if f is not None and b"PRIVATE KEY" in f.read(1 << 16):
                        found.append(f"{layer['digest'][:19]}:{member.name}")
    assert found == []
