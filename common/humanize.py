"""Sizes for people: the one byte formatter (durations are ``labbot.common.durations.format_duration``).

Import-light on purpose: the CLI uses it without pulling in Slack or matplotlib.
"""

from __future__ import annotations

__all__ = ["format_bytes"]

_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(n: float) -> str:
    """``14`` → ``14 B``, ``65536`` → ``64 KiB``, ``1887436`` → ``1.8 MiB``: binary units (the sizes and limits
    labbot counts are powers of two), one decimal, dropped when it is zero. Negative counts are shown as 0."""
    value = max(float(n), 0.0)
    if value < 1024:
        return f"{int(value)} B"
    for unit in _UNITS:
        value /= 1024
        shown = round(value, 1)
        if shown < 1024 or unit == _UNITS[-1]:
            return f"{shown:.1f}".removesuffix(".0") + f" {unit}"
    raise AssertionError("unreachable: the last unit returns")
