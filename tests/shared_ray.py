"""One real Ray head for a whole test run, shared by pytest-xdist's workers.

Each worker used to start a head of its own: on a 2-core machine that is a head's start-up (about 6 s of CPU) and its
idle daemons (about 3 s of CPU a minute: the dashboard, its agent, the GCS, the raylet, the log monitor) for every
worker, all run long, on a suite that is CPU-bound. Here the first worker to need a head starts it in a folder beside
the workers' own temporary folders; the others reuse it (``EmbeddedRayHead.ensure`` finds it answering); each
worker registers itself as a user, under a file lock, and the last to leave stops it. Without xdist the folder is
the session's own and the one user stops it at the end, as before.

The head is started with as many logical CPUs as the workers' separate heads had between them, so jobs that tests
of different workers run at the same moment are not queued behind each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from labbot.training.ray_cluster import EmbeddedRayHead, RayConnection


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def shared_head(folder: Path, user: str, *, workers: int) -> Iterator[RayConnection]:
    """The run's Ray head in ``folder``, started by the first user and stopped by the last."""
    users = folder / "users"
    cpus = max(2, os.cpu_count() or 2) * max(1, workers)
    with _locked(folder):
        head = EmbeddedRayHead(folder / "ray-home", num_cpus=cpus)
        conn = head.ensure()
        users.mkdir(exist_ok=True)
        (users / user).touch()
    try:
        yield conn
    finally:
        with _locked(folder):
            (users / user).unlink(missing_ok=True)
            if not any(users.iterdir()):
                head.stop()
