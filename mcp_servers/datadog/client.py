"""Datadog's HTTP API for the ``datadog`` MCP server: which site, which keys, and what an error answer means.

``DatadogApi`` reads its configuration from the environment — ``DD_API_KEY`` and ``DD_APP_KEY`` (sent as the
``DD-API-KEY`` and ``DD-APPLICATION-KEY`` headers), ``DD_SITE`` (one of :data:`SITES`, default ``datadoghq.com``;
``app.datadoghq.eu``, ``https://us3.datadoghq.com/`` and Datadog's short names such as ``US5`` or ``EU1`` are read
as the site they name) and ``DD_API_URL`` (a base URL that replaces ``https://api.{site}``: proxies, tests) — and
sends every request through :class:`~labbot.mcp_servers.vendor_http.VendorApi`, the one httpx seam for vendors (retries,
``ToolError`` messages, secrets scrubbed). A configuration problem (a missing key, an unknown site) never stops the
server: each call answers it as a tool error instead.

A 429 that carries only ``X-RateLimit-Reset`` (seconds until the limit resets, what Datadog sends) is waited that
long, through VendorApi's ``rate_limit`` hook (:func:`rate_limit`); and :meth:`DatadogApi.fetch` returns the exact
bytes of each successful answer beside its JSON (VendorApi's ``request_raw``), so the tools can store Datadog's own
payload as an artifact.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from mcp.server.mcpserver.exceptions import ToolError

from labbot.common.observe import NO_OBSERVER, Observer
from labbot.mcp_servers.vendor_http import RateLimited, VendorApi, VendorError

__all__ = ["DEFAULT_SITE", "SITES", "Answer", "DatadogApi", "SiteError", "base_url_for", "normalise_site", "rate_limit"]

SITES = (
    "datadoghq.com",
    "us3.datadoghq.com",
    "us5.datadoghq.com",
    "ap1.datadoghq.com",
    "ap2.datadoghq.com",
    "uk1.datadoghq.com",
    "datadoghq.eu",
    "ddog-gov.com",
    "us2.ddog-gov.com",
)
"""Every Datadog site: the ``servers[0].variables.site.enum`` of Datadog's v1 OpenAPI document."""
DEFAULT_SITE = "datadoghq.com"
_SHORT_NAMES = {
    "us1": "datadoghq.com",
    "us3": "us3.datadoghq.com",
    "us5": "us5.datadoghq.com",
    "ap1": "ap1.datadoghq.com",
    "ap2": "ap2.datadoghq.com",
    "uk1": "uk1.datadoghq.com",
    "eu": "datadoghq.eu",
    "eu1": "datadoghq.eu",
    "us1-fed": "ddog-gov.com",
    "us2-fed": "us2.ddog-gov.com",
}
_KEYS_HELP = (
    "create them in Datadog (Organization Settings → API Keys / Application Keys) and set both; "
    "DD_SITE picks the region"
)
_PERMISSION = (  # path prefix → the permission Datadog's document names for it, and what it is for
    ("/api/v1/query", "timeseries_query (querying metrics)"),
    ("/api/v1/monitor", "monitors_read (reading monitors)"),
    ("/api/v1/events", "events_read (reading events)"),
    ("/api/v1/downtime", "monitors_downtime (muting monitors)"),
    ("/api/v2/logs", "logs_read_data (searching logs)"),
)
_ERROR_CHARS = 300


class SiteError(ValueError):
    """``DD_SITE`` names no Datadog site; the message lists the valid ones."""


def normalise_site(site: str) -> str:
    """The site ``site`` names: ``https://app.datadoghq.eu/`` → ``datadoghq.eu``, ``US3`` → ``us3.datadoghq.com``."""
    s = site.strip().lower()
    for scheme in ("https://", "http://"):
        s = s.removeprefix(scheme)
    s = s.split("/", 1)[0]
    for prefix in ("app.", "api."):
        s = s.removeprefix(prefix)
    s = _SHORT_NAMES.get(s, s)
    if s not in SITES:
        raise SiteError(f"DD_SITE {site!r} is not a Datadog site: use one of {', '.join(SITES)}")
    return s


def base_url_for(site: str) -> str:
    """Datadog's API root for ``site``: ``https://api.{site}``. Raises :class:`SiteError` for an unknown one."""
    return f"https://api.{normalise_site(site)}"


@dataclass(frozen=True)
class Answer:
    """A successful answer: the parsed JSON, and the exact bytes Datadog sent."""

    doc: Any
    raw: bytes


def rate_limit(response: httpx.Response) -> RateLimited | None:
    """VendorApi's ``rate_limit`` hook for Datadog: a 429 waits ``X-RateLimit-Reset`` seconds (Datadog's "seconds
    until the limit resets") when it has no ``Retry-After``."""
    if response.status_code != 429:
        return None
    try:
        return RateLimited(float(response.headers["x-ratelimit-reset"]))
    except (KeyError, ValueError):
        return RateLimited()


def _messages(body: Any) -> list[str]:
    """Datadog's ``{"errors": [...]}``: strings in v1, ``{"title", "detail"}`` objects in v2."""
    errors = body.get("errors") if isinstance(body, dict) else None
    if not isinstance(errors, list):
        return []
    out = []
    for e in errors:
        if isinstance(e, dict):
            e = e.get("detail") or e.get("title") or ""
        if str(e).strip():
            out.append(str(e).strip())
    return out


class DatadogApi:
    """Datadog's API; see the module docstring. Every argument left out comes from ``env``.

    Args:
        api_key, app_key: the keys (default: DD_API_KEY, DD_APP_KEY).
        site: the Datadog site (default: DD_SITE, else datadoghq.com).
        url: the API root, replacing the site's (default: DD_API_URL).
        transport: the httpx transport (tests pass ``httpx.ASGITransport(fake.app)``); None is the network.
        sleep, rng: the retry waits and their jitter (tests record the waits and take the jitter off).
        clock: the time now, in unix seconds (what windows end at by default).
    """

    def __init__(
        self,
        api_key: str | None = None,
        app_key: str | None = None,
        *,
        site: str | None = None,
        url: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        rng: random.Random | None = None,
        observer: Observer = NO_OBSERVER,
        clock: Callable[[], float] = time.time,
        env: Mapping[str, str] = os.environ,
    ) -> None:
        self.api_key = (api_key if api_key is not None else env.get("DD_API_KEY", "")).strip()
        self.app_key = (app_key if app_key is not None else env.get("DD_APP_KEY", "")).strip()
        self.clock = clock
        raw_site = site or env.get("DD_SITE", "").strip() or DEFAULT_SITE
        override = (url or env.get("DD_API_URL", "")).strip().rstrip("/")
        self.problem: str | None = None
        try:
            self.site = normalise_site(raw_site)
        except SiteError as e:
            self.site = raw_site
            self.problem = None if override else str(e)  # an explicit URL needs no site
        self.url_override = override or None
        self.base_url = override or (f"https://api.{self.site}" if self.problem is None else "https://api.invalid")
        self.http = VendorApi(
            "Datadog",
            self.base_url,
            self._headers,
            explain=self._explain,
            rate_limit=rate_limit,
            transport=transport,
            timeout=timeout,
            max_retries=max_retries,
            backoff_s=backoff_s,
            sleep=sleep,
            rng=rng,
            observer=observer,
        )

    def _headers(self) -> dict[str, str]:
        if self.problem:
            raise ToolError(self.problem)
        missing = [name for name, key in (("DD_API_KEY", self.api_key), ("DD_APP_KEY", self.app_key)) if not key]
        if missing:
            raise ToolError(f"{' and '.join(missing)} {'are' if len(missing) > 1 else 'is'} not set: {_KEYS_HELP}")
        return {"DD-API-KEY": self.api_key, "DD-APPLICATION-KEY": self.app_key}

    def _explain(self, err: VendorError) -> str | None:
        said = "; ".join(_messages(err.body))[:_ERROR_CHARS]
        if err.status in (401, 403):
            what = next((p for prefix, p in _PERMISSION if err.path.startswith(prefix)), "this request")
            where = (
                f"DD_API_URL {self.url_override} does not reach your account's site"
                if self.url_override
                else f"DD_SITE {self.site} is not your account's site"
            )
            return (
                f"DD_API_KEY or DD_APP_KEY is invalid, or the application key lacks the scope for {what} (or {where})"
            )
        if err.status == 404 and err.path.startswith("/api/v1/monitor/"):
            monitor_id = err.path.removeprefix("/api/v1/monitor/").split("/", 1)[0]
            return f"no such monitor {monitor_id} (list_monitors shows the ids there are)"
        if err.status == 404:
            return f"{err.method} {err.path} found nothing{': ' + said if said else ''}"
        if err.status == 400:
            return f"the request was refused (400): {said or err.text[:_ERROR_CHARS] or 'no reason given'}"
        return None  # 429, 5xx and the rest: VendorApi's messages say it well

    async def fetch(
        self, method: str, path: str, *, params: Mapping[str, Any] | None = None, json_body: Any = None
    ) -> Answer:
        """``method path`` through VendorApi: the parsed answer and its exact bytes; ``ToolError`` on failure."""
        doc, raw = await self.http.request_raw(method, path, params=params, json_body=json_body)
        return Answer(doc, raw)

    async def aclose(self) -> None:
        await self.http.aclose()
