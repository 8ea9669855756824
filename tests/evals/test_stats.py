"""The eval statistics: Wilson intervals, Newcombe's paired and unpaired differences, task sets, saturation."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labbot.evals import stats


def test_wilson_matches_the_published_example_and_is_sane_at_the_ends() -> None:
    ci = stats.wilson(81, 263)  # Newcombe (1998a), example: 0.2553 to 0.3662
    assert ci.to_json() == [0.2553, 0.3662]
    assert stats.wilson(0, 10).low == 0.0 and 0.25 < stats.wilson(0, 10).high < 0.31
    assert stats.wilson(10, 10).high == 1.0 and 0.69 < stats.wilson(10, 10).low < 0.75
    assert stats.wilson(0, 0) == stats.Interval(0.0, 1.0)
    with pytest.raises(ValueError, match="passed <= n"):
        stats.wilson(3, 2)


def test_unpaired_difference_matches_newcombes_method_10() -> None:
    # Newcombe (1998a), example (a): 56/70 against 48/80 → 0.0524 to 0.3339
    assert stats.unpaired_interval(56, 70, 48, 80).to_json() == [0.0524, 0.3339]


def test_pairing_narrows_the_interval_when_the_same_tasks_are_hard_for_both() -> None:
    # 20 tasks: both pass 8, both fail 6, A alone passes 6 → a strong positive association
    a = {f"t{i}": i < 14 for i in range(20)}
    b = {f"t{i}": i < 8 for i in range(20)}
    c = stats.compare(a, b)
    assert (c.both, c.only_a, c.only_b, c.neither) == (8, 6, 0, 6)
    assert c.difference == pytest.approx(0.3)
    assert c.paired.width < c.unpaired.width
    assert c.paired.excludes_zero() and not c.unpaired.excludes_zero()
    assert c.verdict == "A is better"
    assert stats.compare(b, a).verdict == "B is better"


def test_identical_runs_show_no_difference() -> None:
    a = {f"t{i}": i % 3 == 0 for i in range(12)}
    c = stats.compare(a, dict(a))
    assert c.difference == 0 and c.paired.low < 0 < c.paired.high
    assert c.verdict == "no difference the suite can show"


def test_without_association_the_paired_interval_is_the_unpaired_one() -> None:
    # both=2, only_a=2, only_b=2, neither=2: ad − bc = 0
    assert stats.paired_interval(2, 2, 2, 2) == stats.unpaired_interval(4, 8, 4, 8)
    assert stats.paired_interval(0, 0, 0, 0) == stats.Interval(-1.0, 1.0)


@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=60))
def test_intervals_hold_the_estimate_and_stay_in_range(pairs: list[tuple[bool, bool]]) -> None:
    a = {f"t{i}": x for i, (x, _) in enumerate(pairs)}
    b = {f"t{i}": y for i, (_, y) in enumerate(pairs)}
    c = stats.compare(a, b)
    for ci in (c.paired, c.unpaired):
        assert -1.0 <= ci.low <= c.difference + 1e-9 and c.difference - 1e-9 <= ci.high <= 1.0


def test_the_paired_interval_covers_the_true_difference_about_95_percent_of_the_time() -> None:
    rng = random.Random(7)
    hits, rounds, n = 0, 400, 40
    difficulty = [rng.random() for _ in range(n)]
    true_a = sum(min(1.0, d + 0.15) for d in difficulty) / n
    true_b = sum(difficulty) / n
    for _ in range(rounds):
        # one shared draw per task: the solvers agree on what is hard, A is a little better
        u = [rng.random() for _ in range(n)]
        a = {str(i): u[i] < min(1.0, difficulty[i] + 0.15) for i in range(n)}
        b = {str(i): u[i] < difficulty[i] for i in range(n)}
        ci = stats.compare(a, b).paired
        hits += ci.low <= true_a - true_b <= ci.high
    assert hits / rounds >= 0.9


def test_task_set_difference_names_what_only_one_ran() -> None:
    assert stats.task_set_difference(["a", "b"], ["b", "a"]) is None
    said = stats.task_set_difference(["a", "b", "c"], ["b", "d"])
    assert said == "only the first ran a, c; only the second ran d"
    many = stats.task_set_difference([f"t{i}" for i in range(8)], [])
    assert many is not None and many.endswith("and 3 more")


def test_saturation_needs_every_solver_at_ninety_percent() -> None:
    assert stats.saturated({"gold": 1.0, "agent:x": 0.9})
    assert not stats.saturated({"gold": 1.0, "agent:x": 0.85})
    assert not stats.saturated({})
