"""The shell steps of docker/arkouda/Dockerfile's chapel, arkouda-build and runtime stages that need no download
(docker/arkouda/build/*.sh), run here: each on the case it exists for and on the defect it guards against.
Host-only tests run the scripts with bash on this machine (Debian 12, like the image); the library and package
checks also run inside the Arkouda image with runc, on its own binaries, as the runtime stage runs them."""

from __future__ import annotations

import hashlib
import subprocess
import venv
from pathlib import Path

import pytest
from conftest import REPO, image_name, versions

import oci

SCRIPTS = REPO / "docker" / "arkouda" / "build"
ADD_PATH = "$(eval $(call add-path,{}))"


def script(
    name: str, *args: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPTS / name), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        check=False,
    )


def one_line(res: subprocess.CompletedProcess[str]) -> str:
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    return lines[0]


# --- check-chpl-version.sh: chpl --version against the range the pinned Arkouda builds with -------------------

CHPL_OUTPUT = (
    "chpl version {}\n  built with LLVM version 16.0.6\n  available LLVM targets: x86-64, x86\n"
    "Copyright 2020-2026 Hewlett Packard Enterprise Development LP\n"
)


@pytest.mark.parametrize("version", ["2.5.0", "2.8.0", "2.8.1"])
def test_chpl_version_in_range_passes(version: str) -> None:
    res = script("check-chpl-version.sh", "2.5", "2.8", stdin=CHPL_OUTPUT.format(version))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"chpl {version}"


@pytest.mark.parametrize("version", ["2.3.0", "2.4.0", "2.9.0", "3.0.0", "1.33.0"])
def test_chpl_version_out_of_range_fails_in_one_line(version: str) -> None:
    res = script("check-chpl-version.sh", "2.5", "2.8", stdin=CHPL_OUTPUT.format(version))
    assert res.returncode == 1
    line = one_line(res)
    assert f"Chapel {version} is outside 2.5..2.8" in line
    assert "CHAPEL_VERSION in hack/versions.env" in line


def test_chpl_version_pinned_release_is_in_the_pinned_range() -> None:
    v = versions()
    res = script("check-chpl-version.sh", v["CHAPEL_MIN"], v["CHAPEL_MAX"], stdin=f"chpl version {v['CHAPEL_VERSION']}")
    assert res.returncode == 0, res.stderr


def test_chpl_version_unreadable_output_fails() -> None:
    res = script("check-chpl-version.sh", "2.5", "2.8", stdin="bash: chpl: command not found\n")
    assert res.returncode == 1
    assert "no 'chpl version X.Y.Z' line" in one_line(res)


# --- makefile-paths.sh: append to Arkouda's Makefile.paths, never overwrite -------------------------------------


def test_makefile_paths_keeps_the_lines_arkoudas_own_installs_appended(tmp_path: Path) -> None:
    arrow, iconv, hdf5 = (tmp_path / d for d in ("arrow-install", "libiconv-install", "hdf5-serial"))
    for d in (arrow, iconv, hdf5):
        d.mkdir()
    paths = tmp_path / "Makefile.paths"
    # what `make install-arrow` / `make install-iconv` leave (make/deps/arrow.mk, iconv.mk at v2026.07.15);
    # the last line without its newline, as a hand-edited file may be
    paths.write_text(f"# local\n{ADD_PATH.format(arrow)}\n{ADD_PATH.format(iconv)}")
    res = script("makefile-paths.sh", str(paths), str(hdf5), str(arrow), str(iconv))
    assert res.returncode == 0, res.stderr
    assert paths.read_text().splitlines() == [
        "# local",
        ADD_PATH.format(arrow),
        ADD_PATH.format(iconv),
        ADD_PATH.format(hdf5),
    ]
    # a second run adds nothing
    assert script("makefile-paths.sh", str(paths), str(hdf5)).returncode == 0
    assert paths.read_text().count(ADD_PATH.format(hdf5)) == 1


def test_makefile_paths_refuses_a_directory_that_was_not_installed(tmp_path: Path) -> None:
    paths = tmp_path / "Makefile.paths"
    res = script("makefile-paths.sh", str(paths), str(tmp_path / "libiconv-install"))
    assert res.returncode == 1
    assert "libiconv-install does not exist" in one_line(res)
    assert paths.read_text() == ""


# --- fetch.sh: a download that fails or is not the pinned archive names the build argument ----------------------


def test_fetch_checks_the_pinned_checksum(tmp_path: Path) -> None:
    archive = tmp_path / "chapel-2.8.0.tar.gz"
    archive.write_bytes(b"the release archive")
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    out = tmp_path / "out.tar.gz"
    ok = script("fetch.sh", "CHAPEL_URL", archive.as_uri(), str(out), digest)
    assert ok.returncode == 0, ok.stderr
    assert out.read_bytes() == b"the release archive"
    bad = script("fetch.sh", "CHAPEL_URL", archive.as_uri(), str(out), "0" * 64)
    assert bad.returncode == 1
    line = one_line(bad)
    assert f"CHAPEL_URL={archive.as_uri()} has sha256 {digest}, not the pinned {'0' * 64}" in line
    assert not out.exists()


def test_fetch_failure_names_the_url_argument(tmp_path: Path) -> None:
    missing = (tmp_path / "nowhere.tar.gz").as_uri()
    res = script("fetch.sh", "ARKOUDA_URL", missing, str(tmp_path / "out"))
    assert res.returncode == 1
    line = one_line(res)
    assert line.startswith(f"arkouda image build: ARKOUDA_URL={missing} could not be downloaded")
    assert "set ARKOUDA_URL to a mirror" in line


# --- check-tools.sh ---------------------------------------------------------------------------------------------


def test_check_tools_names_every_missing_tool() -> None:
    assert script("check-tools.sh", "arkouda-build", "bash", "sha256sum").returncode == 0
    res = script("check-tools.sh", "arkouda-build", "bash", "no-such-wget", "no-such-cmake")
    assert res.returncode == 1
    assert "missing tool(s) no-such-wget no-such-cmake in the arkouda-build stage" in one_line(res)


# --- check-client.sh: the client must import ---------------------------------------------------------------------


def make_venv(path: Path, *, with_arkouda: bool) -> Path:
    venv.EnvBuilder(with_pip=False).create(path)
    if with_arkouda:
        site = next(path.glob("lib/python3*/site-packages"))
        (site / "arkouda").mkdir()
        (site / "arkouda" / "__init__.py").write_text("print('a test double of the arkouda package')\n")
    return path


def test_check_client_passes_when_arkouda_imports(tmp_path: Path) -> None:
    res = script("check-client.sh", str(make_venv(tmp_path / "venv", with_arkouda=True)))
    assert res.returncode == 0, res.stderr


def test_check_client_fails_in_one_line_when_arkouda_does_not_import(tmp_path: Path) -> None:
    res = script("check-client.sh", str(make_venv(tmp_path / "venv", with_arkouda=False)))
    assert res.returncode == 1
    assert "does not import: ModuleNotFoundError: No module named 'arkouda'" in one_line(res)


def test_check_client_accepts_an_image_without_a_client(tmp_path: Path) -> None:
    assert script("check-client.sh", str(tmp_path / "absent")).returncode == 0


# --- runtime-packages.sh: packages of the server's libraries on a merged /usr -----------------------------------


def test_runtime_packages_skips_shipped_libraries_and_refuses_unowned_ones(tmp_path: Path) -> None:
    """A library outside every package (Arkouda's own Arrow under dep/) is skipped when shipped, else refused."""
    src = tmp_path / "lib.c"
    src.write_text("int shipped(void) { return 1; }\n")
    lib = tmp_path / "dep" / "lib" / "libshipped.so"
    lib.parent.mkdir(parents=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    main = tmp_path / "main.c"
    main.write_text("int shipped(void);\nint main(void) { return shipped() - 1; }\n")
    binary = tmp_path / "server"
    subprocess.run(
        ["cc", "-o", str(binary), str(main), f"-L{lib.parent}", "-lshipped", f"-Wl,-rpath,{lib.parent}"], check=True
    )
    ok = script("runtime-packages.sh", "--shipped", str(tmp_path / "dep"), str(binary))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.split() == ["libc6"]
    refused = script("runtime-packages.sh", str(binary))
    assert refused.returncode == 1
    assert f"no Debian package owns {lib}" in one_line(refused)
    lib.unlink()
    gone = script("runtime-packages.sh", "--shipped", str(tmp_path / "dep"), str(binary))
    assert gone.returncode == 1
    assert "needs libshipped.so" in one_line(gone)


# --- check-libs.sh in the image: what the runtime stage runs ------------------------------------------------------

IMAGE_BINARIES = [
    "/opt/arkouda/bin/arkouda_server",
    "/opt/arkouda/bin/arkouda_server_real",
    "/opt/gasnet/bin/amudprun",
]


def run_in(root: Path, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    (root / "tmp" / name).write_text((SCRIPTS / name).read_text())
    return oci.run(root, ["bash", f"/tmp/{name}", *args], uid=0, gid=0)


def test_check_libs_passes_on_the_images_binaries(arkouda_rootfs: Path) -> None:
    res = run_in(arkouda_rootfs, "check-libs.sh", *IMAGE_BINARIES)
    assert res.returncode == 0, res.stderr


def test_check_libs_fails_on_an_image_that_lacks_a_library(arkouda_image: str) -> None:
    """amudprun and the GASNet client are C++: without libstdc++ they cannot start; the check names both in one
    line (in a throwaway container, so the module's image root stays intact)."""
    with oci.mounted(arkouda_image) as root:
        for lib in (root / "usr/lib/x86_64-linux-gnu").glob("libstdc++.so.6*"):
            lib.unlink()
        res = run_in(root, "check-libs.sh", *IMAGE_BINARIES)
    assert res.returncode == 1
    assert one_line(res) == (
        "arkouda image: /opt/arkouda/bin/arkouda_server_real cannot load libstdc++.so.6; "
        "/opt/gasnet/bin/amudprun cannot load libstdc++.so.6 (ldd: not found); "
        "install the package or copy the library into the image"
    )


def test_runtime_packages_finds_owners_under_merged_usr_where_dpkg_s_alone_fails(arkouda_rootfs: Path) -> None:
    """libzmq, which Arkouda's server links: Debian 12 ships it as /usr/lib/…/libzmq.so.5 while ldd names
    /lib/…/libzmq.so.5, so the old `ldd | xargs dpkg -S` found no owner (and failed under pipefail); the script
    finds libzmq5. pyzmq's extension in the image links the same library."""
    ext = next((arkouda_rootfs / "usr/lib/python3/dist-packages/zmq/backend/cython").glob("socket.*.so"))
    binary = "/" + str(ext.relative_to(arkouda_rootfs))
    listing = oci.run(arkouda_rootfs, ["ldd", binary]).stdout
    assert "libzmq.so.5 => /lib/x86_64-linux-gnu/libzmq.so.5" in listing, listing  # the defect's precondition
    old = oci.run(arkouda_rootfs, ["dpkg", "-S", "/lib/x86_64-linux-gnu/libzmq.so.5"])
    assert old.returncode != 0
    res = run_in(arkouda_rootfs, "runtime-packages.sh", binary)
    assert res.returncode == 0, res.stderr
    packages = res.stdout.split()
    assert {"libc6", "libzmq5"} <= set(packages)
    assert packages == sorted(set(packages))


def test_runtime_packages_in_the_image_lists_the_launchers_packages(arkouda_rootfs: Path) -> None:
    res = run_in(arkouda_rootfs, "runtime-packages.sh", "/opt/gasnet/bin/amudprun")
    assert res.returncode == 0, res.stderr
    assert {"libc6", "libstdc++6", "libgcc-s1"} <= set(res.stdout.split())


# --- the Dockerfile itself: an out-of-range Chapel stops the real-server build before any download ---------------


@pytest.mark.usefixtures("arkouda_image")  # `make images` ran, so the local Debian base exists
def test_dockerfile_refuses_an_out_of_range_chapel_before_downloading(tmp_path: Path) -> None:
    v = versions()
    base = f"{image_name('debian-base').rsplit(':', 1)[0]}:{v['DEBIAN_SUITE']}"
    dockerfile = REPO / "docker" / "arkouda" / "Dockerfile"
    bud = ["buildah", "bud", "--layers", "--force-rm", "--format", "docker", "--isolation", "chroot"]
    bud += ["--network", "host", "--target", "chapel", "--iidfile", str(tmp_path / "iid")]
    bud += ["--build-arg", f"BASE_IMAGE={base}", "--build-arg", "CHAPEL_VERSION=2.3.0", "-f", str(dockerfile)]
    res = subprocess.run([*bud, str(REPO)], capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode != 0
    out = res.stdout + res.stderr
    assert "arkouda image build: Chapel 2.3.0 is outside" in out, out[-3000:]
    assert "apt-get update" not in out  # stopped before the first package (and any Chapel) download
    assert not (tmp_path / "iid").exists()
