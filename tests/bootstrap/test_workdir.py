"""The locales' working directory and Arkouda's token file in it (pure file-system logic)."""

from __future__ import annotations

from pathlib import Path

import pytest
from arkouda_bootstrap.errors import BootstrapError
from arkouda_bootstrap.server import workdir
from arkouda_bootstrap.ssh import keys


def secret(tmp_path: Path, token: bytes | None) -> Path:
    d = tmp_path / "secret"
    d.mkdir()
    if token is not None:
        (d / keys.TOKEN).write_bytes(token)
    return d


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["arkouda_server", "--authenticate"], True),
        (["arkouda_server", "--authenticate=true"], True),
        (["arkouda_server", "--authenticate=false"], False),
        (["arkouda_server", "--ServerPort=5555"], False),
    ],
)
def test_wants_authentication(command: list[str], expected: bool) -> None:
    assert workdir.wants_authentication(command) is expected


def test_read_token_drops_the_line_end_of_a_hand_made_secret(tmp_path: Path) -> None:
    assert workdir.read_token(secret(tmp_path, b"abc123\n")) == "abc123"


@pytest.mark.parametrize("raw", [b"", b"\n", b"two words\n", b"line\nbreak"])
def test_read_token_refuses_what_a_client_cannot_send_verbatim(tmp_path: Path, raw: bytes) -> None:
    with pytest.raises(BootstrapError, match=r"key Secret field token .* must be one word"):
        workdir.read_token(secret(tmp_path, raw))


def test_read_token_names_the_missing_field(tmp_path: Path) -> None:
    with pytest.raises(BootstrapError, match=r"has no field token .*server.authenticate=true"):
        workdir.read_token(secret(tmp_path, None))


def test_prepare_writes_exactly_this_launchs_token(tmp_path: Path) -> None:
    (tmp_path / ".arkouda").mkdir()
    (tmp_path / ".arkouda" / "tokens.txt").write_text("old\n")
    path = workdir.prepare(tmp_path, token="new")
    assert path.read_text() == "new\n"
    assert path.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in (tmp_path / ".arkouda").iterdir()) == ["tokens.txt"]


def test_prepare_without_authentication_removes_a_stale_token(tmp_path: Path) -> None:
    workdir.prepare(tmp_path, token="t")
    path = workdir.prepare(tmp_path, token=None)
    assert not path.exists()
    assert (tmp_path / ".arkouda").is_dir()


def test_prepare_names_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(BootstrapError, match=r"working directory .*/absent \(--work-dir, ARKOUDA_WORK_DIR\) does not"):
        workdir.prepare(tmp_path / "absent", token=None)
