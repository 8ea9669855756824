"""Notion ids as a model writes them — dashed or undashed 32-hex ids, or a Notion URL — checked before any request.

A model-written id goes into a URL path, so anything that is not an id is refused here with a message that says
what would be right; what passes is the canonical dashed form (``1f2e3d4c-...``), and the server still quotes it
as a path segment.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, quote, urlsplit

from mcp.server.mcpserver.exceptions import ToolError

__all__ = ["dashed", "parse_id", "segment"]

_HEX32 = re.compile(r"[0-9a-f]{32}")
_DASHED = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TRAILING_ID = re.compile(r"(?:^|[^0-9a-f])([0-9a-f]{32}|[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12})$")
_NOTION_HOSTS = ("notion.so", "notion.site", "notion.com")


def dashed(hex32: str) -> str:
    """``hex32`` (32 hex digits) as Notion writes ids: 8-4-4-4-12."""
    h = hex32.replace("-", "").lower()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def parse_id(value: str, what: str = "page") -> str:
    """The dashed id in ``value``: an id (dashed or not) or a Notion URL (``https://www.notion.so/Title-<id>``, a
    ``?p=<id>`` peek link); ``ToolError`` for anything else, before any request is made."""
    text = value.strip()
    low = text.lower()
    if _HEX32.fullmatch(low) or _DASHED.fullmatch(low):
        return dashed(low)
    url = urlsplit(text if "://" in text else f"https://{text}")
    host = (url.hostname or "").lower()
    if any(host == h or host.endswith("." + h) for h in _NOTION_HOSTS):
        peek = parse_qs(url.query).get("p", [""])[0].lower()
        if _HEX32.fullmatch(peek):
            return dashed(peek)
        m = _TRAILING_ID.search(url.path.rstrip("/").rsplit("/", 1)[-1].lower())
        if m:
            return dashed(m.group(1))
    shown = text if len(text) <= 80 else text[:77] + "..."
    raise ToolError(
        f"{shown!r} is not a Notion {what} id: give the 32-hex id (dashed or not, e.g. "
        "1f2e3d4c5b6a47988796a5b4c3d2e1f0) or the Notion URL of the " + what
    )


def segment(notion_id: str) -> str:
    """``notion_id`` as one URL path segment (ids are checked already; quoting keeps it so whatever changes)."""
    return quote(notion_id, safe="")
