"""One SaaS API over httpx, for the notion, linear and datadog MCP servers: the seam, the retries, the errors.

Each vendor server builds a ``VendorApi`` with its base URL (the vendor's public one, or the ``*_API_URL`` override
for proxies and tests), a function that returns the auth headers (raising ``ToolError`` with "NOTION_TOKEN is not
set ..." when a credential is missing) and, optionally, two vendor readings of an error answer: ``explain`` says
what it means in the vendor's terms ("the page is not shared with the integration"), ``rate_limit`` says that it is
a rate limit where the vendor does not say so with a plain 429 (Linear's HTTP 400 ``RATELIMITED``) or says how long
to wait in its own header (Datadog's ``X-RateLimit-Reset``). ``request`` then:

* retries a rate limit (a 429, or what ``rate_limit`` calls one) after its ``Retry-After``, else the wait
  ``rate_limit`` read, else with exponential backoff — a wait over ``MAX_RETRY_AFTER_S`` is told, not waited — and
  5xx, timeouts and dropped connections with exponential backoff, at most ``max_retries`` times (the shared policy,
  ``labbot.common.retry``: tenacity waiting on ``Backoff``);
* returns the parsed JSON of a successful answer; ``request_raw`` returns it with the exact bytes of the body (after
  any ``Content-Encoding`` is undone), for a server that stores the vendor's own payload;
* turns every failure into a ``ToolError`` a model can act on — what went wrong and what would fix it — and never
  into a crash of the server;
* keeps credentials out of every message: the secrets in the headers are scrubbed from any text it raises (a
  vendor that echoes the key in an error body, an exception that prints the request).

The one injection seam is ``transport`` (``httpx.MockTransport`` or ``httpx.ASGITransport`` in tests); ``sleep`` is
a seam for the retry waits; ``observer`` (``labbot.common.observe``) hears of every error answer and every request
that got none, each try counted, by HTTP verb and status (``/metrics``). Imports nothing from bot/ or agents/.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import httpx
from mcp.server.mcpserver.exceptions import ToolError
from tenacity import RetryCallState, retry_if_exception_type

from labbot.common.durations import format_duration
from labbot.common.humanize import format_bytes
from labbot.common.observe import NO_OBSERVER, Observer
from labbot.common.retry import Backoff, RetryPolicy
from labbot_client.backoff import retry_after_seconds

__all__ = ["MAX_BACKOFF_S", "MAX_RETRY_AFTER_S", "RateLimit", "RateLimited", "VendorApi", "VendorError", "scrub"]

MAX_RETRY_AFTER_S = 30.0  # a longer rate-limit wait is told to the model instead of waited out inside one tool call
MAX_BACKOFF_S = 8.0  # the longest computed wait between two tries
_BODY_CHARS = 300  # of an error body quoted in a message


@dataclass(frozen=True)
class VendorError:
    """An error answer, as ``explain`` sees it: the HTTP status, the parsed JSON body (or None) and its text."""

    status: int
    body: Any
    text: str
    method: str
    path: str


Explain = Callable[[VendorError], str | None]


@dataclass(frozen=True)
class RateLimited:
    """A vendor's reading of an error answer as a rate limit.

    ``wait_s`` is how long until the limit lifts, as the vendor says it outside ``Retry-After`` (None: it does not
    say). The answer's own ``Retry-After``, when it has a readable one, still comes first; with neither, the retry
    waits with exponential backoff.
    """

    wait_s: float | None = None


RateLimit = Callable[[httpx.Response], RateLimited | None]
"""Reads an error answer (status 400 or more, its body already read; it must not raise): ``RateLimited`` when it is a
rate limit, None when the vendor has nothing to add (a 429 is one all the same)."""


def scrub(text: str, secrets: list[str]) -> str:
    """``text`` with every secret (of 4 characters or more) replaced by ``[redacted]``."""
    for secret in secrets:
        if len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    return text


class VendorApi:
    """A vendor's HTTP API; see the module docstring.

    Args:
        name: the vendor as a person says it ("Notion"): it starts every error message.
        base_url: the API root, e.g. ``https://api.notion.com``.
        headers: returns the request headers (auth included); raises ``ToolError`` when a credential is missing.
        explain: a vendor's reading of an error answer, or None to fall back on the generic one.
        rate_limit: which error answers are rate limits besides a 429, and their wait where ``Retry-After`` does
            not say it (see :class:`RateLimited`); None: only a 429 is, waited after its ``Retry-After``.
        transport: the httpx transport (tests); None is the network.
        timeout: seconds for one request.
        max_retries: retries after the first attempt, for rate limits, 5xx and transport errors.
        backoff_s: the first wait of the shared backoff (``labbot.common.retry``): it doubles up to
            ``MAX_BACKOFF_S``, with equal jitter.
        sleep, rng: seams for the retry waits and their jitter (tests record the waits and take the jitter off).
        observer: told of each error answer (its status) and each try without one (``timeout``, ``connection``).
    """

    def __init__(
        self,
        name: str,
        base_url: str,
        headers: Callable[[], Mapping[str, str]],
        *,
        explain: Explain | None = None,
        rate_limit: RateLimit | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        rng: random.Random | None = None,
        observer: Observer = NO_OBSERVER,
    ) -> None:
        self.name = name
        self.observer = observer
        self._system = name.lower()
        self.base_url = base_url.rstrip("/")
        self._headers = headers
        self._explain = explain
        self._rate_limit = rate_limit
        self._transport = transport
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry = RetryPolicy(
            attempts=max_retries + 1,
            backoff=Backoff(base=backoff_s, cap=max(MAX_BACKOFF_S, backoff_s), max_retry_after=MAX_RETRY_AFTER_S),
        )
        self._sleep = sleep
        self._rng = rng
        self._client: httpx.AsyncClient | None = None

    def client(self) -> httpx.AsyncClient:
        """One pooled client per server (made on first use, in the loop that serves the tools)."""
        if self._client is None or self._client.is_closed:
            self._client = httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout, transport=self._transport)
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: Mapping[str, Any] | None = None,
    ) -> Any:
        """The parsed JSON answer of ``method path``; ``ToolError`` for every failure, after the retries."""
        doc, _ = await self.request_raw(method, path, json_body=json_body, params=params)
        return doc

    async def request_raw(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: Mapping[str, Any] | None = None,
    ) -> tuple[Any, bytes]:
        """Like :meth:`request`, with the exact bytes of the answer's body (``b""`` for a 204 or an empty body,
        whose JSON is ``{}``)."""
        headers = dict(self._headers())
        secrets = [v.split(" ", 1)[-1] for v in headers.values()] + list(headers.values())
        try:
            return await self._request(method, path, headers, json_body, params)
        except ToolError as e:
            raise ToolError(scrub(str(e), secrets)) from None

    async def _request(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        json_body: Any,
        params: Mapping[str, Any] | None,
    ) -> tuple[Any, bytes]:
        where = f"{self.name} ({method} {path})"

        async def attempt() -> tuple[Any, bytes]:
            try:
                r = await self.client().request(method, path, headers=headers, json=json_body, params=params)
            except httpx.TransportError as e:
                kind = "timeout" if isinstance(e, httpx.TimeoutException) else "connection"
                self.observer.api_error(self._system, method.upper(), kind)
                raise
            if r.status_code >= 400:
                self.observer.api_error(self._system, method.upper(), str(r.status_code))
            limited, wait = self._limited(r)
            if limited or r.status_code >= 500:
                if wait is not None and wait > MAX_RETRY_AFTER_S:
                    left = format_duration(wait)
                    raise ToolError(
                        f"{where} is rate limited for another {left} ({_said_how(r)}): try again after that"
                    )
                raise _Again(r, limited, wait)
            if r.status_code >= 400:
                raise ToolError(self._describe(r, method, path, attempts=1, limited=False))
            if r.status_code == 204 or not r.content:
                return {}, r.content
            try:
                return r.json(), r.content
            except (json.JSONDecodeError, UnicodeDecodeError):
                kind = r.headers.get("content-type", "no content type")
                size = format_bytes(len(r.content))
                raise ToolError(
                    f"{where} answered {r.status_code} with a body that is not JSON ({kind}, {size}): "
                    "a proxy or an outage page may be in the way; try again later"
                ) from None

        def give_up(state: RetryCallState) -> NoReturn:
            assert state.outcome is not None
            e = state.outcome.exception()
            if isinstance(e, _Again):
                raise ToolError(
                    self._describe(e.response, method, path, attempts=state.attempt_number, limited=e.limited)
                )
            if isinstance(e, httpx.TimeoutException):
                raise ToolError(
                    f"{where} did not answer within {format_duration(self.timeout)}, {state.attempt_number} times: "
                    "try again later, or ask for less (a shorter window, a smaller page)"
                )
            raise ToolError(
                f"{where} could not be reached ({type(e).__name__}) at {self.base_url}: check the network "
                "or the *_API_URL override"
            )

        retrying = self.retry.retrying(
            retry=retry_if_exception_type((_Again, httpx.TransportError)),
            retry_after=_wait_said,
            give_up=give_up,
            sleep=self._sleep,
            rng=self._rng,
        )
        result: tuple[Any, bytes] = await retrying(attempt)
        return result

    def _limited(self, r: httpx.Response) -> tuple[bool, float | None]:
        """Whether ``r`` is a rate limit, and the wait it asks for (None: not said, back off)."""
        if r.status_code < 400:
            return False, None
        said = self._rate_limit(r) if self._rate_limit is not None else None
        if said is None and r.status_code != 429:
            return False, None
        wait = retry_after_seconds(r.headers.get("retry-after"))
        if wait is None and said is not None and said.wait_s is not None and math.isfinite(said.wait_s):
            wait = max(0.0, said.wait_s)
        return True, wait

    def _describe(self, r: httpx.Response, method: str, path: str, *, attempts: int, limited: bool) -> str:
        text = r.text.strip()
        try:
            body = r.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        err = VendorError(r.status_code, body, text, method, path)
        said = self._explain(err) if self._explain is not None else None
        if said:
            return f"{self.name}: {said}"
        where = f"{self.name} ({method} {path})"
        quoted = f": {text[:_BODY_CHARS]}" if text else ""
        if limited:
            return f"{where} is rate limiting us and still was after {attempts} attempts: try again in a minute"
        if r.status_code >= 500:
            return f"{where} failed with {r.status_code} {attempts} times{quoted}: the service is in trouble; try later"
        return f"{where} refused the request with {r.status_code}{quoted}"


def _said_how(r: httpx.Response) -> str:
    """How a rate-limit answer was given, for the message: ``429 Retry-After``, or the status it came as."""
    return "429 Retry-After" if r.status_code == 429 else f"{r.status_code} rate limit"


class _Again(Exception):
    """An answer worth another try: a rate limit (with the wait it asked for, if any) or a 5xx."""

    def __init__(self, response: httpx.Response, limited: bool, wait: float | None) -> None:
        super().__init__(response.status_code)
        self.response = response
        self.limited = limited
        self.wait = wait


def _wait_said(state: RetryCallState) -> float | None:
    """The wait a rate-limit answer asked for (its ``Retry-After``, else the vendor's own header); None: back off."""
    e = state.outcome.exception() if state.outcome is not None else None
    return e.wait if isinstance(e, _Again) else None
