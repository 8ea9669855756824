"""Two training runs compared on one metric (pure): the mean over each run's final window, the difference of the
two means, and a block-bootstrap interval on that difference. No I/O, no clock; seeded, so the same points give the
same answer.

- **The final window** of a run is its last ``WINDOW_FRACTION`` (10 %) of reported steps, but at least
  ``WINDOW_MIN`` (20) points when the run has them (``window=N``: the last N points instead). One point per step
  (where a restarted attempt re-ran steps, its values win: the caller passes what ``TelemetryStore`` keeps).
  Non-finite values (NaN, ±inf: a divergence) in the window are left out of the mean and counted; a window with
  fewer than ``MIN_POINTS`` finite values is refused (``BadRequest``), never compared.
- **The interval.** Consecutive steps of a training curve are autocorrelated, so resampling steps independently
  (the i.i.d. bootstrap) treats 200 correlated steps as 200 independent ones and gives an interval far too narrow:
  on AR(1) noise with φ = 0.9 it claims a difference between two runs of the same process most of the time. Each
  run's window is resampled instead with the **circular block bootstrap** (``RESAMPLES``, 2,000, draws of blocks of
  consecutive points, wrapped around the window's end so every point is equally likely), its block length chosen
  from the window's own autocorrelation by the rule of Politis & White (2004, with the correction of Patton, Politis
  & White 2009), at least 1 and at most a third of the window. The runs are independent, so each is resampled on
  its own; the bootstrap variance of each mean gets back the ``G/(b·n)`` a block bootstrap is known to miss
  (Künsch 1989, ``G`` from the same flat-top estimate), and the interval is the difference ± Student's t quantile
  × the standard error, its degrees of freedom Welch–Satterthwaite's over the windows' numbers of blocks (a window
  of few blocks knows little about its own variance). On a short, strongly correlated window (50 steps of AR(1)
  noise with φ = 0.9: about 3 independent points' worth) the bootstrap cannot see correlation longer than its
  blocks and covered only ~78 %; so each run's variance is never taken below what its lag-1 autocorrelation alone
  implies (:func:`ar1_variance`: Kendall's bias correction, the exact AR(1) variance of a mean), and the degrees of
  freedom never above its effective number of points. ``benchmarks/compare_runs.py`` measures the coverage
  against an i.i.d. percentile bootstrap's; a window worth fewer than ``ROUGH_BELOW`` independent points gets a
  note that its interval is rough.
- **The verdict** names a better run only when the interval excludes zero, and only when it is known which way is
  better: by the metric's name (``loss``, ``perplexity``, ``error``, ``*_time*``… lower; ``reward``, ``accuracy``,
  ``pass_rate``… higher) or the caller's ``better`` override; the rule used is part of the result.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from labbot.common.errors import BadRequest

WINDOW_FRACTION = 0.10
WINDOW_MIN = 20
MIN_POINTS = 10  # finite values a window needs before its mean is compared
ROUGH_BELOW = 10  # a window worth fewer independent points than this gets a note that its interval is rough
RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 20240615

Better = Literal["lower", "higher"]

# by name: a metric matching one list and not the other (one matching both, or neither, has no direction)
_LOWER = re.compile(
    r"(loss|perplexity|ppl|error|err|regret|latency|_time|time_|^time$|wall|nll|mse|mae|rmse|cost|wer|cer)", re.I
)
_HIGHER = re.compile(
    r"(reward|accuracy|acc|pass_rate|pass@|score|return|f1|bleu|rouge|auc|precision|recall|win_rate|success"
    r"|tokens_per_s|throughput|samples_per_s|mfu)",
    re.I,
)


@dataclass(frozen=True)
class Direction:
    better: Better | None
    rule: str  # in words: how ``better`` was decided


def direction(metric: str, override: str | None = None) -> Direction:
    """Which way ``metric`` is better: ``override`` (``lower``/``higher``) when given, else by its name; unknown
    names have no direction (the verdict then says which is higher, not which is better)."""
    if override is not None:
        if override not in ("lower", "higher"):
            raise BadRequest(f"better={override!r} must be lower or higher: which way {metric} is better")
        return Direction(override, f"{override} is better (as asked)")  # type: ignore[arg-type]
    lower, higher = bool(_LOWER.search(metric)), bool(_HIGHER.search(metric))
    if higher and not lower:
        return Direction("higher", f"higher is better (by its name, {metric}; --better lower to say otherwise)")
    if lower and not higher:
        return Direction("lower", f"lower is better (by its name, {metric}; --better higher to say otherwise)")
    # neither, or both (`reward_loss`): guessing could name the wrong run better
    return Direction(None, f"not known which way {metric} is better: say --better lower|higher for a verdict")


@dataclass(frozen=True)
class Window:
    """One run's final window: the steps it spans, its finite values' mean, what was left out."""

    first_step: int
    last_step: int
    points: int  # finite values used
    left_out: int  # non-finite values in the window, not used
    mean: float
    block: int  # the block length its resamples used

    def to_json(self) -> dict[str, Any]:
        return {
            "steps": [self.first_step, self.last_step],
            "points": self.points,
            "left_out": self.left_out,
            "mean": self.mean,
            "block": self.block,
        }


@dataclass(frozen=True)
class Comparison:
    """Run A against run B on ``metric``: ``difference`` is A's window mean minus B's, with its interval."""

    metric: str
    a: Window
    b: Window
    difference: float
    interval: tuple[float, float]
    confidence: float
    resamples: int
    direction: Direction
    se: float = 0.0  # the difference's standard error
    df: float = math.inf  # the degrees of freedom of its t quantile
    notes: tuple[str, ...] = ()

    def excludes_zero(self) -> bool:
        return self.interval[0] > 0 or self.interval[1] < 0

    @property
    def winner(self) -> Literal["a", "b"] | None:
        """The better run, only when the interval excludes zero and the direction is known."""
        if not self.excludes_zero() or self.direction.better is None:
            return None
        a_higher = self.difference > 0
        return "a" if a_higher == (self.direction.better == "higher") else "b"

    @property
    def verdict(self) -> str:
        pct = f"{self.confidence:.0%}"
        if not self.excludes_zero():
            return f"no difference shown at {pct}"
        if self.direction.better is None:
            return f"{'A' if self.difference > 0 else 'B'}'s {self.metric} is higher (which is better is not known)"
        return f"{'A' if self.winner == 'a' else 'B'} is better"

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "window": {"a": self.a.to_json(), "b": self.b.to_json()},
            "difference": self.difference,
            "interval": [self.interval[0], self.interval[1]],
            "confidence": self.confidence,
            "se": self.se,
            "df": round(self.df, 1),
            "method": (
                f"circular block bootstrap ({self.resamples:,} resamples a run; blocks of {self.a.block} and "
                f"{self.b.block} steps, Politis–White) standard error, Student t on the blocks' degrees of freedom"
            ),
            "better": self.direction.better,
            "rule": self.direction.rule,
            "winner": self.winner,
            "verdict": self.verdict,
            "notes": list(self.notes),
        }


def final_window(points: Sequence[tuple[int, float]], window: int | None = None) -> list[tuple[int, float]]:
    """The last ``window`` points (by step), or by default the last 10 % of them, at least 20 when there are."""
    ordered = sorted(points)
    n = len(ordered)
    if window is None:
        size = max(math.ceil(WINDOW_FRACTION * n), min(WINDOW_MIN, n))
    else:
        if window < 1:
            raise BadRequest(f"window={window} must be a whole number of points, at least {MIN_POINTS}")
        size = min(window, n)
    return ordered[n - size :] if size else []


def block_length(values: np.ndarray) -> int:
    """The circular block bootstrap's block length for the mean of ``values``: Politis & White (2004) with Patton,
    Politis & White's (2009) correction; 1 for values with no autocorrelation, at most a third of the window."""
    return _block_and_bias(values)[0]


def _block_and_bias(values: np.ndarray) -> tuple[int, float]:
    """``(block length, G)``: ``G = Σ λ(k/M)·|k|·R(k)``, the flat-top estimate of the sum that makes a block
    bootstrap with blocks of ``b`` underestimate ``n·Var(mean)`` by about ``G/b`` (Künsch 1989)."""
    n = len(values)
    b_max = max(1, min(math.ceil(3 * math.sqrt(n)), n // 3))
    if n < 8:
        return 1, 0.0
    x = values - values.mean()
    if float(x @ x) <= 0:
        return 1, 0.0
    max_lag = min(n - 1, b_max + 10)
    acov = np.array([float(x[: n - k] @ x[k:]) / n for k in range(max_lag + 1)])
    rho = acov / acov[0]
    # the first lag after which K_N autocorrelations in a row are insignificant (c = 2)
    k_n = max(5, math.ceil(math.sqrt(math.log10(n))))
    bound = 2.0 * math.sqrt(math.log10(n) / n)
    m_hat = max_lag
    for m in range(1, max_lag - k_n + 1):
        if np.all(np.abs(rho[m : m + k_n]) < bound):
            m_hat = m - 1
            break
    m = max(1, min(2 * max(m_hat, 1), max_lag))
    lags = np.arange(-m, m + 1)
    t = np.abs(lags) / m
    flat_top = np.where(t <= 0.5, 1.0, np.where(t <= 1.0, 2.0 * (1.0 - t), 0.0))
    r = acov[np.abs(lags)]
    g = float(np.sum(flat_top * np.abs(lags) * r))
    d_cb = (4.0 / 3.0) * float(np.sum(flat_top * r)) ** 2
    if g <= 0 or d_cb <= 0:
        return 1, max(g, 0.0)
    b = (2.0 * g * g / d_cb) ** (1.0 / 3.0) * n ** (1.0 / 3.0)
    return int(max(1, min(round(b), b_max))), g


def ar1_variance(values: np.ndarray) -> tuple[float, float]:
    """``(variance of the mean, effective number of points)`` of ``values`` read as an AR(1) process: the lag-1
    autocorrelation with Kendall's small-sample bias correction (``ρ̂ + (1 + 3ρ̂)/n``, capped at 0.98), the
    sample variance corrected for the correlation it misses, and the exact variance of an n-point AR(1) mean. A
    floor under the block bootstrap's variance: on a short, strongly correlated window the bootstrap cannot see
    correlation longer than its blocks, and its interval is too narrow (``benchmarks/compare_runs.py``)."""
    n = len(values)
    x = values - values.mean()
    g0 = float(x @ x) / n
    if n < 3 or g0 <= 0:
        return 0.0, float(n)
    r1 = float(x[:-1] @ x[1:]) / n / g0
    r1 = min(0.98, r1 + (1 + 3 * r1) / n)
    if r1 <= 0:
        return g0 / (n - 1), float(n)
    # n·Var(mean)/γ0 for an AR(1) of n points: its "autocorrelation time" over the window
    tau = (1 + r1) / (1 - r1) - 2 * r1 * (1 - r1**n) / (n * (1 - r1) ** 2)
    gamma0 = g0 / max(1.0 - tau / n, 1.0 / n)  # E[sample variance] = γ0·(1 − τ/n)
    return gamma0 * tau / n, n / tau


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile (``p`` > 0.5): exact for df ≤ 2, else the Cornish–Fisher expansion of Abramowitz &
    Stegun 26.7.5 (within 0.004 of the exact value at df 3, 1e-4 from df 10 on); scipy is not a dependency."""
    z = _normal_quantile(p)
    if df < 1.5:
        return math.tan(math.pi * (p - 0.5))
    if df < 2.5:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    v = df
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * v**4)
    )


def _normal_quantile(p: float) -> float:
    """The standard normal's quantile by bisection on erf (to 1e-12: fast enough for one call per comparison)."""
    lo, hi = -10.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def resampled_means(values: np.ndarray, block: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``resamples`` circular-block-bootstrap means of ``values`` (vectorised: block sums from prefix sums)."""
    n = len(values)
    block = max(1, min(block, n))
    wrapped = np.concatenate([values, values[: block - 1]]) if block > 1 else values
    prefix = np.concatenate([[0.0], np.cumsum(wrapped)])
    full, rest = divmod(n, block)
    starts = rng.integers(0, n, size=(resamples, full + (1 if rest else 0)))
    sums = (prefix[starts[:, :full] + block] - prefix[starts[:, :full]]).sum(axis=1)
    if rest:
        last = starts[:, full]
        sums = sums + prefix[last + rest] - prefix[last]
    return np.asarray(sums / n)


def compare_runs(
    a: Sequence[tuple[int, float]],
    b: Sequence[tuple[int, float]],
    metric: str,
    *,
    better: str | None = None,
    window: int | None = None,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    block: int | None = None,
    names: tuple[str, str] = ("A", "B"),
) -> Comparison:
    """Runs A and B compared on ``metric`` over their final windows (see the module's docstring). ``block`` fixes
    the block length for both (1 is the i.i.d. bootstrap, for contrast); by default each window's own. ``names``
    are how a refusal names the runs. Raises BadRequest when a window holds fewer than ``MIN_POINTS`` finite
    values."""
    if not 0 < confidence < 1:
        raise BadRequest(f"confidence={confidence} must be between 0 and 1, e.g. 0.95")
    how = direction(metric, better)
    windows: list[tuple[np.ndarray, int, int, int]] = []
    for name, points in zip(names, (a, b), strict=True):
        w = final_window(points, window)
        values = np.array([v for _, v in w], dtype=float)
        finite = values[np.isfinite(values)]
        left_out = len(values) - len(finite)
        if len(finite) < MIN_POINTS:
            where = f" (steps {w[0][0]}–{w[-1][0]})" if w else ""
            dropped = f", {left_out} NaN/inf left out" if left_out else ""
            raise BadRequest(
                f"not enough points: run {name} has {len(finite)} finite {metric} values in its final window{where}"
                f"{dropped}; a comparison needs at least {MIN_POINTS} — wait for more steps"
                + ("" if window is None else " or widen --window")
            )
        windows.append((finite, w[0][0], w[-1][0], left_out))
    rng = np.random.default_rng(seed)
    stats: list[Window] = []
    variances: list[float] = []
    dfs: list[float] = []
    effectives: list[float] = []
    for finite, first, last, left_out in windows:
        n = len(finite)
        if block is None:
            length, g = _block_and_bias(finite)
        else:  # a fixed block (1: the i.i.d. bootstrap), uncorrected: what a naive bootstrap gives, for contrast
            length, g = max(1, min(block, n)), 0.0
        means = resampled_means(finite, length, resamples, rng)
        # the block bootstrap's variance of a mean is low by about G/(b·n) (Künsch 1989): added back; and never
        # below what the window's lag-1 correlation alone implies (a floor for short, strongly correlated windows)
        boot = float(means.var()) + g / (length * n)
        if block is None:
            floor, effective = ar1_variance(finite)
            effectives.append(effective)
            variances.append(max(boot, floor))
            dfs.append(max(1.0, min(n / length, effective) - 1))  # about one degree of freedom per block
        else:
            variances.append(boot)
            dfs.append(max(1.0, n / length - 1))
        stats.append(Window(first, last, n, left_out, float(finite.mean()), length))
    se = math.sqrt(sum(variances))
    df = sum(variances) ** 2 / sum(v * v / d for v, d in zip(variances, dfs, strict=True)) if se > 0 else 1.0
    difference = stats[0].mean - stats[1].mean
    half = t_quantile(1 - (1 - confidence) / 2, df) * se
    low, high = difference - half, difference + half
    notes = []
    if stats[0].last_step < stats[1].first_step or stats[1].last_step < stats[0].first_step:
        notes.append(
            f"the windows do not overlap (steps {stats[0].first_step}–{stats[0].last_step} and "
            f"{stats[1].first_step}–{stats[1].last_step}): the runs are compared at different points of training"
        )
    for i, (name, w_) in enumerate(zip(names, stats, strict=True)):
        if w_.left_out:
            notes.append(f"run {name}: {w_.left_out} NaN/inf values in its window left out")
        worth = effectives[i] if effectives else w_.points / w_.block
        if worth < ROUGH_BELOW:
            notes.append(
                f"run {name}'s window of {w_.points} correlated steps is worth about {max(worth, 1):.0f} independent "
                "points: the interval is rough and wide (a longer --window would narrow it)"
            )
    return Comparison(
        metric=metric,
        a=stats[0],
        b=stats[1],
        difference=difference,
        interval=(low, high),
        se=se,
        df=df,
        confidence=confidence,
        resamples=resamples,
        direction=how,
        notes=tuple(notes),
    )
