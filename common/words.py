"""Counted nouns in the sentences labbot writes: "1 run", "2 runs", "1 CPU", "2.5 CPUs" (pure)."""

from __future__ import annotations


def counted(n: float, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, plural unless ``n`` is exactly 1 (``plural`` when the noun's is not noun + "s")."""
    text = f"{n:g}" if isinstance(n, float) else str(n)
    return f"{text} {noun if n == 1 else (plural or noun + 's')}"
