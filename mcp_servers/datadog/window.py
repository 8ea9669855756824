"""The time windows the datadog tools take — ``window="1h"`` ending at ``end`` (ISO-8601 or unix seconds, default
now) — turned into the unix seconds Datadog wants, with a clear message for input a model got wrong. Pure
functions; durations are parsed by :func:`labbot.common.durations.parse_duration` like everywhere else in labbot.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from mcp.server.mcpserver.exceptions import ToolError

from labbot.common.durations import ACCEPTED, parse_duration
from labbot.common.errors import BadRequest

__all__ = ["MAX_WINDOW_S", "Window", "iso", "parse_end", "parse_window", "window"]

MAX_WINDOW_S = 400 * 86400.0  # past Datadog's retention for every product: a typo (1000d) rather than a wish
_END_FORMS = "ISO-8601 such as 2026-01-05T10:00:00Z, or unix seconds such as 1767607200"


def parse_window(text: str, *, name: str = "window") -> float:
    """Seconds in a duration such as ``15m``, ``1h``, ``2d``; ``ToolError`` naming what is accepted."""
    try:
        seconds = parse_duration(str(text))
    except BadRequest as e:
        raise ToolError(f"{name}: {e.message}") from None
    if seconds > MAX_WINDOW_S:
        raise ToolError(f"{name} {text!r} is longer than {MAX_WINDOW_S / 86400:.0f} days: use {ACCEPTED}")
    return seconds


def parse_end(text: str | None, now: float) -> float:
    """Unix seconds of ``end``: None, "" or "now" is ``now``; ISO-8601 without a zone is UTC."""
    if text is None or not str(text).strip() or str(text).strip().lower() == "now":
        return now
    s = str(text).strip()
    try:
        value = float(s)
    except ValueError:
        try:
            parsed = datetime.fromisoformat(s)
        except ValueError:
            raise ToolError(f"end {text!r} is not a time: use {_END_FORMS}") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.timestamp()
    if not math.isfinite(value) or value <= 0:
        raise ToolError(f"end {text!r} is not a time: use {_END_FORMS}")
    return value / 1000 if value > 1e11 else value  # milliseconds, as Datadog's own UI and answers give them


class Window:
    """``[start, end]`` in unix seconds, and how to say it."""

    def __init__(self, start: float, end: float, text: str) -> None:
        self.start, self.end, self.text = start, end, text

    def __str__(self) -> str:
        return f"{iso(self.start)} → {iso(self.end)} ({self.text})"


def window(text: str, end: str | None, now: float) -> Window:
    """The window of length ``text`` ending at ``end`` (default ``now``)."""
    seconds = parse_window(text)
    stop = parse_end(end, now)
    return Window(stop - seconds, stop, str(text).strip())


def iso(ts: float) -> str:
    """Unix seconds as ``2026-01-05T10:00:00Z`` (UTC, whole seconds)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
