"""What both reference jobs do with their checkpoints beyond the client's folder convention: write one with
``torch.save``, and read back the newest that loads cleanly and holds what the job needs (a truncated or foreign file
is skipped with a warning, never fatal: the job falls back to the one before, or starts fresh)."""

from __future__ import annotations

import sys
from collections.abc import Set
from typing import Any

import torch

from labbot_client.checkpoints import CheckpointDir, Location

__all__ = ["load_latest", "save"]


def save(ckpts: CheckpointDir, step: int, state: dict[str, Any]) -> Location | None:
    """Write ``state`` as the checkpoint for ``step`` atomically, then prune old ones; None when an object store
    could not take it (logged by the client: training goes on, the next checkpoint tries again)."""
    return ckpts.save(step, lambda f: torch.save(state, f))


def load_latest(
    ckpts: CheckpointDir, needed: Set[str], *, weights_only: bool, verbose: bool, at_most: int | None = None
) -> dict[str, Any] | None:
    """The newest checkpoint that loads, is a dict of its own step and has every key of ``needed``; None if none
    does. ``weights_only`` as ``torch.load``'s: tensors and plain containers only, unless the state holds more
    (tiny-rl's random states). ``at_most``: a remedy's attempt (``JobEnv.resume_step``) takes none past that step,
    even one that setting aside missed."""
    for step, path in reversed(ckpts.list()):
        if at_most is not None and step > at_most:
            continue
        try:
            with ckpts.open(path) as f:
                state = torch.load(f, map_location="cpu", weights_only=weights_only)
            if not isinstance(state, dict) or state.get("step") != step:
                raise ValueError(f"expected a checkpoint dict for step {step}")
            missing = set(needed) - state.keys()
            if missing:
                raise ValueError(f"missing {', '.join(sorted(missing))}")
        except Exception as e:  # a truncated/corrupt file can fail in many ways
            if verbose:
                print(f"warning: skipping unreadable checkpoint {path}: {e}", file=sys.stderr, flush=True)
            continue
        return state
    return None
