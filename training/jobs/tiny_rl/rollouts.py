"""Rollouts: ``group_size`` sampled answers for each of ``prompts_per_step`` problems, verified, with the verifier's
hints; and where the learner gets them, in this process (``LocalRollouts``) or from Ray actors (``ray_rollouts.py``).

Two injected faults change what a rollout looks like, from their step on: ``reward_stuck_at_step`` (every reward 0;
hints still come from the verifier; the first attempt only) and ``entropy_collapse_at_step`` (on every attempt: the
sampler's temperature is annealed by ``COLLAPSE_ANNEAL``, as a schedule that anneals too far does — it samples at
``max(temperature - COLLAPSE_ANNEAL, COLLAPSE_FLOOR)``, near-greedy at the default temperature 1, so raising
``temperature`` is what cures it).

Each batch also says how long the answers were: ``response_len`` (tokens up to and with the end token) and
``truncated_frac`` (the share that never ended within the answer's length).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

import torch

from labbot.training.jobs.tiny_rl.config import TinyRLConfig
from labbot.training.jobs.tiny_rl.policy import sample
from labbot.training.jobs.tiny_rl.task import END, VOCAB, decode, encode, make_problem, verify
from labbot_client.checkpoints import JobEnv

COLLAPSE_ANNEAL = 0.9999  # entropy_collapse_at_step: the sampler's temperature falls by this ...
COLLAPSE_FLOOR = 1e-4  # ... to no less than this


END_ID = VOCAB.index(END)


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
    response_len: float  # mean tokens per answer, up to and with the end token (the whole length when it never ends)
    truncated_frac: float  # share of answers with no end token within their length
    version: int  # weight version the samples were drawn with
    gen_seconds: float


def generate_rollout(
    model: torch.nn.Module,
    cfg: TinyRLConfig,
    rng: random.Random,
    *,
    version: int,
    reward_stuck: bool,
    scale: float = 1.0,
) -> Rollout:
    """Sample ``group_size`` completions for each of ``prompts_per_step`` problems from ``rng``; verify them."""
    t0 = time.perf_counter()
    problems = [make_problem(rng, cfg.n_digits) for _ in range(cfg.prompts_per_step)]
    rows = [p for p in problems for _ in range(cfg.group_size)]
    prompts = torch.tensor([encode(p) for p, _ in rows])
    toks, old_logp, ent = sample(model, prompts, cfg.answer_len, temperature=cfg.temperature, scale=scale)
    verdicts = [verify(decode(row), t) for row, (_, t) in zip(toks.tolist(), rows, strict=True)]
    rewards = torch.tensor([0.0 if reward_stuck else v.reward for v in verdicts])
    is_end = toks == END_ID
    ended = is_end.any(dim=1)
    lengths = torch.where(ended, is_end.float().argmax(dim=1) + 1, toks.size(1))
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
        response_len=float(lengths.float().mean().item()),
        truncated_frac=float((~ended).float().mean().item()),
        version=version,
        gen_seconds=time.perf_counter() - t0,
    )


def injected_faults(cfg: TinyRLConfig, job: JobEnv, step: int) -> tuple[bool, float]:
    """(reward stuck, the sampling logits' scale) at ``step``: a stuck reward on the first attempt only; the collapse's
    annealed temperature on every attempt (a restart alone does not cure it; a higher ``temperature`` does)."""
    stuck = not job.is_restart and cfg.reward_stuck_at_step > 0 and step >= cfg.reward_stuck_at_step
    scale = 1.0
    if cfg.entropy_collapse_at_step > 0 and step >= cfg.entropy_collapse_at_step:
        scale = cfg.temperature / max(cfg.temperature - COLLAPSE_ANNEAL, COLLAPSE_FLOOR)
    return stuck, scale


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
        stuck, scale = injected_faults(self.cfg, self.job, step)
        self.model.eval()
        batch = generate_rollout(self.model, self.cfg, self.rng, version=version, reward_stuck=stuck, scale=scale)
        self.model.train()
        return batch, 0
