"""A run's thread as ``labbot serve`` keeps it, for the thread tests: the real thread keeper, registry, SQLite and
telemetry store against the Slack emulator; Ray is never called."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

from fakes.slack import SlackFake

from labbot.bot.slack.thread_plan import Cadence
from labbot.bot.slack.threads import RunThreads
from labbot.storage.db import Database
from labbot.storage.models import Run, RunStatus, utcnow
from labbot.training.launcher import RayLauncher
from labbot.training.ray_cluster import RayConnection
from labbot.training.registry import JobRegistry
from labbot.training.service import RunService
from labbot.training.specs import LaunchRequest, resolve_launch
from labbot.training.telemetry_ingest import TelemetryBatch, TelemetryPoint
from labbot.training.telemetry_store import TelemetryStore

ALICE = "U0ALICE001"
UNREACHABLE_RAY = "http://127.0.0.1:9"  # the thread keeper never calls Ray; nothing answers there
JOBS = {  # as labbot.toml's [jobs.rl-demo] would declare it
    "rl-demo": {
        "entrypoint": "python rl.py",
        "params": {"steps": 100},
        "plot": ["reward", "pass_rate"],
        "headline": "pass_rate",
    }
}


def reward(step: int) -> float:
    return 1 - math.exp(-step / 30)


def pass_rate(step: int) -> float:
    return step / 160


class Lab:
    """The thread keeper as ``labbot serve`` wires it, and a run of ``rl-demo`` stored as a launch stores it."""

    def __init__(self, tmp_path: Path, slack: SlackFake) -> None:
        self.slack = slack
        self.db = Database(f"sqlite:///{tmp_path / 'labbot.db'}")
        self.db.upgrade()
        self.service = RunService(
            self.db,
            JobRegistry.from_config(JOBS),
            RayLauncher(RayConnection(UNREACHABLE_RAY, None), timeout=1),
            control_url="http://127.0.0.1:9",
            checkpoint_root=tmp_path / "runs",
        )
        self.telemetry = TelemetryStore(self.db)
        self.threads = RunThreads(slack.async_client(), self.service, self.telemetry, Cadence())

    def launch(self, run_id: str, job: str) -> str:
        """A pending run, its config what ``RunService.launch`` stores for ``job``, and its thread: the card's ts."""
        cfg = resolve_launch(self.service.registry.get(job), LaunchRequest(job=job))
        with self.db.session() as s:
            s.add(
                Run(id=run_id, job=job, name=f"{job}-{run_id}", owner=ALICE, config=cfg.model_dump(),
                    status=RunStatus.PENDING.value, telemetry_token_hash="0" * 64)
            )  # fmt: skip
        return asyncio.run(self.threads.open_thread(self.service.get(run_id), self.slack.default_channel))

    def report(self, run_id: str, steps: range, metrics: Any) -> None:
        now = utcnow()
        points = [TelemetryPoint(step=s, when=now, metrics=metrics(s)) for s in steps]
        self.telemetry.ingest(run_id, TelemetryBatch(attempt=1, points=points, events=[]))

    def end(self, run_id: str, status: RunStatus = RunStatus.SUCCEEDED) -> None:
        with self.db.session() as s:
            run = s.get_one(Run, run_id)
            run.status, run.ended_at = status.value, utcnow()

    def tick(self) -> int:
        return asyncio.run(self.threads.tick())

    def files(self, card_ts: str) -> list[tuple[dict[str, Any], bytes]]:
        """Every file posted in the run's thread with its bytes, oldest first."""
        messages = self.slack.messages(self.slack.default_channel, thread_ts=card_ts)
        return [(f, self.slack.file_bytes(f["id"])) for m in messages for f in m.files or []]
