"""Rollouts: ``group_size`` sampled answers for each of ``prompts_per_step`` problems, verified, with the verifier's
hints; and where the learner gets them, in this process (``LocalRollouts``) or from Ray actors (``ray_rollouts.py``).

Two injected faults change what a rollout looks like, from their step on and on the first attempt only:
``reward_stuck_at_step`` (every reward 0; hints still come from the verifier) and ``entropy_collapse_at_step``
(sampling logits times ``COLLAPSE_SCALE``, a near-zero temperature).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

import torch

from labbot.training.jobs.tiny_rl.config import TinyRLConfig
from labbot.training.jobs.tiny_rl.policy import sample
from labbot.training.jobs.tiny_rl.task import decode, encode, make_problem, verify
from labbot_client.checkpoints import JobEnv

COLLAPSE_SCALE = 1e4  # entropy_collapse_at_step: sampling logits times this


@dataclass
class Rollout:
    """One batch of verified samples, the unit a rollout worker hands to the learner."""

    seqs: torch.Tensor  # (B, P + C) prompt + completion
    old_logp: torch.Tensor  # (B, C) behaviour log-probabilities
    rewards: torch.Tensor  # (G, K) per group
    hints: torch.Tensor  # (B, hint_len) hint tokens (zeros where there is none)
    hinted: torch.Tensor  # (B,) bool
    flagged: torch.Tensor  # (B,) flagged completion position, -1 where there is no hint
    entropy: float  # mean per-token entropy of the sampling distribution
    version: int  # weight version the samples were drawn with
    gen_seconds: float


def generate_rollout(
    model: torch.nn.Module,
    cfg: TinyRLConfig,
    rng: random.Random,
    *,
    version: int,
    reward_stuck: bool,
    collapse: bool,
) -> Rollout:
    """Sample ``group_size`` completions for each of ``prompts_per_step`` problems from ``rng``; verify them."""
    t0 = time.perf_counter()
    problems = [make_problem(rng, cfg.n_digits) for _ in range(cfg.prompts_per_step)]
    rows = [p for p in problems for _ in range(cfg.group_size)]
    prompts = torch.tensor([encode(p) for p, _ in rows])
    scale = COLLAPSE_SCALE if collapse else 1.0
    toks, old_logp, ent = sample(model, prompts, cfg.answer_len, temperature=cfg.temperature, scale=scale)
    verdicts = [verify(decode(row), t) for row, (_, t) in zip(toks.tolist(), rows, strict=True)]
    rewards = torch.tensor([0.0 if reward_stuck else v.reward for v in verdicts])
    hints = torch.zeros(len(rows), cfg.hint_len, dtype=torch.long)
    flagged = torch.full((len(rows),), -1, dtype=torch.long)
    for i, v in enumerate(verdicts):
        if v.hint is not None and v.position is not None:
            hints[i] = torch.tensor(encode(v.hint))
            flagged[i] = v.position
    return Rollout(
        seqs=torch.cat([prompts, toks], dim=1),
        old_logp=old_logp,
        rewards=rewards.view(cfg.prompts_per_step, cfg.group_size),
        hints=hints,
        hinted=flagged >= 0,
        flagged=flagged,
        entropy=float(ent.mean().item()),
        version=version,
        gen_seconds=time.perf_counter() - t0,
    )


def injected_faults(cfg: TinyRLConfig, job: JobEnv, step: int) -> tuple[bool, bool]:
    """(reward stuck, entropy collapsed) at ``step``: first attempt only."""
    first = not job.is_restart
    stuck = first and cfg.reward_stuck_at_step > 0 and step >= cfg.reward_stuck_at_step
    collapse = first and cfg.entropy_collapse_at_step > 0 and step >= cfg.entropy_collapse_at_step
    return stuck, collapse


class RolloutSource:
    failures = 0  # rollout workers that died mid-request (and were asked again)

    def next(self, step: int, version: int) -> tuple[Rollout, int]:
        """A batch no more than one version old for learner ``step``, and how many stale ones were dropped."""
        raise NotImplementedError

    def push(self, version: int) -> None:
        """The learner finished a step: its weights are now ``version``."""

    def close(self) -> None:
        pass


class LocalRollouts(RolloutSource):
    """num_rollout_workers=0: the learner's own model samples, on-policy, in this process."""

    def __init__(self, cfg: TinyRLConfig, model: torch.nn.Module, rng: random.Random, job: JobEnv) -> None:
        self.cfg, self.model, self.rng, self.job = cfg, model, rng, job

    def next(self, step: int, version: int) -> tuple[Rollout, int]:
        stuck, collapse = injected_faults(self.cfg, self.job, step)
        self.model.eval()
        batch = generate_rollout(self.model, self.cfg, self.rng, version=version, reward_stuck=stuck, collapse=collapse)
        self.model.train()
        return batch, 0
