"""labbot.agents.fleet.fleet, labbot.agents.fleet.sessions and labbot.agents.fleet.roles against the Anthropic
fake over real HTTP, through the real SDK: threads as persisted conversations (across a restart too), the run's state as
a system block, one ask at a time per
thread, the no-model answer, role allow-lists, and delegation with its depth and fan-out limits."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from fakes.anthropic import FakeAnthropic, SeenRequest, Step, text, tool_use, tool_uses

from labbot.agents.fleet.fleet import Answer, Fleet, delegation_refusal
from labbot.agents.fleet.model import NO_MODEL_MESSAGE, ModelSettings
from labbot.agents.fleet.roles import RULES, Role, load_roles
from labbot.agents.fleet.runtime import AgentEvent, AgentLimiter, AgentRuntime, Budgets
from labbot.agents.fleet.sessions import SessionStore
from labbot.agents.fleet.tools import CallContext, ToolCall, ToolResult, ToolSpec
from labbot.agents.fleet.waits import OutsideWaits, waiting_for_human
from labbot.common.errors import BadRequest
from labbot.storage.db import Database

ALICE, BOB = "U0ALICE001", "U0BOB00001"
CHANNEL = "C0RUNS0001"
THREAD, OTHER_THREAD = "1700000000.000100", "1700000000.000200"
EPHEMERAL = {"type": "ephemeral"}
ROLES = load_roles()


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database = Database(f"sqlite:///{tmp_path / 'labbot.db'}")
    database.upgrade()
    return database


class ToolBox:
    """The composition root's ``tools_for`` and the executor it returns: fixed tools that answer plainly; records
    which roles asked for tools and every call with its context."""

    def __init__(self, *names: str) -> None:
        schema = {"type": "object", "properties": {"run": {"type": "string"}}}
        self.specs = [ToolSpec(name, f"test tool {name}", schema) for name in names]
        self.roles_asked: list[str] = []
        self.calls: list[tuple[str, dict[str, Any], CallContext]] = []

    async def tools_for(self, role: str) -> ToolBox:
        self.roles_asked.append(role)
        return self

    def tools(self) -> list[ToolSpec]:
        return self.specs

    async def call(self, call: ToolCall) -> ToolResult:
        self.calls.append((call.name, dict(call.arguments), call.ctx))
        return ToolResult(f"{call.name}: r1 running at step 1200")


def runtime_for(fake: FakeAnthropic, **kwargs: Any) -> AgentRuntime:
    env = {"ANTHROPIC_API_KEY": fake.api_key, "ANTHROPIC_BASE_URL": fake.base_url}
    return AgentRuntime.from_settings(ModelSettings.from_env(env), **kwargs)


@asynccontextmanager
async def fleet_of(
    fake: FakeAnthropic, db: Database, box: ToolBox, *, limiter: AgentLimiter | None = None, **kwargs: Any
) -> AsyncIterator[Fleet]:
    """A fleet on a fresh runtime (the real SDK client pointed at the fake), closed after."""
    runtime = runtime_for(fake, limiter=limiter or AgentLimiter())
    try:
        yield Fleet(db, runtime, box.tools_for, **kwargs)
    finally:
        await runtime.aclose()


def user(who: str, said: str) -> dict[str, Any]:
    return {"role": "user", "content": f"<@{who}>: {said}"}


def said(answer: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": answer}]}


def role_of(request: SeenRequest, roles: Mapping[str, Role] = ROLES) -> str:
    """Which role a request is for, by its system prompt."""
    prompt = request.system[0]["text"]
    return next(name for name, role in roles.items() if role.system == prompt)


def prompt_block(role: str) -> dict[str, Any]:
    return {"type": "text", "text": ROLES[role].system, "cache_control": EPHEMERAL}


# ----------------------------------------------------------------- threads as conversations


def test_a_thread_starts_a_session_and_a_reply_continues_it(fake: FakeAnthropic, db: Database) -> None:
    fake.script(
        tool_use("lab__list_runs", say="Let me look."),
        text("r1 is running."),
        text("It is at step 1200."),
        text("Hello."),
    )
    box = ToolBox("lab__list_runs")

    async def go() -> tuple[Answer, Answer, Answer, Fleet]:
        async with fleet_of(fake, db, box) as fleet:
            first = await fleet.ask(owner=ALICE, text="what's running?", channel=CHANNEL, thread_ts=THREAD)
            second = await fleet.ask(owner=BOB, text="and its step?", channel=CHANNEL, thread_ts=THREAD)
            other = await fleet.ask(owner=ALICE, text="hi", channel=CHANNEL, thread_ts=OTHER_THREAD)
            return first, second, other, fleet

    first, second, other, fleet = asyncio.run(go())
    assert (first.text, first.stop, first.turns) == ("r1 is running.", "end_turn", 2)
    assert (second.text, second.stop, second.session_id, second.turns) == (
        "It is at step 1200.",
        "end_turn",
        first.session_id,
        1,
    )
    # each answer is kept as a turn of the session, with the model that wrote it
    assert first.turn_id and second.turn_id and first.turn_id != second.turn_id
    assert first.model == second.model == fleet.runtime.model and first.ab_arm is None
    assert first.tokens > 0
    assert other.session_id != first.session_id
    r1, r2, r3, r4 = fake.requests
    assert [r.status for r in fake.requests] == [200, 200, 200, 200]
    assert r1.messages == [user(ALICE, "what's running?")]
    assert r1.system == [prompt_block("assistant")]  # no run: no second block
    # the reply carries the whole first exchange, tool call and result included, then Bob's message
    assert r3.messages == [*r2.messages, said("r1 is running."), user(BOB, "and its step?")]
    assert fleet.history(first.session_id) == [*r3.messages, said("It is at step 1200.")]
    assert r4.messages == [user(ALICE, "hi")]
    session = fleet.session(CHANNEL, THREAD)
    assert session is not None and (session.id, session.role, session.owner, session.run_id) == (
        first.session_id,
        "assistant",
        ALICE,
        None,
    )
    [(_, _, ctx)] = box.calls
    assert (ctx.agent, ctx.role, ctx.owner, ctx.channel, ctx.thread_ts) == (
        first.session_id,
        "assistant",
        ALICE,
        CHANNEL,
        THREAD,
    )


def test_a_run_thread_sends_the_runs_current_state_as_a_second_system_block(fake: FakeAnthropic, db: Database) -> None:
    fake.script(tool_use("lab__list_runs"), text("r1 looks healthy."), text("Still healthy."))
    box = ToolBox("lab__list_runs")
    asked: list[str] = []

    def run_context(run_id: str) -> str:
        asked.append(run_id)
        return f"run {run_id}: running, step {1200 * len(asked)}, loss 2.31, thread {CHANNEL}/{THREAD}"

    async def go() -> None:
        async with fleet_of(fake, db, box, run_context=run_context) as fleet:
            await fleet.ask(owner=ALICE, text="how is it?", channel=CHANNEL, thread_ts=THREAD, run_id="r1")
            await fleet.ask(owner=ALICE, text="and now?", channel=CHANNEL, thread_ts=THREAD)  # the run is kept

    asyncio.run(go())
    assert asked == ["r1", "r1"]  # read afresh for each ask
    r1, r2, r3 = fake.requests
    for request in (r1, r2):
        assert len(request.system) == 2 and request.system[0] == prompt_block("assistant")
        assert request.system[1]["type"] == "text" and "cache_control" not in request.system[1]
        assert "run r1: running, step 1200, loss 2.31" in request.system[1]["text"]
    assert r3.system[0] == prompt_block("assistant") and "step 2400" in r3.system[1]["text"]
    assert box.calls[0][2].run_id == "r1"


def test_a_continued_session_keeps_its_role_and_an_unknown_role_starts_nothing(
    fake: FakeAnthropic, db: Database
) -> None:
    fake.script(text("Diagnosis: OOM."), text("Yes, lower the batch size."))
    box = ToolBox("lab__run_logs")

    async def go() -> Fleet:
        async with fleet_of(fake, db, box) as fleet:
            await fleet.ask(owner=ALICE, text="page p1?", channel=CHANNEL, thread_ts=THREAD, role="investigator")
            await fleet.ask(owner=ALICE, text="fix?", channel=CHANNEL, thread_ts=THREAD)  # role left to default
            with pytest.raises(BadRequest, match="the roles are: assistant, eval-writer, investigator"):
                await fleet.ask(owner=ALICE, text="hi", channel=CHANNEL, thread_ts=OTHER_THREAD, role="chef")
            return fleet

    fleet = asyncio.run(go())
    assert [r.system[0] for r in fake.requests] == [prompt_block("investigator")] * 2
    assert fleet.session(CHANNEL, OTHER_THREAD) is None and len(fake.requests) == 2


def test_a_session_stored_under_a_roles_old_name_is_answered_by_the_role_with_one_warning(
    fake: FakeAnthropic, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    # a row an older labbot wrote (a replica not yet upgraded) after migration 0015 renamed the others
    SessionStore(db).open(channel=CHANNEL, thread_ts=THREAD, role="babysitter", owner=ALICE, run_id="r1")
    fake.script(text("Diagnosis: OOM."), text("Lower the batch size."))
    box = ToolBox("lab__run_logs")

    async def go() -> None:
        async with fleet_of(fake, db, box) as fleet:
            await fleet.ask(owner=ALICE, text="page p1?", channel=CHANNEL, thread_ts=THREAD)
            await fleet.ask(owner=ALICE, text="fix?", channel=CHANNEL, thread_ts=THREAD)

    with caplog.at_level(logging.WARNING, logger="labbot.agents.fleet.fleet"):
        asyncio.run(go())
    assert [r.system[0] for r in fake.requests] == [prompt_block("investigator")] * 2
    assert box.roles_asked == ["investigator", "investigator"]
    assert [r.getMessage() for r in caplog.records if r.name == "labbot.agents.fleet.fleet"] == [
        "agent sessions of role 'babysitter' (its old name) are answered by the investigator role"
    ]


def test_the_history_survives_a_restart_of_labbot(fake: FakeAnthropic, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'labbot.db'}"
    before = Database(url)
    before.upgrade()
    fake.script(tool_use("lab__list_runs"), text("r1 is at step 1200."), text("It was at step 1200, as I said."))
    box = ToolBox("lab__list_runs")

    async def ask(db: Database, question: str) -> Answer:
        async with fleet_of(fake, db, box) as fleet:  # a new fleet and runtime each time: a restarted labbot
            return await fleet.ask(owner=ALICE, text=question, channel=CHANNEL, thread_ts=THREAD)

    first = asyncio.run(ask(before, "where is r1?"))
    before.dispose()
    after = Database(url)
    second = asyncio.run(ask(after, "where was it?"))
    assert second.session_id == first.session_id
    _, r2, r3 = fake.requests
    first_exchange = [*r2.messages, said("r1 is at step 1200.")]
    assert r3.messages == [*first_exchange, user(ALICE, "where was it?")]
    assert r3.status == 200  # the persisted tool_use / tool_result blocks are still a valid history


def test_two_asks_in_one_thread_at_once_take_turns(fake: FakeAnthropic, db: Database) -> None:
    fake.script(text("First answer."), text("Second answer."))
    box = ToolBox("lab__list_runs")

    async def go() -> tuple[list[Answer], Fleet]:
        async with fleet_of(fake, db, box) as fleet:
            answers = await asyncio.gather(
                fleet.ask(owner=ALICE, text="one", channel=CHANNEL, thread_ts=THREAD),
                fleet.ask(owner=BOB, text="two", channel=CHANNEL, thread_ts=THREAD),
            )
            assert fleet._locks == {}  # nothing left behind once the thread is quiet
            return list(answers), fleet

    (a, b), fleet = asyncio.run(go())
    assert (a.text, b.text) == ("First answer.", "Second answer.")
    assert a.session_id == b.session_id
    r1, r2 = fake.requests
    assert r1.messages == [user(ALICE, "one")]
    assert r2.messages == [user(ALICE, "one"), said("First answer."), user(BOB, "two")]  # not interleaved
    assert fleet.history(a.session_id) == [*r2.messages, said("Second answer.")]


def test_without_a_model_the_answer_says_so_and_only_the_question_is_kept(fake: FakeAnthropic, db: Database) -> None:
    box = ToolBox("lab__list_runs")
    keyless = AgentRuntime.from_settings(ModelSettings())  # no ANTHROPIC_API_KEY: a runtime with no client

    async def go() -> tuple[Answer, Answer, Answer]:
        first = await Fleet(db, None, box.tools_for).ask(owner=ALICE, text="q1", channel=CHANNEL, thread_ts=THREAD)
        second = await Fleet(db, keyless, box.tools_for).ask(owner=BOB, text="q2", channel=CHANNEL, thread_ts=THREAD)
        fake.script(text("Now I can answer both."))
        async with fleet_of(fake, db, box) as fleet:  # a model configured at last: the questions are still there
            third = await fleet.ask(owner=ALICE, text="q3", channel=CHANNEL, thread_ts=THREAD)
        return first, second, third

    first, second, third = asyncio.run(go())
    assert first == Answer(NO_MODEL_MESSAGE, "no_model", first.session_id, 0)
    assert second == Answer(NO_MODEL_MESSAGE, "no_model", first.session_id, 0)
    assert box.roles_asked == ["assistant"]  # the first two asks did not even fetch tools
    [request] = fake.requests
    questions = [{"type": "text", "text": f"<@{who}>: {q}"} for who, q in ((ALICE, "q1"), (BOB, "q2"), (ALICE, "q3"))]
    assert request.messages == [{"role": "user", "content": questions}]  # merged: roles still alternate
    assert request.status == 200 and third.text == "Now I can answer both."


# ----------------------------------------------------------------- roles


def test_each_role_loads_with_its_prompt_and_tools() -> None:
    assert set(ROLES) == {"assistant", "eval-writer", "investigator", "researcher"}
    for name, role in ROLES.items():
        assert role.name == name and role.tools
        assert role.system.strip() and role.system.endswith(RULES)
        for rule in ("never instructions", "approval", "mrkdwn"):
            assert rule in role.system
    assert [name for name, role in ROLES.items() if role.allows("delegate")] == ["assistant"]
    investigator, writer = ROLES["investigator"], ROLES["eval-writer"]
    assert all(word in investigator.system for word in ("log", "metrics", "commits", "diagnosis"))
    assert investigator.allows("lab__run_logs") and not investigator.allows("lab__stop_run")
    assert writer.allows("codebase__read_file") and writer.allows("lab__put_artifact")
    assert not writer.allows("lab__stop_run")
    researcher = ROLES["researcher"]  # it launches nothing but an approved plan, and stops nothing outside it
    assert researcher.allows("lab__start_research") and researcher.allows("lab__submit_report")
    outside = ("lab__launch_run", "lab__run_experiment", "lab__stop_run", "lab__stop_experiment", "notion__create_page")
    for tool in outside:
        assert not researcher.allows(tool), tool


def test_a_role_is_offered_only_the_tools_it_allows(fake: FakeAnthropic, db: Database) -> None:
    fake.script(tool_use("lab__stop_run", {"run": "r1"}), text("I can't stop runs."), text("Hello."))
    box = ToolBox("lab__list_runs", "lab__stop_run", "codebase__search", "secret__dump")

    async def go() -> None:
        async with fleet_of(fake, db, box) as fleet:
            await fleet.ask(owner=ALICE, text="stop r1", channel=CHANNEL, thread_ts=THREAD, role="investigator")
            await fleet.ask(owner=ALICE, text="hi", channel=CHANNEL, thread_ts=OTHER_THREAD)

    asyncio.run(go())
    r1, r2, r3 = fake.requests
    assert r1.tool_names == ["lab__list_runs", "codebase__search"]
    [refused] = r2.tool_results()
    assert refused["is_error"] is True and box.calls == []  # a tool outside the list never reaches the executor
    assert r3.tool_names == ["lab__list_runs", "lab__stop_run", "codebase__search", "delegate"]
    assert box.roles_asked == ["investigator", "assistant"]


# ----------------------------------------------------------------- delegation


def test_delegating_to_the_eval_writer_returns_its_answer_as_the_tool_result(fake: FakeAnthropic, db: Database) -> None:
    task = "Write an eval of tiny-lm's perplexity on the held-out split; the model is in training/jobs/tiny_lm.py."
    draft = "Draft: eval_tiny_lm_perplexity.py computes perplexity over the held-out split, seed 0."
    fake.script(
        tool_use("delegate", {"role": "eval-writer", "task": task}),
        tool_use("codebase__search", {"run": "tiny_lm"}),
        text(draft),
        text("The eval-writer drafted eval_tiny_lm_perplexity.py."),
    )
    box = ToolBox("lab__list_runs", "lab__stop_run", "codebase__search")
    events: list[AgentEvent] = []
    limiter = AgentLimiter(max_per_owner=1)  # the parent holds Alice's only slot: the sub-agent shares it

    async def record(event: AgentEvent) -> None:
        events.append(event)

    async def go() -> tuple[Answer, Fleet]:
        async with fleet_of(fake, db, box, limiter=limiter) as fleet:
            answer = await fleet.ask(
                owner=ALICE, text="write an eval", channel=CHANNEL, thread_ts=THREAD, on_event=record
            )
            return answer, fleet

    answer, fleet = asyncio.run(go())
    assert (answer.text, answer.stop, answer.turns) == (
        "The eval-writer drafted eval_tiny_lm_perplexity.py.",
        "end_turn",
        2,
    )
    _, sub1, _, parent2 = fake.requests
    assert [role_of(r) for r in fake.requests] == ["assistant", "eval-writer", "eval-writer", "assistant"]
    assert sub1.system == [prompt_block("eval-writer")]
    assert sub1.messages == [{"role": "user", "content": task}]  # a fresh history: just the task
    assert sub1.tool_names == ["lab__list_runs", "codebase__search"]  # its own allow-list, and no delegate
    [result] = parent2.tool_results()
    assert result["content"] == draft and "is_error" not in result
    [(name, _, ctx)] = box.calls
    assert (name, ctx.role, ctx.owner, ctx.agent, ctx.thread_ts) == (
        "codebase__search",
        "eval-writer",
        ALICE,
        answer.session_id,
        THREAD,
    )
    assert box.roles_asked == ["assistant", "eval-writer"]
    texts = [e.text for e in events]
    assert "calling tool delegate" in texts and "eval-writer: calling tool codebase__search" in texts
    # what the sub-agent wrote is its answer to the parent, not part of the thread's streamed answer
    assert [e.text for e in events if e.kind == "text"] == [answer.text]
    assert fleet.history(answer.session_id) == [*parent2.messages, said(answer.text)]  # the sub-run is not stored
    assert limiter.active(ALICE) == 0


def test_unknown_roles_and_the_fan_out_limit_are_refused_and_the_parent_goes_on(
    fake: FakeAnthropic, db: Database
) -> None:
    def model(request: SeenRequest) -> Step:
        if role_of(request) != "assistant":
            return text(f"done: {request.messages[0]['content']}")
        if request.tool_results():
            return text("Three evals drafted; one helper does not exist.")
        chef = ("delegate", {"role": "chef", "task": "cook"})
        evals = [("delegate", {"role": "eval-writer", "task": f"eval {i}"}) for i in range(4)]
        return tool_uses(chef, *evals)

    fake.answer_with(model)
    box = ToolBox("codebase__search")

    async def go() -> Answer:
        async with fleet_of(fake, db, box) as fleet:  # max_fanout 3 by default
            return await fleet.ask(owner=ALICE, text="four evals", channel=CHANNEL, thread_ts=THREAD)

    answer = asyncio.run(go())
    assert (answer.text, answer.stop) == ("Three evals drafted; one helper does not exist.", "end_turn")
    assert [role_of(r) for r in fake.requests].count("eval-writer") == 3
    chef, *evals, over = fake.requests[-1].tool_results()
    assert chef["is_error"] is True
    assert "'chef'" in chef["content"] and "the roles are: assistant, eval-writer, investigator" in chef["content"]
    assert [(r["content"], r.get("is_error")) for r in evals] == [(f"done: eval {i}", None) for i in range(3)]
    assert over["is_error"] is True and over["content"].startswith("fan-out limit 3 reached")


def test_the_depth_limit_stops_delegation_and_each_parent_goes_on(fake: FakeAnthropic, db: Database) -> None:
    prompt = f"You are a relay: you pass each task on to another relay.\n\n{RULES}"
    relay = Role("relay", prompt, ("lab__*", "delegate"))
    roles = {"assistant": ROLES["assistant"], "relay": relay}

    def model(request: SeenRequest) -> Step:
        results = request.tool_results()
        if role_of(request, roles) == "assistant":
            if results:
                return text(f"top: {results[0]['content']}")
            return tool_use("delegate", {"role": "relay", "task": "level 1"})
        task = request.messages[0]["content"]
        if results:
            return text(f"{task} answered: {results[0]['content']}")
        deeper = f"level {int(task.split()[1]) + 1}"
        return tool_use("delegate", {"role": "relay", "task": deeper})  # called even where it is not offered

    fake.answer_with(model)
    box = ToolBox("lab__list_runs")

    async def go() -> Answer:
        async with fleet_of(fake, db, box, roles=roles, max_depth=2) as fleet:
            return await fleet.ask(owner=ALICE, text="relay it", channel=CHANNEL, thread_ts=THREAD)

    answer = asyncio.run(go())
    by_task = {r.messages[0]["content"]: r for r in fake.requests if role_of(r, roles) == "relay"}
    assert set(by_task) == {"level 1", "level 2"}  # no level 3: depth 2 is the deepest
    assert by_task["level 1"].tool_names == ["lab__list_runs", "delegate"]
    assert by_task["level 2"].tool_names == ["lab__list_runs"]  # at the depth limit the tool is not offered
    assert answer.stop == "end_turn"
    assert answer.text.startswith("top: level 1 answered: level 2 answered: there is no tool named 'delegate'")
    assert all(r.status == 200 for r in fake.requests)


def test_a_sub_agent_that_runs_out_of_budget_is_an_error_result(fake: FakeAnthropic, db: Database) -> None:
    roles = {**ROLES, "eval-writer": dataclasses.replace(ROLES["eval-writer"], budgets=Budgets(max_turns=1))}
    fake.script(
        tool_use("delegate", {"role": "eval-writer", "task": "write an eval"}),
        tool_use("codebase__search"),  # the sub-agent's one turn: a tool call, and then its budget is spent
        text("The eval-writer ran out of turns."),
    )
    box = ToolBox("codebase__search")

    async def go() -> Answer:
        async with fleet_of(fake, db, box, roles=roles) as fleet:
            return await fleet.ask(owner=ALICE, text="an eval", channel=CHANNEL, thread_ts=THREAD)

    answer = asyncio.run(go())
    [result] = fake.requests[-1].tool_results()
    assert result["is_error"] is True
    assert result["content"].startswith("the eval-writer agent stopped without an answer (max_turns)")
    assert answer.text == "The eval-writer ran out of turns." and answer.stop == "end_turn"


def test_delegation_refusals_say_why() -> None:
    roles = ["assistant", "eval-writer"]
    kwargs = {"max_depth": 2, "max_fanout": 3}
    assert delegation_refusal("eval-writer", roles, depth=1, used=2, **kwargs) is None
    depth = delegation_refusal("eval-writer", roles, depth=2, used=0, **kwargs)
    assert depth is not None and depth.startswith("cannot delegate further: depth limit 2")
    unknown = delegation_refusal("chef", roles, depth=0, used=0, **kwargs)
    assert unknown == "there is no role called 'chef'; the roles are: assistant, eval-writer"
    assert delegation_refusal(None, roles, depth=0, used=0, **kwargs) is not None
    fanout = delegation_refusal("eval-writer", roles, depth=0, used=3, **kwargs)
    assert fanout is not None and fanout.startswith("fan-out limit 3 reached")


# ----------------------------------------------------------------- the session store


def test_one_session_per_thread_and_a_saved_history_replaces_the_old(db: Database) -> None:
    store = SessionStore(db)
    first, created = store.open(channel=CHANNEL, thread_ts=THREAD, role="assistant", owner=ALICE, run_id=None)
    again, created_again = store.open(channel=CHANNEL, thread_ts=THREAD, role="investigator", owner=BOB, run_id="r1")
    assert (created, created_again) == (True, False) and again == first
    loose = [store.open(channel=None, thread_ts=None, role="assistant", owner=ALICE, run_id=None)[0] for _ in range(2)]
    assert loose[0].id != loose[1].id  # no thread: never found again
    old = [user(ALICE, "q"), said("a")]
    store.save(first.id, old, [])
    new = [user(ALICE, "q"), said("a, revised"), user(BOB, "q2"), said("a2")]
    store.save(first.id, new, old)
    assert store.history(first.id) == new
    store.bind_run(first.id, "r1")
    store.bind_run(first.id, "r2")  # a session's run, once set, stays
    assert store.get(first.id) == dataclasses.replace(first, run_id="r1")


class WaitsForApproval(ToolBox):
    """A ToolBox whose ``lab__stop_run`` first waits for a person's decision, as the approval gate does."""

    def __init__(self, wait_s: float, *names: str) -> None:
        super().__init__(*names)
        self.wait_s = wait_s

    async def call(self, call: ToolCall) -> ToolResult:
        if call.name == "lab__stop_run":
            with waiting_for_human():
                await asyncio.sleep(self.wait_s)
        return await super().call(call)


def test_a_sub_agent_waiting_for_approval_is_cut_neither_by_the_parents_tool_timeout_nor_its_own_budget(
    fake: FakeAnthropic, db: Database
) -> None:
    fake.script(
        tool_use("delegate", {"role": "assistant", "task": "stop run r1"}),
        tool_use("lab__stop_run", {"run": "r1"}),
        text("Stopped r1."),
        text("The sub-agent stopped r1."),
    )
    # the human takes twice the parent's tool timeout; the timeout is wide enough that the model calls and the
    # database around the wait fit inside it on a loaded machine (at 0.5 s, CI's three workers on two cores missed it)
    box = WaitsForApproval(6.0, "lab__stop_run")
    budgets = Budgets(tool_timeout_s=3.0, wall_time_s=60)

    async def go() -> Answer:
        runtime = runtime_for(fake, budgets=budgets)
        try:
            return await Fleet(db, runtime, box.tools_for).ask(
                owner=ALICE, text="stop r1 via a helper", channel=CHANNEL, thread_ts=THREAD
            )
        finally:
            await runtime.aclose()

    answer = asyncio.run(go())
    assert answer.text == "The sub-agent stopped r1." and answer.stop == "end_turn"
    [result] = fake.requests[3].tool_results()
    assert result["content"] == "Stopped r1." and "is_error" not in result
    assert [name for name, _, _ in box.calls] == ["lab__stop_run"]


class SlowRun(ToolBox):
    """``lab__wait_for_run`` takes ``wait_s``, as waiting on a real run does; marked ``waits`` as the lab server's is
    (or not, to show what the mark is for)."""

    def __init__(self, wait_s: float, *, waits: bool) -> None:
        super().__init__("delegate", "lab__wait_for_run")
        self.specs = [dataclasses.replace(t, waits=waits) if t.name == "lab__wait_for_run" else t for t in self.specs]
        self.wait_s = wait_s

    async def call(self, call: ToolCall) -> ToolResult:
        if call.name == "lab__wait_for_run":
            await asyncio.sleep(self.wait_s)
        return await super().call(call)


@pytest.mark.parametrize("waits", [True, False])
def test_a_sub_agent_waiting_for_a_run_is_not_cut_by_the_parents_tool_timeout(
    fake: FakeAnthropic, db: Database, waits: bool
) -> None:
    """The eval-writer waits minutes for a generation job: a tool marked ``waits`` (the lab server's wait_for_run)
    costs neither it nor its parent budget; the same wait unmarked is cut by the parent's tool timeout."""
    fake.script(
        tool_use("delegate", {"role": "assistant", "task": "wait for r1"}),
        tool_use("lab__wait_for_run", {"run": "r1"}),
        text("r1 ended."),
        text("The sub-agent says r1 ended."),
    )
    box = SlowRun(6.0, waits=waits)
    budgets = Budgets(tool_timeout_s=3.0, wall_time_s=60)

    async def go() -> Answer:
        runtime = runtime_for(fake, budgets=budgets)
        try:
            fleet = Fleet(db, runtime, lambda role: _outside_waits(box))
            return await fleet.ask(owner=ALICE, text="wait for r1 via a helper", channel=CHANNEL, thread_ts=THREAD)
        finally:
            await runtime.aclose()

    answer = asyncio.run(go())
    if waits:
        assert answer.text == "The sub-agent says r1 ended."
        [result] = fake.requests[3].tool_results()
        assert result["content"] == "r1 ended." and "is_error" not in result
    else:  # unmarked, the wait is the sub-agent's own time: it runs out of its budget (0.9 of the parent's timeout)
        [result] = fake.requests[-1].tool_results()
        assert result.get("is_error") and "stopped after 2.7s" in str(result["content"]), result


async def _outside_waits(box: ToolBox) -> OutsideWaits:
    return OutsideWaits(box)


def test_the_labs_notes_are_a_system_block_between_the_prompt_and_the_runs_state(
    fake: FakeAnthropic, db: Database
) -> None:
    notes = "Where this lab keeps things:\n- Run reports go in Notion under abc."
    fake.script(text("ok"), text("ok"))
    box = ToolBox("delegate")

    async def go() -> None:
        async with fleet_of(fake, db, box, notes=notes, run_context=lambda run_id: f"{run_id}: running") as fleet:
            await fleet.ask(owner=ALICE, text="hi", channel=CHANNEL, thread_ts=THREAD, run_id="r1")
            await fleet.ask(owner=ALICE, text="hi", channel=CHANNEL, thread_ts=OTHER_THREAD)

    asyncio.run(go())
    in_run, elsewhere = fake.requests
    assert in_run.system[0] == prompt_block("assistant") and in_run.system[1] == {"type": "text", "text": notes}
    assert "r1: running" in in_run.system[2]["text"] and len(in_run.system) == 3
    assert elsewhere.system == [prompt_block("assistant"), {"type": "text", "text": notes}]


def test_the_investigator_may_read_the_orgs_systems_but_change_nothing() -> None:
    investigator = ROLES["investigator"]
    reads = ["datadog__query_metrics", "datadog__search_logs", "datadog__get_monitor", "linear__get_issue"]
    reads += ["notion__get_page", "codebase__git_log", "lab__run_logs"]
    writes = ["datadog__mute_monitor", "linear__create_issue", "notion__create_page", "lab__stop_run", "lab__ack_page"]
    assert all(investigator.allows(name) for name in reads)
    assert not any(investigator.allows(name) for name in writes)
