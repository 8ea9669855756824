"""The model's text as it is written: with a client that streams (the SDK's ``messages.stream`` against the
Anthropic fake's server-sent events), every turn's text reaches ``on_event`` in pieces before the turn's whole."""

from __future__ import annotations

import asyncio
from typing import Any

from fakes.anthropic import FakeAnthropic, text, tool_uses

from labbot.agents.fleet.model import ModelSettings
from labbot.agents.fleet.runtime import AgentEvent, AgentRuntime, RunOutcome
from labbot.agents.fleet.tools import CallContext, ToolCall, ToolResult, ToolSpec

ALICE = CallContext(agent="agent-1", role="helper", owner="U0ALICE001")
LONG = "r1 is slow because its data loader waits on a full queue; raise num_workers to 4 and watch the step rate."


class OneTool:
    def tools(self) -> list[ToolSpec]:
        return [ToolSpec("lab__runs", "the runs", {"type": "object", "properties": {}})]

    async def call(self, call: ToolCall) -> ToolResult:
        return ToolResult("3 runs")


def run(fake: FakeAnthropic, on_event: Any) -> RunOutcome:
    env = {"ANTHROPIC_API_KEY": fake.api_key, "ANTHROPIC_BASE_URL": fake.base_url}
    settings = ModelSettings.from_env(env)

    async def go() -> RunOutcome:
        runtime = AgentRuntime.from_settings(settings)
        try:
            return await runtime.run(
                "You help.", [{"role": "user", "content": "why?"}], OneTool(), ALICE, on_event=on_event
            )
        finally:
            await runtime.aclose()

    return asyncio.run(go())


def test_each_turns_text_arrives_in_pieces_then_whole_and_the_run_is_unchanged(fake: FakeAnthropic) -> None:
    events: list[AgentEvent] = []

    async def on_event(event: AgentEvent) -> None:
        events.append(event)

    fake.script(tool_uses(("lab__runs", {})), text(LONG))
    outcome = run(fake, on_event)
    assert outcome.stop == "end_turn" and outcome.text == LONG
    pieces = [e.text for e in events if e.kind == "text_delta"]
    assert len(pieces) > 5 and "".join(pieces) == LONG  # the model's tokens, in order, nothing lost or doubled
    kinds = [e.kind for e in events]
    assert kinds.index("text_delta") < kinds.index("text") and kinds[-1] == "text"  # the pieces, then the whole
    assert all(r.body.get("stream") is True for r in fake.requests)  # streamed requests, the fake checking them
    assert outcome.messages[-1] == {"role": "assistant", "content": [{"type": "text", "text": LONG}]}


def test_without_a_listener_the_model_is_not_streamed(fake: FakeAnthropic) -> None:
    fake.script(text(LONG))
    outcome = run(fake, None)
    assert outcome.text == LONG and not any(r.body.get("stream") for r in fake.requests)
