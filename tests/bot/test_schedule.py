"""The periodic work's clean stop: a run in progress when the server stops ends, with no traceback in the log."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from anyio import to_thread

from labbot.bot.schedule import Periodic


def test_stop_waits_for_a_tick_on_its_worker_thread_and_logs_no_error(caplog: pytest.LogCaptureFixture) -> None:
    started, release = threading.Event(), threading.Event()
    finished: list[str] = []

    def tick() -> None:  # the watchdog's tick: on a worker thread, which no cancel can stop
        started.set()
        release.wait(10)
        finished.append("tick")

    async def watch() -> None:
        await to_thread.run_sync(tick)
        finished.append("after-tick")  # what watch() does next (deliver the pages): it must not be cut off

    async def main() -> None:
        jobs = Periodic()
        jobs.every(3600, watch, name="watchdog")
        jobs.start()
        jobs.run_soon("watchdog")
        await to_thread.run_sync(started.wait, 10)
        assert jobs.running == 1
        stopping = asyncio.ensure_future(jobs.stop(timeout_s=10))
        await asyncio.sleep(0.05)
        assert not stopping.done()  # the stop waits for the tick
        release.set()
        await stopping
        assert jobs.running == 0

    with caplog.at_level(logging.DEBUG):
        asyncio.run(main())
    assert finished == ["tick", "after-tick"]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert errors == [], [r.getMessage() for r in errors]


def test_a_run_that_outlasts_the_stop_is_named_and_left(caplog: pytest.LogCaptureFixture) -> None:
    hang = asyncio.Event()

    async def stuck() -> None:
        await hang.wait()

    async def main() -> None:
        jobs = Periodic()
        jobs.every(3600, stuck, name="deadman")
        jobs.start()
        jobs.run_soon("deadman")
        while jobs.running == 0:
            await asyncio.sleep(0.01)
        await jobs.stop(timeout_s=0.1)
        hang.set()

    with caplog.at_level(logging.WARNING, logger="labbot"):
        asyncio.run(main())
    assert any("deadman still running" in r.getMessage() for r in caplog.records)


def test_a_job_that_raises_is_logged_and_runs_again() -> None:
    runs: list[int] = []

    async def flaky() -> None:
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("first run fails")

    async def main() -> None:
        jobs = Periodic()
        jobs.every(0.05, flaky, name="outbox")
        jobs.start()
        for _ in range(200):
            if len(runs) >= 2:
                break
            await asyncio.sleep(0.01)
        await jobs.stop()

    asyncio.run(main())
    assert len(runs) >= 2
