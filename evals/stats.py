"""The statistics of eval results (pure): a pass rate's 95 % interval, the difference of two solvers on one suite
(paired by task, and unpaired for comparison), and when a suite is saturated.

Intervals are Wilson score intervals for one pass rate, and Newcombe's square-and-add ("hybrid score") intervals
for a difference of two: method 10 of Newcombe (1998) for two runs on the same tasks, whose correlation across
tasks (a hard task fails for both solvers) narrows the interval, and the independent-samples form for the unpaired
one. Both stay inside [-1, 1], are sensible at 0 % and 100 % and for a handful of tasks, where the normal (Wald)
interval collapses to a point. Hand-written: statsmodels has the unpaired form only, and is not a dependency.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

Z95 = 1.959963984540054  # the standard normal's 97.5th percentile
SATURATED_AT = 0.9


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


@dataclass(frozen=True)
class Comparison:
    """Run A against run B on the tasks both ran: the difference of pass rates (A − B) with its interval."""

    tasks: int
    a_rate: float
    b_rate: float
    both: int  # tasks both passed
    only_a: int
    only_b: int
    neither: int
    difference: float
    paired: Interval
    unpaired: Interval

    @property
    def verdict(self) -> str:
        if not self.paired.excludes_zero():
            return "no difference the suite can show"
        return "A is better" if self.difference > 0 else "B is better"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(paired=self.paired.to_json(), unpaired=self.unpaired.to_json(), verdict=self.verdict)
        return out


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


def compare(a: Mapping[str, bool], b: Mapping[str, bool]) -> Comparison:
    """Two runs' per-task verdicts (task id → passed) compared on the tasks both have. The caller refuses runs whose
    task sets differ (:func:`task_set_difference`) before asking."""
    shared = sorted(set(a) & set(b))
    both = sum(1 for t in shared if a[t] and b[t])
    only_a = sum(1 for t in shared if a[t] and not b[t])
    only_b = sum(1 for t in shared if b[t] and not a[t])
    neither = len(shared) - both - only_a - only_b
    n = len(shared)
    a_pass, b_pass = both + only_a, both + only_b
    return Comparison(
        tasks=n,
        a_rate=a_pass / n if n else 0.0,
        b_rate=b_pass / n if n else 0.0,
        both=both,
        only_a=only_a,
        only_b=only_b,
        neither=neither,
        difference=(a_pass - b_pass) / n if n else 0.0,
        paired=paired_interval(both, only_a, only_b, neither),
        unpaired=unpaired_interval(a_pass, n, b_pass, n),
    )


def task_set_difference(a: Sequence[str], b: Sequence[str]) -> str | None:
    """None when two runs ran the same tasks; else what differs, in words (for the refusal)."""
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    if not only_a and not only_b:
        return None

    def listed(ids: list[str]) -> str:
        shown = ", ".join(ids[:5])
        return shown + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")

    parts = []
    if only_a:
        parts.append(f"only the first ran {listed(only_a)}")
    if only_b:
        parts.append(f"only the second ran {listed(only_b)}")
    return "; ".join(parts)


def saturated(rates: Mapping[str, float], at: float = SATURATED_AT) -> bool:
    """A suite is saturated when at least one solver ran it and every solver's (latest) pass rate is ≥ ``at``."""
    return bool(rates) and all(rate >= at for rate in rates.values())
