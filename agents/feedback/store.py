"""Feedback rows (``labbot.storage.models.Feedback``): who voted, on what, which way, and why.

A vote is on a message labbot posted: an agent's answer (found through ``agent_turns``: the session and turn, with
the model, role and A/B arm that answered), a run's card (``run_threads``) or an eval run's results
(``votable_messages``). One row per (message, voter): pressing a button again, changing one's mind (a 👍 then a 👎)
or Slack delivering the same event twice leaves one row holding the latest vote. The write is an insert that
ignores a duplicate followed by an update, so two deliveries racing each other (two replicas, two worker threads)
also end in one row. Removing one's reaction takes back the vote it made (not a vote made another way since).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update

from labbot.common.errors import BadRequest, UnknownFeedback
from labbot.storage.db import Database
from labbot.storage.models import AgentSession, AgentTurn, Feedback, RunThread, VotableMessage, utcnow

__all__ = ["KINDS", "FeedbackStore", "Target", "UnknownFeedback", "vote_of_reaction"]

KINDS = ("answer", "run", "eval")
VOTES = {"up": 1, "down": -1}
MAX_COMMENT = 3000
_ID_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"

# Slack's names for the reactions that count as votes (skin tones arrive as "+1::skin-tone-3")
_UP = {"+1", "thumbsup"}
_DOWN = {"-1", "thumbsdown"}


def vote_of_reaction(name: str) -> int | None:
    """+1 for 👍, -1 for 👎 (any skin tone), None for every other reaction."""
    base = name.split("::", 1)[0]
    return 1 if base in _UP else -1 if base in _DOWN else None


@dataclass(frozen=True)
class Target:
    """What a message is, for feedback: an agent's answer, a run's card or an eval run's results."""

    kind: str
    run_id: str | None = None
    turn_id: str | None = None
    session_id: str | None = None
    model: str | None = None
    role: str | None = None
    ab_arm: str | None = None


def _new_id() -> str:
    return "fb" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(6))


class FeedbackStore:
    """Synchronous, one short transaction per call (the Slack handlers run it on a worker thread)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- what a message is ---------------------------------------------------------------------------------------

    def target(self, channel: str, ts: str) -> Target | None:
        """What the message at (channel, ts) is, or None when it is nothing people vote on."""
        with self.db.session() as s:
            turn = s.scalar(select(AgentTurn).where(AgentTurn.channel == channel, AgentTurn.message_ts == ts))
            if turn is not None:
                run_id = s.scalar(select(AgentSession.run_id).where(AgentSession.id == turn.session_id))
                return Target("answer", run_id, turn.id, turn.session_id, turn.model, turn.role, turn.ab_arm)
            card = s.scalar(select(RunThread.run_id).where(RunThread.channel == channel, RunThread.card_ts == ts))
            if card is not None:
                return Target("run", card)
            posted = s.get(VotableMessage, (channel, ts))
            if posted is not None:
                return Target(posted.kind, posted.run_id)
        return None

    def remember(self, channel: str, ts: str, kind: str, run_id: str | None) -> None:
        """Make a posted message votable (an eval run's results)."""
        with self.db.session() as s:
            s.execute(
                self.db.insert_ignoring_duplicates(VotableMessage).values(
                    channel=channel, ts=ts, kind=kind, run_id=run_id, created_at=utcnow()
                )
            )

    # -- votes ---------------------------------------------------------------------------------------------------

    def vote(
        self, *, channel: str, ts: str, user: str, vote: int, source: str, target: Target | None = None
    ) -> dict[str, Any] | None:
        """``user``'s vote (+1 or -1) on the message, replacing any earlier one of theirs; the row, or None when the
        message is nothing people vote on (nothing is written then)."""
        if vote not in (1, -1):
            raise BadRequest(f"a vote is +1 or -1, got {vote!r}")
        target = target or self.target(channel, ts)
        if target is None:
            return None
        now = utcnow()
        with self.db.session() as s:
            s.execute(
                self.db.insert_ignoring_duplicates(Feedback).values(
                    id=_new_id(),
                    kind=target.kind,
                    channel=channel,
                    message_ts=ts,
                    user=user,
                    vote=vote,
                    source=source,
                    turn_id=target.turn_id,
                    session_id=target.session_id,
                    model=target.model,
                    role=target.role,
                    ab_arm=target.ab_arm,
                    run_id=target.run_id,
                    created_at=now,
                    updated_at=now,
                )
            )
            s.execute(
                update(Feedback)
                .where(Feedback.channel == channel, Feedback.message_ts == ts, Feedback.user == user)
                .values(vote=vote, source=source, updated_at=now)
            )
            row = s.scalars(
                select(Feedback).where(Feedback.channel == channel, Feedback.message_ts == ts, Feedback.user == user)
            ).one()
            return _view(row)

    def unvote(self, *, channel: str, ts: str, user: str, vote: int) -> bool:
        """A reaction taken back: the user's vote goes if it is still the one that reaction made."""
        with self.db.session() as s:
            gone = s.execute(
                delete(Feedback).where(
                    Feedback.channel == channel,
                    Feedback.message_ts == ts,
                    Feedback.user == user,
                    Feedback.vote == vote,
                    Feedback.source == "reaction",
                )
            )
            return bool(getattr(gone, "rowcount", 0))

    def comment(self, feedback_id: str, *, user: str, text: str) -> dict[str, Any]:
        """What went wrong, in the voter's words (only the voter may write it; a second comment replaces the first)."""
        text = text.strip()
        if not text:
            raise BadRequest("the comment is empty: say in a sentence what went wrong")
        with self.db.session() as s:
            row = s.get(Feedback, feedback_id)
            if row is None:
                raise UnknownFeedback(f"unknown feedback {feedback_id!r}: `labbot feedback` lists them")
            if row.user != user:
                raise BadRequest(f"feedback {feedback_id} is {row.user}'s: only they can comment on their vote")
            row.comment = text[:MAX_COMMENT]
            row.updated_at = utcnow()
            return _view(row)

    def mark_case(self, feedback_id: str, case_id: str) -> None:
        with self.db.session() as s:
            s.execute(update(Feedback).where(Feedback.id == feedback_id).values(case_id=case_id))

    # -- reading -------------------------------------------------------------------------------------------------

    def get(self, feedback_id: str) -> dict[str, Any]:
        with self.db.session() as s:
            row = s.get(Feedback, feedback_id)
            if row is None:
                raise UnknownFeedback(f"unknown feedback {feedback_id!r}: `labbot feedback` lists them")
            return _view(row)

    def recent(
        self,
        *,
        limit: int = 50,
        kind: str | None = None,
        vote: str | None = None,
        model: str | None = None,
        run_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """Newest first."""
        if kind is not None and kind not in KINDS:
            raise BadRequest(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        if vote is not None and vote not in VOTES:
            raise BadRequest(f"vote must be up or down, got {vote!r}")
        q = select(Feedback).order_by(Feedback.updated_at.desc(), Feedback.id).limit(limit)
        if kind is not None:
            q = q.where(Feedback.kind == kind)
        if vote is not None:
            q = q.where(Feedback.vote == VOTES[vote])
        if model is not None:
            q = q.where(Feedback.model == model)
        if run_id is not None:
            q = q.where(Feedback.run_id == run_id)
        with self.db.session() as s:
            return [_view(r) for r in s.scalars(q)]

    def arm_numbers(self, models: Sequence[str], *, since: datetime | None = None) -> list[dict[str, Any]]:
        """For each arm of an A/B test (A, B in order, with ``models[i]``): its answers (turns recorded in
        A/B sessions on that model), their mean model calls, tokens and seconds, and the 👍 and 👎 votes on them."""
        out = []
        with self.db.session() as s:
            for arm, model in zip(("A", "B"), models, strict=True):
                turns = select(
                    func.count(),
                    func.avg(AgentTurn.model_calls),
                    func.avg(AgentTurn.tokens),
                    func.avg(AgentTurn.elapsed_s),
                ).where(AgentTurn.ab_arm == arm, AgentTurn.model == model)
                votes = select(Feedback.vote, func.count()).where(
                    Feedback.kind == "answer", Feedback.ab_arm == arm, Feedback.model == model
                )
                if since is not None:
                    turns = turns.where(AgentTurn.created_at >= since)
                    votes = votes.where(Feedback.created_at >= since)
                n, calls, tokens, seconds = s.execute(turns).one()
                counted = {int(v): int(c) for v, c in s.execute(votes.group_by(Feedback.vote)).all()}
                out.append(
                    {
                        "arm": arm,
                        "model": model,
                        "answers": int(n or 0),
                        "model_calls_per_answer": float(calls or 0.0),
                        "tokens_per_answer": float(tokens or 0.0),
                        "seconds_per_answer": float(seconds or 0.0),
                        "up": int(counted.get(1, 0)),
                        "down": int(counted.get(-1, 0)),
                    }
                )
        return out


def _view(row: Feedback) -> dict[str, Any]:
    return {
        "id": row.id,
        "kind": row.kind,
        "vote": "up" if row.vote > 0 else "down",
        "user": row.user,
        "comment": row.comment,
        "source": row.source,
        "channel": row.channel,
        "message_ts": row.message_ts,
        "run_id": row.run_id,
        "session_id": row.session_id,
        "turn_id": row.turn_id,
        "model": row.model,
        "role": row.role,
        "ab_arm": row.ab_arm,
        "case": row.case_id,
        "created_at": row.created_at.isoformat(),
        "updated_at": row.updated_at.isoformat(),
    }
