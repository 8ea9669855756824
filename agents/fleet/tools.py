"""What an agent's tools are, whatever serves them: the shared vocabulary of the agent runtime
(``labbot.agents.fleet.runtime``), the MCP client pool (``labbot.agents.fleet.mcp_pool``) and the approval gate.

A tool is a ``ToolSpec`` (its name as the model sees it — ``server__tool`` for MCP tools — its JSON Schema, and
whether it is read-only or destructive); a ``ToolExecutor`` lists them and calls one. Calls never raise for the
tool's own trouble (a crash, a timeout, a refused approval): they return a ``ToolResult`` with ``is_error`` set and a
message the model can act on, which the runtime feeds back as an ``is_error`` ``tool_result``.

Executors stack (the audit around the approval gate around ... around the MCP pool): a call is a ``ToolCall``,
resolved once — its name, arguments and context with the ``ToolSpec`` the outermost executor lists under that name
(``ToolCall.resolve``; the runtime resolves against the tools it offered the model) — and each executor reads what it
needs from it (the gate ``destructive``, ``OutsideWaits`` ``waits``, ``AgentIdentity`` ``server`` and
``labbot_args``) and hands it on, changed at most in its arguments, rather than looking the tool up again. Wrappers
keep a tool's flags as they list it, so the outermost spec says what each of them needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol


@dataclass(frozen=True)
class ToolSpec:
    name: str  # as the model sees it: ^[a-zA-Z0-9_-]{1,64}$ (MCP tools: SERVER__TOOL)
    description: str
    input_schema: Mapping[str, Any]
    read_only: bool = False  # MCP readOnlyHint
    destructive: bool = False  # MCP destructiveHint, or marked so in labbot.toml: runs only after a human approves
    server: str | None = None  # the MCP server it comes from, if any
    # the call waits on something outside the agent (a run on the cluster): its wait is not the agent's time
    # (labbot.agents.fleet.waits); only a built-in server's tool may say so (labbot.common.mcp_meta in its _meta)
    waits: bool = False
    # a read-only tool (full name) whose answer to the same arguments the approval prompt shows: what the call would
    # do, as labbot works it out (labbot.common.mcp_meta's labbot/preview; a built-in server's tools only)
    preview: str | None = None
    # arguments the tool takes that labbot fills in on every call and hides from the model's schema (whose artifact
    # store, which thread: labbot.agents.fleet.identity); set by the executor that hides them
    labbot_args: frozenset[str] = frozenset()

    def as_anthropic(self) -> dict[str, Any]:
        """The tool as the Messages API takes it."""
        return {"name": self.name, "description": self.description, "input_schema": dict(self.input_schema)}


@dataclass(frozen=True)
class ToolResult:
    content: str | Sequence[Mapping[str, Any]]  # text, or Messages API content blocks (text, image)
    is_error: bool = False
    meta: Mapping[str, Any] = field(default_factory=dict)  # e.g. {"approver": "U0ALICE001"} for the audit trail


@dataclass(frozen=True)
class CallContext:
    """Who an agent works for and where: what the approval gate and the audit trail need."""

    agent: str  # the agent session's id
    role: str
    owner: str  # the researcher the agent works for (a Slack user id, or a CLI user)
    channel: str | None = None
    thread_ts: str | None = None
    run_id: str | None = None  # when the thread is a run's


@dataclass(frozen=True)
class ToolCall:
    """One call of a tool, as every executor of a stack receives it and hands it on (see the module docstring).

    ``spec`` is the tool as the executor it was resolved against lists it — for an agent, as the run began — or None
    for a name it does not list: wrappers then pass the call on untouched (nothing to approve, wait for or fill in)
    and the innermost executor answers it (the MCP pool: an ``is_error`` result naming the tools there are)."""

    name: str
    arguments: Mapping[str, Any]
    ctx: CallContext
    spec: ToolSpec | None = None

    @classmethod
    def resolve(cls, executor: ToolExecutor, name: str, arguments: Mapping[str, Any], ctx: CallContext) -> ToolCall:
        """A call of ``name`` with the spec ``executor`` lists under that name (None if none)."""
        return cls(name, arguments, ctx, next((t for t in executor.tools() if t.name == name), None))

    def with_arguments(self, arguments: Mapping[str, Any]) -> ToolCall:
        """The same call with other arguments (filled in by labbot)."""
        return replace(self, arguments=arguments)


class ToolExecutor(Protocol):
    def tools(self) -> Sequence[ToolSpec]: ...

    async def call(self, call: ToolCall) -> ToolResult: ...
