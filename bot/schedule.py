"""The control plane's periodic work (watchdog, outbox, dead-man ping) on APScheduler, with a clean stop.

APScheduler's asyncio executor cancels a job that is running when the scheduler shuts down, and logs the
``CancelledError`` with a traceback. A watchdog tick runs on a worker thread and cannot be cancelled: the cancel only
abandons it half-way (a page written but not yet sent). So each job here runs as a task this class owns, behind a
shield: shutting down stops new runs, the wrapper APScheduler sees returns quietly, and :meth:`Periodic.stop` waits
(bounded) for the work in progress to finish before the database closes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from apscheduler.schedulers.asyncio import AsyncIOScheduler

log = logging.getLogger("labbot")

Job = Callable[[], Awaitable[object]]


class Periodic:
    """Coroutine functions run every few seconds, one run of each at a time, drained on :meth:`stop`."""

    def __init__(self) -> None:
        self._sched = AsyncIOScheduler(timezone="UTC")
        self._running: set[asyncio.Task[object]] = set()

    @property
    def running(self) -> int:
        """How many runs are in progress now."""
        return len(self._running)

    def every(self, seconds: float, job: Job, *, name: str) -> None:
        """Run ``job`` every ``seconds``; a run still going when the next is due is not doubled (coalesced)."""
        self._sched.add_job(
            self._owned(job, name),
            "interval",
            seconds=seconds,
            id=name,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
        )

    def start(self) -> None:
        self._sched.start()

    def run_soon(self, name: str) -> None:
        """Bring the next run of ``name`` forward to now (the first watchdog tick at start-up, a new leader's).
        Before :meth:`start` (or after :meth:`stop`) it does nothing: the first run comes on schedule."""
        if self._sched.running:
            self._sched.modify_job(name, next_run_time=datetime.now(UTC))

    async def stop(self, *, timeout_s: float = 15.0) -> None:
        """No new runs; wait up to ``timeout_s`` for those in progress (logged by name when they do not end)."""
        if self._sched.running:
            self._sched.shutdown(wait=False)
        if not self._running:
            return
        _, pending = await asyncio.wait(set(self._running), timeout=timeout_s)
        for task in pending:
            log.warning("stopping: %s still running after %.0fs, left behind", task.get_name(), timeout_s)

    def _owned(self, job: Job, name: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            task = asyncio.ensure_future(job())
            task.set_name(name)
            self._running.add(task)
            task.add_done_callback(self._running.discard)
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                # the scheduler is shutting down (the only thing that cancels its jobs); the run goes on to its end
                # under stop()'s wait, and this wrapper has nothing left to report
                return

        run.__name__ = run.__qualname__ = name
        return run
