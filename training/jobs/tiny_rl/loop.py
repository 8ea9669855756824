"""The run: warm up (or load the cached warm-up) and pass the hint gate, or resume RL from the newest checkpoint; then
RL steps, each a rollout batch, a learner update, the held-out pass rate when due, telemetry, a checkpoint when due.
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import torch

from labbot.training.jobs.model import TinyLM
from labbot.training.jobs.runtime import hang_forever, pace
from labbot.training.jobs.tiny_rl.checkpoints import (
    check_compatible,
    checkpoint_state,
    checkpoints,
    load_latest_checkpoint,
    save_checkpoint,
)
from labbot.training.jobs.tiny_rl.config import GRAD_SPIKE_SCALE, KL_BLOWUP_LR, TinyRLConfig
from labbot.training.jobs.tiny_rl.gate import hint_gate
from labbot.training.jobs.tiny_rl.learner import Learner
from labbot.training.jobs.tiny_rl.policy import build_model, pass_rate
from labbot.training.jobs.tiny_rl.ray_rollouts import RayRollouts
from labbot.training.jobs.tiny_rl.rollouts import LocalRollouts, Rollout, RolloutSource
from labbot.training.jobs.tiny_rl.task import held_out
from labbot.training.jobs.tiny_rl.warmup import load_or_warmup
from labbot_client import telemetry
from labbot_client.checkpoints import CheckpointDir, JobEnv, Location

StepCallback = Callable[[int, dict[str, float]], None]


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


@dataclass
class Progress:
    """What the RL loop counts from step to step (a checkpoint keeps generations, version and stale_dropped)."""

    start: int = 1  # the first step this process runs
    generations: int = 0  # completions sampled, over every attempt
    version: int = 0  # the policy's weight version: learner steps taken
    stale_dropped: int = 0  # batches dropped as more than one version old
    gate: dict[str, float] | None = None  # the hint gate's numbers (a fresh start only)
    pass_rates: dict[int, float] = field(default_factory=dict)  # step -> held-out pass rate (0: the warm-up model)
    generations_at: dict[int, int] = field(default_factory=dict)  # step -> generations at that evaluation
    max_lag: int = 0  # the largest version lag of a batch trained on
    tokens: int = 0  # completion tokens trained on after the first step (which pays for starting rollout workers)
    t_first: float | None = None  # when the first batch arrived


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
    state = load_latest_checkpoint(job.checkpoint_dir, verbose=True, at_most=job.resume_step)
    model, ref = build_model(cfg), build_model(cfg)
    progress = _warm_start(cfg, job, model, ref, evals) if state is None else _resume(cfg, job, state, model, ref)
    learner, rng = _learner(cfg, model, ref, state)
    del state

    source: RolloutSource
    if cfg.num_rollout_workers > 0:
        source = RayRollouts(cfg, model, progress.version, job, on_workers)
    else:
        source = LocalRollouts(cfg, model, rng, job)
    step = progress.start - 1
    t_start = time.perf_counter()
    try:
        for step in range(progress.start, cfg.steps + 1):
            t0 = time.perf_counter()
            metrics = _rl_step(cfg, job, step, progress, source, learner, evals, t0)
            telemetry.log(step, **metrics)
            if on_step is not None:
                on_step(step, metrics)
            if step % cfg.log_every == 0 or step == cfg.steps:
                _print_step(cfg, step, metrics, progress)
            if (cfg.checkpoint_every and step % cfg.checkpoint_every == 0) or step == cfg.steps:
                _checkpoint(cfg, ckpts, step, learner, rng, progress)
            if not job.is_restart and step == cfg.hang_at_step:
                hang_forever(step)
            pace(t0, cfg.min_step_s)
    finally:
        source.close()
    return _summary(progress, step, t_start)


def _resume(cfg: TinyRLConfig, job: JobEnv, state: dict[str, Any], model: TinyLM, ref: TinyLM) -> Progress:
    """The policy, the reference and the counters from the newest checkpoint (not the warm-up)."""
    check_compatible(state, cfg, job.checkpoint_dir)
    model.load_state_dict(state["model"])
    ref.load_state_dict(state["ref"])
    print(f"resumed from checkpoint step {state['step']}", flush=True)
    return Progress(
        start=int(state["step"]) + 1,
        generations=int(state["generations"]),
        version=int(state["weight_version"]),
        stale_dropped=int(state.get("stale_dropped", 0)),
    )


def _warm_start(cfg: TinyRLConfig, job: JobEnv, model: TinyLM, ref: TinyLM, evals: list[tuple[str, str]]) -> Progress:
    """Policy and reference from the (cached) warm-up, which must pass the hint gate; its pass rate is step 0."""
    telemetry.phase("warmup")
    root: Location = Path(cfg.warmup_dir) if cfg.warmup_dir else job.checkpoint_dir
    warm, path, cached = load_or_warmup(cfg, root, verbose=True)
    print(f"warm-up {'loaded from' if cached else 'saved to'} {path}", flush=True)
    model.load_state_dict(warm.state_dict())
    ref.load_state_dict(warm.state_dict())
    telemetry.phase("eval")
    gate = hint_gate(model, cfg)  # raises GateFailed: the job fails with a message saying so
    print(
        f"hint gate passed: p(flagged) {gate['p_plain']:.3f} -> {gate['p_hinted']:.3f} with the hint "
        f"(ratio {gate['ratio']:.2f}, {gate['flagged']:.0f} wrong samples)",
        flush=True,
    )
    progress = Progress(gate=gate, pass_rates={0: pass_rate(model, cfg, evals)}, generations_at={0: 0})
    telemetry.log(0, pass_rate=progress.pass_rates[0], gate_ratio=gate["ratio"])
    print(f"warm-up pass rate {progress.pass_rates[0]:.3f}", flush=True)
    return progress


def _learner(
    cfg: TinyRLConfig, model: TinyLM, ref: TinyLM, state: dict[str, Any] | None
) -> tuple[Learner, random.Random]:
    """The learner (frozen reference, EMA teacher, optimiser) and the training problems' RNG, seeded by ``rl_seed``
    or restored from the checkpoint."""
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
    return Learner(cfg, model, ref, ema, optimizer), rng


def _rl_step(
    cfg: TinyRLConfig,
    job: JobEnv,
    step: int,
    progress: Progress,
    source: RolloutSource,
    learner: Learner,
    evals: list[tuple[str, str]],
    t0: float,
) -> dict[str, float]:
    """One RL step: a rollout batch, an update on it, the held-out pass rate when due. Returns the step's metrics."""
    telemetry.phase("rollout")
    batch, lag = _next_batch(cfg, step, progress, source)
    if not job.is_restart and step == cfg.crash_at_step:
        raise RuntimeError(f"injected crash at step {step}")
    telemetry.phase("learn")
    nan = not job.is_restart and cfg.nan_at_step > 0 and step >= cfg.nan_at_step
    spike = GRAD_SPIKE_SCALE if cfg.grad_spike_at_step > 0 and step == cfg.grad_spike_at_step else 1.0
    metrics = learner.step(batch, nan=nan, lr_scale=lr_fault(cfg, step), loss_scale=spike)
    progress.version += 1
    source.push(progress.version)
    # in-process: the sampling time; with workers, generation overlaps learning: the step's wall time
    gen_time = batch.gen_seconds if isinstance(source, LocalRollouts) else time.perf_counter() - t0
    n_samples = batch.seqs.size(0)
    metrics.update(
        generations=float(progress.generations),
        tokens_per_s=n_samples * cfg.answer_len / max(gen_time, 1e-9),
        stale_dropped=float(progress.stale_dropped),
        rollout_lag=float(lag),
        rollout_worker_failures=float(source.failures),
    )
    if step % cfg.eval_every == 0 or step == cfg.steps:
        telemetry.phase("eval")
        metrics["pass_rate"] = progress.pass_rates[step] = pass_rate(learner.model, cfg, evals)
        progress.generations_at[step] = progress.generations
    return metrics


def lr_fault(cfg: TinyRLConfig, step: int) -> float:
    """The injected schedule fault, on every attempt (a restart does not cure it; a lower ``lr`` may): from
    ``kl_blowup_at_step`` on, the learning rate is ``KL_BLOWUP_LR`` times ``lr``, as a schedule that jumps does."""
    return KL_BLOWUP_LR if cfg.kl_blowup_at_step > 0 and step >= cfg.kl_blowup_at_step else 1.0


def _next_batch(cfg: TinyRLConfig, step: int, progress: Progress, source: RolloutSource) -> tuple[Rollout, int]:
    """The batch learner ``step`` trains on, counted, and how many versions behind the learner it was sampled."""
    batch, dropped = source.next(step, progress.version)
    progress.stale_dropped += dropped
    lag = progress.version - batch.version
    progress.max_lag = max(progress.max_lag, lag)
    n_samples = batch.seqs.size(0)
    progress.generations += n_samples
    if progress.t_first is None:
        progress.t_first = time.perf_counter()
    else:
        progress.tokens += n_samples * cfg.answer_len
    return batch, lag


def _print_step(cfg: TinyRLConfig, step: int, metrics: dict[str, float], progress: Progress) -> None:
    pr = f" pass_rate {metrics['pass_rate']:.3f}" if "pass_rate" in metrics else ""
    print(
        f"step {step}/{cfg.steps} reward {metrics['reward']:.3f}{pr} entropy {metrics['entropy']:.3f} "
        f"kl {metrics['kl']:.4f} generations {progress.generations} stale_dropped {progress.stale_dropped}",
        flush=True,
    )


def _checkpoint(
    cfg: TinyRLConfig, ckpts: CheckpointDir, step: int, learner: Learner, rng: random.Random, progress: Progress
) -> None:
    state = checkpoint_state(
        cfg,
        step,
        learner,
        rng,
        generations=progress.generations,
        version=progress.version,
        stale=progress.stale_dropped,
    )
    path = save_checkpoint(ckpts, step, state)
    if path is not None:  # None: the object store was unreachable (logged); training goes on
        telemetry.checkpoint(step, str(path))


def _summary(progress: Progress, step: int, t_start: float) -> RLSummary:
    start = progress.start
    elapsed = time.perf_counter() - t_start
    n_steps = step - start + 1
    tokens, t_first = progress.tokens, progress.t_first
    return RLSummary(
        start_step=start,
        final_step=step,
        resumed_from=start - 1 if start > 1 else None,
        warmup_pass_rate=progress.pass_rates.get(0),
        gate=progress.gate,
        final_pass_rate=progress.pass_rates.get(step),
        pass_rates=progress.pass_rates,
        generations_at_pass_rate=progress.generations_at,
        generations=progress.generations,
        stale_dropped=progress.stale_dropped,
        max_rollout_lag=progress.max_lag,
        steps_per_s=n_steps / elapsed if n_steps and elapsed > 0 else 0.0,
        rollout_tokens_per_s=tokens / (time.perf_counter() - t_first) if tokens and t_first is not None else 0.0,
    )
