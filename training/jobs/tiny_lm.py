"""tiny-lm: a small character-level transformer LM, labbot's reference training job.

Launch it by hand, or the way labbot does through Ray's Jobs API::

    python -m labbot.training.jobs.tiny_lm --steps 200 --checkpoint_every 50
    python -m labbot.training.jobs.tiny_lm --steps 50 --checkpoint-every 10 --num_workers 2   # Ray Train, 2 workers
    python -m labbot.training.jobs.tiny_lm --help

Every ``TinyLMConfig`` field is a flag (``flags.py``); ``--checkpoint_every`` and ``--checkpoint-every`` are the
same flag. The model is a nanoGPT-style decoder (causal self-attention, a couple of layers; ``model.py``, shared
with tiny-rl) trained on the public-domain text in ``training/jobs/data/corpus.txt``. This file is the data, the
checkpoints, the training loop and its scale-out. CPU by default, CUDA when available (``--device auto``).

Environment (all optional, so the job also runs by hand):

* ``LABBOT_RUN_ID``: the labbot run this job belongs to (names the Ray Train run).
* ``LABBOT_ATTEMPT``: 1 for the first launch of a run, 2 for its first restart, ... (default 1).
* ``LABBOT_CHECKPOINT_DIR``: where checkpoints live (default ``./checkpoints``). On start the job resumes
  from the newest readable ``ckpt_XXXXXXXX.pt`` there; a corrupt or partial newest file is skipped in favour
  of the one before it. With Ray Train on several nodes this must be shared storage. Rank 0 writes
  ``ckpt_{step:08d}.pt`` atomically every ``checkpoint_every`` steps and at the last step, keeping the newest
  3; each holds model and optimizer state, the step, the config as a dict, the vocabulary and RNG state.
* whatever ``labbot_client.telemetry`` reads: rank 0 reports ``loss`` and ``tokens_per_s`` every step and every
  checkpoint it writes.

Fault injection, for exercising labbot's babysitting. Each fires ONLY when ``LABBOT_ATTEMPT`` is 1, so the
restarted attempt (2, 3, ...) resumes from the last checkpoint and shows recovery:

* ``--hang_at_step N``: step N completes (logged, and checkpointed if due), then the job stops making progress
  forever while the process stays alive (telemetry heartbeats keep flowing, the step stops advancing).
* ``--crash_at_step N``: step N raises ``RuntimeError("injected crash at step N")`` before its update, so the
  process exits non-zero; step N is never logged or checkpointed.
* ``--nan_at_step N``: from step N on the loss is multiplied by NaN before backward, a real divergence: NaN
  gradients poison the weights and NaN is what gets logged. No checkpoint is written while the loss is not finite.

Scale-out: with ``--num_workers N`` (N > 0) the same training loop runs on N Ray Train workers
(``ray.train.torch.TorchTrainer``, DDP via ``prepare_model``); each rank samples its own batches, rank 0 alone
logs and checkpoints, every rank resumes from the same checkpoint dir. ``ray`` is imported only on that path.
The job connects to the cluster it was submitted to (``ray.init()`` with no arguments; outside a cluster that
starts a local one). Ray 2.60 runs Ray Train v2 by default (``RAY_TRAIN_V2_ENABLED`` unset means on), and this
file does not set that variable: every Ray call used here (``TorchTrainer``, ``ScalingConfig``, ``RunConfig``,
``FailureConfig``, ``prepare_model``, ``get_context``, ``report``) means the same in v1 and v2. It does
default ``RAY_TRAIN_ENABLE_PRINT_PATCH`` to 0 (v2 otherwise logs every worker print twice). Ray Train's
own restarts (``FailureConfig(max_failures)``) run inside one labbot attempt, so they see the same
``LABBOT_ATTEMPT``: an injected crash recurs on each of them until they are used up and the job fails, and
labbot's next attempt then recovers.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any, TypedDict

import torch
import torch.nn as nn

from labbot.training.jobs import checkpoint_io
from labbot.training.jobs.flags import config_from_flags, dataclass_parser
from labbot.training.jobs.model import ModelConfig, TinyLM
from labbot.training.jobs.runtime import exit_on_sigterm, hang_forever, pace
from labbot_client import telemetry
from labbot_client.checkpoints import CheckpointDir, JobEnv, Location, join

KEEP_CHECKPOINTS = 3
DEVICES = ("auto", "cpu", "cuda")
MODEL_SHAPE_FIELDS = tuple(f.name for f in fields(ModelConfig))  # what a checkpoint must match


# -----------------------------------------------------------------------------
# config


@dataclass
class TinyLMConfig:
    # run length and checkpointing
    steps: int = field(default=200, metadata={"help": "optimizer steps in total (numbered 1..steps)"})
    checkpoint_every: int = field(
        default=50, metadata={"help": "checkpoint every N steps (and at the last step); 0 = last step only"}
    )
    log_every: int = field(default=10, metadata={"help": "print progress every N steps and at the end"})
    # scale-out
    num_workers: int = field(default=0, metadata={"help": "0 = train in-process; N = N Ray Train workers"})
    max_failures: int = field(default=2, metadata={"help": "Ray Train FailureConfig(max_failures)"})
    # data and model
    batch_size: int = field(default=16, metadata={"help": "sequences per step, per worker"})
    block_size: int = field(default=64, metadata={"help": "context length in characters"})
    n_layer: int = field(default=2, metadata={"help": "transformer blocks"})
    n_head: int = field(default=4, metadata={"help": "attention heads per block"})
    n_embd: int = field(default=64, metadata={"help": "embedding width (a multiple of n_head)"})
    # optimization
    lr: float = field(default=3e-3, metadata={"help": "AdamW learning rate"})
    seed: int = field(default=1337, metadata={"help": "seed for weights and batch sampling"})
    device: str = field(default="auto", metadata={"help": "auto (CUDA when available), cpu or cuda"})
    num_threads: int = field(default=0, metadata={"help": "torch.set_num_threads(N); 0 = torch's default"})
    min_step_s: float = field(
        default=0.0,
        metadata={"help": "each step takes at least this long, the rest slept: a slower model, without its CPU"},
    )
    # fault injection (LABBOT_ATTEMPT == 1 only); 0 = off
    hang_at_step: int = field(default=0, metadata={"help": "stop making progress after this step (0 = off)"})
    crash_at_step: int = field(default=0, metadata={"help": "raise RuntimeError at this step (0 = off)"})
    nan_at_step: int = field(default=0, metadata={"help": "loss becomes NaN from this step on (0 = off)"})

    def __post_init__(self) -> None:
        positive = ("steps", "log_every", "batch_size", "block_size", "n_layer", "n_head", "n_embd")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        non_negative = ("checkpoint_every", "num_workers", "num_threads", "hang_at_step", "crash_at_step")
        for name in (*non_negative, "nan_at_step"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 or more, got {getattr(self, name)}")
        if self.max_failures < -1:
            raise ValueError(f"max_failures must be -1 (retry forever) or more, got {self.max_failures}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"lr must be a positive number, got {self.lr}")
        if not (0 <= self.min_step_s <= 60):
            raise ValueError(f"min_step_s must be from 0 to 60 seconds, got {self.min_step_s}")
        if self.device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {self.device!r}")

    @property
    def model_config(self) -> ModelConfig:
        return ModelConfig(n_layer=self.n_layer, n_head=self.n_head, n_embd=self.n_embd, block_size=self.block_size)


class TrainSummary(TypedDict):
    start_step: int  # first step this call ran (1, or resumed checkpoint step + 1)
    final_step: int  # last completed step
    resumed_from: int | None  # checkpoint step resumed from, None for a fresh start
    first_loss: float | None  # loss at start_step (None if there was nothing left to run)
    final_loss: float | None  # loss at final_step
    steps_per_s: float
    tokens_per_s: float  # summed over workers


StepCallback = Callable[[int, dict[str, float]], None]


# -----------------------------------------------------------------------------
# data


def load_corpus() -> str:
    """The shipped public-domain text (see ``training/jobs/data/README.md``)."""
    return resources.files("labbot.training.jobs").joinpath("data", "corpus.txt").read_text(encoding="utf-8")


def get_batch(
    data: torch.Tensor, batch_size: int, block_size: int, seed: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows of ``data`` picked by ``seed`` alone, so a resumed run sees the same batches."""
    g = torch.Generator().manual_seed(seed)
    ix = torch.randint(len(data) - block_size - 1, (batch_size,), generator=g)  # (B,)
    offsets = ix[:, None] + torch.arange(block_size)[None, :]  # (B, T)
    x = data[offsets]  # (B, T)
    y = data[offsets + 1]  # (B, T) next characters
    return x.to(device), y.to(device)


def batch_seed(seed: int, rank: int, step: int) -> int:
    """Distinct per (seed, rank, step): every rank samples different batches at every step."""
    return ((seed * 1_000_003 + rank) * 1_000_000_007 + step) % (2**63 - 1)


# -----------------------------------------------------------------------------
# checkpoints: {dir}/ckpt_{step:08d}.pt, written atomically by rank 0, newest KEEP_CHECKPOINTS kept


def checkpoints(ckpt_dir: Location) -> CheckpointDir:
    return CheckpointDir(ckpt_dir, suffix=".pt", keep=KEEP_CHECKPOINTS)


def list_checkpoints(ckpt_dir: Location) -> list[tuple[int, Location]]:
    """(step, location) of every complete checkpoint in ``ckpt_dir`` (a folder or a URL), oldest first."""
    return checkpoints(ckpt_dir).list()


def save_checkpoint(ckpt_dir: Location, step: int, state: dict[str, Any]) -> Location | None:
    """Write ``state`` as the checkpoint for ``step`` atomically, then prune old ones (None: not taken; logged)."""
    return checkpoint_io.save(checkpoints(ckpt_dir), step, state)


def load_latest_checkpoint(ckpt_dir: Location, *, verbose: bool, at_most: int | None = None) -> dict[str, Any] | None:
    """The newest checkpoint in ``ckpt_dir`` that loads cleanly (none past ``at_most``); unreadable ones are skipped
    (warning)."""
    needed = {"model", "optimizer", "config", "vocab"}
    return checkpoint_io.load_latest(checkpoints(ckpt_dir), needed, weights_only=True, verbose=verbose, at_most=at_most)


def _check_compatible(state: dict[str, Any], cfg: TinyLMConfig, vocab: str, ckpt_dir: Location) -> None:
    saved = state["config"]
    diffs = []
    for k in MODEL_SHAPE_FIELDS:
        if saved.get(k) != getattr(cfg, k):
            diffs.append(f"{k} {saved.get(k)} != {getattr(cfg, k)}")
    if state["vocab"] != vocab:
        diffs.append("a different vocabulary")
    if diffs:
        raise ValueError(
            f"checkpoint step {state['step']} in {ckpt_dir} is for a different model ({'; '.join(diffs)}); "
            "use a fresh LABBOT_CHECKPOINT_DIR or the same model flags"
        )


# -----------------------------------------------------------------------------
# training


def _resolve_device(requested: str) -> torch.device:
    if requested == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device=cuda was requested but torch.cuda.is_available() is False")
    if requested == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda")


def _run(
    cfg: TinyLMConfig,
    job: JobEnv,
    *,
    rank: int,
    world_size: int,
    device: torch.device,
    prepare_model: Callable[[nn.Module], nn.Module] | None = None,
    on_step: StepCallback | None = None,
) -> TrainSummary:
    """The training loop every worker runs (in-process: rank 0 of 1)."""
    master = rank == 0  # only rank 0 logs and checkpoints
    if cfg.num_threads > 0:
        torch.set_num_threads(cfg.num_threads)
    if master:
        telemetry.init()
    try:
        vocab, data = _load_data()
        raw_model, model, optimizer, start_step = _build(cfg, job, vocab, device, prepare_model, verbose=master)
        resumed_from = start_step - 1 if start_step > 1 else None
        # every process of a run carries its run id (labbot's runtime_env reaches Ray Train workers too)
        print(f"rank {rank}/{world_size}: LABBOT_RUN_ID={os.environ.get('LABBOT_RUN_ID', '-')}", flush=True)
        if master:
            _announce(job, raw_model, vocab, data, device, world_size, resumed_from)
            checkpoints(job.checkpoint_dir).remove_partial()  # leftovers of a crash mid-write

        tokens_per_step = cfg.batch_size * cfg.block_size * world_size
        first_loss: float | None = None
        last_loss: float | None = None
        step = start_step - 1
        t_start = t_print = time.perf_counter()
        steps_since_print = 0
        model.train()
        for step in range(start_step, cfg.steps + 1):
            t0 = time.perf_counter()
            xb, yb = get_batch(data, cfg.batch_size, cfg.block_size, batch_seed(cfg.seed, rank, step), device)
            last_loss = _train_step(cfg, job, step, model, optimizer, xb, yb, world_size)
            if first_loss is None:
                first_loss = last_loss
            dt = time.perf_counter() - t0
            steps_since_print += 1

            if master:
                metrics = {"loss": last_loss, "tokens_per_s": tokens_per_step / max(dt, 1e-9)}
                telemetry.log(step, **metrics)
                if on_step is not None:
                    on_step(step, metrics)
                if step % cfg.log_every == 0 or step == cfg.steps:
                    now = time.perf_counter()
                    tok_s = tokens_per_step * steps_since_print / max(now - t_print, 1e-9)
                    print(f"step {step}/{cfg.steps} loss {last_loss:.4f} tok/s {tok_s:.0f}", flush=True)
                    t_print, steps_since_print = now, 0
                if (cfg.checkpoint_every and step % cfg.checkpoint_every == 0) or step == cfg.steps:
                    if math.isfinite(last_loss):
                        _checkpoint(cfg, job, step, raw_model, optimizer, vocab, device)
                    else:  # diverged weights are no checkpoint: a resume must start from the last good one
                        print(f"step {step}: no checkpoint, the loss is {last_loss} (the newest is the last good one)")
            if not job.is_restart and step == cfg.hang_at_step:
                hang_forever(step, verbose=master)
            pace(t0, cfg.min_step_s)

        elapsed = time.perf_counter() - t_start
        n_steps = step - start_step + 1
        if master and n_steps == 0:
            print(f"nothing to do: already at step {step} of {cfg.steps}", flush=True)
        return TrainSummary(
            start_step=start_step,
            final_step=step,
            resumed_from=resumed_from,
            first_loss=first_loss,
            final_loss=last_loss,
            steps_per_s=n_steps / elapsed if n_steps and elapsed > 0 else 0.0,
            tokens_per_s=n_steps * tokens_per_step / elapsed if n_steps and elapsed > 0 else 0.0,
        )
    finally:
        if master:
            telemetry.finish()


def _load_data() -> tuple[str, torch.Tensor]:
    """The vocabulary (the corpus's characters, sorted) and the corpus as (N,) token ids."""
    text = load_corpus()
    vocab = "".join(sorted(set(text)))
    stoi = {ch: i for i, ch in enumerate(vocab)}
    return vocab, torch.tensor([stoi[ch] for ch in text], dtype=torch.long)  # (N,)


def _build(
    cfg: TinyLMConfig,
    job: JobEnv,
    vocab: str,
    device: torch.device,
    prepare_model: Callable[[nn.Module], nn.Module] | None,
    *,
    verbose: bool,
) -> tuple[TinyLM, nn.Module, torch.optim.Optimizer, int]:
    """The model (bare, and as trained: DDP-wrapped by ``prepare_model`` under Ray Train), its optimizer and the
    first step to run: fresh from ``cfg.seed``, or model, optimizer and RNG state from the newest checkpoint."""
    torch.manual_seed(cfg.seed)  # identical initial weights on every rank
    raw_model = TinyLM(cfg.model_config, len(vocab))
    state = load_latest_checkpoint(job.checkpoint_dir, verbose=verbose, at_most=job.resume_step)
    if state is not None:
        _check_compatible(state, cfg, vocab, job.checkpoint_dir)
        raw_model.load_state_dict(state["model"])
    raw_model.to(device)
    model = prepare_model(raw_model) if prepare_model is not None else raw_model
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.99), weight_decay=0.01)
    if state is None:
        return raw_model, model, optimizer, 1
    optimizer.load_state_dict(state["optimizer"])
    for group in optimizer.param_groups:  # this attempt's lr, not the checkpoint's (a remedy may have changed it)
        group["lr"] = cfg.lr
    torch.set_rng_state(state["rng"]["torch"])
    if device.type == "cuda" and state["rng"].get("cuda") is not None:
        torch.cuda.set_rng_state_all(state["rng"]["cuda"])
    return raw_model, model, optimizer, int(state["step"]) + 1


def _announce(
    job: JobEnv,
    model: nn.Module,
    vocab: str,
    data: torch.Tensor,
    device: torch.device,
    world_size: int,
    resumed_from: int | None,
) -> None:
    """Rank 0's first lines: the model's size, the data, where it runs and checkpoints, and what it resumed."""
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"tiny-lm: {n_params / 1e3:.1f}k params, vocab {len(vocab)}, {len(data)} chars, "
        f"device {device}, world_size {world_size}, run {job.run_id or '-'} attempt {job.attempt}, "
        f"checkpoints in {job.checkpoint_dir}",
        flush=True,
    )
    if resumed_from is not None:
        print(f"resumed from checkpoint step {resumed_from}", flush=True)


def _train_step(
    cfg: TinyLMConfig,
    job: JobEnv,
    step: int,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    xb: torch.Tensor,
    yb: torch.Tensor,
    world_size: int,
) -> float:
    """One optimizer step on the batch (with the crash and NaN faults of the first attempt); the loss, averaged
    over the ranks."""
    _, loss = model(xb, yb)  # logits (B, T, V), loss scalar
    assert loss is not None
    if not job.is_restart and step == cfg.crash_at_step:
        raise RuntimeError(f"injected crash at step {step}")
    if not job.is_restart and cfg.nan_at_step and step >= cfg.nan_at_step:
        loss = loss * float("nan")  # diverge for real: NaN gradients poison the weights
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()

    loss_t = loss.detach()
    if world_size > 1 and torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.all_reduce(loss_t)  # mean loss over ranks, for logging
        loss_t = loss_t / world_size
    return float(loss_t.item())


def _checkpoint(
    cfg: TinyLMConfig,
    job: JobEnv,
    step: int,
    raw_model: nn.Module,
    optimizer: torch.optim.Optimizer,
    vocab: str,
    device: torch.device,
) -> None:
    """Rank 0's checkpoint of ``step``: model, optimizer, step, config, vocabulary and RNG state."""
    path = save_checkpoint(
        job.checkpoint_dir,
        step,
        {
            "model": raw_model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "step": step,
            "config": asdict(cfg),
            "vocab": vocab,
            "rng": {
                "torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if device.type == "cuda" else None,
            },
        },
    )
    if path is not None:  # None: the object store was unreachable (logged); training goes on
        telemetry.checkpoint(step, str(path))


def train(
    cfg: TinyLMConfig,
    *,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    on_step: StepCallback | None = None,
) -> TrainSummary:
    """Train (resuming from the checkpoint dir) and return a summary.

    ``checkpoint_dir`` overrides ``LABBOT_CHECKPOINT_DIR``. ``on_step(step, {"loss", "tokens_per_s"})`` is
    called after every step with exactly what went to telemetry (in-process runs only).
    """
    job = JobEnv.from_environ(checkpoint_dir)
    if cfg.num_workers > 0:
        if on_step is not None:
            raise ValueError("on_step is only supported in-process (num_workers=0)")
        return _train_with_ray(cfg, job)
    return _run(cfg, job, rank=0, world_size=1, device=_resolve_device(cfg.device), on_step=on_step)


# -----------------------------------------------------------------------------
# Ray Train (num_workers > 0); ray is imported only here


def ray_train_loop_per_worker(config: dict[str, Any]) -> None:
    """Body of each Ray Train worker: ``config`` is what ``_train_with_ray`` passes as train_loop_config."""
    import ray.train
    import ray.train.torch

    # The job's runtime_env already reaches the workers on a real cluster; this also covers LABBOT_* set in
    # the driver after Ray started (by hand, in tests).
    os.environ.update(config["env"])
    cfg = TinyLMConfig(**config["cfg"])
    job = JobEnv.from_environ(config["checkpoint_dir"])
    ctx = ray.train.get_context()
    device = ray.train.torch.get_device()
    if cfg.device == "cuda" and device.type != "cuda":
        raise RuntimeError("device=cuda was requested but this Ray Train worker got no GPU")
    summary = _run(
        cfg,
        job,
        rank=ctx.get_world_rank(),
        world_size=ctx.get_world_size(),
        device=device,
        prepare_model=ray.train.torch.prepare_model,  # moves to the worker's device, wraps in DDP
    )
    # A barrier across ranks. Ray Train v2 only hands metrics back to the driver (Result.metrics) with a
    # checkpoint, so rank 0 attaches a one-file one; the model checkpoints stay in the checkpoint dir.
    metrics = dict(summary)
    if ctx.get_world_rank() == 0:
        with tempfile.TemporaryDirectory() as d:
            Path(d, "summary.json").write_text(json.dumps(metrics))
            ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(d))
    else:
        ray.train.report(metrics)


def _train_with_ray(cfg: TinyLMConfig, job: JobEnv) -> TrainSummary:
    import ray
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    # Under ``python -m`` this file is ``__main__``; hand Ray the importable module's function so workers
    # import it by name instead of unpickling a copy of __main__.
    from labbot.training.jobs import tiny_lm

    if not ray.is_initialized():
        ray.init()  # inside a Ray job this connects to its cluster; by hand it starts a local one
    # Ray Train v2 reroutes print() in workers through its logger and, with Ray's own stdout forwarding, the
    # job log then shows every progress line twice. Plain prints reach the driver anyway; Ray Train passes
    # this variable on to the workers. An explicit setting by whoever launches the job wins.
    os.environ.setdefault("RAY_TRAIN_ENABLE_PRINT_PATCH", "0")
    use_gpu = cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available())
    tag = f"{job.run_id}-attempt{job.attempt}" if job.run_id else time.strftime("%Y%m%d-%H%M%S")
    name = f"tiny-lm-{tag}"
    print(f"tiny-lm: Ray Train with {cfg.num_workers} workers (use_gpu={use_gpu}), run {name}", flush=True)
    trainer = TorchTrainer(
        tiny_lm.ray_train_loop_per_worker,
        train_loop_config={
            "cfg": asdict(cfg),
            "env": {k: v for k, v in os.environ.items() if k.startswith("LABBOT_")},
            "checkpoint_dir": str(job.checkpoint_dir),
        },
        scaling_config=ScalingConfig(num_workers=cfg.num_workers, use_gpu=use_gpu),
        run_config=RunConfig(
            name=name,
            storage_path=str(join(job.checkpoint_dir, "ray")),
            failure_config=FailureConfig(max_failures=cfg.max_failures),
        ),
    )
    result = trainer.fit()  # raises TrainingFailedError once max_failures restarts are used up
    m = result.metrics or {}
    return TrainSummary(
        start_step=int(m.get("start_step", 0)),
        final_step=int(m.get("final_step", 0)),
        resumed_from=m.get("resumed_from"),
        first_loss=m.get("first_loss"),
        final_loss=m.get("final_loss"),
        steps_per_s=float(m.get("steps_per_s", 0.0)),
        tokens_per_s=float(m.get("tokens_per_s", 0.0)),
    )


# -----------------------------------------------------------------------------
# command line


def build_parser() -> argparse.ArgumentParser:
    return dataclass_parser(
        TinyLMConfig,
        prog="python -m labbot.training.jobs.tiny_lm",
        description="Train a tiny character-level transformer LM (labbot's reference job).",
        choices={"device": DEVICES},
    )


def parse_config(argv: Sequence[str] | None = None) -> TinyLMConfig:
    return config_from_flags(build_parser(), TinyLMConfig, argv)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_config(argv)
    exit_on_sigterm()
    s = train(cfg)

    def fmt(x: float | None) -> str:
        return "-" if x is None else f"{x:.4f}"

    print(
        f"done: steps {s['start_step']}..{s['final_step']}, loss {fmt(s['first_loss'])} -> "
        f"{fmt(s['final_loss'])}, {s['steps_per_s']:.1f} steps/s",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
