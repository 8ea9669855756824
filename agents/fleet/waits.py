"""Tools that wait on the cluster: their wait is not the agent's time.

A built-in tool that exists to wait (``lab__wait_for_run``: until a run labbot launched for the agent ends) says so in
its MCP ``_meta`` (``ToolSpec.waits``, read from the call's spec). :class:`OutsideWaits` runs such a call inside
:func:`labbot.agents.fleet.human_wait.waiting_outside`, so neither the agent's wall-time budget nor its per-call
timeout — nor those of the agents above it, for a sub-agent — is spent on a generation job or an eval run that takes
minutes; the tool's own ``timeout_s`` bounds the wait.
"""

from __future__ import annotations

from collections.abc import Sequence

from labbot.agents.fleet.human_wait import waiting_outside
from labbot.agents.fleet.tools import ToolCall, ToolExecutor, ToolResult, ToolSpec


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
