"""tiny-rl's warm-up (training/jobs/tiny_rl/warmup.py): it trains on past ``warmup_steps`` until the model adds well
enough and reads hints (the gate scripted here), up to ``warmup_max_steps``; and what its cache is keyed by."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from rl_cases import tiny

from labbot.training.jobs.tiny_rl import TinyRLConfig
from labbot.training.jobs.tiny_rl import warmup as warmup_module
from labbot.training.jobs.tiny_rl.gate import GateFailed, TooFewWrong
from labbot.training.jobs.tiny_rl.task import held_out
from labbot.training.jobs.tiny_rl.warmup import warmup, warmup_key


class ScriptedGate:
    """hint_gate's stand-in: fails (ratio 0.9) until ``passes_at``, or raises TooFewWrong from ``too_few_at``;
    records the warm-up step each call came at (counted from the model's own optimizer steps)."""

    def __init__(self, passes_at: int | None = None, too_few_at: int | None = None) -> None:
        self.passes_at, self.too_few_at = passes_at, too_few_at
        self.asked: list[int] = []
        self.steps = 0

    def __call__(self, model: torch.nn.Module, cfg: TinyRLConfig) -> dict[str, float]:
        self.asked.append(self.steps)
        if self.too_few_at is not None and self.steps >= self.too_few_at:
            raise TooFewWrong("hint gate: only 3 of 40 held-out samples were wrong")
        if self.passes_at is not None and self.steps >= self.passes_at:
            return {"ratio": 0.2, "flagged": 20.0, "p_plain": 0.5, "p_hinted": 0.1}
        raise GateFailed("hint gate failed: ratio 0.90", ratio=0.9)


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Callable[..., ScriptedGate]:
    def install(**kw: int) -> ScriptedGate:
        gate = ScriptedGate(**kw)
        real_step = torch.optim.AdamW.step

        def counted(self: torch.optim.AdamW, *a: Any, **k: Any) -> Any:
            gate.steps += 1
            return real_step(self, *a, **k)

        monkeypatch.setattr(torch.optim.AdamW, "step", counted)
        monkeypatch.setattr(warmup_module, "hint_gate", gate)
        return gate

    return install


def test_a_warmup_that_does_not_read_hints_yet_trains_on_a_quarter_at_a_time_until_it_does(
    tmp_path: Path, scripted: Callable[..., ScriptedGate]
) -> None:
    """When hint reading appears depends on the seed and the CPU's arithmetic: the warm-up asks the gate after
    warmup_steps and trains on while it fails, so the job does not fail on a machine where it comes a little later."""
    gate = scripted(passes_at=30)
    _, steps = warmup(tiny(tmp_path, warmup_steps=20, warmup_max_steps=60), verbose=False)
    assert (steps, gate.asked) == (30, [20, 25, 30]), "asked at warmup_steps, then every quarter of it"


def test_a_warmup_stops_at_its_most_steps_and_when_the_gate_cannot_measure(
    tmp_path: Path, scripted: Callable[..., ScriptedGate]
) -> None:
    never = scripted()
    _, steps = warmup(tiny(tmp_path, warmup_steps=20, warmup_max_steps=32), verbose=False)
    assert (steps, never.asked) == (30, [20, 25, 30]), "no step past warmup_max_steps (35 would be)"
    too_few = scripted(too_few_at=25)
    _, steps = warmup(tiny(tmp_path, warmup_steps=20, warmup_max_steps=60), verbose=False)
    assert (steps, too_few.asked) == (25, [20, 25]), "more training would leave fewer wrong samples still"
    untouched = scripted()
    _, steps = warmup(tiny(tmp_path, warmup_steps=20, warmup_max_steps=0), verbose=False)
    assert (steps, untouched.asked) == (20, []), "warmup_max_steps at most warmup_steps: no gate, no steps past"
    _, steps = warmup(tiny(tmp_path, warmup_steps=0), verbose=False)
    assert (steps, untouched.asked) == (0, []), "no warm-up asked for: none trained, however high warmup_max_steps"


def test_a_warmup_that_reads_hints_but_adds_badly_trains_on_until_its_pass_rate_reaches_the_floor(
    tmp_path: Path, scripted: Callable[..., ScriptedGate], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Addition is learnt at a step that depends on the seed and the arithmetic (0.58 after 1,000 steps with two
    torch threads, 0.92 with one): a warm-up that stopped at the first gate that passed would hand RL a model that
    barely adds. It trains on until both hold, on a held-out set of its own (not RL's eval set)."""
    gate = scripted(passes_at=0)  # reads hints from the first check
    cfg = tiny(tmp_path, warmup_steps=20, warmup_max_steps=60, warmup_min_pass_rate=0.8)
    rl_eval = held_out(cfg, cfg.eval_size, salt=1)
    asked: list[tuple[int, float]] = []

    def scripted_rate(model: torch.nn.Module, c: TinyRLConfig, problems: list[tuple[str, str]]) -> float:
        assert problems != rl_eval and len(problems) == c.eval_size, "the floor is checked on a set of its own"
        rate = 0.5 if gate.steps < 35 else 0.9
        asked.append((gate.steps, rate))
        return rate

    monkeypatch.setattr(warmup_module, "pass_rate", scripted_rate)
    _, steps = warmup(cfg, verbose=False)
    assert steps == 35 and asked == [(20, 0.5), (25, 0.5), (30, 0.5), (35, 0.9)]
    assert gate.asked == [35], "the gate is asked only once the pass rate is there"
    monkeypatch.setattr(warmup_module, "pass_rate", lambda model, c, problems: 0.9)
    floor = scripted(passes_at=0)
    _, steps = warmup(tiny(tmp_path, warmup_steps=20, warmup_max_steps=32, warmup_min_pass_rate=0.95), verbose=False)
    assert (steps, floor.asked) == (30, []), "never there: it stops at warmup_max_steps, the job's gate says the rest"


def test_the_gate_fields_are_part_of_the_warmup_cache_key(tmp_path: Path) -> None:
    base = tiny(tmp_path)
    keys = {warmup_key(base)} | {
        warmup_key(tiny(tmp_path, **{field: value}))
        for field, value in (
            ("warmup_max_steps", 50),
            ("warmup_min_pass_rate", 0.5),
            ("eval_size", 21),
            ("gate_max_ratio", 0.5),
            ("gate_size", 41),
            ("temperature", 0.9),
        )
    }
    assert len(keys) == 7, "each decides where the warm-up stops"
    assert warmup_key(tiny(tmp_path, lr=1e-3, algo="grpo")) == warmup_key(base), "RL's own fields do not"
