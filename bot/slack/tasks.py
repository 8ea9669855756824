"""Background work after the ack: Slack wants an answer within 3 s, so handlers ack and hand the work here."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)


class TaskSet:
    """Keeps a reference to every spawned task (asyncio only keeps weak ones), logs what fails, and runs at most
    ``concurrency`` at a time: a burst of commands queues its work instead of starving the acks of the next ones."""

    def __init__(self, concurrency: int = 4, *, quiet_s: float = 0.2, max_defer_s: float = 2.0) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._slots = asyncio.Semaphore(concurrency)
        self.quiet_s = quiet_s
        self.max_defer_s = max_defer_s
        self._last_request = 0.0

    def touch(self) -> None:
        """A Slack request arrived: background work yields to acks while a burst lasts (at most max_defer_s)."""
        self._last_request = asyncio.get_running_loop().time()

    async def quiet(self) -> None:
        """Wait until no Slack request arrived for ``quiet_s`` (at most ``max_defer_s``): work that can wait —
        background commands, thread upkeep, reconciling — yields to acks while a burst lasts."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.max_defer_s
        while (quiet_for := loop.time() - self._last_request) < self.quiet_s and loop.time() < give_up:
            await asyncio.sleep(self.quiet_s - quiet_for)

    async def _limited(self, coro: Coroutine[Any, Any, Any]) -> Any:
        await self.quiet()
        async with self._slots:
            return await coro

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str | None = None) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(self._limited(coro), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task %s failed", task.get_name(), exc_info=task.exception())

    def __len__(self) -> int:
        return len(self._tasks)

    async def drain(self, timeout: float = 30.0) -> None:
        """Wait for the work in flight (console at end of input, tests); cancel what is left after ``timeout``."""
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=timeout)
            for task in pending:
                task.cancel()
