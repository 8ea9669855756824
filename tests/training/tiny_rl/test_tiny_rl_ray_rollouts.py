"""tiny-rl's Ray rollout actors (training/jobs/tiny_rl/ray_rollouts.py): no stale batch is trained on, and a killed
actor is restarted while the run goes on."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rl_cases import Recorder, tiny

from labbot.training.jobs.tiny_rl import train
from labbot.training.jobs.tiny_rl.ray_rollouts import is_stale


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A local Ray instance in this process for the rollout actors (started by ``ray.init`` as the job does)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.ray
@pytest.mark.subprocess
def test_ray_workers_never_train_on_stale_rollouts_and_survive_a_killed_actor(
    ckpt_dir: Path, warm_dir: Path, local_ray: None
) -> None:
    import ray
    from ray.exceptions import ActorUnavailableError

    actors: list[Any] = []
    rec = Recorder()
    pids: dict[str, int] = {}

    def pid_once_up(actor: Any) -> int:
        deadline = time.monotonic() + 120
        while True:
            try:
                return int(ray.get(actor.pid.remote(), timeout=60))
            except ActorUnavailableError:  # still being restarted
                assert time.monotonic() < deadline, "the killed rollout actor never came back"
                time.sleep(0.2)

    def kill_one(step: int, metrics: dict[str, float]) -> None:
        rec(step, metrics)
        if step == 3:
            pids["before"] = ray.get(actors[0].pid.remote(), timeout=60)
            ray.kill(actors[0], no_restart=False)  # Ray restarts it (worker_restarts); the run must carry on
        if step == 6:
            pids["after"] = pid_once_up(actors[0])  # the same handle, a new process

    summary = train(
        tiny(warm_dir, steps=6, num_rollout_workers=2, eval_every=3),
        on_step=kill_one,
        on_workers=actors.extend,
    )
    assert summary["final_step"] == 6 and sorted(rec.metrics) == list(range(1, 7))
    assert pids["after"] != pids["before"]  # the kill took: Ray restarted the actor, and the run went on
    assert summary["max_rollout_lag"] <= 1
    assert all(m["rollout_lag"] <= 1 for m in rec.metrics.values())
    assert rec.metrics[6]["stale_dropped"] == summary["stale_dropped"]
    assert rec.metrics[6]["rollout_worker_failures"] <= 2  # a request in flight at the kill is asked again
    assert summary["generations"] == 6 * 16


def test_a_batch_more_than_one_version_behind_the_learner_is_stale() -> None:
    assert [is_stale(5, v) for v in (5, 4, 3, 0)] == [False, False, True, True]
