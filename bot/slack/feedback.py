"""Feedback in Slack: the 👍/👎 buttons under every agent answer, the "what went wrong?" modal a 👎 opens, and 👍/👎
reactions on answers, run cards and eval results — each a row in ``labbot.agents.feedback.store``.

The buttons are Block Kit's ``feedback_buttons`` (in a ``context_actions`` block, ``action_id`` ``answer_feedback``);
each button's value names the vote and the answer's turn (``up:trn_…``), so a vote lands on the answer whichever of
its messages carries the buttons. A vote on a message labbot posted nothing votable in is ignored. Pressing twice,
changing the vote and Slack's retries all end in one row with the latest vote (the store's upsert); a 👎 by button
also opens the modal (Slack's ``trigger_id`` lasts 3 s, so it is opened first thing after the ack), whose answer
becomes the vote's comment, and the voter is told how to turn it into an eval case.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from anyio import to_thread
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from labbot.agents.feedback.store import FeedbackStore, Target, vote_of_reaction
from labbot.agents.fleet.sessions import SessionStore
from labbot.common.errors import LabbotError
from labbot.storage.db import Database

log = logging.getLogger(__name__)

ACTION_ID = "answer_feedback"
MODAL_CALLBACK = "feedback_comment"
COMMENT_BLOCK = "comment"
COMMENT_ACTION = "text"


def feedback_block(turn_id: str) -> dict[str, Any]:
    """The 👍/👎 buttons under an agent's answer."""
    return {
        "type": "context_actions",
        "block_id": f"feedback_{turn_id}"[:255],
        "elements": [
            {
                "type": "feedback_buttons",
                "action_id": ACTION_ID,
                "positive_button": {
                    "text": {"type": "plain_text", "text": "Good answer"},
                    "value": f"up:{turn_id}",
                    "accessibility_label": "Mark this answer as good",
                },
                "negative_button": {
                    "text": {"type": "plain_text", "text": "Bad answer"},
                    "value": f"down:{turn_id}",
                    "accessibility_label": "Mark this answer as bad and say what went wrong",
                },
            }
        ],
    }


def comment_modal(feedback_id: str, channel: str, thread_ts: str | None) -> dict[str, Any]:
    """The "what went wrong?" modal a 👎 opens."""
    meta = json.dumps({"feedback": feedback_id, "channel": channel, "thread_ts": thread_ts})
    return {
        "type": "modal",
        "callback_id": MODAL_CALLBACK,
        "private_metadata": meta,
        "title": {"type": "plain_text", "text": "What went wrong?"},
        "submit": {"type": "plain_text", "text": "Send"},
        "close": {"type": "plain_text", "text": "Skip"},
        "blocks": [
            {
                "type": "input",
                "block_id": COMMENT_BLOCK,
                "label": {"type": "plain_text", "text": "What was wrong with the answer, and what would be right?"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": COMMENT_ACTION,
                    "multiline": True,
                    "max_length": 3000,
                    "placeholder": {"type": "plain_text", "text": "e.g. it blamed the data loader; the LR was 10x"},
                },
            }
        ],
    }


def parse_button_value(value: str) -> tuple[int, str] | None:
    """``up:trn_…`` → (+1, turn id); None for anything else."""
    verb, _, turn = value.partition(":")
    vote = {"up": 1, "down": -1}.get(verb)
    if vote is None or not turn.startswith("trn_") or len(turn) > 32:
        return None
    return vote, turn


class SlackFeedback:
    """What the Bolt listeners call for feedback (after their ack)."""

    def __init__(self, client: AsyncWebClient, db: Database, command: str = "/lab") -> None:
        self.client = client
        self.db = db
        self.store = FeedbackStore(db)
        self.command = command

    def _turn_target(self, turn_id: str) -> tuple[str, str, Target] | None:
        """The answer's (channel, message ts) and what it is, for a vote by button."""
        posted = SessionStore(self.db).posted_as(turn_id)
        if posted is None:
            return None
        channel, ts = posted
        target = self.store.target(channel, ts)
        return (channel, ts, target) if target is not None else None

    async def button(self, body: dict[str, Any]) -> None:
        """A press of an answer's 👍 or 👎."""
        action = (body.get("actions") or [{}])[0]
        parsed = parse_button_value(str(action.get("value") or ""))
        user = str((body.get("user") or {}).get("id") or "")
        if parsed is None or not user:
            log.info("a feedback button with an unreadable value was ignored")
            return
        vote, turn_id = parsed
        found = await to_thread.run_sync(self._turn_target, turn_id)
        if found is None:
            log.info("feedback on answer %s, which labbot does not know, was ignored", turn_id)
            return
        channel, ts, target = found
        row = await to_thread.run_sync(
            lambda: self.store.vote(channel=channel, ts=ts, user=user, vote=vote, source="button", target=target)
        )
        if row is None or vote > 0:
            return
        trigger = body.get("trigger_id")
        thread_ts = str((body.get("message") or {}).get("thread_ts") or "") or None
        if trigger:
            try:
                await self.client.views_open(trigger_id=str(trigger), view=comment_modal(row["id"], channel, thread_ts))
            except SlackApiError as e:  # an expired trigger: the vote stands without a comment
                log.info("could not open the feedback modal: %s", e.response.get("error"))

    async def comment(self, body: dict[str, Any]) -> None:
        """The modal's answer: the vote's comment, and a word to the voter on what it can become."""
        view = body.get("view") or {}
        user = str((body.get("user") or {}).get("id") or "")
        try:
            meta = json.loads(view.get("private_metadata") or "{}")
        except ValueError:
            meta = {}
        if not isinstance(meta, dict):  # labbot's modal keeps an object there: this view is not its
            meta = {}
        values = (view.get("state") or {}).get("values") or {}
        text = str(((values.get(COMMENT_BLOCK) or {}).get(COMMENT_ACTION) or {}).get("value") or "")
        feedback_id = str(meta.get("feedback") or "")
        if not feedback_id or not text.strip():
            return
        try:
            row = await to_thread.run_sync(lambda: self.store.comment(feedback_id, user=user, text=text))
        except LabbotError as e:
            log.info("a feedback comment was refused: %s", e.message)
            return
        channel = str(meta.get("channel") or row["channel"])
        note = (
            f"Thanks — noted on feedback `{row['id']}`. `{self.command} eval from-feedback {row['id']}` turns it "
            "into an eval case: can a model answer that question without the mistake you describe?"
        )
        try:
            await self.client.chat_postEphemeral(
                channel=channel, user=user, text=note, thread_ts=str(meta.get("thread_ts") or "") or None
            )
        except SlackApiError as e:
            log.info("could not thank the voter: %s", e.response.get("error"))

    async def reaction(self, event: dict[str, Any], *, added: bool) -> None:
        """👍 or 👎 put on (or taken off) a message labbot posted."""
        vote = vote_of_reaction(str(event.get("reaction") or ""))
        item = event.get("item") or {}
        user = str(event.get("user") or "")
        if vote is None or item.get("type") != "message" or not user:
            return
        channel, ts = str(item.get("channel") or ""), str(item.get("ts") or "")
        if not channel or not ts:
            return
        if added:
            await to_thread.run_sync(
                lambda: self.store.vote(channel=channel, ts=ts, user=user, vote=vote, source="reaction")
            )
        else:
            await to_thread.run_sync(lambda: self.store.unvote(channel=channel, ts=ts, user=user, vote=vote))
