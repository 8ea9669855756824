"""What the tiny-rl tests share: a tiny config (one-digit problems, a few warm-up steps, a gate any model passes: the
gate has tests of its own) and a recorder of the metrics each step reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from labbot.training.jobs.tiny_rl import TinyRLConfig

TELEMETRY_ENV = ("LABBOT_CONTROL_URL", "LABBOT_RUN_ID", "LABBOT_TELEMETRY_TOKEN")


def tiny(warm_dir: Path, **overrides: Any) -> TinyRLConfig:
    base: dict[str, Any] = {
        "n_digits": 1,
        "steps": 4,
        "group_size": 4,
        "prompts_per_step": 4,
        "eval_every": 2,
        "eval_size": 20,
        "gate_size": 40,
        "gate_max_ratio": 100.0,  # any model passes; the gate is tested on its own
        "warmup_min_pass_rate": 0.0,  # a 20-step model adds nothing up: the warm-up's floor is tested on its own
        "warmup_steps": 20,
        "warmup_batch": 16,
        "checkpoint_every": 0,
        "log_every": 1000,
        "n_embd": 32,
        "warmup_dir": str(warm_dir),
    }
    return TinyRLConfig(**{**base, **overrides})


class Recorder:
    def __init__(self) -> None:
        self.metrics: dict[int, dict[str, float]] = {}

    def __call__(self, step: int, metrics: dict[str, float]) -> None:
        self.metrics[step] = dict(metrics)
