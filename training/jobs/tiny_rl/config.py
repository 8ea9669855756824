"""tiny-rl's configuration: every field is a flag of the job (``cli.py``) and a parameter of its registry entry.

The task's lengths follow from ``n_digits``: a prompt ``"047+085="``, an answer ``"2310$"`` (``n_digits + 1`` reversed
digits and the end token) and a hint ``"[..1..]"`` (one character per answer position, in brackets); the model's
context (``block_size``) holds all three.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from labbot.training.jobs.model import ModelConfig

ALGOS = ("grpo", "sdpo", "blend", "rlsd")
TEACHERS = ("self", "ema")
# the range checks of TinyRLConfig.__post_init__ beyond the choices and fractions
AT_LEAST_ONE = (
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
NON_NEGATIVE = (
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
    "kl_blowup_at_step",
    "grad_spike_at_step",
    "max_grad_norm",
)
KL_BLOWUP_LR = 20.0  # kl_blowup_at_step: a schedule that jumps to this × the learning rate and stays
GRAD_SPIKE_SCALE = 1e4  # grad_spike_at_step: one step's gradient times this (a bad backward; the loss reads as usual)
POSITIVE = ("temperature", "lr", "warmup_lr", "clip_eps", "gate_max_ratio")  # and finite


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
    max_grad_norm: float = field(default=1.0, metadata={"help": "clip the gradient to this norm (0 = no clipping)"})
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
    # fault injection; 0 = off. hang, crash, nan and a stuck reward on the first attempt only (a restart is the cure);
    # the collapse, the KL blow-up and the gradient spike on every attempt, each cured only by a change of parameter
    hang_at_step: int = field(default=0, metadata={"help": "stop making progress after this step (0 = off)"})
    crash_at_step: int = field(default=0, metadata={"help": "raise RuntimeError at this step (0 = off)"})
    nan_at_step: int = field(default=0, metadata={"help": "loss becomes NaN from this step on (0 = off)"})
    reward_stuck_at_step: int = field(default=0, metadata={"help": "every reward 0 from this step (0 = off)"})
    entropy_collapse_at_step: int = field(
        default=0,
        metadata={"help": "the sampling temperature anneals by 0.9999 from this step: near-greedy at temperature 1"},
    )
    kl_blowup_at_step: int = field(
        default=0, metadata={"help": f"the learning rate is {KL_BLOWUP_LR:g}x from this step on (0 = off)"}
    )
    grad_spike_at_step: int = field(
        default=0,
        metadata={"help": f"this one step's gradient is {GRAD_SPIKE_SCALE:g}x: a spike, clipped by max_grad_norm"},
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
        for name in AT_LEAST_ONE:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in NON_NEGATIVE:
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 or more, got {getattr(self, name)}")
        if not (0 <= self.min_step_s <= 60):
            raise ValueError(f"min_step_s must be from 0 to 60 seconds, got {self.min_step_s}")
        if not (self.sd_kl_coef >= 0 and math.isfinite(self.sd_kl_coef)):
            raise ValueError(f"sd_kl_coef must be 0 or more, got {self.sd_kl_coef}")
        for name in POSITIVE:
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
