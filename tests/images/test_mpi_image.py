"""The mpi image: the hybrid hello and the Himeno-style benchmark under mpirun, as uid 1000 (runc)."""

from __future__ import annotations

import re
from pathlib import Path

import oci

MPIRUN = ["mpirun", "--oversubscribe"]


def test_programs_and_mpirun_present(mpi_rootfs: Path, mpi_image: str) -> None:
    for path in ("opt/mpi-demo/bin/hybrid-hello", "opt/mpi-demo/bin/himeno", "usr/bin/mpirun"):
        assert (mpi_rootfs / path).exists(), path
    # no CMA single-copy (needs ptrace rights pods under Pod Security "restricted" lack)
    assert "OMPI_MCA_btl_vader_single_copy_mechanism=none" in oci.image_config(mpi_image)["Env"]


def test_hybrid_hello_two_ranks_two_threads(mpi_rootfs: Path, mpi_image: str) -> None:
    res = oci.run(
        mpi_rootfs,
        [*MPIRUN, "-np", "2", "-x", "OMP_NUM_THREADS=2", "/opt/mpi-demo/bin/hybrid-hello"],
        image=mpi_image,
        hostname="mpi-test",
        cwd="/home/arkouda",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    lines = [line for line in res.stdout.splitlines() if line.startswith("Hello from")]
    expected = {
        f"Hello from thread {t} out of 2 from process {p} out of 2 on mpi-test" for t in range(2) for p in range(2)
    }
    assert sorted(lines) == sorted(expected), res.stdout  # every expected line exactly once, nothing else


def _himeno(rootfs: Path, image: str, ranks: int, threads: int) -> dict[str, str]:
    res = oci.run(
        rootfs,
        [*MPIRUN, "-np", str(ranks), "-x", f"OMP_NUM_THREADS={threads}", "/opt/mpi-demo/bin/himeno", "S", "20"],
        image=image,
        cwd="/home/arkouda",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    line = next(line for line in res.stdout.splitlines() if line.startswith("himeno:"))
    return dict(re.findall(r"(\w+)=(\S+)", line))


def test_himeno_reports_mflops_and_the_decomposition_does_not_change_the_result(
    mpi_rootfs: Path, mpi_image: str
) -> None:
    one = _himeno(mpi_rootfs, mpi_image, 1, 1)
    two = _himeno(mpi_rootfs, mpi_image, 2, 2)
    for out in (one, two):
        assert out["size"] == "S"
        assert out["grid"] == "64x64x128"
        assert out["iterations"] == "20"
        assert float(out["MFLOPS"]) > 0
    assert (two["ranks"], two["threads"]) == ("2", "2")
    # Same Jacobi sweep split over 2 ranks x 2 threads: the residual must agree (single-precision sums).
    assert abs(float(one["gosa"]) - float(two["gosa"])) <= 1e-4 * abs(float(one["gosa"]))


def test_himeno_rejects_a_bad_size(mpi_rootfs: Path) -> None:
    res = oci.run(mpi_rootfs, ["/opt/mpi-demo/bin/himeno", "X"], cwd="/home/arkouda")
    assert res.returncode == 2
    assert "size must be S or M" in res.stderr
