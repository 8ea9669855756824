"""labbot.common.api_client, the one client of ``/api/v1`` (the CLI's, synchronous; the lab server's, asynchronous):
both send the admin token and turn every failure into one ApiError carrying the API's own message and code.

The asynchronous client talks to the real ``create_app`` in process (``httpx.ASGITransport``); transport failures and
bodies that are not the API's come from ``httpx.MockTransport``.
"""

from __future__ import annotations

import asyncio
import getpass
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import make_service

from labbot.bot.api import create_app
from labbot.common.api_client import (
    BAD_ADMIN_TOKEN,
    NO_ADMIN_TOKEN,
    NOT_ANSWERING,
    OWNER_ENV,
    ApiClient,
    ApiError,
    AsyncApiClient,
    me,
)
from labbot.training.ray_cluster import RayConnection
from labbot.training.telemetry_store import TelemetryStore

DOWN = "http://127.0.0.1:9"


def _refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def _proxy_page(request: httpx.Request) -> httpx.Response:
    return httpx.Response(502, text="<html>" + "bad gateway " * 100 + "</html>")


def _api(request: httpx.Request) -> httpx.Response:
    if request.headers.get("authorization") != "Bearer t0ken":
        return httpx.Response(401, json={"error": {"code": "unauthorized", "message": "wrong token"}})
    if request.url.path == "/api/v1/runs/r1/stop":
        return httpx.Response(409, json={"error": {"code": "conflict", "message": "run r1 is already stopped"}})
    return httpx.Response(200, json={"path": request.url.path, "query": dict(request.url.params)})


def _raised(call: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        call()
    return caught.value


def test_the_async_client_carries_the_apis_own_message_and_code(tmp_path: Path) -> None:
    service = make_service(tmp_path, RayConnection("http://127.0.0.1:9", None))
    app = create_app(service, TelemetryStore(service.db), admin_token="t0ken")
    api = AsyncApiClient("http://labbot.test/", "t0ken", transport=httpx.ASGITransport(app=app))
    assert api.url == "http://labbot.test"
    assert asyncio.run(api.json("GET", "/runs")) == {"runs": []}
    unknown = _raised(lambda: asyncio.run(api.json("GET", "/runs/nosuch")))
    assert (unknown.message, unknown.code, unknown.status) == (
        "unknown run 'nosuch'; list runs with `labbot runs`",
        "unknown_run",
        404,
    )
    streamed = _raised(lambda: asyncio.run(api.read("/artifacts/a1", 10, params={"agent": "researcher"})))
    assert streamed.status is not None and streamed.status >= 400 and streamed.message  # read's errors too
    wrong = AsyncApiClient("http://labbot.test", "nope", transport=httpx.ASGITransport(app=app))
    assert _raised(lambda: asyncio.run(wrong.json("GET", "/runs"))).status == 401


def test_the_sync_client_sends_the_token_and_raises_the_apis_error() -> None:
    api = ApiClient("http://labbot.test", "t0ken", transport=httpx.MockTransport(_api))
    assert api.json("GET", "/runs", params={"limit": 2}) == {"path": "/api/v1/runs", "query": {"limit": "2"}}
    conflict = _raised(lambda: api.json("POST", "/runs/r1/stop"))
    assert (conflict.message, conflict.code, conflict.status) == ("run r1 is already stopped", "conflict", 409)
    api.close()


@pytest.mark.parametrize(
    ("handler", "message", "code", "status"),
    [
        (_refuse, f"the labbot control plane is not answering at {DOWN} (ConnectError)", NOT_ANSWERING, None),
        (_proxy_page, ("<html>" + "bad gateway " * 100)[:300], "http", 502),  # not the API's JSON: its start
    ],
)
def test_both_clients_fail_the_same_way(handler: Any, message: str, code: str, status: int | None) -> None:
    sync = ApiClient(DOWN, "t0ken", transport=httpx.MockTransport(handler))
    async_ = AsyncApiClient(DOWN, "t0ken", transport=httpx.MockTransport(handler))
    errors = [
        _raised(lambda: sync.request("GET", "/runs")),
        _raised(lambda: asyncio.run(async_.request("GET", "/runs"))),
        _raised(lambda: asyncio.run(async_.read("/artifacts/a1", 10))),
    ]
    sync.close()
    assert {(e.message, e.code, e.status) for e in errors} == {(message, code, status)}


def test_without_an_admin_token_labbot_is_not_running_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABBOT_HOME", str(tmp_path))
    monkeypatch.delenv("LABBOT_ADMIN_TOKEN", raising=False)
    missing = f"no admin token at {tmp_path / 'admin_token'}"
    cli = _raised(ApiClient)  # the CLI's: at once, before any request
    assert (cli.message, cli.code, cli.status) == (missing, NO_ADMIN_TOKEN, None)
    server = AsyncApiClient(transport=httpx.MockTransport(_api))  # a server's: on each call, so it may start first
    assert _raised(lambda: asyncio.run(server.json("GET", "/runs"))).message == missing
    (tmp_path / "admin_token").write_text("t0ken\n")
    assert asyncio.run(server.json("GET", "/runs"))["path"] == "/api/v1/runs"
    sync = ApiClient(transport=httpx.MockTransport(_api))
    assert sync.json("GET", "/jobs")["path"] == "/api/v1/jobs"
    sync.close()


def test_read_stops_at_the_limit() -> None:
    body = b"x" * 10_000
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    api = AsyncApiClient("http://labbot.test", "t0ken", transport=transport)
    data, _, cut = asyncio.run(api.read("/artifacts/a1", 100))
    assert (data, cut) == (b"x" * 100, True)
    data, headers, cut = asyncio.run(api.read("/artifacts/a1", 20_000))
    assert (data, cut, headers["content-length"]) == (body, False, "10000")


def test_an_admin_token_given_in_the_environment_is_sent_and_a_bad_one_is_refused_before_any_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LABBOT_HOME", str(tmp_path))
    (tmp_path / "admin_token").write_text("t0ken\n")
    given = "the-deployments-" + "shared-admin-token-0123456789"
    seen: list[str] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["authorization"])
        return httpx.Response(200, json={})

    monkeypatch.setenv("LABBOT_ADMIN_TOKEN", given)
    sync = ApiClient(transport=httpx.MockTransport(record))
    sync.json("GET", "/runs")
    sync.close()
    asyncio.run(AsyncApiClient(transport=httpx.MockTransport(record)).json("GET", "/runs"))
    assert seen == [f"Bearer {given}"] * 2, "the variable wins over the file"
    monkeypatch.setenv("LABBOT_ADMIN_TOKEN", "too-" + "short")
    e = _raised(ApiClient)
    assert e.code == BAD_ADMIN_TOKEN and e.status is None and "LABBOT_ADMIN_TOKEN" in e.message
    assert "too-short" not in e.message


def test_labbot_owner_is_who_the_cli_acts_as_else_the_login_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(OWNER_ENV, raising=False)
    assert me() == getpass.getuser()
    monkeypatch.setenv(OWNER_ENV, " U0CONSOLE1 ")
    assert me() == "U0CONSOLE1"
    monkeypatch.setenv(OWNER_ENV, "")
    assert me() == getpass.getuser(), "empty is unset"
