"""Time an agent spends waiting — for a human's decision, or for a run on the cluster it asked to wait for — is not
the agent's time.

An agent run (``labbot.agents.fleet.runtime``) has a wall-time budget and a timeout per tool call; a destructive call
waits for a person's Approve (``labbot.agents.fleet.approvals``, up to 10 minutes) inside the tool call, possibly deep
inside it: a ``delegate`` call runs a sub-agent whose own destructive call waits. Neither the waiting run nor any run
above it should be cut off, or charged, for that wait.

Each run registers a ``HumanWaits`` for the duration of its loop (``tracking``); the registrations form a stack in a
context variable, which asyncio copies into every task a run starts, so the tool calls of a run — and the sub-agents
they start — see every run above them. The approval gate wraps its wait in ``waiting_for_human()``, which charges
the wait to every run on the stack at once. A run subtracts ``HumanWaits.total()`` from its elapsed time, and a tool
call's deadline moves by the real seconds humans were waited for during the call (``HumanWaits.real_total()``).
Overlapping waits (two approvals asked at once) count once.

A built-in tool that exists to wait on something outside the agent (``lab__wait_for_run``: until a run labbot launched
for the agent ends) says so in its MCP ``_meta`` (``ToolSpec.waits``, read from the call's spec). :class:`OutsideWaits`
runs such a call inside ``waiting_outside()``, the same charge under a name that says what it is, so neither the
agent's wall-time budget nor its per-call timeout — nor those of the agents above it, for a sub-agent — is spent on a
generation job or an eval run that takes minutes; the tool's own ``timeout_s`` bounds the wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from labbot.agents.fleet.tools import ToolCall, ToolExecutor, ToolResult, ToolSpec

__all__ = ["HumanWaits", "OutsideWaits", "tracking", "waiting_for_human", "waiting_outside"]

_STACK: ContextVar[tuple[HumanWaits, ...]] = ContextVar("labbot_human_waits", default=())


class HumanWaits:
    """How long one run has waited for humans (and, under ``waiting_outside``, on the cluster): in its own clock
    (for its budget) and in real seconds (for the event loop's timeouts)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._open = 0
        self._since = (0.0, 0.0)
        self._total = (0.0, 0.0)

    @property
    def waiting(self) -> bool:
        return self._open > 0

    def total(self) -> float:
        """Seconds of the run's clock spent waiting for a human so far (an open wait included)."""
        return self._total[0] + (self._clock() - self._since[0] if self._open else 0.0)

    def real_total(self) -> float:
        """The same in real (monotonic) seconds."""
        return self._total[1] + (time.monotonic() - self._since[1] if self._open else 0.0)

    def _begin(self) -> None:
        if self._open == 0:
            self._since = (self._clock(), time.monotonic())
        self._open += 1

    def _end(self) -> None:
        self._open -= 1
        if self._open == 0:
            run, real = self._since
            self._total = (self._total[0] + self._clock() - run, self._total[1] + time.monotonic() - real)


@contextmanager
def tracking(waits: HumanWaits) -> Iterator[HumanWaits]:
    """Charge human waits in this context (and the tasks started from it) to ``waits`` as well."""
    token = _STACK.set((*_STACK.get(), waits))
    try:
        yield waits
    finally:
        _STACK.reset(token)


@contextmanager
def waiting_for_human() -> Iterator[None]:
    """Around a wait for a person's decision: every run that (transitively) made this call is paused meanwhile."""
    stack = _STACK.get()
    for waits in stack:
        waits._begin()
    try:
        yield
    finally:
        for waits in stack:
            waits._end()


waiting_outside = waiting_for_human  # a wait on the cluster, not a person: charged alike (not the agent's time)


class OutsideWaits:
    """``inner``'s tools, with the calls of those that wait on the cluster charged to nobody."""

    def __init__(self, inner: ToolExecutor) -> None:
        self.inner = inner

    def tools(self) -> Sequence[ToolSpec]:
        return self.inner.tools()

    async def call(self, call: ToolCall) -> ToolResult:
        if call.spec is None or not call.spec.waits:
            return await self.inner.call(call)
        with waiting_outside():
            return await self.inner.call(call)
