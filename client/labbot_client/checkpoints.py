"""Checkpoints the way labbot restarts a run: one folder, one file a step, written atomically, newest few kept.

labbot restarts a dead run by launching it again with ``LABBOT_ATTEMPT`` one higher and the same
``LABBOT_CHECKPOINT_DIR``; a job that resumes from the newest checkpoint that loads picks up where it died. This
module holds the part every job shares and no framework owns — where the folder is, what a checkpoint file is
called, how it is written so a crash mid-write never leaves a half file under a real name, and pruning — and
leaves serialisation to the job (``torch.save``, ``safetensors``, ``pickle``)::

    from labbot_client.checkpoints import CheckpointDir, JobEnv

    job = JobEnv.from_environ()
    ckpts = CheckpointDir(job.checkpoint_dir, suffix=".pt", keep=3)
    for step, path in reversed(ckpts.list()):      # newest first; skip the ones that do not load
        ...
    ckpts.save(step, lambda f: torch.save(state, f))

Standard library only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

__all__ = ["CheckpointDir", "JobEnv"]

ENV_ATTEMPT = "LABBOT_ATTEMPT"
ENV_CHECKPOINT_DIR = "LABBOT_CHECKPOINT_DIR"
ENV_RUN_ID = "LABBOT_RUN_ID"


@dataclass(frozen=True)
class JobEnv:
    """What labbot tells a job through its environment (all optional: a job runs the same outside labbot)."""

    run_id: str | None
    attempt: int
    checkpoint_dir: Path

    @classmethod
    def from_environ(cls, checkpoint_dir: str | os.PathLike[str] | None = None) -> JobEnv:
        raw_attempt = os.environ.get(ENV_ATTEMPT, "").strip() or "1"
        try:
            attempt = int(raw_attempt)
        except ValueError:
            raise ValueError(f"{ENV_ATTEMPT} must be an integer, got {raw_attempt!r}") from None
        if checkpoint_dir is None:
            checkpoint_dir = os.environ.get(ENV_CHECKPOINT_DIR, "").strip() or "./checkpoints"
        return cls(
            run_id=os.environ.get(ENV_RUN_ID, "").strip() or None,
            attempt=attempt,
            # absolute, so workers (whatever their cwd) share the driver's folder
            checkpoint_dir=Path(checkpoint_dir).expanduser().resolve(),
        )

    @property
    def is_restart(self) -> bool:
        """True on attempt 2, 3, ...: labbot relaunched this run after it died."""
        return self.attempt > 1


@dataclass(frozen=True)
class CheckpointDir:
    """``{root}/ckpt_{step:08d}{suffix}`` files, written atomically, the newest ``keep`` kept (0 keeps all)."""

    root: Path
    suffix: str = ".pt"
    keep: int = 3

    def path(self, step: int) -> Path:
        if step < 0:
            raise ValueError(f"a checkpoint step is >= 0, got {step}")
        return self.root / f"ckpt_{step:08d}{self.suffix}"

    def list(self) -> list[tuple[int, Path]]:
        """(step, path) of every checkpoint file, oldest first."""
        if not self.root.is_dir():
            return []
        pattern = re.compile(r"^ckpt_(\d{8})" + re.escape(self.suffix) + "$")
        found = []
        for p in self.root.iterdir():
            m = pattern.match(p.name)
            if m and p.is_file():
                found.append((int(m.group(1)), p))
        return sorted(found)

    def save(self, step: int, write: Callable[[BinaryIO], object]) -> Path:
        """Call ``write(f)`` on a temporary file, fsync it, rename it to the step's name, then prune old ones."""
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.path(step)
        tmp = self.root / f".{path.name}.tmp.{os.getpid()}"
        try:
            with open(tmp, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        if self.keep:
            for _, old in self.list()[: -self.keep]:
                old.unlink(missing_ok=True)
        return path

    def remove_partial(self) -> int:
        """Delete what a crash mid-write left behind (``.ckpt_*.tmp.*``); returns how many."""
        if not self.root.is_dir():
            return 0
        stale = list(self.root.glob(".ckpt_*.tmp.*"))
        for p in stale:
            p.unlink(missing_ok=True)
        return len(stale)
