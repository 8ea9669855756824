"""Each run's Slack thread as rows: where its card is and what has been posted there (``run_threads``), so nothing
posts twice, even across a restart of labbot, and the replies people wrote in it (``thread_messages``).

The run threads' upkeep (``labbot.bot.slack.threads``) and the agents' threads (``labbot.bot.slack.agent_threads``)
read and write them here. Synchronous and short: one small transaction per call; the caller passes the time."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import or_, select
from sqlalchemy.exc import IntegrityError

from labbot.storage.db import Database
from labbot.storage.models import Run, RunStatus, RunThread, ThreadMessage


@dataclass(frozen=True)
class Reply:
    run_id: str
    first_without_agent: bool  # the thread has not yet been told that no agent is configured


@dataclass(frozen=True)
class Posted:
    """What one round of a thread's upkeep posted, to remember: the run's status and attempt seen, the progress line
    (its time and step) when one was posted, the plot milestones passed, whether the summary went out."""

    status: str
    attempt: int
    progress_at: datetime | None = None
    progress_step: int | None = None
    milestones: Sequence[int] = ()
    summary: bool = False
    reopened: bool = False  # the run was restarted after its summary: a new summary is due at its next end


class RunThreadStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create(self, run_id: str, channel: str, ts: str, *, attempt: int, status: str, at: datetime) -> None:
        """The thread whose root (the run card) was just posted at ``channel``/``ts``."""
        with self.db.session() as s:
            s.add(
                RunThread(
                    run_id=run_id,
                    channel=channel,
                    card_ts=ts,
                    card_updated_at=at,
                    plots_posted=[],
                    attempt_seen=attempt,
                    status_seen=status,
                    summary_posted=False,
                    no_agent_said=False,
                    history=[],
                )
            )

    def get(self, run_id: str) -> RunThread | None:
        with self.db.session() as s:
            return s.get(RunThread, run_id)

    def thread_of(self, run_id: str) -> tuple[str, str] | None:
        """The run's thread (channel, root ts), or None."""
        row = self.get(run_id)
        return (row.channel, row.card_ts) if row else None

    def run_of_thread(self, channel: str, thread_ts: str) -> str | None:
        """The run whose thread this is, or None."""
        with self.db.session() as s:
            row = s.scalar(select(RunThread).where(RunThread.channel == channel, RunThread.card_ts == thread_ts))
            return row.run_id if row else None

    def open_threads(self) -> list[RunThread]:
        """The threads the upkeep tends: those whose summary is not posted yet, and those of runs restarted after
        their summary was (their run is no longer ended)."""
        ended = [status.value for status in RunStatus if status.is_terminal]
        restarted = RunThread.run_id.in_(select(Run.id).where(Run.status.not_in(ended)))
        with self.db.session() as s:
            q = select(RunThread).where(or_(RunThread.summary_posted.is_(False), restarted))
            return list(s.scalars(q))

    def append_history(self, run_id: str, line: str, *, keep: int) -> RunThread | None:
        """Add a line to the card's history, keeping the last ``keep``; None when the run has no thread."""
        with self.db.session() as s:
            row = s.get(RunThread, run_id)
            if row is None:
                return None
            row.history = [*row.history, line][-keep:]
            return row

    def remember(self, run_id: str, posted: Posted) -> None:
        with self.db.session() as s:
            row = s.get_one(RunThread, run_id)
            row.status_seen, row.attempt_seen = posted.status, posted.attempt
            if posted.progress_at is not None:
                row.progress_posted_at, row.progress_step = posted.progress_at, posted.progress_step
            if posted.milestones:
                row.plots_posted = [*row.plots_posted, *posted.milestones]
            if posted.reopened:
                row.summary_posted = False
            if posted.summary:
                row.summary_posted = True

    def card_updated(self, run_id: str, digest: str, *, at: datetime) -> None:
        with self.db.session() as s:
            row = s.get_one(RunThread, run_id)
            row.card_digest, row.card_updated_at = digest, at

    def store_reply(self, channel: str, thread_ts: str, user: str, ts: str, text: str) -> Reply | None:
        """A reply in a run's thread, kept with the run; None when the thread is no run's (or the same message was
        delivered twice: stored once)."""
        try:
            with self.db.session() as s:
                row = s.scalar(select(RunThread).where(RunThread.channel == channel, RunThread.card_ts == thread_ts))
                if row is None:
                    return None
                s.add(ThreadMessage(run_id=row.run_id, channel=channel, ts=ts, user=user, text=text))
                first = not row.no_agent_said
                row.no_agent_said = True
                return Reply(row.run_id, first_without_agent=first)
        except IntegrityError:
            return None
