"""A/B tests of the agents' models: ``[agents.ab]`` read strictly; a new thread gets an arm and keeps it (every model
call in the thread, sub-agents' included, goes to the arm's model); the split is even; turns record who answered."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from fakes.anthropic import FakeAnthropic, SeenRequest, Step, text, tool_use

from labbot.agents.feedback.ab import AbTest
from labbot.agents.fleet.fleet import Fleet
from labbot.agents.fleet.model import ModelSettings
from labbot.agents.fleet.runtime import AgentRuntime
from labbot.agents.fleet.tools import ToolCall, ToolResult, ToolSpec
from labbot.common.errors import BadRequest
from labbot.storage.db import Database
from labbot.storage.models import AgentSession, AgentTurn

ALICE = "U0ALICE001"
CHANNEL = "C0RUNS0001"
AB = AbTest(("model-a", "model-b"))


class NoTools:
    async def tools_for(self, role: str) -> NoTools:
        return self

    def tools(self) -> list[ToolSpec]:
        return []

    async def call(self, call: ToolCall) -> ToolResult:
        return ToolResult("nothing")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"models": ["only-one"]}, "two model names"),
        ({"models": ["same", "same"]}, "the same"),
        ({"models": "m1,m2"}, "two model names"),
        ({"models": ["a", "b"], "split": 1.5}, "between 0 and 1"),
        ({"models": ["a", "b"], "split": True}, "between 0 and 1"),
        ({"models": ["a", "b"], "roles": "assistant"}, "list of agent roles"),
        ({"models": ["a", "b"], "arms": 2}, "unknown key"),
    ],
)
def test_a_bad_ab_table_is_refused_saying_what_is_right(table: dict[str, Any], message: str) -> None:
    with pytest.raises(BadRequest, match=message):
        AbTest.from_config(table)


def test_no_table_or_no_models_is_no_test() -> None:
    assert AbTest.from_config(None) is None
    assert AbTest.from_config({"models": []}) is None
    ab = AbTest.from_config({"models": [" model-a ", "model-b"], "roles": ["assistant"], "split": 0.25})
    assert ab == AbTest(("model-a", "model-b"), ("assistant",), 0.25)
    assert ab.applies_to("assistant") and not ab.applies_to("investigator")


def test_the_split_is_even_and_a_function_of_the_session() -> None:
    from labbot.agents.fleet.sessions import new_session_id

    ids = [new_session_id() for _ in range(4000)]
    arms = [AB.arm(i)[0] for i in ids]
    assert 0.46 < arms.count("B") / len(arms) < 0.54
    assert [AB.arm(i) for i in ids[:50]] == [AB.arm(i) for i in ids[:50]]  # the same id, the same arm
    assert {AB.arm(i) for i in ids} == {("A", "model-a"), ("B", "model-b")}
    quarter = AbTest(("model-a", "model-b"), split=0.25)
    share = [quarter.arm(i)[0] for i in ids].count("B") / len(ids)
    assert 0.21 < share < 0.29


def test_each_thread_keeps_its_arms_model_for_every_call_sub_agents_included(
    fake: FakeAnthropic, tmp_path: Path
) -> None:
    db = Database(f"sqlite:///{tmp_path / 'labbot.db'}")
    db.upgrade()

    def model(req: SeenRequest) -> Step:
        last = req.messages[-1]["content"]
        if isinstance(last, str) and "delegate please" in last:
            return tool_use("delegate", {"role": "eval-writer", "task": "write an eval"})
        return text(f"answered by {req.body['model']}")

    fake.answer_with(model)
    env = {"ANTHROPIC_API_KEY": fake.api_key, "ANTHROPIC_BASE_URL": fake.base_url}
    runtime = AgentRuntime.from_settings(ModelSettings.from_env(env))

    async def go() -> list[tuple[str, str]]:
        fleet = Fleet(db, runtime, NoTools().tools_for, ab=AB)
        out = []
        try:
            for i in range(12):
                thread = f"1700000000.{i:06d}"
                first = await fleet.ask(owner=ALICE, text="delegate please", channel=CHANNEL, thread_ts=thread)
                second = await fleet.ask(owner=ALICE, text="and then?", channel=CHANNEL, thread_ts=thread)
                assert first.ab_arm == second.ab_arm and first.model == second.model
                assert first.session_id == second.session_id
                out.append((thread, str(first.model)))
            # a threadless ask (the CLI) is in no test: the configured model answers
            lone = await fleet.ask(owner=ALICE, text="hi", channel=None, thread_ts=None)
            assert lone.ab_arm is None and lone.model == runtime.model
        finally:
            await runtime.aclose()
        return out

    threads = asyncio.run(go())
    models = {m for _, m in threads}
    assert models == {"model-a", "model-b"}  # 12 threads: both arms (1 in 2**11 that one arm takes all)
    # every request of a thread (sub-agent included) went to that thread's model
    by_thread = dict(threads)
    for req in fake.requests:
        assert req.body["model"] in ("model-a", "model-b", runtime.model)
    with db.session() as s:
        sessions = {r.thread_ts: (r.model, r.ab_arm) for r in s.query(AgentSession).all() if r.thread_ts}
        turns = s.query(AgentTurn).order_by(AgentTurn.created_at).all()
        for thread, model_name in by_thread.items():
            assert sessions[thread][0] == model_name
            assert sessions[thread][1] == ("A" if model_name == "model-a" else "B")
        ab_turns = [t for t in turns if t.ab_arm]
        assert len(ab_turns) == 24 and {t.seq for t in ab_turns} == {1, 2}
        assert all(t.model == AB.model_of(str(t.ab_arm)) and t.tokens > 0 for t in ab_turns)
    # the sub-agent's calls carry the parent's model: the delegated task's request names the thread's model
    delegated = [r for r in fake.requests if r.messages and r.messages[0].get("content") == "write an eval"]
    assert len(delegated) == 12
    assert sorted(r.body["model"] for r in delegated) == sorted(by_thread.values())
