"""Whose artifact store an agent's tool calls use: set by labbot, never by the model.

The built-in ``lab`` server serves every agent from one process, so its artifact tools take an ``as_agent``
argument naming the store. ``AgentIdentity`` wraps a role's executor: it hides that argument from the tool schemas
the model sees, and fills it in on every call with the agent's store — ``RESEARCHER/ROLE``, so a researcher's
assistant keeps its files across threads, and another researcher's agents (or another role) cannot read them unless
they are shared. Whatever the model puts there is overwritten.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from agents.tools import CallContext, ToolExecutor, ToolResult, ToolSpec

IDENTITY_ARG = "as_agent"
LAB_SERVER = "lab"


def store_of(ctx: CallContext) -> str:
    """The artifact store of the agent behind ``ctx``."""
    return f"{ctx.owner}/{ctx.role}"


def _takes_identity(spec: ToolSpec) -> bool:
    return spec.server == LAB_SERVER and IDENTITY_ARG in (spec.input_schema.get("properties") or {})


def _without_identity(spec: ToolSpec) -> ToolSpec:
    schema = dict(spec.input_schema)
    schema["properties"] = {k: v for k, v in (schema.get("properties") or {}).items() if k != IDENTITY_ARG}
    if "required" in schema:
        schema["required"] = [r for r in schema["required"] if r != IDENTITY_ARG]
    return replace(spec, input_schema=schema)


class AgentIdentity:
    def __init__(self, inner: ToolExecutor) -> None:
        self.inner = inner

    def tools(self) -> Sequence[ToolSpec]:
        return [_without_identity(t) if _takes_identity(t) else t for t in self.inner.tools()]

    async def call(self, name: str, arguments: Mapping[str, Any], ctx: CallContext) -> ToolResult:
        spec = next((t for t in self.inner.tools() if t.name == name), None)
        if spec is not None and _takes_identity(spec):
            arguments = {**arguments, IDENTITY_ARG: store_of(ctx)}
        return await self.inner.call(name, arguments, ctx)
