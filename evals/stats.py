"""The statistics of eval results (pure): a pass rate's 95 % interval, the difference of two solvers on one suite
(paired by task, and unpaired for comparison), and when a suite is saturated.

Intervals are Wilson score intervals for one pass rate, and Newcombe's square-and-add ("hybrid score") intervals
for a difference of two: method 10 of Newcombe (1998) for two runs on the same tasks, whose correlation across
tasks (a hard task fails for both solvers) narrows the interval, and the independent-samples form for the unpaired
one. Both stay inside [-1, 1], are sensible at 0 % and 100 % and for a handful of tasks, where the normal (Wald)
interval collapses to a point (``labbot.common.proportions``, shared with the A/B report of the agents' models).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from labbot.common.proportions import Z95, Interval, paired_interval, unpaired_interval, wilson

__all__ = [
    "SATURATED_AT",
    "Z95",
    "Comparison",
    "Interval",
    "compare",
    "paired_interval",
    "saturated",
    "task_set_difference",
    "unpaired_interval",
    "wilson",
]

SATURATED_AT = 0.9


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
