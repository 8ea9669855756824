"""Feedback in Slack, through the real Bolt app and the Slack fake: an answer carries the 👍/👎 buttons of its turn;
a press is a vote (twice, changed, or retried: one row, the latest vote); a 👎 opens the "what went wrong?" modal,
whose answer is the vote's comment; 👍/👎 reactions on answers and run cards count, on anything else they do not."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from fakes.slack import SlackFake, started
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.models.blocks import Block

from labbot.agents.fleet.sessions import SessionStore, TurnRecord, new_turn_id
from labbot.bot.config import SlackSettings
from labbot.bot.slack import app as slack_app
from labbot.bot.slack.agent_threads import AgentThreads
from labbot.bot.slack.feedback import ACTION_ID, COMMENT_ACTION, COMMENT_BLOCK, SlackFeedback
from labbot.bot.slack.handlers import SlackDeps
from labbot.bot.slack.payloads import Workspace, feedback_click, signed, view_submission
from labbot.bot.slack.tasks import TaskSet
from labbot.storage.db import Database
from labbot.storage.models import Feedback, Run, RunThread, utcnow
from labbot.storage.seen import DurableSeenKeys

SECRET = "feedback-test-signing-secret"
ALICE, BOB = "U0ALICE001", "U0BOB00001"


@pytest.fixture
def slack() -> Iterator[SlackFake]:
    with started() as fake:  # every Web API call checked against Slack's spec at the end
        yield fake


class Answers:
    """Stands in for the fleet: each ask is answered with a turn kept in the database, as the fleet keeps it."""

    def __init__(self, db: Database) -> None:
        self.sessions = SessionStore(db)

    async def ask(self, *, owner: str, text: str, channel: str | None, thread_ts: str | None, **_: Any) -> Any:
        session, _ = self.sessions.open(
            channel=channel, thread_ts=thread_ts, role="assistant", owner=owner, run_id=None
        )
        history = [{"role": "user", "content": f"<@{owner}>: {text}"}, {"role": "assistant", "content": "r1 is slow"}]
        turn = TurnRecord(new_turn_id(), owner, "assistant", "model-a", "A", "end_turn", 1, 900, 1.2, 0, 1, channel)
        self.sessions.save(session.id, history, [], turn)

        class Said:
            text = "r1 is slow: the data loader waits on a full queue."
            turn_id = turn.id

        return Said()


def rows(db: Database) -> list[tuple[str, int, str | None, str]]:
    with db.session() as s:
        return [(r.user, r.vote, r.comment, r.kind) for r in s.query(Feedback).order_by(Feedback.user)]


def test_votes_comments_and_reactions_in_slack(slack: SlackFake, db: Database) -> None:
    ws = Workspace(team_id=slack.team_id, app_id=slack.app_id, channel=slack.default_channel)
    channel = slack.default_channel
    client = slack.async_client()
    root = slack.user_message(channel, ALICE, "why is r1 slow?")

    async def go() -> None:
        tasks = TaskSet()
        talks = AgentThreads(client, db, cast(Any, Answers(db)))
        app = slack_app.build_app(
            deps=SlackDeps(client, cast(Any, None), cast(Any, None), SlackSettings()),
            signing_secret=SECRET,
            tasks=tasks,
            triggers=DurableSeenKeys(db, ttl_s=slack_app.REPLAY_TTL_S),
            feedback=SlackFeedback(client, db),
        )

        async def send(body: str, content_type: str = "application/x-www-form-urlencoded") -> None:
            headers = dict(signed(body, SECRET, content_type=content_type))
            response = await app.async_dispatch(AsyncBoltRequest(body=body, headers=headers))
            assert response.status == 200, response.body

        async def settled(cond: Callable[[], Any], what: str) -> Any:
            for _ in range(200):
                await tasks.drain()
                got = cond()
                if got:
                    return got
                await asyncio.sleep(0.05)
            raise AssertionError(f"timed out waiting for {what}")

        await talks.answer(user=ALICE, text="why is r1 slow?", channel=channel, thread_ts=root.ts)
        [answer] = [m for m in slack.messages(channel, thread_ts=root.ts) if m.bot_id]
        [buttons] = [b for b in answer.blocks if b["type"] == "context_actions"]
        Block.parse(buttons).validate_json()  # slack_sdk's own model of the block
        element = buttons["elements"][0]
        assert element["type"] == "feedback_buttons" and element["action_id"] == ACTION_ID
        up, down = element["positive_button"]["value"], element["negative_button"]["value"]

        # a 👍, pressed twice, then Slack's retry of it (the same body again): one row
        press = feedback_click(ws, user=ALICE, value=up, message_ts=answer.ts, thread_ts=root.ts)
        for body in (press, feedback_click(ws, user=ALICE, value=up, message_ts=answer.ts), press):
            await send(body)
        await settled(lambda: rows(db) == [(ALICE, 1, None, "answer")], "Alice's 👍")
        assert slack.views_opened() == []  # a 👍 asks nothing

        # she changes her mind: the same row, now 👎, and the modal opens
        await send(feedback_click(ws, user=ALICE, value=down, message_ts=answer.ts, thread_ts=root.ts))
        [modal] = await settled(slack.views_opened, "the what-went-wrong modal")
        assert rows(db) == [(ALICE, -1, None, "answer")]
        assert modal["type"] == "modal" and modal["callback_id"] == "feedback_comment"
        typed = {COMMENT_BLOCK: {COMMENT_ACTION: "it blamed the loader; the LR warm-up was missing"}}
        await send(view_submission(ws, user=ALICE, view=modal, values=typed))
        await settled(lambda: rows(db)[0][2], "the comment")
        assert rows(db) == [(ALICE, -1, "it blamed the loader; the LR warm-up was missing", "answer")]
        [thanks] = await settled(lambda: slack.ephemeral_messages(channel, ALICE), "the thank-you")
        assert "eval from-feedback fb" in thanks.text
        # someone else cannot write her comment
        await send(view_submission(ws, user=BOB, view=modal, values={COMMENT_BLOCK: {COMMENT_ACTION: "fine"}}))
        await tasks.drain()
        assert rows(db)[0][2] == "it blamed the loader; the LR warm-up was missing"

        # reactions: Bob's 👍 on the answer counts; a 🎉 does not; a 👍 on a human's message does not
        await send(json.dumps(slack.reaction_payload(answer, user=BOB, reaction="+1::skin-tone-3")), "application/json")
        await send(json.dumps(slack.reaction_payload(answer, user=BOB, reaction="tada")), "application/json")
        await send(json.dumps(slack.reaction_payload(root, user=BOB, reaction="+1")), "application/json")
        await settled(lambda: len(rows(db)) == 2, "Bob's 👍 reaction")
        assert rows(db) == [
            (ALICE, -1, "it blamed the loader; the LR warm-up was missing", "answer"),
            (BOB, 1, None, "answer"),
        ]
        # he takes it back: his vote goes
        await send(
            json.dumps(slack.reaction_payload(answer, user=BOB, reaction="+1", removed=True)), "application/json"
        )
        await settled(lambda: len(rows(db)) == 1, "Bob's vote taken back")

        # a 👎 reaction on a run's card is feedback on the run
        card = await client.chat_postMessage(channel=channel, text="run r1: running")
        with db.session() as s:
            s.add(Run(id="r1", job="tiny-lm", name="n", owner=ALICE, config={}, telemetry_token_hash="x",
                      created_at=utcnow()))  # fmt: skip
            s.flush()
            s.add(RunThread(run_id="r1", channel=channel, card_ts=str(card["ts"]), status_seen="running"))
        card_msg = slack.message(channel, str(card["ts"]))
        assert card_msg is not None
        await send(json.dumps(slack.reaction_payload(card_msg, user=BOB, reaction="-1")), "application/json")
        await settled(lambda: (BOB, -1, None, "run") in rows(db), "Bob's 👎 on the run card")

    asyncio.run(go())
