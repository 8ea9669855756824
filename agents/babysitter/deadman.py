"""Dead-man switch: labbot's own heartbeat to an outside check, so that labbot being down is itself noticed.

Where it sits: labbot pages humans about training runs, but nothing inside labbot can page about labbot itself
crashing, hanging or losing its network. An external checker can: a healthchecks.io-style URL that expects a ping
every so often and alerts (often through PagerDuty) when the pings stop. The control plane calls `DeadmanSwitch.ping`
every ``every`` seconds while it is healthy; silence is the signal. Off unless labbot.toml has a ``[deadman]``
table with a ``url``::

    [deadman]
    url = "https://hc-ping.com/your-uuid"   # the ping URL; it usually embeds a secret token
    every = "1m"                            # how often to ping (a duration, as elsewhere in labbot.toml)
    method = "GET"                          # GET, POST or HEAD

The ping URL is a credential (anyone holding it can keep a dead labbot looking alive): logs and reprs show only its
``scheme://host``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from labbot.common.durations import parse_duration
from labbot.common.errors import BadRequest

__all__ = ["DeadmanSettings", "DeadmanSwitch", "redacted_url"]

log = logging.getLogger(__name__)

METHODS = ("GET", "POST", "HEAD")
DEFAULT_EVERY = "1m"
KEYS = ("url", "every", "method")


def redacted_url(url: str) -> str:
    """``scheme://host[:port]`` of ``url``: what may be shown of a URL whose path or query holds a secret."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<unparsable url>"
    return f"{parts.scheme or '?'}://{host}{port}"


@dataclass(frozen=True)
class DeadmanSettings:
    """The ``[deadman]`` table of labbot.toml; see the module docstring."""

    url: str = field(repr=False)
    every_s: float = 60.0
    method: str = "GET"

    def __repr__(self) -> str:
        return f"DeadmanSettings(url={redacted_url(self.url)!r}, every_s={self.every_s:g}, method={self.method!r})"

    @classmethod
    def from_config(cls, table: Mapping[str, Any] | None) -> DeadmanSettings | None:
        """Settings from the ``[deadman]`` table, or None (off) when it is absent or has no ``url``.

        BadRequest says what is wrong and what would be right; it never quotes the URL beyond scheme://host.
        """
        if table is None:
            return None
        if not isinstance(table, Mapping):
            raise BadRequest('labbot.toml: [deadman] must be a table, e.g. [deadman] url = "https://hc-ping.com/..."')
        unknown = sorted(set(table) - set(KEYS))
        if unknown:
            raise BadRequest(
                f"labbot.toml: [deadman] has unknown key(s) {', '.join(unknown)}; accepted: {', '.join(KEYS)}"
            )
        url = table.get("url")
        if url is None or url == "":
            return None
        if not isinstance(url, str):
            raise BadRequest('labbot.toml: [deadman] url must be a string, e.g. url = "https://hc-ping.com/<uuid>"')
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError for a bad port
        except ValueError:
            raise BadRequest("labbot.toml: [deadman] url is not a valid URL; use http(s)://host/path") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BadRequest(
                f"labbot.toml: [deadman] url must be an http(s) URL with a host, got {redacted_url(url)!r}; "
                'e.g. url = "https://hc-ping.com/<uuid>"'
            )
        every = table.get("every", DEFAULT_EVERY)
        if isinstance(every, bool) or not isinstance(every, (str, int, float)):
            raise BadRequest(f'labbot.toml: [deadman] every must be a duration such as "1m", got {every!r}')
        try:
            every_s = parse_duration(str(every))
        except BadRequest as e:
            raise BadRequest(f"labbot.toml: [deadman] every: {e.message}") from None
        method = table.get("method", "GET")
        if not isinstance(method, str) or method.upper() not in METHODS:
            raise BadRequest(f"labbot.toml: [deadman] method must be one of {', '.join(METHODS)}, got {method!r}")
        return cls(url=url, every_s=every_s, method=method.upper())


class DeadmanSwitch:
    """Pings one check URL; see the module docstring.

    `ping` never raises. The first failure of an outage is logged as a warning and the rest stay quiet until a ping
    succeeds again, which is logged once at info. ``transport`` is the test seam.
    """

    def __init__(
        self,
        url: str,
        *,
        method: str = "GET",
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if method.upper() not in METHODS:
            raise ValueError(f"dead-man switch method must be one of {', '.join(METHODS)}, got {method!r}")
        self._url = url
        self.method = method.upper()
        self.where = redacted_url(url)
        self.failing = False
        self._http = httpx.AsyncClient(timeout=timeout, transport=transport, headers={"User-Agent": "labbot deadman"})

    @classmethod
    def from_settings(cls, settings: DeadmanSettings, **kwargs: Any) -> DeadmanSwitch:
        return cls(settings.url, method=settings.method, **kwargs)

    def __repr__(self) -> str:
        return f"DeadmanSwitch({self.where!r}, method={self.method!r})"

    async def ping(self) -> bool:
        """True when the check answered 2xx; never raises."""
        try:
            response = await self._http.request(self.method, self._url)
        except httpx.HTTPError as e:
            # httpx's exception texts can quote the URL; only the exception's kind is safe to log.
            return self._failed(f"{type(e).__name__} (no answer)")
        except Exception as e:  # a bad URL must not take the heartbeat loop down with it
            return self._failed(f"{type(e).__name__}")
        if not response.is_success:
            return self._failed(f"HTTP {response.status_code}")
        if self.failing:
            log.info("dead-man switch: %s answers again; pings resumed", self.where)
        self.failing = False
        return True

    def _failed(self, why: str) -> bool:
        if not self.failing:
            log.warning(
                "dead-man switch: ping to %s failed (%s); the outside check alerts if this lasts", self.where, why
            )
        self.failing = True
        return False

    async def aclose(self) -> None:
        await self._http.aclose()
