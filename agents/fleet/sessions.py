"""Agent sessions: the conversation bound to a Slack thread, kept in the database so that a restart of labbot loses
nothing.

``labbot.agents.fleet.fleet`` is the only user: it finds (or starts) the session of a thread, loads its history
— the Messages API messages exactly as the runtime (``labbot.agents.fleet.runtime``) returned them, tool calls and
results included — and, after a run, saves the new history in one transaction. Rows: ``AgentSession`` (one per thread;
its role, run and model are fixed when it starts), ``AgentMessage`` (one per message, by ``seq``) and ``AgentTurn``
(one per answer: who asked, the model and role that answered, turns, tokens and time, and the Slack message it
became — what feedback on that message is counted against), in ``labbot.storage.models``.

A session with no thread (``channel`` or ``thread_ts`` None) is never found again: each such ask starts a new one.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError

from labbot.storage.db import Database
from labbot.storage.models import AgentMessage, AgentSession, AgentTurn, utcnow

__all__ = ["SessionInfo", "SessionStore", "TurnRecord", "new_session_id", "new_turn_id"]


def new_session_id() -> str:
    """``ses_`` and 16 hex digits: short enough for the audit trail's and approvals' agent columns."""
    return "ses_" + secrets.token_hex(8)


@dataclass(frozen=True)
class SessionInfo:
    id: str
    channel: str | None
    thread_ts: str | None
    role: str
    owner: str  # who started it
    run_id: str | None
    model: str | None = None  # the model it answers with; None: the configured one
    ab_arm: str | None = None  # "A" or "B" when an A/B test chose its model


@dataclass(frozen=True)
class TurnRecord:
    """One answer, as ``save`` keeps it (an ``agent_turns`` row): who asked, who answered, what it cost."""

    id: str
    owner: str
    role: str
    model: str
    ab_arm: str | None
    stop: str
    model_calls: int
    tokens: int
    elapsed_s: float
    first_seq: int  # the question's position in the history
    last_seq: int  # the answer's
    channel: str | None


def new_turn_id() -> str:
    return "trn_" + secrets.token_hex(8)


def _info(row: AgentSession) -> SessionInfo:
    return SessionInfo(row.id, row.channel, row.thread_ts, row.role, row.owner, row.run_id, row.model, row.ab_arm)


class SessionStore:
    """Sessions and their histories in ``db``. Synchronous and short: one small transaction per call."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, session_id: str) -> SessionInfo | None:
        with self.db.session() as s:
            row = s.get(AgentSession, session_id)
            return _info(row) if row is not None else None

    def find(self, channel: str | None, thread_ts: str | None) -> SessionInfo | None:
        """The session bound to the thread, if there is one."""
        if not channel or not thread_ts:
            return None
        with self.db.session() as s:
            row = s.scalars(
                select(AgentSession).where(AgentSession.channel == channel, AgentSession.thread_ts == thread_ts)
            ).first()
            return _info(row) if row is not None else None

    def threads_of(self, owner: str, *, limit: int) -> list[dict[str, Any]]:
        """``owner``'s sessions that talk in a Slack thread, the latest active first: where, the role, the run."""
        with self.db.session() as s:
            rows = s.scalars(
                select(AgentSession)
                .where(AgentSession.owner == owner, AgentSession.channel.is_not(None))
                .order_by(AgentSession.updated_at.desc())
                .limit(limit)
            )
            return [{"channel": t.channel, "thread_ts": t.thread_ts, "role": t.role, "run_id": t.run_id} for t in rows]

    def open(
        self,
        *,
        channel: str | None,
        thread_ts: str | None,
        role: str,
        owner: str,
        run_id: str | None,
        session_id: str | None = None,
        model: str | None = None,
        ab_arm: str | None = None,
    ) -> tuple[SessionInfo, bool]:
        """The thread's session, or a new one bound to it: (session, created). If another process starts the
        thread's session at the same moment, that one is returned (the unique index decides), with its model and
        arm, not these."""
        found = self.find(channel, thread_ts)
        if found is not None:
            return found, False
        threaded = bool(channel and thread_ts)
        row = AgentSession(
            id=session_id or new_session_id(),
            channel=channel if threaded else None,
            thread_ts=thread_ts if threaded else None,
            role=role,
            owner=owner,
            run_id=run_id,
            model=model,
            ab_arm=ab_arm,
        )
        try:
            with self.db.session() as s:
                s.add(row)
        except IntegrityError:
            found = self.find(channel, thread_ts)
            if found is None:
                raise
            return found, False
        return _info(row), True

    def bind_run(self, session_id: str, run_id: str) -> None:
        """Bind a session that has no run yet to ``run_id`` (a thread that turned out to be a run's)."""
        with self.db.session() as s:
            s.execute(
                update(AgentSession)
                .where(AgentSession.id == session_id, AgentSession.run_id.is_(None))
                .values(run_id=run_id, updated_at=utcnow())
            )

    def history(self, session_id: str) -> list[dict[str, Any]]:
        """The session's messages in order, as the Messages API takes them ([] for an unknown session)."""
        with self.db.session() as s:
            rows = s.execute(
                select(AgentMessage.role, AgentMessage.content)
                .where(AgentMessage.session_id == session_id)
                .order_by(AgentMessage.seq)
            ).all()
        return [{"role": role, "content": content} for role, content in rows]

    def save(
        self,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        previous: Sequence[Mapping[str, Any]],
        turn: TurnRecord | None = None,
    ) -> None:
        """Make ``messages`` the session's history, in one transaction. ``previous`` is the history as loaded:
        messages it shares with ``messages`` (the unchanged head) are not written again. ``turn``, the answer that
        made them, is kept in the same transaction (numbered after the session's earlier answers)."""
        kept = 0
        for old, new in zip(previous, messages, strict=False):
            if dict(old) != dict(new):
                break
            kept += 1
        now = utcnow()
        with self.db.session() as s:
            s.execute(delete(AgentMessage).where(AgentMessage.session_id == session_id, AgentMessage.seq >= kept))
            s.add_all(
                AgentMessage(session_id=session_id, seq=seq, role=m["role"], content=m["content"], created_at=now)
                for seq, m in enumerate(messages)
                if seq >= kept
            )
            s.execute(update(AgentSession).where(AgentSession.id == session_id).values(updated_at=now))
            if turn is not None:
                done = s.scalar(select(func.count()).select_from(AgentTurn).where(AgentTurn.session_id == session_id))
                s.add(
                    AgentTurn(
                        id=turn.id,
                        session_id=session_id,
                        seq=int(done or 0) + 1,
                        owner=turn.owner,
                        role=turn.role,
                        model=turn.model,
                        ab_arm=turn.ab_arm,
                        stop=turn.stop,
                        model_calls=turn.model_calls,
                        tokens=turn.tokens,
                        elapsed_s=turn.elapsed_s,
                        first_seq=turn.first_seq,
                        last_seq=turn.last_seq,
                        channel=turn.channel,
                        created_at=now,
                    )
                )

    def posted(self, turn_id: str, channel: str, message_ts: str) -> None:
        """The Slack message an answer became (votes on that message are votes on the answer)."""
        with self.db.session() as s:
            s.execute(update(AgentTurn).where(AgentTurn.id == turn_id).values(channel=channel, message_ts=message_ts))

    def posted_as(self, turn_id: str) -> tuple[str, str] | None:
        """The Slack message (channel, ts) an answer became, or None (no such turn, or not posted)."""
        with self.db.session() as s:
            turn = s.get(AgentTurn, turn_id)
            if turn is None or not turn.channel or not turn.message_ts:
                return None
            return turn.channel, turn.message_ts
