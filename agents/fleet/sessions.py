"""Agent sessions: the conversation bound to a Slack thread, kept in the database so that a restart of labbot loses
nothing.

``labbot.agents.fleet.conversations`` is the only user: it finds (or starts) the session of a thread, loads its history
— the Messages API messages exactly as the runtime (``labbot.agents.fleet.runtime``) returned them, tool calls and
results included — and, after a run, saves the new history in one transaction. Rows: ``AgentSession`` (one per thread;
its role and run are fixed when it starts) and ``AgentMessage`` (one per message, by ``seq``), in
``labbot.storage.models``.

A session with no thread (``channel`` or ``thread_ts`` None) is never found again: each such ask starts a new one.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError

from labbot.storage.db import Database
from labbot.storage.models import AgentMessage, AgentSession, utcnow

__all__ = ["SessionInfo", "SessionStore", "new_session_id"]


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


def _info(row: AgentSession) -> SessionInfo:
    return SessionInfo(row.id, row.channel, row.thread_ts, row.role, row.owner, row.run_id)


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

    def open(
        self, *, channel: str | None, thread_ts: str | None, role: str, owner: str, run_id: str | None
    ) -> tuple[SessionInfo, bool]:
        """The thread's session, or a new one bound to it: (session, created). If another process starts the
        thread's session at the same moment, that one is returned (the unique index decides)."""
        found = self.find(channel, thread_ts)
        if found is not None:
            return found, False
        threaded = bool(channel and thread_ts)
        row = AgentSession(
            id=new_session_id(),
            channel=channel if threaded else None,
            thread_ts=thread_ts if threaded else None,
            role=role,
            owner=owner,
            run_id=run_id,
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
        self, session_id: str, messages: Sequence[Mapping[str, Any]], previous: Sequence[Mapping[str, Any]]
    ) -> None:
        """Make ``messages`` the session's history, in one transaction. ``previous`` is the history as loaded:
        messages it shares with ``messages`` (the unchanged head) are not written again."""
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
