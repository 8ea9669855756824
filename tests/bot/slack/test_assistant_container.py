"""The assistant container through the real Bolt app: opening it offers suggested prompts, a question typed there is
answered in its thread, streamed; a workspace without the assistant feature refuses the prompts and nothing breaks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

from fakes.slack import SlackFake
from slack_bolt.request.async_request import AsyncBoltRequest

from labbot.agents.fleet.runtime import AgentEvent
from labbot.bot.config import SlackSettings
from labbot.bot.slack import app as slack_app
from labbot.bot.slack.agent_threads import AgentThreads
from labbot.bot.slack.handlers import SlackDeps
from labbot.bot.slack.payloads import JSON, Workspace, assistant_thread_started, signed
from labbot.bot.slack.prompts import PROMPTS
from labbot.bot.slack.runtime import web_client
from labbot.bot.slack.tasks import TaskSet
from labbot.storage.db import Database
from labbot.storage.seen import DurableSeenKeys

SECRET = "assistant-test-signing-secret"
ALICE = "U0ALICE001"


class Echo:
    async def ask(self, *, text: str, on_event: Any, **_: Any) -> Any:
        await on_event(AgentEvent("tool_call", "calling tool lab__runs", tool="lab__runs"))
        await on_event(AgentEvent("text", f"You asked: {text}"))
        return SimpleNamespace(text=f"You asked: {text}", turn_id=None)


def test_the_assistant_container_offers_prompts_and_answers_in_its_thread(slack: SlackFake, db: Database) -> None:
    client = web_client(slack.bot_token, slack.start())
    talks = AgentThreads(client, db, cast(Any, Echo()))
    dm = slack.dm_channel(ALICE)
    ws = Workspace(team_id=slack.team_id, app_id=slack.app_id, channel=dm)

    async def go() -> None:
        tasks = TaskSet()
        app = slack_app.build_app(
            deps=SlackDeps(client, cast(Any, None), cast(Any, None), SlackSettings(), conversations=talks),
            signing_secret=SECRET, tasks=tasks, triggers=DurableSeenKeys(db, ttl_s=slack_app.REPLAY_TTL_S),
        )  # fmt: skip

        async def send(body: str, until: Callable[[], Any]) -> None:
            response = await app.async_dispatch(
                AsyncBoltRequest(body=body, headers=dict(signed(body, SECRET, content_type=JSON)))
            )
            assert response.status == 200
            for _ in range(200):  # Bolt runs the listener after the ack: await what it does
                await tasks.drain()
                if until():
                    return
                await asyncio.sleep(0.02)
            raise AssertionError("timed out")

        root = slack.user_message(dm, ALICE, "hello")
        await send(
            assistant_thread_started(ws, user=ALICE, dm=dm, thread_ts=root.ts),
            lambda: slack.suggested_prompts(dm, root.ts),
        )
        assert slack.suggested_prompts(dm, root.ts) == list(PROMPTS)

        question = slack.user_message(dm, ALICE, PROMPTS[0]["message"], root.ts)
        stopped = lambda: slack.calls_to("chat.stopStream")  # noqa: E731
        await send(json.dumps(slack.event_payload(question)), stopped)
        [answer] = [m for m in slack.messages(dm, thread_ts=root.ts) if m.bot_id]
        assert answer.streamed and answer.text == f"You asked: {PROMPTS[0]['message']}"
        start = slack.calls_to("chat.startStream")[0].params
        assert "recipient_user_id" not in start  # a DM names no recipient

        slack.fail_next(200, on="assistant.threads.setSuggestedPrompts", body={"ok": False, "error": "not_allowed"})
        other = slack.user_message(dm, ALICE, "again")
        asked = lambda: len(slack.calls_to("assistant.threads.setSuggestedPrompts")) == 2  # noqa: E731
        await send(assistant_thread_started(ws, user=ALICE, dm=dm, thread_ts=other.ts), asked)  # refused: no harm
        assert slack.suggested_prompts(dm, other.ts) == []

    asyncio.run(go())


def test_without_a_model_a_question_in_the_assistant_container_is_told_how_to_turn_agents_on(
    slack: SlackFake, db: Database
) -> None:
    client = web_client(slack.bot_token, slack.start())
    dm = slack.dm_channel(ALICE)

    async def go() -> None:
        tasks = TaskSet()
        app = slack_app.build_app(
            deps=SlackDeps(client, cast(Any, None), cast(Any, None), SlackSettings(), conversations=None),
            signing_secret=SECRET, tasks=tasks, triggers=DurableSeenKeys(db, ttl_s=slack_app.REPLAY_TTL_S),
        )  # fmt: skip
        root = slack.user_message(dm, ALICE, "hello")
        question = slack.user_message(dm, ALICE, "why is my run slow?", root.ts)
        body = json.dumps(slack.event_payload(question))
        response = await app.async_dispatch(
            AsyncBoltRequest(body=body, headers=dict(signed(body, SECRET, content_type=JSON)))
        )
        assert response.status == 200
        for _ in range(200):
            await tasks.drain()
            if [m for m in slack.messages(dm, thread_ts=root.ts) if m.bot_id]:
                break
            await asyncio.sleep(0.02)
        [answer] = [m for m in slack.messages(dm, thread_ts=root.ts) if m.bot_id]
        assert "No model is configured" in answer.text and "ANTHROPIC_API_KEY" in answer.text

    asyncio.run(go())
