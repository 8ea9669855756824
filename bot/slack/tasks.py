"""Background work after the ack: Slack wants an answer within 3 s, so handlers ack and hand the work here."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)


class TaskSet:
    """Keeps a reference to every spawned task (asyncio only keeps weak ones) and logs what fails."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str | None = None) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
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
