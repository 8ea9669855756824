"""Parsing and printing durations such as ``30s``, ``10m``, ``1h30m`` (pure functions)."""

from __future__ import annotations

import re

from labbot.common.errors import BadRequest

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
ACCEPTED = "a number with a unit, e.g. 30s, 10m, 1h30m (units: ms, s, m, h, d)"


def parse_duration(text: str) -> float:
    """Seconds in ``text``. A bare number means seconds. Raises BadRequest naming what is accepted."""
    s = text.strip().lower()
    if not s:
        raise BadRequest(f"empty duration: use {ACCEPTED}")
    try:
        value = float(s)
    except ValueError:
        pos, total = 0, 0.0
        for m in _PART.finditer(s):
            if m.start() != pos:
                break
            total += float(m.group(1)) * _UNITS[m.group(2)]
            pos = m.end()
        if pos != len(s) or pos == 0:
            raise BadRequest(f"bad duration {text!r}: use {ACCEPTED}") from None
        value = total
    if value <= 0 or value != value or value == float("inf"):
        raise BadRequest(f"bad duration {text!r}: it must be positive; use {ACCEPTED}")
    return value


def format_duration(seconds: float) -> str:
    """``95`` → ``1m35s``; the inverse of :func:`parse_duration` for whole seconds."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    rest = round(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts)
