"""The A/B report: never "significant" on too few votes or an arm without any; a real difference found; the votes
still needed; and the interval's coverage on simulated votes with a known difference."""

from __future__ import annotations

import random

import pytest

from labbot.agents.feedback.report import MIN_VOTES, ab_report, votes_needed


def arms(a_up: int, a_down: int, b_up: int, b_down: int) -> list[dict[str, object]]:
    return [
        {"arm": "A", "model": "m-a", "up": a_up, "down": a_down, "answers": a_up + a_down},
        {"arm": "B", "model": "m-b", "up": b_up, "down": b_down, "answers": b_up + b_down},
    ]


def test_one_arm_unanswered_is_not_enough_votes() -> None:
    report = ab_report(arms(40, 2, 0, 0))
    assert report["significant"] is False and report["verdict"] == "not enough votes"
    assert "arm B has 0 vote(s)" in report["why"]
    assert report["difference"] is None and report["interval"] is None
    assert report["arms"][1]["up_rate"] is None and report["arms"][1]["interval"] == [0.0, 1.0]
    assert report["more_votes_needed"]["per_arm"] == MIN_VOTES


@pytest.mark.parametrize("votes", [(5, 0, 0, 5), (9, 0, 0, 9), (1, 0, 0, 1)])
def test_tiny_samples_are_never_significant_however_lopsided(votes: tuple[int, int, int, int]) -> None:
    report = ab_report(arms(*votes))
    assert report["significant"] is False and report["verdict"] == "not enough votes"
    assert report["more_votes_needed"]["per_arm"] >= MIN_VOTES - max(votes)


def test_a_real_difference_with_enough_votes_is_significant_and_names_the_better_arm() -> None:
    report = ab_report(arms(30, 20, 45, 5))
    assert report["significant"] is True and report["verdict"] == "B is preferred"
    assert report["difference"] == pytest.approx(0.3)
    low, high = report["interval"]
    assert 0 < low < 0.3 < high < 1
    assert report["more_votes_needed"]["per_arm"] == 0
    flipped = ab_report(arms(45, 5, 30, 20))
    assert flipped["verdict"] == "A is preferred" and flipped["interval"][1] < 0


def test_no_difference_yet_says_how_many_more_votes_it_would_take() -> None:
    report = ab_report(arms(14, 6, 16, 4))  # 70 % vs 80 %: not shown by 20 votes each
    assert report["significant"] is False and report["verdict"] == "no difference shown yet"
    need = votes_needed(0.7, 0.8)
    assert 250 <= need <= 330  # the textbook figure for 70 % vs 80 % at 5 % / 80 % power is about 290
    assert report["more_votes_needed"]["per_arm"] == need - 20
    same = ab_report(arms(15, 5, 15, 5))
    assert same["verdict"] == "no difference shown yet" and "agree" in same["more_votes_needed"]["note"]
    assert same["more_votes_needed"]["per_arm"] > 100


def test_the_interval_covers_the_true_difference_on_simulated_votes() -> None:
    """95 % intervals cover a known difference in at least 93 % of simulated A/B tests (benchmarks/ab_coverage.py
    measures it over more settings)."""
    rng = random.Random(7)
    covered = trials = 0
    for p_a, p_b, n in [(0.6, 0.75, 40), (0.8, 0.8, 60), (0.5, 0.65, 120), (0.9, 0.95, 80)]:
        for _ in range(250):
            a_up = sum(rng.random() < p_a for _ in range(n))
            b_up = sum(rng.random() < p_b for _ in range(n))
            low, high = ab_report(arms(a_up, n - a_up, b_up, n - b_up))["interval"]
            covered += low <= p_b - p_a <= high
            trials += 1
    assert covered / trials >= 0.93
