"""Slack Web API calls per run-hour at default settings (claim: reported, and under 1 a minute per run), against a
naive bot that posts a message per logged step and updates its card every tick, in one run.

One hour of a run that logs a step a second (3,600 steps) is replayed on a simulated clock through the real thread
keeper (`RunThreads.tick` every 2 s, default cadence), the real database and telemetry store, a run really launched
on a local Ray head, and the real slack_sdk client talking to the local Slack fake, which counts every call.

    .venv/bin/python benchmarks/slack_calls.py
"""

from __future__ import annotations

import asyncio
import tempfile
from datetime import timedelta
from pathlib import Path

from _harness import report
from fakes.slack import SlackFake
from support import SLEEPER, make_service

from labbot.bot.config import SlackSettings
from labbot.bot.slack.runtime import web_client
from labbot.bot.slack.thread_plan import Cadence
from labbot.bot.slack.threads import RunThreads
from labbot.storage.models import Run, utcnow
from labbot.training.ray_cluster import EmbeddedRayHead
from labbot.training.specs import LaunchRequest
from labbot.training.telemetry_ingest import TelemetryBatch, TelemetryPoint
from labbot.training.telemetry_store import TelemetryStore

TICK_S = 2
HOUR_S = 3600


async def replay(threads: RunThreads, telemetry: TelemetryStore, run_id: str, clock: list) -> None:  # type: ignore[type-arg]
    start = clock[0]
    for t in range(0, HOUR_S, TICK_S):
        now = start + timedelta(seconds=t)
        clock[0] = now
        points = [
            TelemetryPoint(step=s, when=now, metrics={"loss": 3.0 * (1 + s) ** -0.1, "tokens_per_s": 4.1e4})
            for s in range(t + 1, t + TICK_S + 1)
        ]
        await asyncio.to_thread(telemetry.ingest, run_id, TelemetryBatch(attempt=1, points=points, events=[]))
        await threads.tick()


def main() -> None:
    defaults = SlackSettings()
    with tempfile.TemporaryDirectory(prefix="lb-calls-") as tmp, SlackFake() as fake:
        head = EmbeddedRayHead(Path(tmp) / "ray")
        ray = head.ensure()
        try:
            service = make_service(Path(tmp), ray, SLEEPER)
            telemetry = TelemetryStore(service.db)
            run = service.launch(LaunchRequest(job="sleeper", owner="U0ALICE001", params={}, name="hour-long")).run
            with service.db.session() as s:  # the run declares 3,600 steps, so milestones and ETA apply
                row = s.get_one(Run, run["id"])
                row.config = row.config | {"params": {"steps": HOUR_S}}
            clock = [utcnow()]
            cadence = Cadence(defaults.card_every_s, defaults.progress_every_s, defaults.plot_milestones)

            async def go() -> None:
                client = web_client(fake.bot_token, fake.start())
                threads = RunThreads(client, service, telemetry, cadence, clock=lambda: clock[0])
                await threads.open_thread(service.get(run["id"]), fake.default_channel)
                await replay(threads, telemetry, run["id"], clock)
                await asyncio.to_thread(service.stop, run["id"])
                clock[0] += timedelta(seconds=TICK_S)
                await threads.tick()  # the end: final card, plot and summary

            asyncio.run(go())
        finally:
            head.stop()
        calls = [c for c in fake.calls if c.method != "auth.test"]
    by_method: dict[str, int] = {}
    for c in calls:
        by_method[c.method] = by_method.get(c.method, 0) + 1
    naive = HOUR_S + HOUR_S // TICK_S  # a post per step + a card update per tick
    ratio = len(calls) / naive
    print(f"labbot: {len(calls)} Slack Web API calls for a one-hour run ({len(calls) / 60:.2f} a minute): {by_method}")
    print(f"naive bot (a post per step, a card update per tick): {naive} calls")
    print(f"ratio labbot/naive = {ratio:.4f}; under 1 a minute: {len(calls) < 60}")
    report(
        "slack_calls",
        {
            "calls_per_run_hour": len(calls),
            "per_minute": len(calls) / 60,
            "naive_calls": naive,
            "ratio": ratio,
            "claim": "< 60 calls per run-hour",
            "ok": len(calls) < 60,
        },
    )


if __name__ == "__main__":
    main()
