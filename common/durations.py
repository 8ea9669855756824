"""Reading and writing durations (pure functions): ``parse_duration`` reads ``30s``, ``10m``, ``1h30m``, ``1h 30m``;
``format_duration`` is the one way labbot shows a duration to people (CLI, Slack, pages, messages to agents)."""

from __future__ import annotations

import math
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
            gap = s[pos : m.start()]
            if gap and not (pos > 0 and gap.isspace()):  # only a space between two parts: "1h 30m", not "10 m"
                break
            total += float(m.group(1)) * _UNITS[m.group(2)]
            pos = m.end()
        if pos != len(s) or pos == 0:
            raise BadRequest(f"bad duration {text!r}: use {ACCEPTED}") from None
        value = total
    if value <= 0 or value != value or value == float("inf"):
        raise BadRequest(f"bad duration {text!r}: it must be positive; use {ACCEPTED}")
    return value


def format_duration(seconds: float | None, *, unknown: str = "—") -> str:
    """A duration for people: ``350ms``, ``1.5s``, ``45s``, ``2m 10s``, ``1h 5m``, ``2d 3h``.

    Milliseconds under a second, tenths under ten seconds ("1.5s", "7s"), then whole seconds in at most two units,
    the larger first, the smaller floored and left out when it is zero. Always floored, so a wait or an age is never
    shown longer than it is. None and NaN are ``unknown``, +inf is "forever", zero or less "0s".
    :func:`parse_duration` reads every result back (to the precision shown).
    """
    if seconds is None or math.isnan(seconds):
        return unknown
    if seconds == math.inf:
        return "forever"
    if seconds <= 0:
        return "0s"
    if seconds < 1:
        ms = math.floor(round(seconds * 1000, 6))
        return f"{ms}ms"
    if seconds < 10:
        tenths = math.floor(round(seconds * 10, 6))
        return f"{tenths // 10}s" if tenths % 10 == 0 else f"{tenths / 10:.1f}s"
    total = int(seconds)
    for big, big_size, small, small_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if total >= big_size:
            n, rest = divmod(total, big_size)
            rest //= small_size
            return f"{n}{big} {rest}{small}" if rest else f"{n}{big}"
    return f"{total}s"
