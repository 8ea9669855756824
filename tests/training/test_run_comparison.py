"""The statistics of comparing two training runs (pure): final windows, the block bootstrap's interval on the
difference of window means, the direction rule, and a verdict only when the interval excludes zero."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labbot.common.errors import BadRequest
from labbot.training.compare import MIN_POINTS, compare_runs, direction, final_window, t_quantile


def ar1(n: int, phi: float, rng: np.random.Generator, mean: float = 0.0) -> list[tuple[int, float]]:
    """``n`` steps of AR(1) noise around ``mean`` (stationary from its first point), as (step, value) points."""
    e = rng.normal(size=n)
    x = np.empty(n)
    x[0] = e[0] / math.sqrt(1 - phi * phi)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + e[i]
    return list(enumerate((x + mean).tolist()))


def test_the_final_window_is_the_last_tenth_at_least_twenty_points() -> None:
    points = [(s, float(s)) for s in range(1000)]
    assert final_window(points) == points[900:]
    assert final_window(points[:100]) == points[80:100]  # 10 % is 10: twenty instead
    assert final_window(points[:15]) == points[:15]  # fewer than twenty: all of them
    assert final_window(points, 50) == points[950:]
    assert final_window(list(reversed(points)), 3) == points[997:]  # by step, whatever the order given


def test_a_known_difference_is_detected_and_the_better_run_named_by_direction() -> None:
    rng = np.random.default_rng(0)
    low, high = ar1(1000, 0.5, rng, mean=1.0), ar1(1000, 0.5, rng, mean=1.5)
    c = compare_runs(low, high, "loss")
    assert c.excludes_zero() and c.interval[1] < 0 and abs(c.difference + 0.5) < 0.3
    assert (c.winner, c.verdict) == ("a", "A is better")  # lower loss
    assert compare_runs(low, high, "reward").verdict == "B is better"  # higher reward
    assert compare_runs(low, high, "loss", better="higher").verdict == "B is better"
    unknown = compare_runs(low, high, "entropy")
    assert unknown.winner is None and unknown.verdict == "B's entropy is higher (which is better is not known)"
    doc = c.to_json()
    assert doc["window"]["a"]["points"] == 100 and doc["window"]["a"]["steps"] == [900, 999]
    assert doc["better"] == "lower" and "by its name" in doc["rule"] and "block bootstrap" in doc["method"]


def test_same_inputs_same_answer() -> None:
    rng = np.random.default_rng(3)
    a, b = ar1(300, 0.7, rng), ar1(300, 0.7, rng)
    assert compare_runs(a, b, "loss").to_json() == compare_runs(a, b, "loss").to_json()


def test_two_runs_of_the_same_process_get_no_verdict_in_nearly_all_seeds() -> None:
    rng = np.random.default_rng(11)
    verdicts = [compare_runs(ar1(400, 0.5, rng), ar1(400, 0.5, rng), "loss", seed=i).winner for i in range(100)]
    assert sum(v is not None for v in verdicts) <= 10  # nominal 5 %


def test_the_iid_bootstrap_claims_differences_in_autocorrelated_noise_the_block_bootstrap_does_not() -> None:
    """Why the block bootstrap: two runs of the same AR(1) process (φ = 0.9, 200-point windows). Resampling steps
    as if independent 'finds' a difference in most pairs; blocks of correlated steps in few."""
    rng = np.random.default_rng(5)
    pairs = [(ar1(200, 0.9, rng), ar1(200, 0.9, rng)) for _ in range(60)]
    iid = sum(compare_runs(a, b, "loss", window=200, block=1, seed=i).excludes_zero() for i, (a, b) in enumerate(pairs))
    block = sum(compare_runs(a, b, "loss", window=200, seed=i).excludes_zero() for i, (a, b) in enumerate(pairs))
    assert iid >= 30 and block <= 12, (iid, block)
    a, b = pairs[next(i for i, (a, b) in enumerate(pairs)
                     if compare_runs(a, b, "loss", window=200, block=1).excludes_zero()
                     and not compare_runs(a, b, "loss", window=200).excludes_zero())]  # fmt: skip
    assert compare_runs(a, b, "loss", window=200).verdict == "no difference shown at 95%"


def test_the_95_percent_interval_covers_the_true_difference_on_ar1_data() -> None:
    rng = np.random.default_rng(7)
    covered = 0
    for i in range(150):
        c = compare_runs(ar1(200, 0.5, rng, 0.3), ar1(200, 0.5, rng), "loss", window=200, seed=i)
        covered += c.interval[0] <= 0.3 <= c.interval[1]
    assert covered / 150 >= 0.88, covered


def test_non_finite_points_are_left_out_and_counted_and_too_few_refused() -> None:
    rng = np.random.default_rng(1)
    a, b = ar1(200, 0.3, rng), ar1(200, 0.3, rng)
    a[-1], a[-2] = (a[-1][0], math.nan), (a[-2][0], math.inf)
    c = compare_runs(a, b, "loss")
    assert (c.a.points, c.a.left_out) == (18, 2) and math.isfinite(c.difference)
    assert "run A: 2 NaN/inf values in its window left out" in c.notes
    diverged = [(s, v if s < 189 else math.nan) for s, v in b]
    with pytest.raises(BadRequest, match=r"not enough points: run B has 9 finite loss values .*11 NaN/inf left out"):
        compare_runs(a, diverged, "loss", window=20)
    with pytest.raises(BadRequest, match=f"at least {MIN_POINTS}"):
        compare_runs(a[:5], b, "loss")


def test_windows_at_different_points_of_training_are_said() -> None:
    rng = np.random.default_rng(2)
    short, long = ar1(200, 0.3, rng), ar1(2000, 0.3, rng)
    assert any("do not overlap" in n for n in compare_runs(short, long, "loss").notes)


@pytest.mark.parametrize(
    ("metric", "better"),
    [("loss", "lower"), ("val_loss", "lower"), ("perplexity", "lower"), ("error_rate", "lower"),
     ("step_time", "lower"), ("reward", "higher"), ("accuracy", "higher"), ("pass_rate", "higher"),
     ("tokens_per_s", "higher"), ("entropy", None), ("kl", None), ("reward_loss", None)],
)  # fmt: skip
def test_direction_by_name(metric: str, better: str | None) -> None:
    assert direction(metric).better == better
    assert direction(metric, "higher").better == "higher"


def test_a_bad_direction_is_refused() -> None:
    with pytest.raises(BadRequest, match="must be lower or higher"):
        direction("loss", "smaller")


def test_t_quantiles() -> None:
    for df, exact in ((1, 12.706), (2, 4.303), (3, 3.182), (10, 2.228), (30, 2.042)):
        assert abs(t_quantile(0.975, df) - exact) < 4e-3
