"""Whose artifact store an agent's tool calls use: set by labbot, never by the model.

The built-in ``lab`` server serves every agent from one process, so its artifact tools take an ``as_agent``
argument naming the store (and ``post_artifact`` takes the thread to post in); so do the built-in ``datadog``
server's tools, which keep each full payload in the agent's store. ``AgentIdentity`` wraps a role's
executor: it hides those arguments from the tool schemas the model sees, and fills them in on every call — the
thread the agent works in, and the agent's store — ``RESEARCHER/ROLE``, so a researcher's
assistant keeps its files across threads, and another researcher's agents (or another role) cannot read them unless
they are shared. Whatever the model puts there is overwritten.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from labbot.agents.fleet.tools import CallContext, ToolExecutor, ToolResult, ToolSpec

IDENTITY_ARG = "as_agent"
WHERE_ARGS = ("in_channel", "in_thread")  # the Slack thread an agent works in, for tools that post into it
LABBOT_ARGS = (IDENTITY_ARG, *WHERE_ARGS)
LAB_SERVER = "lab"
# built-in servers whose tools take labbot's arguments: lab (artifacts, posting) and datadog (full payloads stored)
IDENTITY_SERVERS = frozenset({LAB_SERVER, "datadog"})


def store_of(ctx: CallContext) -> str:
    """The artifact store of the agent behind ``ctx``."""
    return f"{ctx.owner}/{ctx.role}"


def _takes_identity(spec: ToolSpec) -> bool:
    return spec.server in IDENTITY_SERVERS and any(
        a in (spec.input_schema.get("properties") or {}) for a in LABBOT_ARGS
    )


def _without_identity(spec: ToolSpec) -> ToolSpec:
    schema = dict(spec.input_schema)
    schema["properties"] = {k: v for k, v in (schema.get("properties") or {}).items() if k not in LABBOT_ARGS}
    if "required" in schema:
        schema["required"] = [r for r in schema["required"] if r not in LABBOT_ARGS]
    return replace(spec, input_schema=schema)


class AgentIdentity:
    def __init__(self, inner: ToolExecutor) -> None:
        self.inner = inner

    def tools(self) -> Sequence[ToolSpec]:
        return [_without_identity(t) if _takes_identity(t) else t for t in self.inner.tools()]

    async def call(self, name: str, arguments: Mapping[str, Any], ctx: CallContext) -> ToolResult:
        spec = next((t for t in self.inner.tools() if t.name == name), None)
        if spec is not None and _takes_identity(spec):
            props = spec.input_schema.get("properties") or {}
            given = {k: v for k, v in arguments.items() if k not in LABBOT_ARGS}  # the model's are dropped
            labbot = {IDENTITY_ARG: store_of(ctx), "in_channel": ctx.channel, "in_thread": ctx.thread_ts}
            arguments = {**given, **{k: v for k, v in labbot.items() if k in props and v is not None}}
        return await self.inner.call(name, arguments, ctx)
