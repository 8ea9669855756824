"""labbot.mcp_servers.vendor_http.VendorApi against scripted answers (``httpx.MockTransport``), no network.

Each test scripts what the vendor answers, in order, and asserts on what VendorApi returned or raised, how many
requests it sent and which waits it asked the ``sleep`` seam for (nothing here sleeps). Covered: the retries (429
after its Retry-After, too long a wait told not waited, 5xx, timeouts, unreachable), the errors (non-JSON, a
refusal, the secret scrubbed even when the vendor echoes it) and the two vendor hooks: ``rate_limit`` (an answer
that is a rate limit without saying 429, or with its wait in the vendor's own header) and ``request_raw`` (the exact
bytes beside the JSON). Last, VendorApi, LinearApi and DatadogApi built without a transport reach the vendor through
the ``HTTP_PROXY`` of the environment (a forward proxy on localhost), as users behind a proxy need.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from mcp.server.mcpserver.exceptions import ToolError
from support import NoJitter

from labbot.mcp_servers.datadog import DatadogApi
from labbot.mcp_servers.linear import LinearApi
from labbot.mcp_servers.vendor_http import MAX_RETRY_AFTER_S, RateLimited, VendorApi, VendorError

TOKEN = "sk-acme-0123456789abcdef"
Scripted = httpx.Response | Callable[[httpx.Request], httpx.Response]


class Vendor:
    """A scripted vendor: answers the requests with ``answers`` in order (a response, or a function of the request
    that returns or raises), and records every request and every wait VendorApi asks for."""

    def __init__(self, *answers: Scripted) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []
        self.sleeps: list[float] = []

    def _handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if callable(answer):
            return answer(request)
        return httpx.Response(answer.status_code, headers=answer.headers, stream=answer.stream)  # a fresh one each time

    async def _sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def api(self, **kw: Any) -> VendorApi:
        headers = kw.pop("headers", lambda: {"Authorization": f"Bearer {TOKEN}"})
        return VendorApi(
            "Acme",
            "https://api.acme.test",
            headers,
            transport=httpx.MockTransport(self._handle),
            sleep=self._sleep,
            rng=NoJitter(),
            **kw,
        )


def run(api: VendorApi, method: str = "GET", path: str = "/v1/things", **kw: Any) -> Any:
    async def go() -> Any:
        try:
            return await api.request(method, path, **kw)
        finally:
            await api.aclose()

    return asyncio.run(go())


def run_raw(api: VendorApi, path: str = "/v1/things") -> tuple[Any, bytes]:
    async def go() -> tuple[Any, bytes]:
        try:
            return await api.request_raw("GET", path)
        finally:
            await api.aclose()

    return asyncio.run(go())


def error(api: VendorApi, **kw: Any) -> str:
    with pytest.raises(ToolError) as e:
        run(api, **kw)
    return str(e.value)


def ok(doc: Any = None) -> httpx.Response:
    return httpx.Response(200, json={"ok": True} if doc is None else doc)


def limited(status: int = 429, *, body: Any = None, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, json=body or {"error": "slow down"}, headers=headers)


# the default: what every vendor gets without a hook (notion's case)


def test_a_successful_answer_is_its_json_and_the_request_is_what_was_asked() -> None:
    vendor = Vendor(ok({"id": 7}))
    assert run(vendor.api(), "POST", "/v1/things", json_body={"name": "x"}, params={"q": "a b"}) == {"id": 7}
    [sent] = vendor.requests
    assert sent.method == "POST" and sent.url == "https://api.acme.test/v1/things?q=a+b"
    assert json.loads(sent.content) == {"name": "x"} and sent.headers["authorization"] == f"Bearer {TOKEN}"
    assert vendor.sleeps == []


def test_429_is_retried_after_its_retry_after_through_the_sleep_seam() -> None:
    vendor = Vendor(limited(headers={"Retry-After": "2"}), limited(headers={"Retry-After": "0.25"}), ok())
    assert run(vendor.api()) == {"ok": True}
    assert vendor.sleeps == [2.0, 0.25] and len(vendor.requests) == 3


def test_a_retry_after_longer_than_the_cap_is_told_not_waited() -> None:
    vendor = Vendor(limited(headers={"Retry-After": str(int(MAX_RETRY_AFTER_S) + 90)}))
    text = error(vendor.api())
    assert text == "Acme (GET /v1/things) is rate limited for another 2m (429 Retry-After): try again after that"
    assert vendor.sleeps == [] and len(vendor.requests) == 1


def test_429_without_a_wait_backs_off_then_says_so() -> None:
    vendor = Vendor(*[limited()] * 4)
    text = error(vendor.api())
    assert text == "Acme (GET /v1/things) is rate limiting us and still was after 4 attempts: try again in a minute"
    assert vendor.sleeps == [0.5, 1.0, 2.0]


def test_5xx_is_retried_then_a_clear_error() -> None:
    vendor = Vendor(httpx.Response(503, text="busy"), ok())
    assert run(vendor.api()) == {"ok": True} and vendor.sleeps == [0.5]
    vendor = Vendor(*[httpx.Response(500, text="oops")] * 3)
    text = error(vendor.api(max_retries=2, backoff_s=0.1))
    assert text == "Acme (GET /v1/things) failed with 500 3 times: oops: the service is in trouble; try later"
    assert vendor.sleeps == [0.1, 0.2] and len(vendor.requests) == 3


def test_a_timeout_is_retried_then_a_clear_error() -> None:
    def hang(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    vendor = Vendor(hang, ok())
    assert run(vendor.api()) == {"ok": True} and vendor.sleeps == [0.5]
    vendor = Vendor(hang, hang)
    text = error(vendor.api(timeout=5, max_retries=1))
    assert text.startswith("Acme (GET /v1/things) did not answer within 5s, 2 times: try again later")
    assert vendor.sleeps == [0.5]


def test_an_unreachable_vendor_is_a_clear_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"refused, sending Bearer {TOKEN}", request=request)

    vendor = Vendor(refuse, refuse)
    text = error(vendor.api(max_retries=1))
    assert text.startswith("Acme (GET /v1/things) could not be reached (ConnectError) at https://api.acme.test")
    assert TOKEN not in text


def test_a_body_that_is_not_json_is_a_clear_error() -> None:
    vendor = Vendor(httpx.Response(200, text="<html>Sign in</html>", headers={"content-type": "text/html"}))
    text = error(vendor.api())
    assert text == (
        "Acme (GET /v1/things) answered 200 with a body that is not JSON (text/html, 20 B): "
        "a proxy or an outage page may be in the way; try again later"
    )


def test_a_refusal_is_not_retried_and_quotes_the_vendor() -> None:
    vendor = Vendor(httpx.Response(400, json={"message": "name is required"}))
    text = error(vendor.api())
    assert text == 'Acme (GET /v1/things) refused the request with 400: {"message":"name is required"}'
    assert len(vendor.requests) == 1 and vendor.sleeps == []


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(401, text=f"invalid token: Bearer {TOKEN}"),
        httpx.Response(403, json={"error": f"key {TOKEN} may not read this"}),
        httpx.Response(500, text=f"crashed while checking {TOKEN}"),
    ],
    ids=["401 with the header", "403 with the key", "500"],
)
def test_the_secret_never_appears_in_an_error_even_when_the_vendor_echoes_it(answer: httpx.Response) -> None:
    vendor = Vendor(*[answer] * 4)
    text = error(vendor.api())
    assert TOKEN not in text and "[redacted]" in text


def test_the_secret_is_scrubbed_from_what_explain_says_too() -> None:
    def explain(err: VendorError) -> str:
        return f"the key was refused ({err.text})"

    vendor = Vendor(httpx.Response(401, text=f"bad key {TOKEN}"))
    assert error(vendor.api(explain=explain)) == "Acme: the key was refused (bad key [redacted])"


def test_a_missing_credential_is_told_before_anything_is_sent() -> None:
    def headers() -> dict[str, str]:
        raise ToolError("ACME_TOKEN is not set: create one and set ACME_TOKEN")

    vendor = Vendor()
    assert error(vendor.api(headers=headers)) == "ACME_TOKEN is not set: create one and set ACME_TOKEN"
    assert vendor.requests == []


# the rate_limit hook


def ratelimited_code(response: httpx.Response) -> RateLimited | None:
    """A Linear-like hook: a 400 whose body says RATELIMITED is a rate limit; X-Reset-In says the wait."""
    if response.json().get("code") != "RATELIMITED":
        return None
    wait = response.headers.get("x-reset-in")
    return RateLimited(float(wait) if wait is not None else None)


RATELIMITED = {"code": "RATELIMITED"}


def test_the_hook_makes_an_answer_a_rate_limit_and_says_the_wait() -> None:
    vendor = Vendor(limited(400, body=RATELIMITED, headers={"X-Reset-In": "3"}), ok())
    assert run(vendor.api(rate_limit=ratelimited_code)) == {"ok": True}
    assert vendor.sleeps == [3.0] and len(vendor.requests) == 2


def test_the_answers_retry_after_comes_before_the_hooks_wait() -> None:
    vendor = Vendor(limited(400, body=RATELIMITED, headers={"Retry-After": "1", "X-Reset-In": "9"}), ok())
    assert run(vendor.api(rate_limit=ratelimited_code)) == {"ok": True} and vendor.sleeps == [1.0]


def test_a_rate_limit_of_unknown_wait_backs_off_then_says_so() -> None:
    vendor = Vendor(*[limited(400, body=RATELIMITED)] * 3)
    text = error(vendor.api(rate_limit=ratelimited_code, max_retries=2))
    assert text == "Acme (GET /v1/things) is rate limiting us and still was after 3 attempts: try again in a minute"
    assert vendor.sleeps == [0.5, 1.0]


def test_the_hooks_wait_has_the_same_cap() -> None:
    vendor = Vendor(limited(400, body=RATELIMITED, headers={"X-Reset-In": "90"}))
    text = error(vendor.api(rate_limit=ratelimited_code))
    assert text == "Acme (GET /v1/things) is rate limited for another 1m 30s (400 rate limit): try again after that"
    assert vendor.sleeps == []


def test_the_hook_can_give_a_429_its_wait() -> None:
    """Datadog's way: a 429 with only X-RateLimit-Reset."""

    def reset_header(response: httpx.Response) -> RateLimited | None:
        reset = response.headers.get("x-ratelimit-reset")
        return RateLimited(float(reset)) if response.status_code == 429 and reset else None

    vendor = Vendor(limited(headers={"X-RateLimit-Reset": "7"}), ok())
    assert run(vendor.api(rate_limit=reset_header)) == {"ok": True} and vendor.sleeps == [7.0]
    vendor = Vendor(limited(headers={"X-RateLimit-Reset": "120"}))
    assert "rate limited for another 2m (429 Retry-After)" in error(vendor.api(rate_limit=reset_header))
    assert vendor.sleeps == []


def test_an_answer_the_hook_passes_on_keeps_the_default() -> None:
    """None from the hook: a plain 400 is refused at once, a 429 is still a rate limit."""
    vendor = Vendor(httpx.Response(400, json={"code": "INVALID"}), limited(headers={"Retry-After": "2"}), ok())
    api = vendor.api(rate_limit=ratelimited_code)
    assert "refused the request with 400" in error(api)
    assert run(api) == {"ok": True} and vendor.sleeps == [2.0]


def test_the_hook_only_reads_error_answers_and_a_wait_that_is_no_number_backs_off() -> None:
    seen: list[int] = []

    def hook(response: httpx.Response) -> RateLimited | None:
        seen.append(response.status_code)
        return RateLimited(float("inf")) if response.status_code == 420 else None

    vendor = Vendor(ok(), httpx.Response(420, text="enhance your calm"), ok())
    api = vendor.api(rate_limit=hook)
    assert run(api) == {"ok": True} and seen == []
    assert run(api) == {"ok": True} and seen == [420] and vendor.sleeps == [0.5]


# request_raw: the exact bytes


def test_request_raw_returns_the_exact_bytes_beside_the_json() -> None:
    body = b'{"series": [1.50, 2e3],   "name": "caf\\u00e9"}\n'  # spacing and spelling json.dumps would not keep
    vendor = Vendor(httpx.Response(200, content=body, headers={"content-type": "application/json"}))
    doc, raw = run_raw(vendor.api())
    assert doc == {"series": [1.5, 2000.0], "name": "café"} and raw == body


def test_request_raw_returns_the_body_decoded_of_its_content_encoding() -> None:
    body = json.dumps({"points": list(range(100))}).encode()
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    vendor = Vendor(httpx.Response(200, content=gzip.compress(body), headers=headers))
    doc, raw = run_raw(vendor.api())
    assert raw == body and doc == {"points": list(range(100))}


def test_request_raw_of_an_empty_answer_is_an_empty_dict_and_no_bytes() -> None:
    vendor = Vendor(httpx.Response(204))
    assert run_raw(vendor.api()) == ({}, b"")


def test_request_raw_keeps_only_the_answer_that_succeeded() -> None:
    vendor = Vendor(httpx.Response(503, text="busy"), httpx.Response(200, content=b'{"a":1}'))
    assert run_raw(vendor.api()) == ({"a": 1}, b'{"a":1}')


def test_request_raw_raises_like_request() -> None:
    vendor = Vendor(httpx.Response(404, text=f"no thing for {TOKEN}"))
    with pytest.raises(ToolError, match=r"refused the request with 404: no thing for \[redacted\]"):
        run_raw(vendor.api())


# the network default: no transport given is httpx's own, which honours the environment's proxy


class ForwardProxy:
    """An HTTP forward proxy on localhost that answers every request itself, recording its request line."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.request_lines: list[str] = []

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        self.request_lines.append(head.split("\r\n", 1)[0])
        lengths = [int(h.split(":", 1)[1]) for h in head.lower().split("\r\n") if h.startswith("content-length:")]
        await reader.readexactly(sum(lengths))
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(self.body)}\r\n\r\n".encode()
            + self.body
        )
        await writer.drain()
        writer.close()

    async def through(self, monkeypatch: pytest.MonkeyPatch, call: Callable[[], Any]) -> Any:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "REQUEST_METHOD"):
            monkeypatch.delenv(name, raising=False)
        for name in ("HTTP_PROXY", "http_proxy"):
            monkeypatch.setenv(name, f"http://127.0.0.1:{port}")
        async with server:
            return await call()


@pytest.mark.parametrize("vendor", ["VendorApi", "LinearApi", "DatadogApi"])
def test_without_a_transport_requests_go_through_the_environments_proxy(
    vendor: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = ForwardProxy(b'{"data": {"viewer": {"id": "u1"}}}')

    async def call() -> Any:
        if vendor == "LinearApi":
            linear = LinearApi("lin_api_key", "http://api.linear.test/graphql")
            try:
                return await linear.execute("query { viewer { id } }")
            finally:
                await linear.aclose()
        if vendor == "DatadogApi":
            datadog = DatadogApi("dd-api", "dd-app", url="http://api.datadog.test", env={})
            try:
                return (await datadog.fetch("GET", "/api/v1/validate")).doc["data"]
            finally:
                await datadog.aclose()
        api = VendorApi("Acme", "http://api.acme.test", dict)
        try:
            return (await api.request("GET", "/v1/viewer"))["data"]
        finally:
            await api.aclose()

    assert asyncio.run(proxy.through(monkeypatch, call)) == {"viewer": {"id": "u1"}}
    [line] = proxy.request_lines
    assert line.split(" ")[1].startswith("http://api.")  # the absolute URL a forward proxy is sent
