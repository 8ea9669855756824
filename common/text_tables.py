"""A number as a table cell and a plain-text table: what the CLI's, Slack's and the MCP servers' tables are made of
(``labbot.bot.render.tables``, ``labbot.common.experiment_text``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def metric(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value  # NaN / Infinity as the API carries them
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)
