"""tiny-rl: RL with textual feedback on multi-digit addition, labbot's reference RL job.

Run it by hand, or the way labbot does through Ray's Jobs API::

    python -m labbot.training.jobs.tiny_rl                     # algo=sdpo: self-distillation from the hinted model
    python -m labbot.training.jobs.tiny_rl --algo grpo --steps 100 --group_size 8
    python -m labbot.training.jobs.tiny_rl --algo blend --lam 0.5 --num_rollout_workers 2   # Ray rollout actors
    python -m labbot.training.jobs.tiny_rl --help

Every ``TinyRLConfig`` field is a flag (``--a_b`` and ``--a-b`` both work). CPU only; the model is tiny-lm's
``TinyLM`` (a nanoGPT-style decoder) over a character vocabulary.

The task. ``"047+085="`` asks for 47 + 85 with the answer written least-significant digit first and zero-padded to
``n_digits + 1`` digits, then the end token: ``"2310$"``. The reward is sparse: 1 when the whole completion is
exactly right, else 0. On a wrong completion the verifier also returns a precise textual hint naming the first wrong
token, one character per answer position: ``"[..1..]"`` means "answer position 2 (0-based) is not 1". A hint goes in
front of the prompt: ``"[..1..]047+085="``.

The run.

1. Warm-up (supervised, from scratch): answers to plain prompts and to hinted prompts (a hint about a wrong digit,
   then the correct answer), so the model learns to read hints. Hint reading appears only once the model has learned
   addition, and when addition and hint reading appear depends on the seed and on the float arithmetic (the CPU, the
   number of torch threads): the same seed is at 0.58 held-out pass rate after 1,000 steps with two threads and at
   0.92 with one. So the warm-up trains to a level, not a step count: after ``warmup_steps`` it asks whether the
   held-out pass rate (greedy, on a set of its own) is at least ``warmup_min_pass_rate`` and the model reads hints
   (the gate, step 2), and while either is not so it trains on a quarter of ``warmup_steps`` at a time, up to
   ``warmup_max_steps``. With the defaults RL starts from about 0.85 or more whatever the machine (seed 0 with two
   threads on a 2-core EPYC stops after 1,500 steps at 0.87 on RL's eval set), and RL's room is the rest. The warm-up
   checkpoint is cached under ``warmup_dir`` (default: the checkpoint dir) in a folder named by a hash of
   the fields that shape it, so RL runs with different algorithms start from the same weights.
2. Gate: on held-out problems the warm-up model samples answers; at each sample's first wrong token the hinted
   model (hint in context) must put clearly less probability on that token than the unhinted one (mean
   probability ratio at most ``gate_max_ratio``), else the job fails with a message saying so.
3. RL, ``steps`` learner steps. Each step samples ``group_size`` completions for each of ``prompts_per_step``
   prompts (``temperature``), verifies them and updates the policy with a PPO-style clipped objective
   (``clip_eps``, ``ppo_epochs`` passes; the ratio is against the behaviour log-probabilities) and a per-token
   advantage chosen by ``algo``:

   * ``grpo``: ``(r - mean) / (std + eps)`` within each group, broadcast to every token of the sequence;
   * ``sdpo`` (self-distillation): the sampled-token advantage ``A_sdpo = log p_teacher(token | hint + prompt,
     prefix) - log p_student(token | prompt, prefix)`` on samples that got a hint (wrong ones), 0 on correct ones,
     is what ``sd_adv_flagged`` / ``sd_adv_unflagged`` report; what trains (``sd_kl_coef`` > 0, the default) is a
     distillation term instead, added to the (then zero-advantage) policy loss::

         L_sd = sd_kl_coef / (B * C) * sum over hinted rows i, at their flagged position f_i, of
                KL(q_i || p_student(. | prompt_i, prefix_i))
         q_i(v) = p_teacher(v | hint_i + prompt_i, prefix_i) * [v != flagged token] / (1 - p_teacher(flagged))

     i.e. the hinted teacher's distribution over the answer vocabulary conditioned on what the hint says for
     certain (the flagged token is wrong), at the first wrong position, where the student's prefix is right. The
     teacher is the policy itself (``teacher=self``, no grad) or an EMA copy (``teacher=ema``, ``ema_decay``).
     ``sd_kl_coef 0`` trains on ``A_sdpo`` in the policy loss instead (the old objective: pushing down sampled
     tokens with no target, with a teacher that shares the student's weights, loses pass rate);
   * ``blend``: ``lam * A_grpo`` in the policy loss plus ``(1 - lam) * L_sd`` (``sd_kl_coef 0``:
     ``lam * A_grpo + (1 - lam) * A_sdpo``);
   * ``rlsd``: ``sign(A_grpo) * |A_sdpo|`` on hinted samples (the reward says which way, the teacher says which
     tokens and how much), ``A_grpo`` on samples without a hint (correct ones, where the teacher has nothing to say);
     no distillation term.

Environment (all optional, so the job also runs by hand): ``LABBOT_RUN_ID``, ``LABBOT_ATTEMPT`` (1 for the first
launch), ``LABBOT_CHECKPOINT_DIR`` (default ``./checkpoints``): RL checkpoints ``ckpt_{step:08d}.pt`` (atomic, newest
3 kept; step, model, optimiser, EMA teacher, frozen reference, RNG states, generations, weight version, config) and
the warm-up cache. On start the job resumes RL from the newest readable checkpoint (not from the warm-up).

Telemetry every RL step (``labbot_client.telemetry``): ``loss``, ``reward``, ``frac_reward_zero_std``, ``entropy``,
``kl`` (to the frozen warm-up model), ``generations``, ``sd_adv_flagged``, ``sd_adv_unflagged``, ``tokens_per_s``,
``stale_dropped``, ``rollout_lag``, ``rollout_worker_failures``; ``pass_rate`` (held-out greedy exact match) every
``eval_every`` steps, at the last step and at step 0 (the warm-up model); every checkpoint; and the phase (warmup,
rollout, learn, eval).

Fault injection, each ONLY when ``LABBOT_ATTEMPT`` is 1: ``hang_at_step``, ``crash_at_step``, ``nan_at_step`` as in
tiny-lm; ``reward_stuck_at_step N``: from step N every reward is 0 (hints still come from the verifier), so every
group has zero reward spread; ``entropy_collapse_at_step N``: from step N sampling logits are scaled by 1e4 (a
near-zero temperature), so the sampling entropy drops to about 0.

Scale-out: ``num_rollout_workers N`` (N > 0) starts N Ray actors that generate and verify rollouts while the learner
trains. Weights go through the object store (``ray.put``) after every learner step with a version number; each batch
carries the version it was generated with and the learner drops batches more than one version old (counted in
``stale_dropped``). An actor that dies is restarted by Ray (``worker_restarts``) and asked again
(``rollout_worker_failures``); the other keeps working. ``ray`` is imported only on that path, and the job connects
with ``ray.init()`` as tiny-lm does.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import torch
import torch.nn.functional as F

from labbot.training.jobs.flags import config_from_flags, dataclass_parser
from labbot.training.jobs.model import ModelConfig, TinyLM
from labbot.training.jobs.runtime import exit_on_sigterm, hang_forever, pace
from labbot_client import telemetry
from labbot_client.checkpoints import CheckpointDir, JobEnv, Location, join

ALGOS = ("grpo", "sdpo", "blend", "rlsd")
TEACHERS = ("self", "ema")
KEEP_CHECKPOINTS = 3
END = "$"
HINT_OPEN, HINT_BLANK, HINT_CLOSE = "[", ".", "]"
VOCAB = "0123456789+=" + HINT_OPEN + HINT_BLANK + HINT_CLOSE + END
STOI = {ch: i for i, ch in enumerate(VOCAB)}
ANSWER_TOKENS = "0123456789" + END  # what a completion may contain: the policy samples only these
# added to the logits of a completion position: the other tokens (hint and prompt syntax) get probability 0, so a
# hint can always mark its one wrong token unambiguously
ANSWER_MASK = torch.tensor([0.0 if ch in ANSWER_TOKENS else -1e9 for ch in VOCAB])
COLLAPSE_SCALE = 1e4  # entropy_collapse_at_step: sampling logits times this
ADV_EPS = 1e-6
FLAGGED_WEIGHT = 10.0  # warm-up: extra loss weight of the flagged position in hinted examples
# the fields that decide the warm-up weights: the cache key
WARMUP_FIELDS = (
    "n_digits",
    "n_layer",
    "n_head",
    "n_embd",
    "warmup_steps",
    "warmup_batch",
    "warmup_lr",
    "warmup_hint_frac",
    "warmup_max_steps",
    "warmup_min_pass_rate",
    "seed",
    # the pass-rate check and the gate decide how far the warm-up trains past warmup_steps
    "eval_size",
    "gate_size",
    "gate_max_ratio",
    "temperature",
)


# -----------------------------------------------------------------------------
# config


@dataclass
class TinyRLConfig:
    algo: str = field(default="sdpo", metadata={"help": "advantage: grpo, sdpo, blend or rlsd"})
    steps: int = field(default=200, metadata={"help": "RL learner steps (numbered 1..steps)"})
    n_digits: int = field(default=2, metadata={"help": "digits per operand (1..8)"})
    group_size: int = field(default=8, metadata={"help": "samples per prompt (a GRPO group), at least 2"})
    prompts_per_step: int = field(default=8, metadata={"help": "prompts per rollout batch"})
    temperature: float = field(default=1.0, metadata={"help": "sampling temperature"})
    lr: float = field(default=2e-4, metadata={"help": "RL AdamW learning rate"})
    clip_eps: float = field(default=0.2, metadata={"help": "PPO ratio clip"})
    ppo_epochs: int = field(default=1, metadata={"help": "passes over each rollout batch (1 = one on-policy step)"})
    lam: float = field(default=0.5, metadata={"help": "blend: weight of the GRPO advantage, in [0, 1]"})
    teacher: str = field(default="self", metadata={"help": "self-distillation teacher: self or ema"})
    sd_kl_coef: float = field(
        default=1.0,
        metadata={"help": "sdpo/blend: weight of the distillation KL at the flagged position (0 = off)"},
    )
    ema_decay: float = field(default=0.99, metadata={"help": "EMA teacher decay, in [0, 1)"})
    eval_every: int = field(default=10, metadata={"help": "held-out pass rate every N steps (and at the end)"})
    eval_size: int = field(default=200, metadata={"help": "held-out problems for pass_rate"})
    checkpoint_every: int = field(default=25, metadata={"help": "checkpoint every N steps (and the last); 0 = last"})
    log_every: int = field(default=10, metadata={"help": "print progress every N steps"})
    # warm-up and gate
    warmup_steps: int = field(default=1000, metadata={"help": "supervised warm-up steps"})
    warmup_batch: int = field(default=32, metadata={"help": "warm-up sequences per step"})
    warmup_lr: float = field(default=3e-3, metadata={"help": "warm-up AdamW learning rate"})
    warmup_hint_frac: float = field(default=0.75, metadata={"help": "fraction of warm-up examples with a hint"})
    warmup_max_steps: int = field(
        default=3000,
        metadata={
            "help": "past warmup_steps, train on until the pass rate and the hint gate pass, up to this many steps"
        },
    )
    warmup_min_pass_rate: float = field(
        default=0.85,
        metadata={"help": "the warm-up trains on until its held-out pass rate is at least this (0 = the gate alone)"},
    )
    warmup_dir: str = field(default="", metadata={"help": "warm-up cache folder ('' = the checkpoint dir)"})
    gate_size: int = field(default=200, metadata={"help": "held-out samples for the hint gate"})
    gate_max_ratio: float = field(
        default=0.7, metadata={"help": "gate: mean p(flagged | hint) / p(flagged | no hint) must be at most this"}
    )
    # model
    n_layer: int = field(default=2, metadata={"help": "transformer blocks"})
    n_head: int = field(default=4, metadata={"help": "attention heads"})
    n_embd: int = field(default=64, metadata={"help": "embedding width (a multiple of n_head)"})
    seed: int = field(default=0, metadata={"help": "seed of the warm-up and the held-out problems"})
    rl_seed: int = field(default=0, metadata={"help": "seed of RL's training problems and sampling"})
    num_threads: int = field(default=0, metadata={"help": "torch.set_num_threads(N); 0 = torch's default"})
    min_step_s: float = field(
        default=0.0,
        metadata={"help": "each step takes at least this long, the rest slept: a slower model, without its CPU"},
    )
    # scale-out
    num_rollout_workers: int = field(default=0, metadata={"help": "0 = in-process; N = N Ray rollout actors"})
    worker_restarts: int = field(default=2, metadata={"help": "Ray restarts of a rollout actor that dies"})
    # fault injection (LABBOT_ATTEMPT == 1 only); 0 = off
    hang_at_step: int = field(default=0, metadata={"help": "stop making progress after this step (0 = off)"})
    crash_at_step: int = field(default=0, metadata={"help": "raise RuntimeError at this step (0 = off)"})
    nan_at_step: int = field(default=0, metadata={"help": "loss becomes NaN from this step on (0 = off)"})
    reward_stuck_at_step: int = field(default=0, metadata={"help": "every reward 0 from this step (0 = off)"})
    entropy_collapse_at_step: int = field(
        default=0, metadata={"help": "sampling collapses to near-greedy from this step (0 = off)"}
    )

    def __post_init__(self) -> None:
        if self.algo not in ALGOS:
            raise ValueError(f"algo must be one of {', '.join(ALGOS)}, got {self.algo!r}")
        if self.teacher not in TEACHERS:
            raise ValueError(f"teacher must be one of {', '.join(TEACHERS)}, got {self.teacher!r}")
        if self.group_size < 2:
            raise ValueError(f"group_size must be at least 2 (a group needs a spread), got {self.group_size}")
        if not 1 <= self.n_digits <= 8:
            raise ValueError(f"n_digits must be between 1 and 8 (hint positions are one digit), got {self.n_digits}")
        if not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"lam must be in [0, 1], got {self.lam}")
        if not 0.0 <= self.ema_decay < 1.0:
            raise ValueError(f"ema_decay must be in [0, 1), got {self.ema_decay}")
        if not 0.0 <= self.warmup_hint_frac <= 1.0:
            raise ValueError(f"warmup_hint_frac must be in [0, 1], got {self.warmup_hint_frac}")
        if not 0.0 <= self.warmup_min_pass_rate <= 1.0:
            raise ValueError(f"warmup_min_pass_rate must be in [0, 1], got {self.warmup_min_pass_rate}")
        positive = (
            "steps",
            "prompts_per_step",
            "ppo_epochs",
            "eval_every",
            "eval_size",
            "log_every",
            "warmup_batch",
            "gate_size",
            "n_layer",
            "n_head",
            "n_embd",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        non_negative = (
            "warmup_steps",
            "warmup_max_steps",
            "checkpoint_every",
            "num_threads",
            "num_rollout_workers",
            "worker_restarts",
            "hang_at_step",
            "crash_at_step",
            "nan_at_step",
            "reward_stuck_at_step",
            "entropy_collapse_at_step",
        )
        for name in non_negative:
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 or more, got {getattr(self, name)}")
        if not (0 <= self.min_step_s <= 60):
            raise ValueError(f"min_step_s must be from 0 to 60 seconds, got {self.min_step_s}")
        if not (self.sd_kl_coef >= 0 and math.isfinite(self.sd_kl_coef)):
            raise ValueError(f"sd_kl_coef must be 0 or more, got {self.sd_kl_coef}")
        for name in ("temperature", "lr", "warmup_lr", "clip_eps", "gate_max_ratio"):
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a positive number, got {value}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")

    @property
    def answer_len(self) -> int:
        """Completion length: n_digits + 1 reversed digits, then the end token."""
        return self.n_digits + 2

    @property
    def prompt_len(self) -> int:
        return 2 * self.n_digits + 2

    @property
    def block_size(self) -> int:
        return self.hint_len + self.prompt_len + self.answer_len

    @property
    def hint_len(self) -> int:
        """``"[..1..]"``: one character per completion position, in brackets."""
        return self.answer_len + 2

    @property
    def model_config(self) -> ModelConfig:
        return ModelConfig(n_layer=self.n_layer, n_head=self.n_head, n_embd=self.n_embd, block_size=self.block_size)


class RLSummary(TypedDict):
    start_step: int
    final_step: int
    resumed_from: int | None
    warmup_pass_rate: float | None  # None when resumed (no warm-up evaluated)
    gate: dict[str, float] | None
    final_pass_rate: float | None
    pass_rates: dict[int, float]  # step -> held-out pass rate (0 = the warm-up model)
    generations_at_pass_rate: dict[int, int]  # step -> cumulative generations at that evaluation
    generations: int
    stale_dropped: int
    max_rollout_lag: int  # the largest version lag of a batch that was trained on
    steps_per_s: float
    rollout_tokens_per_s: float  # completion tokens / wall time of the RL loop, from the first batch's arrival on


StepCallback = Callable[[int, dict[str, float]], None]


# -----------------------------------------------------------------------------
# task: problems, verifier, hints (pure)


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


# -----------------------------------------------------------------------------
# advantages and loss (pure)


def grpo_advantages(rewards: torch.Tensor, eps: float = ADV_EPS) -> torch.Tensor:
    """(G, K) rewards -> (G, K): ``(r - mean) / (std + eps)`` per group (population std); a flat group is 0."""
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, unbiased=False, keepdim=True)
    return (rewards - mean) / (std + eps)


def zero_std_fraction(rewards: torch.Tensor) -> float:
    """Fraction of groups (rows of a (G, K) tensor) whose rewards are all equal."""
    return float((rewards == rewards[:, :1]).all(dim=1).float().mean().item())


def sdpo_advantages(teacher_logp: torch.Tensor, student_logp: torch.Tensor, hinted: torch.Tensor) -> torch.Tensor:
    """(B, C) per-token ``log p_teacher - log p_student`` on hinted rows (``hinted``: (B,) bool), 0 elsewhere."""
    return torch.where(hinted[:, None], teacher_logp - student_logp, torch.zeros_like(student_logp))


def combine_advantages(
    algo: str, a_grpo: torch.Tensor, a_sd: torch.Tensor, hinted: torch.Tensor, lam: float, distill: bool = False
) -> torch.Tensor:
    """The per-token advantage of ``algo`` from the (B, C) GRPO (broadcast) and self-distillation advantages.

    rlsd: ``sign(A_grpo) * |A_sdpo|`` on hinted rows, ``A_grpo`` on rows without a hint. ``distill``: the
    distillation term carries the self-distillation signal, so sdpo and blend leave ``A_sdpo`` out (sdpo: 0).
    """
    if distill and algo in ("sdpo", "blend"):
        a_sd = torch.zeros_like(a_sd)
    if algo == "grpo":
        return a_grpo
    if algo == "sdpo":
        return a_sd
    if algo == "blend":
        return lam * a_grpo + (1.0 - lam) * a_sd
    if algo == "rlsd":
        return torch.where(hinted[:, None], torch.sign(a_grpo) * a_sd.abs(), a_grpo)
    raise ValueError(f"algo must be one of {', '.join(ALGOS)}, got {algo!r}")


def clipped_policy_loss(
    logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, clip_eps: float
) -> tuple[torch.Tensor, float]:
    """PPO's clipped surrogate, mean over tokens: ``-min(ratio * A, clip(ratio, 1 +- eps) * A)``; and clip fraction."""
    ratio = torch.exp(logp - old_logp)
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
    loss = -torch.minimum(ratio * adv, clipped * adv).mean()
    clip_frac = float(((ratio - 1.0).abs() > clip_eps).float().mean().item())
    return loss, clip_frac


# -----------------------------------------------------------------------------
# model, sampling, scoring


def build_model(cfg: TinyRLConfig) -> TinyLM:
    return TinyLM(cfg.model_config, len(VOCAB))


def answer_logprobs(model: torch.nn.Module, seqs: torch.Tensor, prompt_len: int, temperature: float) -> torch.Tensor:
    """(B, P + C) token ids -> (B, C, V) log-distributions over the vocabulary at each of the last C positions."""
    logits, _ = model(seqs[:, :-1])  # (B, P + C - 1, V)
    logits = logits[:, prompt_len - 1 :] / temperature + ANSWER_MASK  # (B, C, V): the completion tokens
    return torch.log_softmax(logits, dim=-1)


def gather_tokens(logp: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """(B, C, V) log-distributions and (B, C) token ids -> (B, C) log-probabilities of those tokens."""
    return logp.gather(-1, tokens[..., None]).squeeze(-1)


def token_logprobs(model: torch.nn.Module, seqs: torch.Tensor, prompt_len: int, temperature: float) -> torch.Tensor:
    """(B, P + C) token ids -> (B, C) log-probabilities of the last C tokens given everything before them."""
    return gather_tokens(answer_logprobs(model, seqs, prompt_len, temperature), seqs[:, prompt_len:])


@torch.no_grad()
def sample(
    model: torch.nn.Module,
    prompts: torch.Tensor,
    length: int,
    *,
    temperature: float,
    scale: float = 1.0,
    greedy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sample ``length`` tokens after (B, P) ``prompts`` with torch's global RNG.

    Returns the (B, C) tokens, their (B, C) log-probabilities under the policy (``logits / temperature``) and the
    (B, C) entropy of the distribution actually sampled from (``logits * scale / temperature``).
    """
    seqs = prompts
    toks, logps, ents = [], [], []
    for _ in range(length):
        logits, _ = model(seqs)
        # a diverged (NaN) policy samples uniformly instead of crashing; its NaN loss is what gets reported
        logits = torch.nan_to_num(logits[:, -1], nan=0.0) / temperature + ANSWER_MASK  # (B, V)
        sampling = torch.log_softmax(logits * scale, dim=-1)
        nxt = sampling.argmax(-1) if greedy else torch.multinomial(sampling.exp(), 1).squeeze(-1)
        logps.append(torch.log_softmax(logits, dim=-1).gather(-1, nxt[:, None]).squeeze(-1))
        ents.append(-(sampling.exp() * sampling).sum(-1))
        toks.append(nxt)
        seqs = torch.cat([seqs, nxt[:, None]], dim=1)
    return torch.stack(toks, 1), torch.stack(logps, 1), torch.stack(ents, 1)


def held_out(cfg: TinyRLConfig, n: int, salt: int) -> list[tuple[str, str]]:
    """A fixed set of problems of its own RNG (``salt`` separates eval from gate), never the training stream."""
    rng = random.Random(f"held-out-{cfg.seed}-{cfg.n_digits}-{salt}")
    return [make_problem(rng, cfg.n_digits) for _ in range(n)]


@torch.no_grad()
def pass_rate(model: torch.nn.Module, cfg: TinyRLConfig, problems: list[tuple[str, str]]) -> float:
    """Held-out greedy exact match."""
    was_training = model.training
    model.eval()
    prompts = torch.tensor([encode(p) for p, _ in problems])
    toks, _, _ = sample(model, prompts, cfg.answer_len, temperature=1.0, greedy=True)
    model.train(was_training)
    right = sum(verify(decode(row), t).reward for row, (_, t) in zip(toks.tolist(), problems, strict=True))
    return right / len(problems)


# -----------------------------------------------------------------------------
# rollouts


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


def teacher_distributions(teacher: torch.nn.Module, batch: Rollout, cfg: TinyRLConfig) -> torch.Tensor:
    """(B, C, V) log p_teacher(. | hint + prompt, prefix) at the student's completion positions, no grad (rows
    without a hint: 0)."""
    out = torch.zeros(*batch.old_logp.shape, len(VOCAB))
    if batch.hinted.any():
        seqs = torch.cat([batch.hints[batch.hinted], batch.seqs[batch.hinted]], dim=1)
        with torch.no_grad():
            out[batch.hinted] = answer_logprobs(teacher, seqs, cfg.hint_len + cfg.prompt_len, cfg.temperature)
    return out


def teacher_logprobs(teacher: torch.nn.Module, batch: Rollout, cfg: TinyRLConfig) -> torch.Tensor:
    """(B, C) log p_teacher(token | hint + prompt, prefix) on the student's tokens (rows without a hint: 0)."""
    return gather_tokens(teacher_distributions(teacher, batch, cfg), batch.seqs[:, cfg.prompt_len :])


def distill_targets(
    teacher_logp: torch.Tensor, tokens: torch.Tensor, hinted: torch.Tensor, flagged: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The distillation target and where it applies, from the (B, C, V) teacher log-distributions.

    At the flagged position of each hinted row the target is the teacher's distribution conditioned on what the
    hint says for certain, "not the flagged token": that token's probability set to 0, the rest renormalised.
    Returns the (B, C, V) target log-distributions and the (B, C) bool mask of the flagged positions.
    """
    mask = torch.zeros_like(tokens, dtype=torch.bool)
    rows = hinted.nonzero().squeeze(1)
    mask[rows, flagged[rows]] = True
    excluded = F.one_hot(tokens, teacher_logp.size(-1)).bool() & mask[..., None]
    target = torch.log_softmax(teacher_logp.masked_fill(excluded, -1e9), dim=-1)
    return target, mask


def distill_loss(student_logp: torch.Tensor, target_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``KL(target || student)`` over the vocabulary at the ``mask`` positions, summed and divided by the number
    of (B, C) tokens: the same per-token normalisation as the policy loss."""
    kl = (target_logp.exp() * (target_logp - student_logp)).sum(-1)  # (B, C)
    return (kl * mask).sum() / mask.numel()


def distill_weight(algo: str, lam: float, coef: float) -> float:
    """Weight of the distillation term: ``coef`` for sdpo, ``(1 - lam) * coef`` for blend, 0 for grpo and rlsd."""
    return {"sdpo": coef, "blend": (1.0 - lam) * coef}.get(algo, 0.0)


# -----------------------------------------------------------------------------
# warm-up and gate


def _synthetic_hint(rng: random.Random, answer: str) -> str:
    """A hint about an off-by-one digit (a missed or spurious carry, the typical mistake) at a random position."""
    pos = rng.randrange(len(answer) - 1)
    return make_hint(pos, str((int(answer[pos]) + rng.choice((-1, 1))) % 10), len(answer))


@torch.no_grad()
def _hinted_examples(
    model: torch.nn.Module, cfg: TinyRLConfig, rng: random.Random, n: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` hint + prompt + correct answer sequences and their (n, C) loss weights. The hint is the verifier's on
    the model's own sample (the token the model would have said is named as wrong, as in RL), or an off-by-one one
    when the sample is right. The flagged position weighs ``1 + FLAGGED_WEIGHT``: reading the hint is the point."""
    problems = [make_problem(rng, cfg.n_digits) for _ in range(n)]
    prompts = torch.tensor([encode(p) for p, _ in problems])
    model.eval()
    toks, _, _ = sample(model, prompts, cfg.answer_len, temperature=1.0)
    model.train()
    rows = []
    weights = torch.ones(n, cfg.answer_len)
    for i, (row, (prompt, target)) in enumerate(zip(toks.tolist(), problems, strict=True)):
        hint = verify(decode(row), target).hint or _synthetic_hint(rng, target + END)
        rows.append(encode(hint + prompt + target + END))
        weights[i, hint.index(next(c for c in hint[1:] if c != HINT_BLANK)) - 1] += FLAGGED_WEIGHT
    return torch.tensor(rows), weights


def _warmup_loss(
    model: torch.nn.Module, seqs: torch.Tensor, answer_len: int, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """Cross-entropy on the answer tokens only, weighted per token (mean weight 1 when ``weights`` is None)."""
    logits, _ = model(seqs[:, :-1])
    logits = logits[:, -answer_len:]  # (B, C, V): predictions of the answer tokens only
    ce = F.cross_entropy(logits.reshape(-1, logits.size(-1)), seqs[:, -answer_len:].reshape(-1), reduction="none")
    if weights is None:
        return ce.mean()
    return (ce * weights.reshape(-1)).sum() / weights.sum()


def warmup_key(cfg: TinyRLConfig) -> str:
    shape = json.dumps({k: getattr(cfg, k) for k in WARMUP_FIELDS}, sort_keys=True)
    return hashlib.sha256(shape.encode()).hexdigest()[:12]


def warmup(cfg: TinyRLConfig, *, verbose: bool) -> tuple[TinyLM, int]:
    """Supervised warm-up from scratch (seeded by ``cfg.seed`` alone): plain and hinted examples, answer-only loss.

    ``warmup_steps`` steps; then, while the model is not ready (:func:`warmup_not_ready`: its held-out pass rate under
    ``warmup_min_pass_rate``, or :func:`hint_gate` failing because it does not read hints yet), a quarter of
    ``warmup_steps`` more at a time, up to ``warmup_max_steps`` in all. The checks do not move the training's random
    state, so step N's weights are the same however often they were made. Returns the model and its steps; the job's
    own gate afterwards says whether it passed.
    """
    torch.manual_seed(cfg.seed)
    rng = random.Random(f"warmup-{cfg.seed}")
    model = build_model(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.warmup_lr, betas=(0.9, 0.99), weight_decay=0.01)
    n_hint = round(cfg.warmup_batch * cfg.warmup_hint_frac)
    train_on = 0 < cfg.warmup_steps < cfg.warmup_max_steps  # else exactly warmup_steps, and no gate asked here
    most = cfg.warmup_max_steps if train_on else cfg.warmup_steps
    every = max(1, cfg.warmup_steps // 4)
    check_at = cfg.warmup_steps
    checks = held_out(cfg, cfg.eval_size, salt=3) if train_on else []  # salt 1 is RL's eval set, 2 the gate's
    step = 0
    while step < most:
        step += 1
        loss = torch.zeros(())
        if n_hint < cfg.warmup_batch:
            problems = [make_problem(rng, cfg.n_digits) for _ in range(cfg.warmup_batch - n_hint)]
            plain = torch.tensor([encode(p + t + END) for p, t in problems])
            loss = loss + _warmup_loss(model, plain, cfg.answer_len)
        if n_hint:
            seqs, weights = _hinted_examples(model, cfg, rng, n_hint)
            loss = loss + _warmup_loss(model, seqs, cfg.answer_len, weights)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if verbose and (step % 100 == 0 or step == cfg.warmup_steps):
            print(f"warmup {step}/{cfg.warmup_steps} loss {loss.item():.4f}", flush=True)
        if not train_on or step < check_at:
            continue
        not_yet = warmup_not_ready(model, cfg, checks)
        if not_yet is None:
            break
        if step + every > most:
            if verbose:
                print(f"warmup {step}: {not_yet}, at warmup_max_steps {most}: stopping here", flush=True)
            break
        check_at = step + every
        if verbose:
            print(f"warmup {step}: {not_yet}; training on to step {check_at} (at most {most})", flush=True)
    return model, step


def warmup_not_ready(model: torch.nn.Module, cfg: TinyRLConfig, problems: list[tuple[str, str]]) -> str | None:
    """Why the warm-up may not stop yet (what the log says), or None when it may.

    Ready when the greedy pass rate on ``problems`` (a held-out set of the warm-up's own, not RL's eval set, so that
    stopping on a lucky check does not flatter RL's first number) is at least ``warmup_min_pass_rate`` and the model
    reads hints, or when the gate finds too few wrong samples to measure (more training would leave fewer still: the
    job's gate says so). Neither check draws from the training's random state."""
    if cfg.warmup_min_pass_rate > 0:
        rate = pass_rate(model, cfg, problems)
        if rate < cfg.warmup_min_pass_rate:
            return f"held-out pass rate {rate:.2f} < warmup_min_pass_rate {cfg.warmup_min_pass_rate}"
    try:
        hint_gate(model, cfg)
    except TooFewWrong:
        return None
    except GateFailed as e:
        return f"the model does not read hints yet (gate ratio {e.ratio or 0:.2f} > {cfg.gate_max_ratio})"
    return None


def load_or_warmup(cfg: TinyRLConfig, cache_root: Location, *, verbose: bool) -> tuple[TinyLM, Location | None, bool]:
    """The cached warm-up model for ``cfg``'s warm-up fields, trained and saved (atomically) if absent.

    Returns the model, the cache file and whether it came from the cache.
    """
    cache = CheckpointDir(join(cache_root, f"warmup-{warmup_key(cfg)}"), suffix=".pt", keep=1)
    for _, path in reversed(cache.list()):
        try:
            with cache.open(path) as f:
                state = torch.load(f, map_location="cpu", weights_only=True)
            model = build_model(cfg)
            model.load_state_dict(state["model"])
        except Exception as e:
            if verbose:
                print(f"warning: skipping unreadable warm-up cache {path}: {e}", file=sys.stderr, flush=True)
            continue
        return model, path, True
    cache.remove_partial()
    model, steps = warmup(cfg, verbose=verbose)
    warm_cfg = {k: getattr(cfg, k) for k in WARMUP_FIELDS}
    saved = cache.save(steps, lambda f: torch.save({"model": model.state_dict(), "config": warm_cfg}, f))
    return model, saved, False


class GateFailed(RuntimeError):
    """The hint gate failed: the model does not read hints (``ratio``, when measured, is above the maximum)."""

    def __init__(self, message: str, ratio: float | None = None) -> None:
        super().__init__(message)
        self.ratio = ratio


class TooFewWrong(GateFailed):
    """The hint gate could not measure: too few held-out samples were wrong."""


@torch.no_grad()
def hint_gate(model: torch.nn.Module, cfg: TinyRLConfig) -> dict[str, float]:
    """Does the model read hints? Sample answers to held-out problems; at each wrong sample's first wrong token,
    compare the probability of that token with the hint in context against without it.

    Returns ``p_plain`` and ``p_hinted`` (mean probabilities of the flagged token), ``ratio`` and ``flagged`` (how
    many samples were wrong); raises ``GateFailed`` when the ratio is above ``gate_max_ratio`` or fewer than 10
    samples were wrong (nothing to measure).
    """
    problems = held_out(cfg, cfg.gate_size, salt=2)
    state = torch.get_rng_state()
    torch.manual_seed(cfg.seed + 7919)
    was_training = model.training
    model.eval()
    prompts = torch.tensor([encode(p) for p, _ in problems])
    toks, _, _ = sample(model, prompts, cfg.answer_len, temperature=cfg.temperature)
    torch.set_rng_state(state)
    rows, hints, pos = [], [], []
    for i, (row, (_, target)) in enumerate(zip(toks.tolist(), problems, strict=True)):
        v = verify(decode(row), target)
        if v.hint is not None and v.position is not None:
            rows.append(i)
            hints.append(encode(v.hint))
            pos.append(v.position)
    if len(rows) < 10:
        model.train(was_training)
        raise TooFewWrong(
            f"hint gate: only {len(rows)} of {cfg.gate_size} held-out samples were wrong, too few to measure whether "
            "the warm-up model reads hints (lower warmup_steps)"
        )
    seqs = torch.cat([prompts, toks], dim=1)[rows]
    plain = token_logprobs(model, seqs, cfg.prompt_len, cfg.temperature)
    hinted = token_logprobs(
        model, torch.cat([torch.tensor(hints), seqs], dim=1), cfg.hint_len + cfg.prompt_len, cfg.temperature
    )
    model.train(was_training)
    idx = torch.tensor(pos)[:, None]
    p_plain = float(plain.gather(1, idx).exp().mean().item())
    p_hinted = float(hinted.gather(1, idx).exp().mean().item())
    result = {"p_plain": p_plain, "p_hinted": p_hinted, "ratio": p_hinted / p_plain, "flagged": float(len(rows))}
    if result["ratio"] > cfg.gate_max_ratio:
        raise GateFailed(
            f"hint gate failed: with the hint in context the flagged token keeps probability {p_hinted:.3f} against "
            f"{p_plain:.3f} without (ratio {result['ratio']:.2f} > gate_max_ratio {cfg.gate_max_ratio}) over "
            f"{len(rows)} wrong held-out samples; the warm-up did not teach the model to read hints "
            "(raise warmup_steps, warmup_max_steps or warmup_hint_frac)",
            ratio=result["ratio"],
        )
    return result


# -----------------------------------------------------------------------------
# learner


@dataclass
class Learner:
    cfg: TinyRLConfig
    model: TinyLM
    ref: TinyLM  # the frozen warm-up model (KL)
    ema: TinyLM | None  # teacher=ema
    optimizer: torch.optim.Optimizer

    @property
    def teacher(self) -> torch.nn.Module:
        return self.ema if self.ema is not None else self.model

    def step(self, batch: Rollout, *, nan: bool) -> dict[str, float]:
        """One update on ``batch``; returns the step's metrics."""
        cfg = self.cfg
        a_grpo = grpo_advantages(batch.rewards).reshape(-1, 1).expand_as(batch.old_logp)  # (B, C)
        tokens = batch.seqs[:, cfg.prompt_len :]
        t_dist = teacher_distributions(self.teacher, batch, cfg)
        target, at_flagged = distill_targets(t_dist, tokens, batch.hinted, batch.flagged)
        sd_weight = distill_weight(cfg.algo, cfg.lam, cfg.sd_kl_coef)
        with torch.no_grad():
            s_logp = token_logprobs(self.model, batch.seqs, cfg.prompt_len, cfg.temperature)
            a_sd = sdpo_advantages(gather_tokens(t_dist, tokens), s_logp, batch.hinted)
            adv = combine_advantages(cfg.algo, a_grpo, a_sd, batch.hinted, cfg.lam, distill=sd_weight > 0)
            kl = self._kl(batch)
        loss = torch.zeros(())
        clip_frac = 0.0
        for _ in range(cfg.ppo_epochs):
            s_dist = answer_logprobs(self.model, batch.seqs, cfg.prompt_len, cfg.temperature)
            loss, clip_frac = clipped_policy_loss(gather_tokens(s_dist, tokens), batch.old_logp, adv, cfg.clip_eps)
            if sd_weight > 0:
                loss = loss + sd_weight * distill_loss(s_dist, target, at_flagged)
            if nan:
                loss = loss * float("nan")  # diverge for real: NaN gradients poison the weights
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
        if self.ema is not None:
            with torch.no_grad():
                for pe, p in zip(self.ema.parameters(), self.model.parameters(), strict=True):
                    pe.lerp_(p, 1.0 - cfg.ema_decay)
        metrics = {
            "loss": float(loss.item()),
            "reward": float(batch.rewards.mean().item()),
            "frac_reward_zero_std": zero_std_fraction(batch.rewards),
            "entropy": batch.entropy,
            "kl": kl,
            "clip_frac": clip_frac,
        }
        metrics.update(flagged_advantages(a_sd, batch.hinted, batch.flagged))
        return metrics

    @torch.no_grad()
    def _kl(self, batch: Rollout) -> float:
        """Mean per-token KL(policy || frozen warm-up model) at the sampled positions."""
        p = self.cfg.prompt_len
        t = self.cfg.temperature
        lp = torch.log_softmax(self.model(batch.seqs[:, :-1])[0][:, p - 1 :] / t + ANSWER_MASK, -1)
        lq = torch.log_softmax(self.ref(batch.seqs[:, :-1])[0][:, p - 1 :] / t + ANSWER_MASK, -1)
        return float((lp.exp() * (lp - lq)).sum(-1).mean().item())


def flagged_advantages(a_sd: torch.Tensor, hinted: torch.Tensor, flagged: torch.Tensor) -> dict[str, float]:
    """Mean self-distillation advantage at the flagged positions and at the other tokens of hinted rows
    (empty when no row had a hint)."""
    if not hinted.any():
        return {}
    rows = a_sd[hinted]  # (H, C)
    mask = torch.zeros_like(rows, dtype=torch.bool)
    mask[torch.arange(len(rows)), flagged[hinted]] = True
    return {"sd_adv_flagged": float(rows[mask].mean().item()), "sd_adv_unflagged": float(rows[~mask].mean().item())}


# -----------------------------------------------------------------------------
# checkpoints


def checkpoints(ckpt_dir: Location) -> CheckpointDir:
    return CheckpointDir(ckpt_dir, suffix=".pt", keep=KEEP_CHECKPOINTS)


def save_checkpoint(ckpts: CheckpointDir, step: int, state: dict[str, Any]) -> Location | None:
    """Write ``state`` as the checkpoint for ``step`` atomically, then prune old ones (None: an object store could
    not take it; logged, training goes on)."""
    return ckpts.save(step, lambda f: torch.save(state, f))


def load_latest_checkpoint(ckpt_dir: Location, *, verbose: bool) -> dict[str, Any] | None:
    """The newest RL checkpoint in ``ckpt_dir`` that loads cleanly; unreadable ones are skipped (warning)."""
    needed = {"model", "optimizer", "ref", "ema", "rng", "generations", "weight_version", "config"}
    ckpts = checkpoints(ckpt_dir)
    for step, path in reversed(ckpts.list()):
        try:
            with ckpts.open(path) as f:
                state = torch.load(f, map_location="cpu", weights_only=False)
            if not isinstance(state, dict) or state.get("step") != step:
                raise ValueError(f"expected a checkpoint dict for step {step}")
            missing = needed - state.keys()
            if missing:
                raise ValueError(f"missing {', '.join(sorted(missing))}")
        except Exception as e:
            if verbose:
                print(f"warning: skipping unreadable checkpoint {path}: {e}", file=sys.stderr, flush=True)
            continue
        return state
    return None


# -----------------------------------------------------------------------------
# training


def train(
    cfg: TinyRLConfig,
    *,
    checkpoint_dir: str | Path | None = None,
    on_step: StepCallback | None = None,
    on_workers: Callable[[list[Any]], None] | None = None,
) -> RLSummary:
    """Warm up (or load the cached warm-up), gate, then RL; resume RL from the newest checkpoint if there is one.

    ``checkpoint_dir`` overrides ``LABBOT_CHECKPOINT_DIR``. ``on_step(step, metrics)`` gets exactly what went to
    telemetry each step; ``on_workers(actors)`` gets the Ray rollout actors once they exist (tests kill one).
    """
    job = JobEnv.from_environ(checkpoint_dir)
    if cfg.num_threads > 0:
        torch.set_num_threads(cfg.num_threads)
    telemetry.init()
    try:
        return _train(cfg, job, on_step, on_workers)
    finally:
        telemetry.finish()


def _train(
    cfg: TinyRLConfig,
    job: JobEnv,
    on_step: StepCallback | None,
    on_workers: Callable[[list[Any]], None] | None,
) -> RLSummary:
    ckpts = checkpoints(job.checkpoint_dir)
    ckpts.remove_partial()
    evals = held_out(cfg, cfg.eval_size, salt=1)
    state = load_latest_checkpoint(job.checkpoint_dir, verbose=True)
    model = build_model(cfg)
    ref = build_model(cfg)
    gate: dict[str, float] | None = None
    pass_rates: dict[int, float] = {}
    gens_at: dict[int, int] = {}
    if state is not None:
        saved = {k: state["config"].get(k) for k in WARMUP_FIELDS}
        if saved != {k: getattr(cfg, k) for k in WARMUP_FIELDS}:
            raise ValueError(
                f"checkpoint step {state['step']} in {job.checkpoint_dir} is for a different task or model "
                f"({saved}); use a fresh LABBOT_CHECKPOINT_DIR or the same flags"
            )
        model.load_state_dict(state["model"])
        ref.load_state_dict(state["ref"])
        start = int(state["step"]) + 1
        generations = int(state["generations"])
        version = int(state["weight_version"])
        stale_dropped = int(state.get("stale_dropped", 0))
        print(f"resumed from checkpoint step {state['step']}", flush=True)
    else:
        telemetry.phase("warmup")
        root: Location = Path(cfg.warmup_dir) if cfg.warmup_dir else job.checkpoint_dir
        warm, path, cached = load_or_warmup(cfg, root, verbose=True)
        print(f"warm-up {'loaded from' if cached else 'saved to'} {path}", flush=True)
        model.load_state_dict(warm.state_dict())
        ref.load_state_dict(warm.state_dict())
        telemetry.phase("eval")
        gate = hint_gate(model, cfg)
        print(
            f"hint gate passed: p(flagged) {gate['p_plain']:.3f} -> {gate['p_hinted']:.3f} with the hint "
            f"(ratio {gate['ratio']:.2f}, {gate['flagged']:.0f} wrong samples)",
            flush=True,
        )
        pass_rates[0] = pass_rate(model, cfg, evals)
        gens_at[0] = 0
        telemetry.log(0, pass_rate=pass_rates[0], gate_ratio=gate["ratio"])
        print(f"warm-up pass rate {pass_rates[0]:.3f}", flush=True)
        start, generations, version, stale_dropped = 1, 0, 0, 0
    ref.requires_grad_(False)
    ema = copy.deepcopy(model).requires_grad_(False) if cfg.teacher == "ema" else None
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.99), weight_decay=0.0)
    torch.manual_seed(cfg.rl_seed)
    rng = random.Random(f"rl-{cfg.rl_seed}")  # the training problems
    if state is not None:
        optimizer.load_state_dict(state["optimizer"])
        if ema is not None and state["ema"] is not None:
            ema.load_state_dict(state["ema"])
        torch.set_rng_state(state["rng"]["torch"])
        rng.setstate(state["rng"]["python"])
    learner = Learner(cfg, model, ref, ema, optimizer)
    del state

    source: RolloutSource
    if cfg.num_rollout_workers > 0:
        source = RayRollouts(cfg, model, version, job, on_workers)
    else:
        source = LocalRollouts(cfg, model, rng, job)
    max_lag = 0
    tokens = 0  # completion tokens trained on after the first step (which pays for starting rollout workers)
    t_first: float | None = None
    step = start - 1
    t_start = time.perf_counter()
    try:
        for step in range(start, cfg.steps + 1):
            t0 = time.perf_counter()
            telemetry.phase("rollout")
            batch, dropped = source.next(step, version)
            stale_dropped += dropped
            lag = version - batch.version
            max_lag = max(max_lag, lag)
            n_samples = batch.seqs.size(0)
            generations += n_samples
            if t_first is None:
                t_first = time.perf_counter()
            else:
                tokens += n_samples * cfg.answer_len
            if not job.is_restart and step == cfg.crash_at_step:
                raise RuntimeError(f"injected crash at step {step}")
            telemetry.phase("learn")
            nan = not job.is_restart and cfg.nan_at_step > 0 and step >= cfg.nan_at_step
            metrics = learner.step(batch, nan=nan)
            version += 1
            source.push(version)
            # in-process: the sampling time; with workers, generation overlaps learning: the step's wall time
            gen_time = batch.gen_seconds if isinstance(source, LocalRollouts) else time.perf_counter() - t0
            metrics.update(
                generations=float(generations),
                tokens_per_s=n_samples * cfg.answer_len / max(gen_time, 1e-9),
                stale_dropped=float(stale_dropped),
                rollout_lag=float(lag),
                rollout_worker_failures=float(source.failures),
            )
            if step % cfg.eval_every == 0 or step == cfg.steps:
                telemetry.phase("eval")
                metrics["pass_rate"] = pass_rates[step] = pass_rate(model, cfg, evals)
                gens_at[step] = generations
            telemetry.log(step, **metrics)
            if on_step is not None:
                on_step(step, metrics)
            if step % cfg.log_every == 0 or step == cfg.steps:
                pr = f" pass_rate {metrics['pass_rate']:.3f}" if "pass_rate" in metrics else ""
                print(
                    f"step {step}/{cfg.steps} reward {metrics['reward']:.3f}{pr} entropy {metrics['entropy']:.3f} "
                    f"kl {metrics['kl']:.4f} generations {generations} stale_dropped {stale_dropped}",
                    flush=True,
                )
            if (cfg.checkpoint_every and step % cfg.checkpoint_every == 0) or step == cfg.steps:
                ckpt = {
                    "step": step,
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "ref": ref.state_dict(),
                    "ema": ema.state_dict() if ema is not None else None,
                    "rng": {"torch": torch.get_rng_state(), "python": rng.getstate()},
                    "generations": generations,
                    "weight_version": version,
                    "stale_dropped": stale_dropped,
                    "config": asdict(cfg),
                    "vocab": VOCAB,
                }
                path = save_checkpoint(ckpts, step, ckpt)
                if path is not None:  # None: the object store was unreachable (logged); training goes on
                    telemetry.checkpoint(step, str(path))
            if not job.is_restart and step == cfg.hang_at_step:
                hang_forever(step)
            pace(t0, cfg.min_step_s)
    finally:
        source.close()
    elapsed = time.perf_counter() - t_start
    n_steps = step - start + 1
    return RLSummary(
        start_step=start,
        final_step=step,
        resumed_from=start - 1 if start > 1 else None,
        warmup_pass_rate=pass_rates.get(0),
        gate=gate,
        final_pass_rate=pass_rates.get(step),
        pass_rates=pass_rates,
        generations_at_pass_rate=gens_at,
        generations=generations,
        stale_dropped=stale_dropped,
        max_rollout_lag=max_lag,
        steps_per_s=n_steps / elapsed if n_steps and elapsed > 0 else 0.0,
        rollout_tokens_per_s=tokens / (time.perf_counter() - t_first) if tokens and t_first is not None else 0.0,
    )


def _faults(cfg: TinyRLConfig, job: JobEnv, step: int) -> tuple[bool, bool]:
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
        stuck, collapse = _faults(self.cfg, self.job, step)
        self.model.eval()
        batch = generate_rollout(self.model, self.cfg, self.rng, version=version, reward_stuck=stuck, collapse=collapse)
        self.model.train()
        return batch, 0


# -----------------------------------------------------------------------------
# Ray rollout actors (num_rollout_workers > 0); ray is imported only here


class RolloutWorker:
    """Body of a Ray rollout actor: a copy of the policy that samples with the weights it is handed."""

    def __init__(self, cfg_dict: dict[str, Any], index: int) -> None:
        torch.set_num_threads(1)
        self.cfg = TinyRLConfig(**cfg_dict)
        self.model = build_model(self.cfg).eval()
        self.rng = random.Random(f"worker-{self.cfg.seed}-{index}-{time.time_ns()}")
        torch.manual_seed(self.rng.randrange(2**31))
        self.version = -1

    def rollout(self, weights: dict[str, torch.Tensor], version: int, stuck: bool, collapse: bool) -> Rollout:
        if version != self.version:
            self.model.load_state_dict(weights)
            self.version = version
        return generate_rollout(self.model, self.cfg, self.rng, version=version, reward_stuck=stuck, collapse=collapse)

    def pid(self) -> int:
        """The process this actor runs in (a restarted actor has a new one)."""
        return os.getpid()


RESTARTING_RETRY_S = 0.2  # how soon a rollout actor that Ray is restarting is asked again


def is_stale(learner_version: int, batch_version: int) -> bool:
    """A batch sampled with weights more than one version behind the learner's: never trained on."""
    return learner_version - batch_version > 1


class RayRollouts(RolloutSource):
    """N rollout actors, one request in flight each; weights through the object store, tagged with a version."""

    def __init__(
        self,
        cfg: TinyRLConfig,
        model: torch.nn.Module,
        version: int,
        job: JobEnv,
        on_workers: Callable[[list[Any]], None] | None,
    ) -> None:
        import ray

        # Under ``python -m`` this file is ``__main__``: hand Ray the importable module's class
        from labbot.training.jobs import tiny_rl

        if not ray.is_initialized():
            ray.init()  # inside a Ray job this connects to its cluster; by hand it starts a local one
        self.ray = ray
        self.cfg, self.model, self.job = cfg, model, job
        actor: Any = ray.remote(num_cpus=1, max_restarts=cfg.worker_restarts, max_task_retries=0)(tiny_rl.RolloutWorker)
        self.actors: list[Any] = [actor.remote(asdict(cfg), i) for i in range(cfg.num_rollout_workers)]
        self.weights = ray.put({k: v.detach().clone() for k, v in model.state_dict().items()})
        self.version = version
        self.step = 0
        self.pending: dict[Any, int] = {}  # object ref -> actor index
        self.failures = 0
        self._last = 0  # the actor whose batch the learner took last: asked again after the learner's step
        for i in range(len(self.actors)):
            self._request(i)
        if on_workers is not None:
            on_workers(list(self.actors))

    def _request(self, i: int) -> None:
        stuck, collapse = _faults(self.cfg, self.job, max(self.step, 1))
        ref = self.actors[i].rollout.remote(self.weights, self.version, stuck, collapse)
        self.pending[ref] = i

    def next(self, step: int, version: int) -> tuple[Rollout, int]:
        from ray.exceptions import ActorUnavailableError, RayActorError

        self.step = step
        dropped = 0
        while True:
            done, _ = self.ray.wait(list(self.pending), num_returns=1)
            i = self.pending.pop(done[0])
            try:
                batch: Rollout = self.ray.get(done[0])
            except ActorUnavailableError:  # being restarted by Ray: not another death; ask it again shortly
                time.sleep(RESTARTING_RETRY_S)
                self._request(i)
                continue
            except RayActorError as e:  # died mid-request: Ray restarts it (up to worker_restarts times); ask again
                self.failures += 1
                if self.failures > self.cfg.worker_restarts * len(self.actors) + len(self.actors):
                    raise RuntimeError(f"rollout workers keep dying ({self.failures} failures): {e}") from e
                print(f"rollout worker {i} died ({type(e).__name__}); asking it again", flush=True)
                self._request(i)
                continue
            if is_stale(version, batch.version):
                dropped += 1  # never train on a rollout more than one version old
                self._request(i)
                continue
            self._last = i
            return batch, dropped

    def push(self, version: int) -> None:
        self.version = version
        self.weights = self.ray.put({k: v.detach().clone() for k, v in self.model.state_dict().items()})
        self._request(self._last)

    def close(self) -> None:
        for a in self.actors:
            self.ray.kill(a)


# -----------------------------------------------------------------------------
# command line


def build_parser() -> argparse.ArgumentParser:
    return dataclass_parser(
        TinyRLConfig,
        prog="python -m labbot.training.jobs.tiny_rl",
        description="RL with textual feedback (GRPO / self-distillation) on multi-digit addition.",
        choices={"algo": ALGOS, "teacher": TEACHERS},
    )


def parse_config(argv: Sequence[str] | None = None) -> TinyRLConfig:
    return config_from_flags(build_parser(), TinyRLConfig, argv)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_config(argv)
    exit_on_sigterm()
    try:
        s = train(cfg)
    except GateFailed as e:
        print(f"tiny-rl: {e}", file=sys.stderr, flush=True)
        return 1
    final = "-" if s["final_pass_rate"] is None else f"{s['final_pass_rate']:.3f}"
    warm = "-" if s["warmup_pass_rate"] is None else f"{s['warmup_pass_rate']:.3f}"
    print(
        f"done: steps {s['start_step']}..{s['final_step']}, pass rate {warm} -> {final}, "
        f"{s['generations']} generations, {s['stale_dropped']} stale dropped, {s['steps_per_s']:.1f} steps/s",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
