"""An experiment's numbers (pure): a seed's objective from its telemetry, the intermediate values told to the pruner,
a config's score across seeds with its interval, the ranking, and the verdict between the best config and the
runner-up.

- **A seed's objective** is the mean of the metric's last ``window`` reported values (``at_step`` None), or its
  value at the last step at or before ``at_step``. A seed with no such value, or a non-finite one (a divergence),
  has none: its trial fails rather than scoring.
- **Intermediate values** compare like with like: a step is told to the pruner only once every seed of the config
  has reported it, as the mean across seeds; a step where a seed's value is not finite is told as the worst value
  there is (``inf`` when lower is better), so a diverged config is the first a pruner stops.
- **A config's score** is the mean across its seeds with Student's t interval (95 %, n − 1 degrees of freedom);
  one seed has no interval.
- **The verdict** between the best config and the runner-up is Welch's interval on the difference of their means:
  "better" only when it excludes zero; with one seed on either side no interval exists and it says so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from labbot.training.compare import t_quantile

CONFIDENCE = 0.95


def seed_objective(points: Sequence[tuple[int, float]], *, at_step: int | None, window: int) -> float | None:
    """A seed's objective from its (step, value) points, or None when it has none (or it is not finite)."""
    ordered = sorted(points)
    if at_step is not None:
        before = [v for s, v in ordered if s <= at_step]
        if not before:
            return None
        value = before[-1]
        return value if math.isfinite(value) else None
    tail = [v for _, v in ordered[-window:]]
    if not tail or not all(math.isfinite(v) for v in tail):
        return None
    return statistics.fmean(tail)


def aligned_means(seeds: Sequence[Mapping[int, float]], *, after: int | None, goal: str) -> list[tuple[int, float]]:
    """``(step, mean across seeds)`` for each step after ``after`` that every seed has reported, in step order."""
    if not seeds:
        return []
    common = set(seeds[0])
    for points in seeds[1:]:
        common &= set(points)
    worst = math.inf if goal == "min" else -math.inf
    out = []
    for step in sorted(common):
        if after is not None and step <= after:
            continue
        values = [points[step] for points in seeds]
        out.append((step, statistics.fmean(values) if all(math.isfinite(v) for v in values) else worst))
    return out


@dataclass(frozen=True)
class Score:
    """A config's score: the mean of its seeds' objectives and the half-width of its interval (None: one seed)."""

    mean: float
    half_width: float | None
    n: int

    def to_json(self) -> dict[str, Any]:
        low = self.mean - self.half_width if self.half_width is not None else None
        high = self.mean + self.half_width if self.half_width is not None else None
        return {"mean": self.mean, "low": low, "high": high, "n": self.n}

    def words(self) -> str:
        if self.half_width is None:
            return f"{self.mean:.4g} (one seed)"
        return f"{self.mean:.4g} ± {self.half_width:.2g} ({self.n} seeds)"


def score(values: Sequence[float]) -> Score:
    n = len(values)
    mean = statistics.fmean(values)
    if n < 2:
        return Score(mean, None, n)
    sd = statistics.stdev(values)
    return Score(mean, t_quantile(0.5 + CONFIDENCE / 2, n - 1) * sd / math.sqrt(n), n)


@dataclass(frozen=True)
class Verdict:
    better: str | None  # "best" when the best config is shown better than the runner-up, else None
    difference: float
    low: float | None
    high: float | None
    words: str

    def to_json(self) -> dict[str, Any]:
        return {"better": self.better, "difference": self.difference, "low": self.low, "high": self.high,
                "words": self.words}  # fmt: skip


def verdict(best: Sequence[float], runner_up: Sequence[float], *, goal: str) -> Verdict:
    """The best config against the runner-up across seeds (difference = best − runner-up)."""
    diff = statistics.fmean(best) - statistics.fmean(runner_up)
    if len(best) < 2 or len(runner_up) < 2:
        return Verdict(
            None, diff, None, None,
            "no difference shown: with one seed a config has no interval (run with seeds ≥ 2 for a verdict)",
        )  # fmt: skip
    va, vb = statistics.variance(best) / len(best), statistics.variance(runner_up) / len(runner_up)
    se = math.sqrt(va + vb)
    if se == 0:
        better = diff != 0
        low = high = diff
    else:
        df = (va + vb) ** 2 / (va**2 / (len(best) - 1) + vb**2 / (len(runner_up) - 1))
        half = t_quantile(0.5 + CONFIDENCE / 2, df) * se
        low, high = diff - half, diff + half
        better = low > 0 or high < 0
    direction_ok = (diff < 0) if goal == "min" else (diff > 0)
    interval = f"{diff:+.3g} [{low:+.3g}, {high:+.3g}]"
    if better and direction_ok:
        return Verdict("best", diff, low, high, f"better: the best config beats the runner-up by {interval} (95 %)")
    return Verdict(None, diff, low, high, f"no difference shown: best − runner-up = {interval} (95 %) includes 0")


def rank(scores: Mapping[int, Score], *, goal: str) -> list[int]:
    """Trial numbers by score, best first (ties by trial number)."""
    sign = 1.0 if goal == "min" else -1.0
    return sorted(scores, key=lambda n: (sign * scores[n].mean, n))
