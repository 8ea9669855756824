"""Intervals for proportions (pure): one rate's 95 % Wilson score interval, and Newcombe's square-and-add ("hybrid
score") intervals for the difference of two — method 10 of Newcombe (1998) for two rates on the same items (their
correlation narrows the interval), and the independent-samples form. Both stay inside [-1, 1], are sensible at 0 % and
100 % and for a handful of items, where the normal (Wald) interval collapses to a point. Hand-written: statsmodels has
the unpaired form only, and is not a dependency.

Shared by an eval's pass rates (``labbot.evals.stats``) and the A/B report of the agents' models
(``labbot.agents.feedback.report``), which sit in two layers that may not import each other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Z95", "Interval", "paired_interval", "unpaired_interval", "wilson"]

Z95 = 1.959963984540054  # the standard normal's 97.5th percentile


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    @property
    def width(self) -> float:
        return self.high - self.low

    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def to_json(self) -> list[float]:
        return [round(self.low, 4), round(self.high, 4)]


def wilson(passed: int, n: int, z: float = Z95) -> Interval:
    """The Wilson score interval of a pass rate of ``passed`` out of ``n``; (0, 1) when ``n`` is 0."""
    if n < 0 or not 0 <= passed <= n:
        raise ValueError(f"need 0 <= passed <= n, got passed={passed}, n={n}")
    if n == 0:
        return Interval(0.0, 1.0)
    p = passed / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # at 0 % and 100 % the algebra gives the bound exactly; rounding must not put it a hair past p
    return Interval(min(max(0.0, centre - half), p), max(min(1.0, centre + half), p))


def _newcombe(p1: float, ci1: Interval, p2: float, ci2: Interval, phi: float) -> Interval:
    d = p1 - p2
    lower = math.sqrt(max(0.0, (p1 - ci1.low) ** 2 - 2 * phi * (p1 - ci1.low) * (ci2.high - p2) + (ci2.high - p2) ** 2))
    upper = math.sqrt(max(0.0, (ci1.high - p1) ** 2 - 2 * phi * (ci1.high - p1) * (p2 - ci2.low) + (p2 - ci2.low) ** 2))
    return Interval(max(-1.0, d - lower), min(1.0, d + upper))


def paired_interval(both: int, only_a: int, only_b: int, neither: int, z: float = Z95) -> Interval:
    """Newcombe's method 10 for the difference of two pass rates on the same ``n`` tasks (a 2×2 table)."""
    n = both + only_a + only_b + neither
    if n == 0:
        return Interval(-1.0, 1.0)
    a_pass, b_pass = both + only_a, both + only_b
    ci_a, ci_b = wilson(a_pass, n, z), wilson(b_pass, n, z)
    margins = a_pass * (n - a_pass) * b_pass * (n - b_pass)
    phi = 0.0
    if margins > 0:
        cross = float(both * neither - only_a * only_b)
        # Newcombe's correction: a positive association is shrunk by n/2 (never below zero)
        cross = max(cross - n / 2, 0.0) if cross > 0 else cross
        phi = cross / math.sqrt(margins)
    return _newcombe(a_pass / n, ci_a, b_pass / n, ci_b, phi)


def unpaired_interval(a_passed: int, a_n: int, b_passed: int, b_n: int, z: float = Z95) -> Interval:
    """Newcombe's square-and-add interval for two independent pass rates (what one gets ignoring the pairing)."""
    if a_n == 0 or b_n == 0:
        return Interval(-1.0, 1.0)
    return _newcombe(a_passed / a_n, wilson(a_passed, a_n, z), b_passed / b_n, wilson(b_passed, b_n, z), 0.0)
