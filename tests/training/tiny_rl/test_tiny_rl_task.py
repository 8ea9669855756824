"""tiny-rl's task (training/jobs/tiny_rl/task.py): the problems, the verifier and its hints, the vocabulary."""

from __future__ import annotations

import pytest

from labbot.training.jobs.tiny_rl import TinyRLConfig
from labbot.training.jobs.tiny_rl.task import END, STOI, VOCAB, encode, make_hint, make_problem, verify


def test_problem_format_reverses_and_pads_the_answer() -> None:
    import random

    rng = random.Random(3)
    for _ in range(50):
        prompt, target = make_problem(rng, 3)
        a, b = prompt.rstrip("=").split("+")
        assert len(a) == len(b) == 3 and len(target) == 4
        assert int(target[::-1]) == int(a) + int(b)


def test_verifier_rewards_exact_answers_and_hints_the_first_wrong_token() -> None:
    assert verify("2310$", "2310").reward == 1.0 and verify("2310$", "2310").hint is None
    wrong = verify("2350$", "2310")
    assert (wrong.reward, wrong.position, wrong.token, wrong.hint) == (0.0, 2, "5", "[..5..]")
    assert verify("23100", "2310").hint == "[....0]"  # no end token where it belongs
    assert verify("231", "2310").hint == f"[...{END}.]"  # stopped one short
    assert verify("9310$", "2310").hint == "[9....]"
    with pytest.raises(ValueError, match="at most 5 tokens"):
        verify("2310$1", "2310")
    cfg = TinyRLConfig(n_digits=3)
    assert len(make_hint(2, "5", cfg.answer_len)) == cfg.hint_len
    with pytest.raises(ValueError, match=r"a hint position is in \[0, 5\), got 5"):
        make_hint(5, "1", 5)
    assert set(make_hint(4, END, 5)) <= set(VOCAB)


def test_encode_covers_hinted_prompts() -> None:
    assert encode(make_hint(3, "7", 4) + "12+34=") == [STOI[c] for c in "[...7]12+34="]
