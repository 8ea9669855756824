"""Ray rollout actors (``num_rollout_workers`` N > 0): N actors generate and verify rollouts while the learner trains.

Weights go through the object store (``ray.put``) after every learner step with a version number; each batch carries
the version it was generated with and the learner drops batches more than one version old (counted in
``stale_dropped``). An actor that dies is restarted by Ray (``worker_restarts``) and asked again
(``rollout_worker_failures``); the other keeps working. ``ray`` is imported only here, when the actors start, and the
job connects with ``ray.init()`` as tiny-lm does (inside a Ray job: its cluster; by hand: a local one).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import torch

from labbot.training.jobs.tiny_rl.config import TinyRLConfig
from labbot.training.jobs.tiny_rl.policy import build_model
from labbot.training.jobs.tiny_rl.rollouts import Rollout, RolloutSource, generate_rollout, injected_faults
from labbot_client.checkpoints import JobEnv

RESTARTING_RETRY_S = 0.2  # how soon a rollout actor that Ray is restarting is asked again


class RayRollouts(RolloutSource):
    """N rollout actors, one request in flight each; weights through the object store, tagged with a version."""

    def __init__(
        self,
        cfg: TinyRLConfig,
        model: torch.nn.Module,
        version: int,
        job: JobEnv,
        on_workers: Callable[[list[Any]], None] | None,
    ) -> None:
        import ray

        if not ray.is_initialized():
            ray.init()  # inside a Ray job this connects to its cluster; by hand it starts a local one
        self.ray = ray
        self.cfg, self.model, self.job = cfg, model, job
        actor: Any = ray.remote(num_cpus=1, max_restarts=cfg.worker_restarts, max_task_retries=0)(RolloutWorker)
        self.actors: list[Any] = [actor.remote(asdict(cfg), i) for i in range(cfg.num_rollout_workers)]
        self.weights = ray.put({k: v.detach().clone() for k, v in model.state_dict().items()})
        self.version = version
        self.step = 0
        self.pending: dict[Any, int] = {}  # object ref -> actor index
        self.failures = 0
        self._last = 0  # the actor whose batch the learner took last: asked again after the learner's step
        for i in range(len(self.actors)):
            self._request(i)
        if on_workers is not None:
            on_workers(list(self.actors))

    def _request(self, i: int) -> None:
        stuck, scale = injected_faults(self.cfg, self.job, max(self.step, 1))
        ref = self.actors[i].rollout.remote(self.weights, self.version, stuck, scale)
        self.pending[ref] = i

    def next(self, step: int, version: int) -> tuple[Rollout, int]:
        from ray.exceptions import ActorUnavailableError, RayActorError

        self.step = step
        dropped = 0
        while True:
            done, _ = self.ray.wait(list(self.pending), num_returns=1)
            i = self.pending.pop(done[0])
            try:
                batch: Rollout = self.ray.get(done[0])
            except ActorUnavailableError:  # being restarted by Ray: not another death; ask it again shortly
                time.sleep(RESTARTING_RETRY_S)
                self._request(i)
                continue
            except RayActorError as e:  # died mid-request: Ray restarts it (up to worker_restarts times); ask again
                self.failures += 1
                if self.failures > self.cfg.worker_restarts * len(self.actors) + len(self.actors):
                    raise RuntimeError(f"rollout workers keep dying ({self.failures} failures): {e}") from e
                print(f"rollout worker {i} died ({type(e).__name__}); asking it again", flush=True)
                self._request(i)
                continue
            if is_stale(version, batch.version):
                dropped += 1  # never train on a rollout more than one version old
                self._request(i)
                continue
            self._last = i
            return batch, dropped

    def push(self, version: int) -> None:
        self.version = version
        self.weights = self.ray.put({k: v.detach().clone() for k, v in self.model.state_dict().items()})
        self._request(self._last)

    def close(self) -> None:
        for a in self.actors:
            self.ray.kill(a)


def is_stale(learner_version: int, batch_version: int) -> bool:
    """A batch sampled with weights more than one version behind the learner's: never trained on."""
    return learner_version - batch_version > 1


class RolloutWorker:
    """Body of a Ray rollout actor: a copy of the policy that samples with the weights it is handed."""

    def __init__(self, cfg_dict: dict[str, Any], index: int) -> None:
        torch.set_num_threads(1)
        self.cfg = TinyRLConfig(**cfg_dict)
        self.model = build_model(self.cfg).eval()
        self.rng = random.Random(f"worker-{self.cfg.seed}-{index}-{time.time_ns()}")
        torch.manual_seed(self.rng.randrange(2**31))
        self.version = -1

    def rollout(self, weights: dict[str, torch.Tensor], version: int, stuck: bool, scale: float) -> Rollout:
        if version != self.version:
            self.model.load_state_dict(weights)
            self.version = version
        return generate_rollout(self.model, self.cfg, self.rng, version=version, reward_stuck=stuck, scale=scale)

    def pid(self) -> int:
        """The process this actor runs in (a restarted actor has a new one)."""
        return os.getpid()
