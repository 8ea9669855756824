"""Hostile input at the HTTP doors, in process (no Ray, no labbot process): every one of them is a 4xx saying what is
wrong, never a 500, and an oversized unsigned body at ``POST /slack/events`` is refused before it is read and never
reaches the log.

The Slack door is driven through raw ASGI so the test counts the body bytes the app actually pulled from the server.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any, cast

import pytest
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_bolt.authorization import AuthorizeResult
from starlette.applications import Starlette
from starlette.testclient import TestClient

from labbot.bot.api import create_app
from labbot.bot.slack.http import MAX_SLACK_BODY, events_route
from labbot.bot.slack.payloads import JSON, Workspace, signed, slash_command
from labbot.common.errors import BadRequest
from labbot.common.json_input import json_depth, loads_json
from labbot.training.telemetry_ingest import parse_batch

SECRET = "test-signing-secret"
ADMIN = "admin-secret"
CHUNK = 64 << 10
BIG = 50 << 20
MARK = b"UNSIGNED-BODY-MARKER-"
WS = Workspace(team_id="T0TEAM0001", app_id="A0APP00001", channel="C0LAB00001")
DEEP = b"[" * 30_000 + b"]" * 30_000


# ----------------------------------------------------------------------------------------------- the Slack door


async def _authorize(enterprise_id: str | None, team_id: str | None, user_id: str | None) -> AuthorizeResult:
    return AuthorizeResult(enterprise_id=enterprise_id, team_id=team_id, bot_token="xoxb-test", bot_user_id="U0BOT")


def _slack_app() -> Starlette:
    bolt = AsyncApp(signing_secret=SECRET, request_verification_enabled=False, authorize=_authorize)

    @bolt.command("/lab")
    async def on_lab(ack: AsyncAck) -> None:
        await ack(text="pong")

    return Starlette(routes=[events_route(bolt, SECRET)])


def _big_body() -> Iterator[bytes]:
    """50 MB in 64 KiB chunks, made as they are pulled: the test never holds the body either."""
    filler = MARK + b"x" * (CHUNK - len(MARK))
    for _ in range(BIG // CHUNK):
        yield filler


def _post(app: Starlette, headers: dict[str, str], chunks: Iterable[bytes]) -> tuple[int, dict[str, Any], int]:
    """POST /slack/events over raw ASGI: (status, JSON answer or {}, body bytes the app read)."""
    it = iter(chunks)
    state = {"read": 0, "next": next(it, None)}
    status = 0
    out: list[bytes] = []

    async def receive() -> dict[str, Any]:
        chunk = state["next"]
        if chunk is None:
            return {"type": "http.disconnect"}
        state["next"] = next(it, None)
        state["read"] += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": state["next"] is not None}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            out.append(message.get("body", b""))

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/slack/events",
        "raw_path": b"/slack/events",
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode("latin-1"), v.encode("utf-8")) for k, v in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    asyncio.run(app(scope, receive, send))  # type: ignore[arg-type]
    body = b"".join(out)
    try:
        answer = json.loads(body) if body else {}
    except ValueError:
        answer = {"raw": body.decode(errors="replace")}
    return status, answer, cast(int, state["read"])


def _forged_fresh() -> dict[str, str]:
    """Signing headers that are well formed and fresh, with a signature that cannot match."""
    return {"X-Slack-Request-Timestamp": str(int(time.time())), "X-Slack-Signature": "v0=" + "0" * 64}


def test_a_50mb_unsigned_body_is_refused_unread_and_stays_out_of_the_log(caplog: pytest.LogCaptureFixture) -> None:
    app = _slack_app()
    caplog.set_level(logging.DEBUG)
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    # declared length over the limit: 413 before a byte is read
    status, answer, read = _post(app, form | {"Content-Length": str(BIG)}, _big_body())
    assert status == 413 and answer["error"]["code"] == "too_large", answer
    assert read == 0
    # streamed (no length), with signing headers that look right: reading stops at the limit
    status, answer, read = _post(app, form | _forged_fresh(), _big_body())
    assert status == 413 and "limit" in answer["error"]["message"], answer
    assert read <= MAX_SLACK_BODY + CHUNK
    # streamed and not signed at all: 401 before a byte is read
    status, answer, read = _post(app, form, _big_body())
    assert status == 401 and read == 0, answer
    logged = caplog.text
    assert MARK.decode() not in logged and len(logged) < 4096, logged[:500]


def test_the_slack_door_says_what_is_wrong_with_the_signing_headers() -> None:
    app = _slack_app()
    body = slash_command(WS, user="U0ALICE001", user_name="alice", text="runs").encode()
    fresh = str(int(time.time()))
    cases = [
        ({"X-Slack-Request-Timestamp": "abc", "X-Slack-Signature": "v0=" + "0" * 64}, 400, "X-Slack-Request-Timestamp"),
        ({"X-Slack-Request-Timestamp": "²", "X-Slack-Signature": "v0=" + "0" * 64}, 400, "X-Slack-Request-Timestamp"),
        ({"X-Slack-Request-Timestamp": "9" * 400, "X-Slack-Signature": "v0=" + "0" * 64}, 400, "unix seconds"),
        ({"X-Slack-Request-Timestamp": fresh, "X-Slack-Signature": "v0=é"}, 400, "X-Slack-Signature"),
        ({"X-Slack-Request-Timestamp": fresh, "X-Slack-Signature": "v0=" + "0" * 64}, 401, "does not match"),
        (signed(body.decode(), "not-the-secret"), 401, "does not match"),
        (signed(body.decode(), SECRET, timestamp=int(time.time()) - 6 * 60), 401, "5-minute window"),
        ({}, 401, "not signed"),
    ]
    for headers, want, says in cases:
        status, answer, _ = _post(app, headers, [body])
        assert status == want and says in answer["error"]["message"], (headers, status, answer)


def test_a_signed_request_still_reaches_bolt() -> None:
    app = _slack_app()
    body = slash_command(WS, user="U0ALICE001", user_name="alice", text="runs")
    status, answer, read = _post(app, signed(body, SECRET), [body.encode()])
    assert status == 200 and "pong" in json.dumps(answer), answer
    assert read == len(body)
    # a signed body that is not what its content type says: 400, not a 500 from inside Bolt
    deep = DEEP.decode()
    status, answer, _ = _post(app, signed(deep, SECRET, content_type=JSON), [DEEP])
    assert status == 400, answer


# ----------------------------------------------------------------------------------------------- /api/v1 and /plots


class _Store:
    """A telemetry store that takes any token: what is tested is the body's parsing."""

    def authenticate(self, run_id: str, token: str | None) -> None:
        return None

    def ingest(self, run_id: str, batch: Any) -> int:
        return len(batch.points)


@pytest.fixture
def api() -> TestClient:
    # no service behind it: every case here must be refused before the service is asked anything
    app = create_app(cast(Any, None), cast(Any, _Store()), admin_token=ADMIN)
    return TestClient(app, headers={"Authorization": f"Bearer {ADMIN}"}, raise_server_exceptions=False)


def _error(r: Any, status: int = 400) -> str:
    assert r.status_code == status, (r.status_code, r.text)
    return str(r.json()["error"]["message"])


def test_a_malformed_plot_signature_is_400(api: TestClient) -> None:
    for sig in ("é", "%C3%A9", "0" * 31 + "é", "x" * 5000):
        for image in ("loss", "metrics"):
            assert "sig=" in _error(api.get(f"/plots/r1/{image}.png?sig={sig}", headers={"Authorization": ""}))


def test_integer_query_parameters_are_ascii_digits_in_range(api: TestClient) -> None:
    for query in ("tail=²", "tail=%C2%B2", "tail=١٢", "tail=-1", "tail=1e3", "tail=" + "9" * 5000):
        assert "whole number" in _error(api.get(f"/api/v1/runs/r1/logs?{query}"))
    for query in ("limit=²", "limit=0", "limit=" + "9" * 5000):
        assert "whole number" in _error(api.get(f"/api/v1/runs?{query}"))
    assert "whole number" in _error(api.get("/api/v1/runs/r1?wait=³"))


def test_json_nested_30000_deep_is_400(api: TestClient) -> None:
    assert "nested" in _error(api.post("/api/v1/runs", content=DEEP))
    assert "nested" in _error(api.post("/api/v1/runs", content=b'{"job": ' + DEEP + b"}"))
    telemetry = api.post("/api/v1/runs/r1/telemetry", content=DEEP, headers={"Authorization": "Bearer t"})
    assert "nested" in _error(telemetry)


def test_telemetry_numbers_out_of_range_are_400(api: TestClient) -> None:
    def post(point: str) -> Any:
        body = '{"attempt": 1, "points": [' + point + "]}"
        return api.post("/api/v1/runs/r1/telemetry", content=body, headers={"Authorization": "Bearer t"})

    assert "points[0].step" in _error(post('{"step": 1e23, "metrics": {"loss": 1.0}}'))
    assert "points[0].step" in _error(post('{"step": 100000000000000000000000, "metrics": {"loss": 1.0}}'))
    assert "points[0].metrics.loss" in _error(post('{"step": 1, "metrics": {"loss": 1' + "0" * 400 + "}}"))
    assert "points[0].ts" in _error(post('{"step": 1, "ts": 1' + "0" * 400 + ', "metrics": {"loss": 1.0}}'))
    assert "attempt" in _error(
        api.post("/api/v1/runs/r1/telemetry", content='{"attempt": 1e23}', headers={"Authorization": "Bearer t"})
    )
    ok = post('{"step": 9223372036854775807, "metrics": {"loss": 1.0}}')
    assert ok.status_code == 200 and ok.json() == {"accepted": 1}


# ----------------------------------------------------------------------------------------------- the JSON reader


def test_the_json_reader_measures_depth_outside_strings() -> None:
    assert json_depth(b'{"a": [1, {"b": "[[[[{{{{"}]}') == 3
    assert json_depth(b'"\\"[[["') == 0 and json_depth(b"3") == 0
    assert loads_json(b'{"loss": NaN}')["loss"] != 0  # the telemetry wire format's bare NaN still parses
    assert loads_json(b"[" * 64 + b"]" * 64) is not None
    for body, says in ((b"[" * 65 + b"]" * 65, "nested"), (b"{", "not JSON"), (b"\xff\xfe{", "not")):
        with pytest.raises(BadRequest, match=says):
            loads_json(body)
    with pytest.raises(BadRequest, match="nested"):
        parse_batch(DEEP)


def test_the_depth_scan_is_linear_on_unterminated_strings() -> None:
    start = time.perf_counter()
    for body in (b'"\\' * 500_000, b'"[' * 500_000, b"[" * 1_000_000):
        with pytest.raises(BadRequest):
            loads_json(body)
    assert time.perf_counter() - start < 5.0
