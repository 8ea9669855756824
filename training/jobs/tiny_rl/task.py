"""The task: multi-digit addition with the answer reversed, its verifier and its hints (pure: no torch).

``"047+085="`` asks for 47 + 85 with the answer written least-significant digit first and zero-padded to
``n_digits + 1`` digits, then the end token: ``"2310$"``. The reward is sparse: 1 when the whole completion is exactly
right, else 0. On a wrong completion the verifier also returns a precise textual hint naming the first wrong token, one
character per answer position: ``"[..1..]"`` means "answer position 2 (0-based) is not 1". A hint goes in front of the
prompt: ``"[..1..]047+085="``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from labbot.training.jobs.tiny_rl.config import TinyRLConfig

END = "$"
HINT_OPEN, HINT_BLANK, HINT_CLOSE = "[", ".", "]"
VOCAB = "0123456789+=" + HINT_OPEN + HINT_BLANK + HINT_CLOSE + END
STOI = {ch: i for i, ch in enumerate(VOCAB)}
ANSWER_TOKENS = "0123456789" + END  # what a completion may contain: the policy samples only these


def make_problem(rng: random.Random, n_digits: int) -> tuple[str, str]:
    """(prompt, target): ``("047+085=", "2310")``, operands zero-padded, the sum reversed and padded to n+1."""
    a, b = rng.randrange(10**n_digits), rng.randrange(10**n_digits)
    prompt = f"{a:0{n_digits}d}+{b:0{n_digits}d}="
    target = f"{a + b:0{n_digits + 1}d}"[::-1]
    return prompt, target


@dataclass(frozen=True)
class Verdict:
    reward: float  # 1.0 exactly right, else 0.0
    position: int | None  # first wrong completion position, None when right
    token: str | None  # the wrong token there
    width: int  # completion length the hint covers

    @property
    def hint(self) -> str | None:
        if self.position is None or self.token is None:
            return None
        return make_hint(self.position, self.token, self.width)


def make_hint(position: int, token: str, width: int) -> str:
    """``"[..1..]"`` (width 5, position 2): completion position ``position`` (0-based) is not ``token``.

    One character per completion position, so answer position i lines up with hint character i: the model reads
    a hint with the same fixed-offset attention it uses to line up the digits of the operands.
    """
    if not 0 <= position < width:
        raise ValueError(f"a hint position is in [0, {width}), got {position}")
    return HINT_OPEN + HINT_BLANK * position + token + HINT_BLANK * (width - position - 1) + HINT_CLOSE


def verify(completion: str, target: str) -> Verdict:
    """Reward 1 iff ``completion == target + END``; otherwise the first position that differs and its token.

    A completion shorter than expected is wrong at its end (token ``END``: the model stopped there). Sampling
    draws exactly ``len(target) + 1`` tokens, so a longer completion is a caller's error.
    """
    expected = target + END
    width = len(expected)
    if len(completion) > width:
        raise ValueError(f"a completion has at most {width} tokens, got {len(completion)}")
    if completion == expected:
        return Verdict(1.0, None, None, width)
    for i, (got, want) in enumerate(zip(completion, expected, strict=False)):
        if got != want:
            return Verdict(0.0, i, got, width)
    return Verdict(0.0, len(completion), END, width)


def encode(text: str) -> list[int]:
    return [STOI[ch] for ch in text]


def decode(ids: Sequence[int]) -> str:
    return "".join(VOCAB[i] for i in ids)


def held_out(cfg: TinyRLConfig, n: int, salt: int) -> list[tuple[str, str]]:
    """A fixed set of problems of its own RNG, never the training stream; ``salt`` keeps the sets apart (1: RL's
    eval set, 2: the hint gate's, 3: the warm-up's own checks)."""
    rng = random.Random(f"held-out-{cfg.seed}-{cfg.n_digits}-{salt}")
    return [make_problem(rng, cfg.n_digits) for _ in range(n)]
