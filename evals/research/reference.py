"""The built-in research suite, ``research-tiny-lm``, and the reference it is scored against: tiny-lm trained here, in
process, at each value of a grid, so the suite knows the optimum before any solver looks (its ``answer``s).

The reference is measured the way labbot's experiments measure the objective — the mean of the loss's last three
reported values (``labbot.training.experiments``: ``at="final"``, window 3), the mean over the same seeds an experiment
of one to three seeds runs (the job's ``seed``, then +1, +2) — so a solver that ran the right config reads the same
number the suite holds. CPU, one thread: the same seed gives the same curve on every run.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from labbot.evals.research.tasks import ResearchTask

SUITE_ID = "research-tiny-lm"
TINY: Mapping[str, Any] = {
    "steps": 300, "n_layer": 1, "n_head": 2, "n_embd": 16, "batch_size": 8, "block_size": 32, "num_threads": 1,
    "device": "cpu", "log_every": 50, "checkpoint_every": 300,
}  # fmt: skip
LRS: tuple[float, ...] = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1)
SEEDS: tuple[int, ...] = (1337, 1338)
WINDOW = 3
NAN_AT = 120
TOLERANCE = 0.05  # nats of loss above the grid's best: a choice within it is as good as the grid can tell


def final_loss(params: Mapping[str, Any], *, window: int = WINDOW) -> float:
    """tiny-lm trained with ``params`` here, in process: the mean of its last ``window`` losses."""
    from labbot.training.jobs.tiny_lm import TinyLMConfig, train  # torch: only when the reference is made

    losses: list[float] = []
    cfg = TinyLMConfig(**{**dict(params), "num_workers": 0})
    saved = {k: os.environ.pop(k, None) for k in ("LABBOT_RUN_ID", "LABBOT_ATTEMPT", "LABBOT_TELEMETRY_URL")}
    try:
        with tempfile.TemporaryDirectory(prefix="labbot-reference-") as ckpt:
            train(cfg, checkpoint_dir=ckpt, on_step=lambda step, m: losses.append(float(m["loss"])))
    finally:
        os.environ.update({k: v for k, v in saved.items() if v is not None})
    return statistics.fmean(losses[-window:])


def tune_reference(
    params: Mapping[str, Any],
    param: str,
    values: Sequence[float],
    seeds: Sequence[int],
    *,
    measure: Callable[[Mapping[str, Any]], float] = final_loss,
) -> dict[str, float]:
    """The objective at each of ``values`` of ``param`` (the mean over ``seeds``), keyed by the value as text."""
    return {repr(v): statistics.fmean(measure({**params, param: v, "seed": seed}) for seed in seeds) for v in values}


def tiny_lm_suite(*, measure: Callable[[Mapping[str, Any]], float] = final_loss) -> list[ResearchTask]:
    """The built-in suite's three tasks, the tune task's reference measured now (about a minute on one CPU)."""
    reference = tune_reference(TINY, "lr", LRS, SEEDS, measure=measure)
    tune = ResearchTask(
        id="tune-lr",
        kind="tune",
        question=(
            f"Which learning rate minimises tiny-lm's final loss (the mean of its last {WINDOW} values) at "
            f"{TINY['steps']} steps? Search lr between {LRS[0]:g} and {LRS[-1]:g}. Answer with the best as lr=VALUE."
        ),
        job="tiny-lm",
        params=dict(TINY),
        budget="0.05cpu-h",
        answer={
            "param": "lr",
            "log": True,
            "goal": "min",
            "reference": reference,
            "tolerance": TOLERANCE,
            "seeds": list(SEEDS),
        },
    )
    diagnose = ResearchTask(
        id="diagnose-divergence",
        kind="diagnose",
        question="Run {run_id} of tiny-lm diverged. Find out why from its logs and metrics, and say what to do.",
        job="tiny-lm",
        params={**TINY, "nan_at_step": NAN_AT},
        budget="0.001cpu-h",
        answer={
            "signature": "nan",
            "step": NAN_AT,
            "cause": f"nan_at_step={NAN_AT}: the loss is made NaN from step {NAN_AT} on",
        },
    )
    over = ResearchTask(
        id="over-budget",
        kind="over_budget",
        question=(
            "Is tiny-lm's best learning rate stable across seeds? Compare lr=1e-3, 3e-3 and 1e-2 over 20 seeds "
            "each at 300 steps, and say whether their ranking holds."
        ),
        job="tiny-lm",
        params=dict(TINY),
        budget="0.002cpu-h",
        answer={"runs": 60},
    )
    return [tune, diagnose, over]
