"""The dead-man switch against a local check server (http.server), and the ``[deadman]`` settings."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from support import free_port

from labbot.agents.babysitter.deadman import DeadmanSettings, DeadmanSwitch, redacted_url
from labbot.common.errors import BadRequest

TOKEN = "5f1c0e2a-secret-ping-token-9b7d"


class Check(ThreadingHTTPServer):
    """A healthchecks.io-style check: records each ping (method, path) and answers ``status``."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.status = 200
        self.pings: list[tuple[str, str]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/ping/{TOKEN}?rid=1"


class _Handler(BaseHTTPRequestHandler):
    server: Check

    def _answer(self) -> None:
        self.server.pings.append((self.command, self.path))
        body = b"OK" if self.server.status < 300 else b"nope"
        self.send_response(self.server.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_POST = do_HEAD = _answer

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass


@pytest.fixture
def check() -> Iterator[Check]:
    server = Check()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


def pings(url: str, statuses: list[int] | None = None, check: Check | None = None, **kwargs: Any) -> list[bool]:
    """Ping ``url`` once per entry of ``statuses`` (set on ``check`` before each ping); the results."""

    async def go() -> list[bool]:
        switch = DeadmanSwitch(url, **kwargs)
        try:
            results = []
            for status in statuses or [200]:
                if check is not None:
                    check.status = status
                results.append(await switch.ping())
            return results
        finally:
            await switch.aclose()

    return asyncio.run(go())


def test_a_2xx_ping_is_ok(check: Check) -> None:
    assert pings(check.url, [200, 204], check) == [True, True]
    assert check.pings == [("GET", f"/ping/{TOKEN}?rid=1")] * 2


@pytest.mark.parametrize("method", ["POST", "HEAD"])
def test_the_method_is_configurable(check: Check, method: str) -> None:
    assert pings(check.url, method=method.lower()) == [True]
    assert check.pings[0][0] == method


def test_a_500_is_a_failed_ping_warned_once_per_outage_then_recovery_logged(
    check: Check, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="labbot.agents.babysitter.deadman")

    results = pings(check.url, [500, 500, 503, 200, 200, 500], check)

    assert results == [False, False, False, True, True, False]
    levels = [(r.levelname, "failed" if "failed" in r.message else "again") for r in caplog.records]
    assert levels == [("WARNING", "failed"), ("INFO", "again"), ("WARNING", "failed")]
    assert "HTTP 500" in caplog.records[0].message
    assert f"http://127.0.0.1:{check.server_address[1]}" in caplog.records[0].message
    assert TOKEN not in caplog.text and "rid=1" not in caplog.text


def test_an_unreachable_check_is_a_failed_ping_and_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"http://127.0.0.1:{free_port()}/ping/{TOKEN}"  # nothing listens there

    assert pings(url, [200, 200], timeout=1.0) == [False, False]

    assert [r.levelname for r in caplog.records if r.name == "labbot.agents.babysitter.deadman"] == ["WARNING"]
    assert "ConnectError" in caplog.text
    assert TOKEN not in caplog.text


def test_a_url_httpx_cannot_use_is_a_failed_ping(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    assert pings(f"ftp://example.invalid/{TOKEN}") == [False]
    assert TOKEN not in caplog.text


def test_repr_shows_only_scheme_and_host() -> None:
    url = f"https://hc-ping.com/{TOKEN}"

    async def build() -> str:
        switch = DeadmanSwitch(url)
        await switch.aclose()
        return repr(switch)

    assert asyncio.run(build()) == "DeadmanSwitch('https://hc-ping.com', method='GET')"
    assert TOKEN not in repr(DeadmanSettings(url=url))
    assert redacted_url(f"https://user:{TOKEN}@hc-ping.com:8443/x?k={TOKEN}") == "https://hc-ping.com:8443"


# ----------------------------------------------------------------- [deadman] settings


@pytest.mark.parametrize("table", [None, {}, {"every": "5m"}, {"url": ""}], ids=["absent", "empty", "no url", "blank"])
def test_the_switch_is_off_without_a_url(table: dict[str, Any] | None) -> None:
    assert DeadmanSettings.from_config(table) is None


def test_settings_from_a_full_table() -> None:
    url = f"https://hc-ping.com/{TOKEN}"

    settings = DeadmanSettings.from_config({"url": url, "every": "1m30s", "method": "post"})

    assert settings == DeadmanSettings(url=url, every_s=90.0, method="POST")


def test_settings_defaults() -> None:
    settings = DeadmanSettings.from_config({"url": "http://checks.lab.internal/ping/x"})

    assert settings is not None
    assert (settings.every_s, settings.method) == (60.0, "GET")


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ({"url": "hc-ping.com/abc"}, "must be an http(s) URL with a host"),
        ({"url": "https:///abc"}, "must be an http(s) URL with a host"),
        ({"url": "http://host:99999/x"}, "not a valid URL"),
        ({"url": 42}, "url must be a string"),
        ({"url": "https://hc-ping.com/x", "every": "soon"}, "bad duration 'soon'"),
        ({"url": "https://hc-ping.com/x", "every": "0s"}, "must be positive"),
        ({"url": "https://hc-ping.com/x", "every": True}, "every must be a duration"),
        ({"url": "https://hc-ping.com/x", "method": "PUT"}, "method must be one of GET, POST, HEAD"),
        ({"url": "https://hc-ping.com/x", "interval": "1m"}, "unknown key(s) interval; accepted: url, every, method"),
    ],
)
def test_a_bad_table_says_what_is_wrong_and_what_is_right(table: dict[str, Any], says: str) -> None:
    with pytest.raises(BadRequest) as caught:
        DeadmanSettings.from_config(table)

    assert says in caught.value.message
    assert caught.value.message.startswith("labbot.toml: [deadman]")


def test_a_bad_url_is_reported_without_its_secret() -> None:
    with pytest.raises(BadRequest) as caught:
        DeadmanSettings.from_config({"url": f"ftp://hc-ping.com/{TOKEN}"})

    assert "ftp://hc-ping.com" in caught.value.message
    assert TOKEN not in caught.value.message


def test_a_table_that_is_not_a_table() -> None:
    with pytest.raises(BadRequest, match=r"\[deadman\] must be a table"):
        DeadmanSettings.from_config("https://hc-ping.com/x")  # type: ignore[arg-type]
