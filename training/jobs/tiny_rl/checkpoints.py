"""tiny-rl's checkpoints: ``{dir}/ckpt_{step:08d}.pt``, written atomically, the newest ``KEEP_CHECKPOINTS`` kept.

Each holds the step, the policy, its optimiser, the frozen reference (the warm-up model) and the EMA teacher, the RNG
states (torch's and the training problems'), the generation count, the weight version, the stale batches dropped, the
config and the vocabulary: everything RL needs to go on as if it had never stopped. The warm-up's own cache is not a
checkpoint (``warmup.py``).
"""

from __future__ import annotations

import random
from dataclasses import asdict
from typing import Any

import torch

from labbot.training.jobs import checkpoint_io
from labbot.training.jobs.tiny_rl.config import TinyRLConfig
from labbot.training.jobs.tiny_rl.learner import Learner
from labbot.training.jobs.tiny_rl.task import VOCAB
from labbot.training.jobs.tiny_rl.warmup import WARMUP_FIELDS
from labbot_client.checkpoints import CheckpointDir, Location

KEEP_CHECKPOINTS = 3


def checkpoints(ckpt_dir: Location) -> CheckpointDir:
    return CheckpointDir(ckpt_dir, suffix=".pt", keep=KEEP_CHECKPOINTS)


def save_checkpoint(ckpts: CheckpointDir, step: int, state: dict[str, Any]) -> Location | None:
    """Write ``state`` as the checkpoint for ``step`` atomically, then prune old ones (None: not taken; logged)."""
    return checkpoint_io.save(ckpts, step, state)


def load_latest_checkpoint(ckpt_dir: Location, *, verbose: bool, at_most: int | None = None) -> dict[str, Any] | None:
    """The newest RL checkpoint in ``ckpt_dir`` that loads cleanly; unreadable ones are skipped (warning). Not
    weights-only: it holds the Python and torch random states."""
    needed = {"model", "optimizer", "ref", "ema", "rng", "generations", "weight_version", "config"}
    return checkpoint_io.load_latest(
        checkpoints(ckpt_dir), needed, weights_only=False, verbose=verbose, at_most=at_most
    )


def checkpoint_state(
    cfg: TinyRLConfig, step: int, learner: Learner, rng: random.Random, *, generations: int, version: int, stale: int
) -> dict[str, Any]:
    """What the checkpoint of ``step`` holds."""
    return {
        "step": step,
        "model": learner.model.state_dict(),
        "optimizer": learner.optimizer.state_dict(),
        "ref": learner.ref.state_dict(),
        "ema": learner.ema.state_dict() if learner.ema is not None else None,
        "rng": {"torch": torch.get_rng_state(), "python": rng.getstate()},
        "generations": generations,
        "weight_version": version,
        "stale_dropped": stale,
        "config": asdict(cfg),
        "vocab": VOCAB,
    }


def check_compatible(state: dict[str, Any], cfg: TinyRLConfig, ckpt_dir: Location) -> None:
    """A checkpoint resumes only the task and model it was written for: the warm-up fields must match, but for the
    sampling temperature (a remedy may raise it; the warm-up's cache is keyed by it because the gate samples)."""
    fields = [k for k in WARMUP_FIELDS if k != "temperature"]
    saved = {k: state["config"].get(k) for k in fields}
    if saved != {k: getattr(cfg, k) for k in fields}:
        raise ValueError(
            f"checkpoint step {state['step']} in {ckpt_dir} is for a different task or model "
            f"({saved}); use a fresh LABBOT_CHECKPOINT_DIR or the same flags"
        )
