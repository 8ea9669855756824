"""Notion's public API (``https://api.notion.com/v1``, version 2025-09-03) over the shared httpx seam.

:class:`NotionApi` holds the configuration — ``NOTION_TOKEN`` (sent as ``Authorization: Bearer``), ``NOTION_API_URL``
(the base URL; proxies and tests) and the pinned ``Notion-Version`` — and hands every request to
:class:`~labbot.mcp_servers.vendor_http.VendorApi`, which retries 429/5xx/timeouts and turns failures into
``ToolError``. :func:`explain` reads Notion's error body (``code``, ``message``) into what a model can act on.
:meth:`NotionApi. paginate` follows ``next_cursor``. The tools (server.py) and the block tree walker (blocks.py) sit on
top.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from mcp.server.mcpserver.exceptions import ToolError

from labbot.common.observe import NO_OBSERVER, Observer
from labbot.mcp_servers.vendor_http import VendorApi, VendorError

__all__ = ["DEFAULT_URL", "NOTION_VERSION", "TOKEN_MISSING", "NotionApi", "explain"]

DEFAULT_URL = "https://api.notion.com"
NOTION_VERSION = "2025-09-03"  # data sources replace databases from this version on
PAGE_SIZE = 100  # Notion's maximum page_size
INTEGRATIONS = "https://www.notion.so/profile/integrations"
TOKEN_MISSING = (
    f"NOTION_TOKEN is not set: create an internal integration at {INTEGRATIONS}, share the pages it should see "
    "with it (in Notion: ••• → Connections → add the integration), and set NOTION_TOKEN to its secret"
)
_THING = [
    (re.compile(r"^/v1/pages/([^/]+)"), "page {}"),
    (re.compile(r"^/v1/blocks/([^/]+)"), "block or page {}"),
    (re.compile(r"^/v1/data_sources/([^/]+)"), "data source {}"),
    (re.compile(r"^/v1/databases/([^/]+)"), "database {}"),
]


def _thing(path: str) -> str:
    for pattern, name in _THING:
        m = pattern.match(path)
        if m:
            return name.format(m.group(1))
    return "the page"


def explain(err: VendorError) -> str | None:
    """Notion's error answer in words a model can act on; None for 429/5xx (VendorApi's own words, after retries)."""
    body = err.body if isinstance(err.body, dict) else {}
    code, message = str(body.get("code") or ""), str(body.get("message") or "").strip()
    said = f" (Notion said: {message[:300]})" if message else ""
    if err.status == 429 or err.status >= 500:
        return None
    if err.status == 401 or code == "unauthorized":
        return (
            f"NOTION_TOKEN is invalid or was revoked (401 unauthorized): copy the integration's secret again from "
            f"{INTEGRATIONS} and set NOTION_TOKEN"
        )
    if err.status == 404 or code == "object_not_found":
        thing = _thing(err.path)
        hint = (
            " (a database's own id is not a data source id: search with kind='data_source' to find it)"
            if thing.startswith("data source")
            else ""
        )
        return (
            f"{thing} was not found, or is not shared with the integration: open it in Notion, ••• → Connections, "
            f"and add the integration{hint}"
        )
    if err.status == 403 or code == "restricted_resource":
        return (
            f"the integration lacks the capability for {err.method} {err.path} (403 restricted_resource){said}: in "
            f"{INTEGRATIONS} give it the capability it needs (read content, insert or update content, comments)"
        )
    if err.status == 409 or code == "conflict_error":
        return f"the change conflicted with another edit of the same content (409 conflict){said}: try again"
    if err.status == 400 or code == "validation_error":
        return f"Notion refused {err.method} {err.path} ({code or err.status}): {message[:500] or err.text[:300]}"
    return None


class NotionApi:
    """Notion's API for the tools; see the module docstring.

    Args:
        token: the integration secret (default: ``NOTION_TOKEN``, read on each call so a missing one fails the
            call, not the server).
        base_url: the API root (default: ``NOTION_API_URL``, else https://api.notion.com).
        transport, timeout, max_retries, backoff_s, sleep, rng: passed to ``VendorApi`` (tests swap the transport,
            the retry sleep and its jitter).
    """

    def __init__(
        self,
        token: str | None = None,
        *,
        base_url: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        rng: random.Random | None = None,
        observer: Observer = NO_OBSERVER,
    ) -> None:
        self._token = token
        self.base_url = (base_url or os.environ.get("NOTION_API_URL") or DEFAULT_URL).rstrip("/")
        self.http = VendorApi(
            "Notion",
            self.base_url,
            self._headers,
            explain=explain,
            transport=transport,
            timeout=timeout,
            max_retries=max_retries,
            backoff_s=backoff_s,
            sleep=sleep,
            rng=rng,
            observer=observer,
        )

    def _headers(self) -> dict[str, str]:
        token = (self._token if self._token is not None else os.environ.get("NOTION_TOKEN", "")).strip()
        if not token:
            raise ToolError(TOKEN_MISSING)
        return {"Authorization": f"Bearer {token}", "Notion-Version": NOTION_VERSION}

    async def request(
        self, method: str, path: str, *, json_body: Any = None, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """One call; the answer must be a JSON object (Notion's always are)."""
        doc = await self.http.request(method, path, json_body=json_body, params=params)
        if not isinstance(doc, dict):
            raise ToolError(f"Notion ({method} {path}) answered with {type(doc).__name__}, not an object: try again")
        return doc

    async def paginate(
        self, method: str, path: str, *, body: dict[str, Any] | None = None, limit: int | None = None
    ) -> tuple[list[dict[str, Any]], bool]:
        """The ``results`` of a list endpoint, following ``next_cursor``: (up to ``limit`` results, whether more
        were left). GET endpoints take the cursor as a query parameter, POST ones in the body."""
        results: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            size = PAGE_SIZE if limit is None else max(1, min(PAGE_SIZE, limit - len(results)))
            page: dict[str, Any] = {"page_size": size, **({"start_cursor": cursor} if cursor else {})}
            if method == "GET":
                doc = await self.request(method, path, params=page)
            else:
                doc = await self.request(method, path, json_body={**(body or {}), **page})
            batch = doc.get("results")
            if not isinstance(batch, list):
                raise ToolError(f"Notion ({method} {path}) answered without a list of results: try again")
            results.extend(r for r in batch if isinstance(r, dict))
            cursor = doc.get("next_cursor") if doc.get("has_more") else None
            if limit is not None and len(results) >= limit:
                return results[:limit], bool(cursor) or len(results) > limit
            if not cursor:
                return results, False

    async def aclose(self) -> None:
        await self.http.aclose()
