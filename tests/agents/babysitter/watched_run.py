"""A run launched with a thread of its own and a watchdog over it (a real RunService on the session's Ray head, a
pager posting to Slack's outbox, a hand-moved clock): what the watchdog tests on RL runs and remedies start from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support import Clock, make_service

from labbot.agents.babysitter.pager import Pager
from labbot.agents.babysitter.policy import PagingPolicy, WatchdogPolicy
from labbot.agents.babysitter.watchdog import Watchdog
from labbot.storage.models import Run
from labbot.training.ray_cluster import RayConnection
from labbot.training.service import RunService
from labbot.training.specs import LaunchRequest


def watched_run(
    tmp_path: Path,
    ray: RayConnection,
    jobs: dict[str, Any],
    job: str,
    *,
    restart_backoff_s: float = 10.0,
    **launch: Any,
) -> tuple[RunService, Watchdog, Clock, str]:
    """``job`` launched by U0ALICE001 with a thread in C0LAB00001, and a watchdog (no start-up grace) over it."""
    service = make_service(tmp_path, ray, jobs)
    run_id = service.launch(LaunchRequest(job=job, owner="U0ALICE001", **launch)).run["id"]
    with service.db.session() as s:
        row = s.get_one(Run, run_id)
        row.thread_ts, row.channel = "1700000000.000100", "C0LAB00001"
    clock = Clock()
    return service, watchdog(service, clock, restart_backoff_s=restart_backoff_s), clock, run_id


def watchdog(service: RunService, clock: Clock, *, restart_backoff_s: float = 10.0) -> Watchdog:
    """A watchdog over ``service``'s runs, as a (re)started labbot builds it."""
    pager = Pager(service.db, PagingPolicy(), slack=True, pagerduty=False, clock=clock)
    policy = WatchdogPolicy(startup_grace_s=0, restart_backoff_s=restart_backoff_s)
    return Watchdog(service.db, service.launcher, service, pager, policy, address="ray-under-test", clock=clock)
