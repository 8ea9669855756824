"""Agent answers in Slack: streamed into the thread with the assistant status, and what happens when Slack refuses
streaming or rate-limits it mid-answer (the answer still arrives complete, once; a refusal is remembered)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, cast

import pytest
from fakes.slack import SlackFake
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler

from labbot.agents.fleet.runtime import AgentEvent
from labbot.agents.fleet.sessions import SessionStore, TurnRecord, new_turn_id
from labbot.bot.slack.agent_threads import AgentThreads
from labbot.bot.slack.runtime import web_client
from labbot.bot.slack.streams import SurfaceSupport, status_of
from labbot.storage.db import Database
from labbot.storage.models import AgentTurn

ALICE = "U0ALICE001"
NARRATION = ["Let me read the run's logs.", "The loader waits on a full queue; checking the metrics."]
ANSWER = "r1 is slow: the data loader waits on a full queue. Raise `num_workers` to 4."
FULL = "\n\n".join([*NARRATION, ANSWER])


@dataclass
class Said:
    text: str
    turn_id: str | None


class Scripted:
    """Stands in for the fleet: writes the narration and the answer as the runtime would, with tool calls between,
    and keeps the answer's turn as the fleet does."""

    def __init__(self, db: Database, *, gate: asyncio.Event | None = None) -> None:
        self.sessions = SessionStore(db)
        self.gate = gate

    async def ask(self, *, owner: str, channel: str | None, thread_ts: str | None, on_event: Any, **_: Any) -> Said:
        for text, tool in zip(NARRATION, ["lab__run_logs", "lab__run_metrics"], strict=True):
            await on_event(AgentEvent("thinking", "thinking"))
            await on_event(AgentEvent("text", text))
            await on_event(AgentEvent("tool_call", f"calling tool {tool}", tool=tool))
            if self.gate is not None:
                await self.gate.wait()
        await on_event(AgentEvent("text", ANSWER))
        session, _ = self.sessions.open(
            channel=channel, thread_ts=thread_ts, role="assistant", owner=owner, run_id=None
        )
        turn = TurnRecord(new_turn_id(), owner, "assistant", "model-a", "A", "end_turn", 3, 900, 1.2, 0, 1, channel)
        history = [{"role": "user", "content": "why?"}, {"role": "assistant", "content": ANSWER}]
        self.sessions.save(session.id, history, [], turn)
        return Said(ANSWER, turn.id)


def talks_for(slack: SlackFake, db: Database, support: SurfaceSupport | None = None, **kw: Any) -> AgentThreads:
    client = web_client(slack.bot_token, slack.start())
    client.retry_handlers = [AsyncRateLimitErrorRetryHandler(max_retry_count=1)]
    return AgentThreads(client, db, cast(Any, Scripted(db, **kw)), support=support)


def bot_replies(slack: SlackFake, thread_ts: str) -> list[Any]:
    return [m for m in slack.messages(slack.default_channel, thread_ts=thread_ts)[1:] if m.bot_id]


def ask(slack: SlackFake, talks: AgentThreads, channel: str | None = None) -> str:
    channel = channel or slack.default_channel
    root = slack.user_message(channel, ALICE, "why is r1 slow?")
    asyncio.run(talks.answer(user=ALICE, text=root.text, channel=channel, thread_ts=root.ts))
    return root.ts


def texts_of(blocks: list[dict[str, Any]]) -> str:
    return "\n\n".join(b["text"]["text"] for b in blocks if b["type"] == "section")


def answer_ts(db: Database) -> str | None:
    with db.session() as s:
        return s.query(AgentTurn).one().message_ts


def test_an_answer_streams_into_the_thread_with_the_status_saying_what_the_agent_does(
    slack: SlackFake, db: Database
) -> None:
    gate = asyncio.Event()
    talks = talks_for(slack, db, gate=gate)
    root = slack.user_message(slack.default_channel, ALICE, "why is r1 slow?")
    seen: list[tuple[str, str]] = []
    slack.subscribe(lambda e: seen.append((e.kind, e.detail)))

    async def go() -> None:
        answering = asyncio.create_task(
            talks.answer(user=ALICE, text=root.text, channel=slack.default_channel, thread_ts=root.ts)
        )
        for _ in range(400):  # the first narration is in the thread while the agent still works
            if bot_replies(slack, root.ts):
                break
            await asyncio.sleep(0.01)
        [partial] = bot_replies(slack, root.ts)
        assert partial.streaming and partial.text == NARRATION[0] and not answering.done()
        gate.set()
        await answering

    asyncio.run(go())
    [answer] = bot_replies(slack, root.ts)
    assert answer.streamed and not answer.streaming and answer.text == FULL  # complete, once
    assert [b["type"] for b in answer.blocks] == ["context", "context_actions"]  # tools used, 👍/👎
    assert answer_ts(db) == answer.ts
    statuses = [d for k, d in seen if k == "status"]
    assert statuses[0] == "is thinking…" and "is reading the run's logs…" in statuses
    assert slack.assistant_status(slack.default_channel, root.ts) == ""  # cleared at the end
    start = slack.calls_to("chat.startStream")[0].params
    assert start["recipient_user_id"] == ALICE and start["recipient_team_id"] == slack.team_id
    assert not slack.calls_to("chat.update")  # no progress message to replace


@pytest.mark.parametrize("refusal", ["not_allowed", "unknown_method", "method_not_supported_for_channel_type"])
def test_a_refused_stream_falls_back_to_the_progress_message_and_is_remembered(
    slack: SlackFake, db: Database, refusal: str
) -> None:
    support = SurfaceSupport()
    talks = talks_for(slack, db, support)
    slack.fail_next(200, on="chat.startStream", body={"ok": False, "error": refusal})
    first = ask(slack, talks)
    [answer] = bot_replies(slack, first)
    assert answer.text == ANSWER and not answer.streamed  # the progress message, replaced by the answer
    assert any(b["type"] == "context_actions" for b in answer.blocks)
    assert answer_ts(db) == answer.ts

    with db.session() as s:
        s.query(AgentTurn).delete()
    second = ask(slack, talks)
    [again] = bot_replies(slack, second)
    assert again.text == ANSWER and len(slack.calls_to("chat.startStream")) == 1  # not asked again
    dm = slack.dm_channel(ALICE)
    with db.session() as s:
        s.query(AgentTurn).delete()
    third = ask(slack, talks, dm)
    streamed_in_dm = slack.message(dm, slack.messages(dm, thread_ts=third)[-1].ts)
    assert streamed_in_dm is not None
    # refused for channels only: a DM still streams; refused outright: nowhere
    assert streamed_in_dm.streamed is (refusal == "method_not_supported_for_channel_type")
    assert streamed_in_dm.text in (FULL, ANSWER)


def test_rate_limited_mid_answer_the_rest_arrives_at_the_end(slack: SlackFake, db: Database) -> None:
    talks = talks_for(slack, db)
    slack.fail_next(429, on="chat.appendStream", times=5, retry_after=0)  # past the client's one retry
    ts = ask(slack, talks)
    [answer] = bot_replies(slack, ts)
    assert answer.text == FULL and not answer.streaming
    assert [c.ok for c in slack.calls_to("chat.appendStream")] == [False, False]  # gave up appending, kept text
    assert slack.calls_to("chat.stopStream")[-1].params["markdown_text"] == FULL[len(NARRATION[0]) :]


def test_when_the_stream_cannot_be_finished_the_answer_replaces_it(slack: SlackFake, db: Database) -> None:
    talks = talks_for(slack, db)
    slack.fail_next(429, on="chat.appendStream", times=5, retry_after=0)
    slack.fail_next(429, on="chat.stopStream", times=5, retry_after=0)
    ts = ask(slack, talks)
    [answer] = bot_replies(slack, ts)
    assert answer.text.startswith(NARRATION[0]) and ANSWER in str(answer.blocks)  # chat.update: the whole answer
    assert not answer.streaming and FULL.replace("`", "") in texts_of(answer.blocks).replace("`", "")
    assert any(b["type"] == "context_actions" for b in answer.blocks) and answer_ts(db) == answer.ts


def test_when_the_stream_message_cannot_be_replaced_a_new_one_takes_its_place(slack: SlackFake, db: Database) -> None:
    talks = talks_for(slack, db)
    slack.fail_next(429, on="chat.appendStream", times=5, retry_after=0)
    slack.fail_next(429, on="chat.stopStream", times=5, retry_after=0)
    slack.fail_next(200, on="chat.update", body={"ok": False, "error": "cant_update_message"})
    ts = ask(slack, talks)
    [answer] = bot_replies(slack, ts)  # the partial one deleted
    assert not answer.streamed and ANSWER in str(answer.blocks) and answer_ts(db) == answer.ts


def test_a_refused_status_is_remembered_and_the_answer_still_streams(slack: SlackFake, db: Database) -> None:
    support = SurfaceSupport()
    talks = talks_for(slack, db, support)
    slack.fail_next(200, on="assistant.threads.setStatus", body={"ok": False, "error": "missing_scope"})
    ts = ask(slack, talks)
    [answer] = bot_replies(slack, ts)
    assert answer.streamed and answer.text == FULL
    assert len(slack.calls_to("assistant.threads.setStatus")) == 1 and support.refused == {"status": "missing_scope"}


def test_status_lines_name_what_the_agent_does() -> None:
    def of(tool: str) -> str:
        return status_of(AgentEvent("tool_call", "", tool=tool))

    assert of("lab__run_logs") == "is reading the run's logs…"
    assert of("lab__run_metrics") == "is reading the run's metrics…"
    assert of("codebase__search") == "is reading the code…"
    assert of("delegate") == "is asking another agent…"
    assert status_of(AgentEvent("thinking", "thinking")) == "is thinking…"
    assert len(of("x" * 200)) <= 50


def test_labbots_own_asks_have_no_recipient_and_use_the_progress_message(slack: SlackFake, db: Database) -> None:
    talks = talks_for(slack, db)
    root = slack.user_message(slack.default_channel, ALICE, "a run's card")
    asyncio.run(talks.answer(user="labbot", text="investigate", channel=slack.default_channel, thread_ts=root.ts))
    [answer] = bot_replies(slack, root.ts)  # the investigator's diagnosis: the progress message, replaced
    assert answer.text == ANSWER and not slack.calls_to("chat.startStream")


class Researching(Scripted):
    """The researcher's turn as the runtime reports it: each tool called, then done (one with an error)."""

    async def ask(self, *, owner: str, channel: str | None, thread_ts: str | None, on_event: Any, **_: Any) -> Said:
        for tool, failed in (
            ("lab__search_findings", False),
            ("lab__propose_plan", True),
            ("lab__propose_plan", False),
        ):
            await on_event(AgentEvent("tool_call", f"calling tool {tool}", tool=tool))
            await on_event(AgentEvent("tool_done", f"tool {tool} done", tool=tool, is_error=failed))
        await on_event(AgentEvent("text", "The plan is ready for your approval."))
        return Said("The plan is ready for your approval.", None)


def test_the_researchers_answer_streams_in_slacks_plan_display_and_the_console_shows_it(
    slack: SlackFake, db: Database
) -> None:
    client = web_client(slack.bot_token, slack.start())
    talks = AgentThreads(client, db, cast(Any, Researching(db)))
    root = slack.user_message(slack.default_channel, ALICE, "which lr?")
    seen: list[tuple[str, str]] = []
    slack.subscribe(lambda e: seen.append((e.kind, e.detail)))
    brief = "Research question qabc2345 (research_id='qabc2345'), asked by <@U0ALICE001>: which lr is best?"
    asyncio.run(
        talks.answer(user=ALICE, text=brief, channel=slack.default_channel, thread_ts=root.ts, role="researcher")
    )
    [answer] = bot_replies(slack, root.ts)
    start = slack.calls_to("chat.startStream")[0].params
    assert start["task_display_mode"] == "plan"
    assert start["chunks"][0] == {"type": "plan_update", "title": "Research: which lr is best?"}
    assert answer.plan_title == "Research: which lr is best?"
    assert [(t["title"], t["status"]) for t in answer.tasks.values()] == [
        ("Read what the lab already found", "complete"),
        ("Propose the plan", "error"),
        ("Propose the plan", "complete"),
    ]
    assert answer.text == "The plan is ready for your approval." and not answer.streaming
    assert ("task", "in_progress Read what the lab already found") in seen and (
        "task",
        "error Propose the plan",
    ) in seen


def test_other_roles_stream_their_text_alone(slack: SlackFake, db: Database) -> None:
    client = web_client(slack.bot_token, slack.start())
    talks = AgentThreads(client, db, cast(Any, Researching(db)))
    root = slack.user_message(slack.default_channel, ALICE, "which lr?")
    asyncio.run(talks.answer(user=ALICE, text="which lr?", channel=slack.default_channel, thread_ts=root.ts))
    start = slack.calls_to("chat.startStream")[0].params
    assert "task_display_mode" not in start and "chunks" not in start
    [answer] = bot_replies(slack, root.ts)
    assert answer.tasks == {} and answer.plan_title is None
