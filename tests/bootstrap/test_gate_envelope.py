"""The gate's request checks (arkouda_bootstrap.gate.envelope), pure: every malformed shape, every token case,
the size bound, shutdown, and the error replies the client reads."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from arkouda_bootstrap.gate.envelope import (
    BINARY_MARKER,
    Limits,
    Refusal,
    Refused,
    Request,
    TokenFile,
    check_request,
    error_reply,
    request_bytes,
)
from fakes import FakeClock

LIMITS = Limits(max_envelope_bytes=4096)
GOOD: dict[str, Any] = {"user": "ann", "token": "", "cmd": "getconfig", "format": "STRING", "args": "", "size": -1}


def envelope(**changes: Any) -> bytes:
    body = {**GOOD, **changes}
    for key in [k for k, v in changes.items() if v is DROP]:
        del body[key]
    return json.dumps(body).encode()


DROP = object()


def check(*frames: bytes, token: bytes | None = None, limits: Limits = LIMITS) -> Request | Refused:
    return check_request([memoryview(f) for f in frames], limits=limits, token=lambda: token)


def refused(result: Request | Refused, reason: Refusal) -> str:
    assert isinstance(result, Refused), result
    assert result.reason is reason, result
    return result.message


def test_the_pinned_clients_requests_pass() -> None:
    assert check(envelope()) == Request(user="ann", cmd="getconfig", binary=False)
    args = json.dumps([json.dumps({"key": "seconds", "dtype": "str", "val": "1"})])
    assert check(envelope(cmd="sleep", args=args, size=1)) == Request(user="ann", cmd="sleep", binary=False)
    binary = envelope(cmd="array", format="BINARY") + BINARY_MARKER
    assert check(binary, b"\x00" * 10_000) == Request(user="ann", cmd="array", binary=True)
    assert check(envelope(token=None)) == Request(user="ann", cmd="getconfig", binary=False)


MALFORMED = [
    pytest.param([], "has no frame", id="no-frame"),
    pytest.param([b""], "not JSON", id="empty"),
    pytest.param([b"\xff\xfe"], "not JSON", id="not-utf8"),
    pytest.param([b"{not json"], "not JSON", id="broken-json"),
    pytest.param([b"GET / HTTP/1.1\r\n\r\n"], "not JSON", id="http"),
    pytest.param([b"42"], "not a JSON object", id="json-number"),
    pytest.param([b'"connect"'], "not a JSON object", id="json-string"),
    pytest.param([b"[]"], "not a JSON object", id="json-list"),
    pytest.param([b"{}"], "lacks the field(s) user, token, cmd, format, args, size", id="empty-object"),
    pytest.param([envelope(token=DROP)], "lacks the field(s) token", id="no-token"),
    pytest.param([envelope(size=DROP, args=DROP)], "lacks the field(s) args, size", id="no-args-size"),
    pytest.param([envelope(user=7)], "user is not a string", id="user-int"),
    pytest.param([envelope(cmd=None)], "cmd is not a string", id="cmd-null"),
    pytest.param([envelope(cmd="")], "cmd is empty", id="cmd-empty"),
    pytest.param([envelope(args=["a"])], "args is not a string", id="args-list"),
    pytest.param([envelope(token=123)], "token is not a string", id="token-int"),
    pytest.param([envelope(size="1")], "size is not an integer", id="size-string"),
    pytest.param([envelope(size=True)], "size is not an integer", id="size-bool"),
    pytest.param([envelope(size=1.5)], "size is not an integer", id="size-float"),
    pytest.param([envelope(format="XML")], "format is 'XML', not STRING or BINARY", id="format-unknown"),
    pytest.param([envelope(format="BINARY"), b"x"], "goes with the BINARY_PAYLOAD marker", id="binary-no-marker"),
    pytest.param([envelope() + BINARY_MARKER, b"x"], "goes with the BINARY_PAYLOAD marker", id="marker-on-string"),
    pytest.param(
        [envelope(format="BINARY") + BINARY_MARKER], "a BINARY request has 2 frames, this one 1", id="binary-1-frame"
    ),
    pytest.param(
        [envelope(format="BINARY") + BINARY_MARKER, b"a", b"b"],
        "a BINARY request has 2 frames, this one 3",
        id="binary-3-frames",
    ),
    pytest.param([envelope(), b"extra"], "a STRING request has 1 frame, this one 2", id="string-2-frames"),
]


@pytest.mark.parametrize(("frames", "message"), MALFORMED)
def test_every_malformed_shape_is_refused_with_its_reason(frames: list[bytes], message: str) -> None:
    assert message in refused(check(*frames), Refusal.MALFORMED)


def test_the_user_is_kept_for_the_reply_when_the_envelope_is_otherwise_wrong() -> None:
    result = check(envelope(size="x"))
    assert isinstance(result, Refused) and (result.user, result.cmd) == ("ann", "getconfig")


def test_an_envelope_above_the_limit_is_refused_without_being_parsed() -> None:
    class Unreadable:
        """A frame whose bytes must never be read: only its size."""

        def __len__(self) -> int:
            return 5000

        def __bytes__(self) -> bytes:
            raise AssertionError("the oversized envelope was read")

    result = check_request([Unreadable()], limits=LIMITS, token=lambda: None)  # type: ignore[list-item]
    message = refused(result, Refusal.TOO_LARGE)
    assert "5000 bytes, above the gate's limit of 4096 (server.gate.maxEnvelopeBytes)" in message
    assert check(envelope(args="x" * 3000)) == Request(user="ann", cmd="getconfig", binary=False)


def test_a_large_payload_frame_is_not_limited_by_the_envelope_bound() -> None:
    binary = envelope(cmd="array", format="BINARY") + BINARY_MARKER
    assert isinstance(check(binary, b"\x00" * (1 << 20)), Request)


TOKEN = b"s3cret-token"


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        pytest.param("", "carries no token", id="empty"),
        pytest.param(None, "carries no token", id="null"),
        pytest.param("s3cret-tokeX", "not the release's current token", id="wrong"),
        pytest.param("s3cret-token\n", "not the release's current token", id="trailing-newline"),
        pytest.param("s3cret-toke", "not the release's current token", id="prefix"),
        pytest.param("S3CRET-TOKEN", "not the release's current token", id="case"),
        pytest.param("old-token-before-rotation", "not the release's current token", id="stale"),
        pytest.param("s3cret-tökén", "not the release's current token", id="non-ascii"),
    ],
)
def test_every_wrong_token_is_refused(given: str | None, reason: str) -> None:
    message = refused(check(envelope(token=given), token=TOKEN), Refusal.TOKEN)
    assert reason in message


def test_the_right_token_passes_and_no_token_is_needed_without_authentication() -> None:
    assert isinstance(check(envelope(token=TOKEN.decode()), token=TOKEN), Request)
    assert isinstance(check(envelope(token="anything"), token=None), Request)


def test_a_gate_that_could_not_read_the_token_refuses_and_says_so() -> None:
    message = refused(check(envelope(token="x"), token=b""), Refusal.TOKEN)
    assert "could not read the release's token" in message


def test_the_token_is_checked_before_shutdown_and_a_malformed_envelope_before_the_token() -> None:
    refused(check(envelope(cmd="shutdown", token="wrong"), token=TOKEN), Refusal.TOKEN)
    refused(check(envelope(size="x", token="wrong"), token=TOKEN), Refusal.MALFORMED)


def test_shutdown_is_refused_unless_allowed() -> None:
    message = refused(check(envelope(cmd="shutdown")), Refusal.SHUTDOWN)
    assert "helm uninstall" in message and "server.gate.allowShutdown" in message
    allowed = Limits(max_envelope_bytes=4096, allow_shutdown=True)
    assert check(envelope(cmd="shutdown"), limits=allowed) == Request(user="ann", cmd="shutdown", binary=False)


def test_the_error_reply_is_what_the_client_raises_on() -> None:
    reply = json.loads(error_reply("no", user="ann", cmd="getconfig"))
    assert reply == {"msg": "no", "msgType": "ERROR", "msgFormat": "STRING", "user": "ann", "payload": ""}
    # a command whose reply the client reads as bytes: it raises on the "Error:" prefix
    assert error_reply("no", user="ann", cmd="tondarray") == b"Error: no"
    assert error_reply("no", user="ann", cmd="tondarray<int64,1>") == b"Error: no"
    assert json.loads(error_reply("no", user="ann", cmd="tondarrays"))["msgType"] == "ERROR"


def test_the_health_check_request_is_a_valid_envelope() -> None:
    raw = request_bytes("ruok", user="arkouda-gate", token=TOKEN)
    assert check(raw, token=TOKEN) == Request(user="arkouda-gate", cmd="ruok", binary=False)


def test_the_token_file_is_read_again_after_the_kubelet_replaced_it(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_bytes(b"first")
    clock = FakeClock()
    token = TokenFile(path, clock=clock, recheck_seconds=2)
    assert token() == b"first"
    replacement = tmp_path / "token.new"
    replacement.write_bytes(b"second")
    os.replace(replacement, path)  # as the kubelet swaps a Secret volume's files
    assert token() == b"first"  # checked again only after recheck_seconds
    clock.advance(2)
    assert token() == b"second"
    path.unlink()
    clock.advance(2)
    assert token() == b"second"  # a moment without the file keeps the last token
