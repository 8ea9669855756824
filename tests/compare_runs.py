"""Training runs stored as a launch and their telemetry store them (Ray never called), for the tests of comparing
two runs at each front door: the HTTP API, the CLI and ``/lab compare``."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from labbot.storage.models import Run, RunStatus, utcnow
from labbot.training.service import RunService
from labbot.training.specs import LaunchRequest, resolve_launch
from labbot.training.telemetry_ingest import TelemetryBatch, TelemetryPoint
from labbot.training.telemetry_store import TelemetryStore

RL_JOB = {  # as labbot.toml's [jobs.rl-demo] would declare it
    "rl-demo": {"entrypoint": "python rl.py", "params": {"steps": 100}, "plot": ["reward"], "headline": "reward"}
}


def noisy(mean: float, seed: int, phi: float = 0.5) -> Callable[[int], float]:
    """A curve: ``mean`` plus AR(1) noise (sd about 0.1), the same for the same seed."""
    rng = np.random.default_rng(seed)
    e = rng.normal(scale=0.1, size=10_000)
    x = np.empty_like(e)
    x[0] = e[0]
    for i in range(1, len(e)):
        x[i] = phi * x[i - 1] + e[i]
    return lambda step: mean + 1.0 / math.sqrt(step + 1) + float(x[step])


def training_run(
    service: RunService,
    run_id: str,
    job: str,
    steps: int,
    metrics: Callable[[int], dict[str, float]],
    *,
    owner: str = "U0ALICE001",
) -> str:
    """A succeeded run of ``job`` (its config as ``RunService.launch`` stores it) that reported ``metrics(step)``
    for steps 0..steps-1."""
    cfg = resolve_launch(service.registry.get(job), LaunchRequest(job=job))
    with service.db.session() as s:
        s.add(
            Run(id=run_id, job=job, name=f"{job}-{run_id}", owner=owner, config=cfg.model_dump(),
                status=RunStatus.RUNNING.value, telemetry_token_hash="0" * 64)
        )  # fmt: skip
    now = utcnow()
    if steps:
        points = [TelemetryPoint(step=st, when=now, metrics=metrics(st)) for st in range(steps)]
        TelemetryStore(service.db).ingest(run_id, TelemetryBatch(attempt=1, points=points, events=[]))
    with service.db.session() as s:
        s.get_one(Run, run_id).status = RunStatus.SUCCEEDED.value
    return run_id
