"""Linear's GraphQL API over the shared httpx seam (:class:`labbot.mcp_servers.vendor_http.VendorApi`).

:class:`LinearApi` POSTs one document with its variables to ``LINEAR_API_URL`` (default
``https://api.linear.app/graphql``) with ``Authorization: LINEAR_API_KEY`` — a personal API key is sent as it is, an
OAuth token (``lin_oauth_…``) as ``Bearer``. It returns the ``data`` of the answer, or raises ``ToolError`` with
Linear's message and what to do: a missing, invalid or revoked key, a forbidden action, a rate limit, a query the
schema refuses, an entity that does not exist. The key never appears in a message (VendorApi scrubs what it raises,
and this module scrubs what it raises itself). :meth:`LinearApi.paginate` follows a connection's ``pageInfo``.

Linear says "rate limited" as HTTP 400 (or 429) with ``extensions.code: "RATELIMITED"`` and tells when its budgets
refill in ``X-RateLimit-*-Reset`` headers (epoch milliseconds). :func:`rate_limit` is VendorApi's ``rate_limit``
hook for that: it reads such an answer as a rate limit and its wait from those headers (a ``Retry-After`` comes
first), so the retries, their cap and their waits (through the ``sleep`` seam) are the shared ones.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import httpx
from mcp.server.mcpserver.exceptions import ToolError

from labbot.common.observe import NO_OBSERVER, Observer
from labbot.mcp_servers.vendor_http import RateLimit, RateLimited, VendorApi, VendorError, scrub

__all__ = ["DEFAULT_URL", "KEY_ENV", "MISSING_KEY", "URL_ENV", "LinearApi", "explain_errors", "rate_limit"]

KEY_ENV = "LINEAR_API_KEY"
URL_ENV = "LINEAR_API_URL"
DEFAULT_URL = "https://api.linear.app/graphql"
MISSING_KEY = (
    "LINEAR_API_KEY is not set: create a personal API key in Linear (Settings → Security & access → API) "
    "and set LINEAR_API_KEY"
)
_NEW_KEY = "create a new personal API key in Linear (Settings → Security & access → API) and set LINEAR_API_KEY"
_RESETS = ("requests", "complexity", "endpoint-requests")  # X-RateLimit-{kind}-Reset / -Remaining
_NOT_FOUND = re.compile(r"not found:\s*(\w+)", re.IGNORECASE)
MAX_PAGES = 100  # of one connection: a cursor that never ends must not loop forever


def authorization(key: str) -> str:
    """The ``Authorization`` header for ``key``: personal API keys raw, OAuth access tokens as ``Bearer``."""
    if key.lower().startswith("bearer "):
        return key
    return f"Bearer {key}" if key.startswith("lin_oauth") else key


def _codes(errors: Iterable[Any]) -> list[str]:
    return [str((e.get("extensions") or {}).get("code") or "").upper() for e in errors if isinstance(e, dict)]


def _said(error: dict[str, Any]) -> str:
    message = str(error.get("message") or "no message").strip()
    extensions = error.get("extensions") or {}
    shown = str(extensions.get("userPresentableMessage") or "").strip()
    return f"{message} — {shown}" if shown and shown not in message else message


def explain_errors(errors: Any) -> str:
    """Linear's GraphQL ``errors`` array as one message: what went wrong (Linear's words) and what to do."""
    items = [e for e in errors if isinstance(e, dict)] if isinstance(errors, list) else []
    if not items:
        return f"answered with an error labbot cannot read ({str(errors)[:200]}): try again later"
    codes = _codes(items)
    said = "; ".join(_said(e) for e in items[:3])
    if "AUTHENTICATION_ERROR" in codes:
        return f"LINEAR_API_KEY is invalid or was revoked (Linear said: {said}): {_NEW_KEY}"
    if "FORBIDDEN" in codes:
        return (
            f"the key's user may not do this (FORBIDDEN: {said}): ask a Linear admin for access to that team, "
            "or use a key of a user who has it"
        )
    if "RATELIMITED" in codes:
        return f"rate limited (RATELIMITED: {said}): wait a minute and try again, asking for less"
    if "GRAPHQL_VALIDATION_FAILED" in codes:
        return (
            f"refused the query labbot sent (GRAPHQL_VALIDATION_FAILED: {said}): labbot's linear server no longer "
            "matches Linear's API; report this to labbot's maintainers"
        )
    if "ENTITY_NOT_FOUND" in codes or "not found" in said.lower():
        named = _NOT_FOUND.search(said)  # Linear: "Entity not found: Issue - Could not find referenced Issue."
        return (
            f"there is no such {named.group(1).lower() if named else 'entity'} ({said}): check the id or identifier "
            "(e.g. ENG-123), or find it with search_issues / list_teams"
        )
    if "INVALID_INPUT" in codes or "BAD_USER_INPUT" in codes:
        return f"refused the request as invalid ({said}): correct it and try again"
    return f"answered with an error ({said})"


def _explain(err: VendorError) -> str | None:
    if isinstance(err.body, dict) and err.body.get("errors"):
        return explain_errors(err.body["errors"])
    return None


def _number(headers: httpx.Headers, name: str) -> float | None:
    try:
        return float(headers[name])
    except (KeyError, ValueError):
        return None


def _reset_wait(headers: httpx.Headers, now: float) -> float | None:
    """Seconds until the exhausted rate-limit budget refills, from Linear's ``X-RateLimit-*-Reset`` headers (the
    budgets whose ``-Remaining`` is 0 when it says which, else the latest reset)."""
    exhausted, resets = [], []
    for kind in _RESETS:
        reset = _number(headers, f"x-ratelimit-{kind}-reset")
        if reset is None:
            continue
        reset = reset / 1000 if reset > 1e11 else reset  # epoch milliseconds (Linear's), or seconds
        resets.append(reset)
        remaining = _number(headers, f"x-ratelimit-{kind}-remaining")
        if remaining is not None and remaining <= 0:
            exhausted.append(reset)
    chosen = exhausted or resets
    return max(0.0, max(chosen) - now) if chosen else None


def rate_limit(clock: Callable[[], float] = time.time) -> RateLimit:
    """VendorApi's ``rate_limit`` hook for Linear: an answer whose GraphQL ``errors`` say ``RATELIMITED`` (HTTP 400,
    or 429) is a rate limit, to be waited until its ``X-RateLimit-*-Reset`` headers say, measured from ``clock``."""

    def read(response: httpx.Response) -> RateLimited | None:
        try:
            body = response.json()
        except ValueError:  # JSONDecodeError and UnicodeDecodeError both are
            body = None
        ratelimited = isinstance(body, dict) and "RATELIMITED" in _codes(body.get("errors") or [])
        if not ratelimited and response.status_code != 429:
            return None
        return RateLimited(_reset_wait(response.headers, clock()))

    return read


class LinearApi:
    """Linear's GraphQL endpoint; see the module docstring.

    Args:
        api_key: the key (default: ``LINEAR_API_KEY``, read at each call, so setting it later works).
        url: the endpoint (default: ``LINEAR_API_URL``, else ``https://api.linear.app/graphql``).
        transport: the httpx transport (tests: ``httpx.ASGITransport(fake.app)``); None is the network.
        sleep, rng: the retry waits' seam and their jitter's (tests record the waits and take the jitter off).
        clock: the time ``X-RateLimit-*-Reset`` headers are measured from.
        page_size: nodes asked for per page of a connection (Linear allows up to 250).
    """

    def __init__(
        self,
        api_key: str | None = None,
        url: str | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        rng: random.Random | None = None,
        observer: Observer = NO_OBSERVER,
        clock: Callable[[], float] = time.time,
        page_size: int = 50,
    ) -> None:
        self.url = url or os.environ.get(URL_ENV) or DEFAULT_URL
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"{URL_ENV} must be an http(s) URL like {DEFAULT_URL}, got {self.url!r}")
        # the path is sent apart from the origin: httpx would add a trailing slash to a base URL's path
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._api_key = api_key
        self.page_size = page_size
        self.http = VendorApi(
            "Linear",
            f"{parts.scheme}://{parts.netloc}",
            self._headers,
            explain=_explain,
            rate_limit=rate_limit(clock),
            transport=transport,  # None: httpx's own, which honours HTTP(S)_PROXY
            timeout=timeout,
            max_retries=max_retries,
            backoff_s=backoff_s,
            sleep=sleep,
            rng=rng,
            observer=observer,
        )

    def _key(self) -> str:
        return (self._api_key if self._api_key is not None else os.environ.get(KEY_ENV, "")).strip()

    def _headers(self) -> dict[str, str]:
        key = self._key()
        if not key:
            raise ToolError(MISSING_KEY)
        return {"Authorization": authorization(key)}  # only secrets here: VendorApi scrubs every value

    async def execute(self, document: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """The ``data`` of one GraphQL request; ``ToolError`` for every failure (Linear's errors explained)."""
        body = await self.http.request("POST", self._path, json_body={"query": document, "variables": variables or {}})
        secrets = [self._key(), authorization(self._key())]
        if not isinstance(body, dict):
            raise ToolError(f"Linear answered with JSON that is not a GraphQL response ({type(body).__name__})")
        if body.get("errors"):
            raise ToolError(scrub(f"Linear: {explain_errors(body['errors'])}", secrets))
        data = body.get("data")
        if not isinstance(data, dict):
            raise ToolError("Linear answered without data or errors: a proxy may be in the way; try again later")
        return data

    async def paginate(
        self,
        document: str,
        variables: dict[str, Any],
        path: tuple[str, ...],
        *,
        limit: int | None = None,
        after: str | None = None,
    ) -> list[dict[str, Any]]:
        """The ``nodes`` of the connection at ``path`` in the answer, following ``pageInfo`` from ``after`` on until
        it ends or ``limit`` nodes are in hand. ``document`` takes ``$first`` and ``$after``."""
        nodes: list[dict[str, Any]] = []
        for _ in range(MAX_PAGES):
            want = self.page_size if limit is None else min(self.page_size, limit - len(nodes))
            connection: Any = await self.execute(document, {**variables, "first": want, "after": after})
            for key in path:
                connection = connection.get(key) if isinstance(connection, dict) else None
            if not isinstance(connection, dict) or not isinstance(connection.get("nodes"), list):
                raise ToolError(f"Linear answered without {'.'.join(path)}.nodes: try again later")
            nodes += connection["nodes"]
            page = connection.get("pageInfo") or {}
            cursor = page.get("endCursor")
            if not page.get("hasNextPage") or not cursor or cursor == after or (limit and len(nodes) >= limit):
                break
            after = cursor
        return nodes if limit is None else nodes[:limit]

    async def aclose(self) -> None:
        await self.http.aclose()
