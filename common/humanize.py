"""Durations for people ("45s", "12m", "1h 05m", "2d 3h"), shared by the CLI and Slack rendering.

Import-light on purpose: the CLI uses it without pulling in Slack or matplotlib.
"""

from __future__ import annotations

import math


def duration(seconds: float | None, *, unknown: str = "—") -> str:
    """A rounded human duration; ``unknown`` for None, negative or non-finite input."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return unknown
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h {(s % 3600) // 60:02d}m"
    return f"{s // 86400}d {(s % 86400) // 3600}h"
