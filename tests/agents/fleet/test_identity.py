"""labbot.agents.fleet.identity: the artifact tools of the built-in lab server get the agent's store from labbot, never
from the
model — the argument is hidden from the schemas the model sees and overwritten on every call."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from labbot.agents.fleet.identity import AgentIdentity, store_of
from labbot.agents.fleet.tools import CallContext, ToolCall, ToolExecutor, ToolResult, ToolSpec

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "text": {"type": "string"}, "as_agent": {"type": "string"}},
    "required": ["name", "text"],
}
CTX = CallContext(agent="ses_1", role="eval-writer", owner="U0ALICE001", channel="C1", thread_ts="1.2")


class Inner:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def tools(self) -> Sequence[ToolSpec]:
        return [
            ToolSpec("lab__put_artifact", "store text", SCHEMA, server="lab"),
            ToolSpec("other__put_artifact", "someone else's", SCHEMA, server="other"),
        ]

    async def call(self, call: ToolCall) -> ToolResult:
        self.calls.append({"name": call.name, **call.arguments})
        return ToolResult("ok")


def call(executor: ToolExecutor, name: str, arguments: Mapping[str, Any]) -> ToolResult:
    """``executor``'s call of ``name``, resolved against the tools it lists (as the runtime resolves the model's)."""
    return asyncio.run(executor.call(ToolCall.resolve(executor, name, arguments, CTX)))


def test_the_model_never_sees_or_sets_whose_store_it_writes_to() -> None:
    inner = Inner()
    wrapped = AgentIdentity(inner)
    lab, other = wrapped.tools()
    assert "as_agent" not in lab.input_schema["properties"] and lab.input_schema["required"] == ["name", "text"]
    assert "as_agent" in other.input_schema["properties"], "only the lab server's tools are labbot's to fill in"

    forged = {"name": "r.md", "text": "x", "as_agent": "U0BOB00001/assistant"}  # the model tries another store
    call(wrapped, "lab__put_artifact", forged)
    call(wrapped, "other__put_artifact", forged)
    assert inner.calls[0]["as_agent"] == store_of(CTX) == "U0ALICE001/eval-writer"
    assert inner.calls[1]["as_agent"] == "U0BOB00001/assistant"  # another server's argument is left alone
    assert lab.labbot_args == {"as_agent"} and other.labbot_args == frozenset(), "the offered spec says what is filled"

    # a call resolved against the server's own listing (the argument still in the schema) is filled in all the same
    asyncio.run(wrapped.call(ToolCall.resolve(inner, "lab__put_artifact", forged, CTX)))
    assert inner.calls[2]["as_agent"] == store_of(CTX)


def test_a_post_tool_gets_the_thread_the_agent_works_in() -> None:
    schema = {
        "type": "object",
        "properties": {k: {"type": "string"} for k in ("artifact_id", "as_agent", "in_channel", "in_thread")},
        "required": ["artifact_id"],
    }

    class Posting(Inner):
        def tools(self) -> Sequence[ToolSpec]:
            return [ToolSpec("lab__post_artifact", "post it", schema, server="lab")]

    inner = Posting()
    wrapped = AgentIdentity(inner)
    [spec] = wrapped.tools()
    assert set(spec.input_schema["properties"]) == {"artifact_id"}
    call(wrapped, "lab__post_artifact", {"artifact_id": "a1", "in_channel": "C0EVIL"})
    assert inner.calls == [
        {
            "name": "lab__post_artifact",
            "artifact_id": "a1",
            "as_agent": store_of(CTX),
            "in_channel": "C1",
            "in_thread": "1.2",
        }
    ]
