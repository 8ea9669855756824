"""Healthy runs of tiny-rl and tiny-lm over five seeds, each step judged by the watchdog's own rules
(``monitoring.observe`` and ``evaluate``, as the server runs them): no remedy fires — none of the findings a remedy
may act on (``remedies.FINDINGS``) holds at any step. In-process, small configs; ``benchmarks/rl_recovery.py`` does
the same at the default sizes beside the faulty runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from rl_cases import tiny

from labbot.training.jobs.tiny_lm import TinyLMConfig
from labbot.training.jobs.tiny_lm import train as train_lm
from labbot.training.jobs.tiny_rl import train as train_rl
from labbot.training.monitoring import RunState, Thresholds, evaluate, observe
from labbot.training.remedies import FINDINGS

T0 = datetime(2026, 12, 1, tzinfo=UTC)


class Judge:
    """The watchdog's judgment after every step; what it found that a remedy could act on."""

    def __init__(self) -> None:
        self.vitals: dict[str, Any] = {}
        self.acted: list[tuple[int, str]] = []

    def __call__(self, step: int, metrics: dict[str, float]) -> None:
        when = T0 + timedelta(seconds=step)
        self.vitals = observe(self.vitals, 1, [(step, when, metrics)], now=when)
        state = RunState(
            run_id="healthy", status="running", ray_status="RUNNING", ray_error_type=None, ray_message="",
            attempt=1, attempt_started_at=T0, last_telemetry_at=when, last_step=step, last_step_at=when,
            vitals=self.vitals, thresholds=Thresholds(),
        )  # fmt: skip
        self.acted += [(step, f.kind) for f in evaluate(state, when) if f.kind in FINDINGS]


@pytest.mark.parametrize("seed", range(5))
def test_a_healthy_tiny_rl_run_fires_no_remedy(seed: int, ckpt_dir: Path, warm_dir: Path) -> None:
    judge = Judge()
    # a warm-up that can add (a 20-step one cannot: every reward 0 is a true no_signal, not a healthy run)
    cfg = tiny(warm_dir, steps=25, rl_seed=seed, eval_every=25, warmup_steps=400, warmup_min_pass_rate=0.5)
    train_rl(cfg, on_step=judge)
    assert judge.vitals["rl"]["grad_norm"], "the rules saw the gradient norms"
    assert judge.acted == []


@pytest.mark.parametrize("seed", range(5))
def test_a_healthy_tiny_lm_run_fires_no_remedy(seed: int, ckpt_dir: Path) -> None:
    judge = Judge()
    cfg = TinyLMConfig(steps=60, checkpoint_every=0, log_every=1000, seed=seed, n_layer=1, n_embd=32, batch_size=8)
    train_lm(cfg, on_step=judge)
    assert len(judge.vitals["loss_window"]) >= 50
    assert judge.acted == []
