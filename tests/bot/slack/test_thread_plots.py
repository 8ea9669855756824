"""A run's thread plots what its job names: a job declaring ``plot = ["reward", "pass_rate"]`` in labbot.toml gets
one image with a panel per metric at its milestone and at the end (a metric not reported yet shows "no data yet"),
and its card shows the headline metric. The real thread keeper, registry, SQLite and telemetry store, against the
Slack emulator (every Web API call checked against Slack's spec when the test ends); Ray is never called.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.slack import SlackFake, started

from labbot.bot.render.plots import metrics_plot_png
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

    def end(self, run_id: str) -> None:
        with self.db.session() as s:
            run = s.get_one(Run, run_id)
            run.status, run.ended_at = RunStatus.SUCCEEDED.value, utcnow()

    def tick(self) -> int:
        return asyncio.run(self.threads.tick())

    def files(self, card_ts: str) -> list[tuple[dict[str, Any], bytes]]:
        """Every file posted in the run's thread with its bytes, oldest first."""
        messages = self.slack.messages(self.slack.default_channel, thread_ts=card_ts)
        return [(f, self.slack.file_bytes(f["id"])) for m in messages for f in m.files or []]


@pytest.fixture
def slack() -> Iterator[SlackFake]:
    with started() as fake:
        yield fake


@pytest.fixture
def lab(tmp_path: Path, slack: SlackFake) -> Lab:
    return Lab(tmp_path, slack)


def test_a_job_declaring_reward_and_pass_rate_gets_them_plotted_in_its_thread(lab: Lab) -> None:
    card_ts = lab.launch("rl0001", "rl-demo")
    lab.report("rl0001", range(1, 61), lambda s: {"reward": reward(s)})  # pass_rate not reported yet
    lab.tick()  # 60 % done: the 50 % milestone's plot

    [(info, png)] = lab.files(card_ts)
    assert (
        info["name"] == "rl0001-reward+pass_rate-50.png"
        and info["title"] == "rl-demo-rl0001 reward, pass_rate (50% done)"
    )
    series = {"reward": [(s, reward(s)) for s in range(1, 61)], "pass_rate": []}
    assert png == metrics_plot_png(series, title="rl-demo-rl0001 — reward, pass_rate (50% done)", attempts=[(1, 1)])

    lab.report("rl0001", range(61, 101), lambda s: {"reward": reward(s), "pass_rate": pass_rate(s)})
    lab.end("rl0001")
    lab.tick()  # the end: the final plot, the card and the summary

    (_, first), (final_info, final) = lab.files(card_ts)
    series = {
        "reward": [(s, reward(s)) for s in range(1, 101)],
        "pass_rate": [(s, pass_rate(s)) for s in range(61, 101)],
    }
    assert final == metrics_plot_png(series, title="rl-demo-rl0001 — reward, pass_rate (final)", attempts=[(1, 1)])
    assert final_info["name"] == "rl0001-reward+pass_rate-final.png" and final != first

    card = lab.slack.message(lab.slack.default_channel, card_ts)
    assert card is not None and card.text.endswith("pass_rate 0.6250")  # the headline's latest value: 100 / 160
    assert any("pass_rate 0.3812 → 0.6250" in text for text in lab.slack.texts(thread_ts=card_ts))  # the summary
    assert not any("loss" in text for text in lab.slack.texts(thread_ts=card_ts))


def test_a_run_stored_before_jobs_named_their_plots_still_gets_its_loss_plot(lab: Lab) -> None:
    card_ts = lab.launch("lm0001", "tiny-lm")
    with lab.db.session() as s:  # what a run launched by an older labbot keeps: no plot, no headline
        run = s.get_one(Run, "lm0001")
        run.config = {k: v for k, v in run.config.items() if k not in ("plot", "headline")} | {"params": {"steps": 100}}
    lab.report("lm0001", range(1, 61), lambda s: {"loss": 3.0 / s, "reward": 1.0})
    lab.tick()
    [(info, png)] = lab.files(card_ts)
    assert info["name"] == "lm0001-loss-50.png"
    assert png == metrics_plot_png(
        {"loss": [(s, 3.0 / s) for s in range(1, 61)]}, title="tiny-lm-lm0001 — loss (50% done)", attempts=[(1, 1)]
    )
    card = lab.slack.message(lab.slack.default_channel, card_ts)
    assert card is not None and card.text.endswith("loss 0.0500")
