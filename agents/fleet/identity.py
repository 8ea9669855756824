"""Whose artifact store an agent's tool calls use: set by labbot, never by the model.

The built-in ``lab`` server serves every agent from one process, so its artifact tools take an ``as_agent``
argument naming the store (and ``post_artifact`` takes the thread to post in); so do the built-in ``datadog``
server's tools, which keep each full payload in the agent's store. ``AgentIdentity`` wraps a role's
executor: it hides those arguments from the tool schemas the model sees, and fills them in on every call — the
thread the agent works in, and the agent's store — ``RESEARCHER/ROLE``, so a researcher's
assistant keeps its files across threads, and another researcher's agents (or another role) cannot read them unless
they are shared. Whatever the model puts there is overwritten. Which of those arguments a tool takes is read from the
call's spec (``ToolCall.spec``): its schema as the server lists it, or, in the spec the model was offered, the
``labbot_args`` recorded when they were hidden.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from labbot.agents.fleet.tools import CallContext, ToolCall, ToolExecutor, ToolResult, ToolSpec

IDENTITY_ARG = "as_agent"
WHERE_ARGS = ("in_channel", "in_thread")  # the Slack thread an agent works in, for tools that post into it
LABBOT_ARGS = (IDENTITY_ARG, *WHERE_ARGS)
LAB_SERVER = "lab"
# built-in servers whose tools take labbot's arguments: lab (artifacts, posting) and datadog (full payloads stored)
IDENTITY_SERVERS = frozenset({LAB_SERVER, "datadog"})


def store_of(ctx: CallContext) -> str:
    """The artifact store of the agent behind ``ctx``."""
    return f"{ctx.owner}/{ctx.role}"


def _labbot_args(spec: ToolSpec) -> frozenset[str]:
    """The arguments labbot fills in for ``spec``'s tool: those its schema takes (the tool as its server lists it),
    or, once hidden from the model, those ``_without_identity`` recorded. Empty for another server's tool."""
    if spec.server not in IDENTITY_SERVERS:
        return frozenset()
    props = spec.input_schema.get("properties") or {}
    return spec.labbot_args | {a for a in LABBOT_ARGS if a in props}


def _without_identity(spec: ToolSpec, filled: frozenset[str]) -> ToolSpec:
    schema = dict(spec.input_schema)
    schema["properties"] = {k: v for k, v in (schema.get("properties") or {}).items() if k not in LABBOT_ARGS}
    if "required" in schema:
        schema["required"] = [r for r in schema["required"] if r not in LABBOT_ARGS]
    return replace(spec, input_schema=schema, labbot_args=filled)


class AgentIdentity:
    def __init__(self, inner: ToolExecutor) -> None:
        self.inner = inner

    def tools(self) -> Sequence[ToolSpec]:
        specs = []
        for spec in self.inner.tools():
            filled = _labbot_args(spec)
            specs.append(_without_identity(spec, filled) if filled else spec)
        return specs

    async def call(self, call: ToolCall) -> ToolResult:
        filled = _labbot_args(call.spec) if call.spec is not None else frozenset()
        if filled:
            ctx = call.ctx
            given = {k: v for k, v in call.arguments.items() if k not in LABBOT_ARGS}  # the model's are dropped
            labbot = {IDENTITY_ARG: store_of(ctx), "in_channel": ctx.channel, "in_thread": ctx.thread_ts}
            call = call.with_arguments({**given, **{k: v for k, v in labbot.items() if k in filled and v is not None}})
        return await self.inner.call(call)
