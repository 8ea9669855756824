"""What a run's Slack thread needs now: a pure function of the run and what was already posted.

The thread keeper calls ``plan`` every tick for each run with a thread and carries out what it returns. All of
labbot's Slack chattiness is decided here, so the rate of Web API calls per run is easy to reason about and test:
the card is updated on a status or attempt change at once and otherwise at most every ``card_every_s``; a progress
line is posted at most every ``progress_every_s``; a plot of the job's metrics at each milestone and at the end; one
summary per end (a run restarted after it ended is tended again, and its new end gets a summary of its own).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

TERMINAL = ("succeeded", "failed", "stopped")


@dataclass(frozen=True)
class ThreadState:
    """What was already posted for a run (a row of ``run_threads``)."""

    card_digest: str | None = None
    card_updated_at: datetime | None = None
    progress_posted_at: datetime | None = None
    progress_step: int | None = None
    plots_posted: tuple[int, ...] = ()
    attempt_seen: int = 1
    status_seen: str = "pending"
    summary_posted: bool = False


@dataclass(frozen=True)
class Cadence:
    card_every_s: float = 120.0
    progress_every_s: float = 600.0
    plot_milestones: tuple[int, ...] = (50,)


@dataclass(frozen=True)
class Plan:
    update_card: bool = False
    card_digest: str | None = None
    restarted: bool = False  # a new attempt began: say so in the thread
    progress: bool = False
    plot_milestone: int | None = None  # a milestone percent to plot now (the latest one passed)
    milestones_passed: tuple[int, ...] = ()  # every milestone this plot covers: none is plotted later
    summary: bool = False  # the run ended: final plot and summary
    left_queue: bool = False  # a queued run was admitted (capacity freed): say so in the thread
    reopened: bool = False  # the run ended, its summary was posted, and it was restarted: the thread is tended again

    @property
    def empty(self) -> bool:
        return not (
            self.update_card
            or self.restarted
            or self.progress
            or self.plot_milestone
            or self.summary
            or self.left_queue
            or self.reopened
        )


def card_digest(run: dict[str, Any], history: list[str]) -> str:
    """What the card shows, hashed: an update that would change nothing is skipped. It begins ``0:`` for a card drawn
    before the run's first step (``Step —``), so the first step can be told from the digest alone."""
    shown = {k: run.get(k) for k in ("status", "attempt", "step", "metrics", "checkpoint_step", "error", "name")} | {
        "history": history[-5:]
    }
    if run.get("queue_position") is not None:  # a queued run's card shows its place in line
        shown["queue_position"] = run["queue_position"]
    if run.get("step") is None and run.get("phase"):  # before the first step, the card shows the job's phase
        shown["phase"] = run["phase"]
    digest = hashlib.sha256(json.dumps(shown, sort_keys=True, default=str).encode()).hexdigest()
    return f"{0 if run.get('step') is None else 1}:{digest[:62]}"  # 64 characters, as the column keeps


def percent_done(run: dict[str, Any]) -> float | None:
    total = run.get("params", {}).get("steps")
    step = run.get("step")
    if not isinstance(total, int) or total <= 0 or step is None:
        return None
    return 100.0 * min(step, total) / total


def plan(run: dict[str, Any], state: ThreadState, *, history: list[str], now: datetime, cadence: Cadence) -> Plan:
    status = run["status"]
    reopened = False
    if state.summary_posted:
        if status in TERMINAL:
            return Plan()
        # restarted after it ended (a stop, a failure, then `restart`): the new attempt gets its notice, card, progress
        # and, at its end, a summary of its own
        state, reopened = replace(state, summary_posted=False), True
    digest = card_digest(run, history)
    changed_state = status != state.status_seen or run["attempt"] != state.attempt_seen
    card_due = state.card_updated_at is None or (now - state.card_updated_at).total_seconds() >= cadence.card_every_s
    moved_in_line = run.get("queue_position") is not None  # a place in line is news at once, like a status
    # the first step is news too: a card showing `Step —` while the run trains reads as a stuck run
    first_step = run.get("step") is not None and (state.card_digest or "").startswith("0:")
    # and so is a phase the job names before its first step (tiny-rl's warm-up: a minute with no step)
    early_phase = run.get("step") is None and bool(run.get("phase"))
    update_card = digest != state.card_digest and (
        changed_state or card_due or moved_in_line or first_step or early_phase or status in TERMINAL
    )
    if status in TERMINAL:
        return Plan(update_card=update_card, card_digest=digest, summary=True)
    restarted = run["attempt"] > state.attempt_seen
    step = run.get("step")
    progress_due = (
        status == "running"
        and step is not None
        and step != state.progress_step
        and (
            state.progress_posted_at is None
            or (now - state.progress_posted_at).total_seconds() >= cadence.progress_every_s
        )
    )
    # the first progress line waits for a full interval after launch: the launch confirmation covers the start
    if state.progress_posted_at is None and progress_due:
        started = run.get("started_at")
        if started is None or (now - datetime.fromisoformat(started)).total_seconds() < cadence.progress_every_s:
            progress_due = False
    pct = percent_done(run)
    due: tuple[int, ...] = ()
    if pct is not None and status == "running":
        due = tuple(m for m in cadence.plot_milestones if pct >= m and m not in state.plots_posted)
    return Plan(
        update_card=update_card,
        card_digest=digest,
        reopened=reopened,
        left_queue=state.status_seen == "queued" and status != "queued",
        restarted=restarted and "queued" not in (state.status_seen, status),  # leaving the queue is said instead
        progress=progress_due,
        plot_milestone=max(due) if due else None,
        milestones_passed=due,
    )


@dataclass(frozen=True)
class HomeState:
    """What a user's home tab last showed: the view's digest, the digest of its statuses, when it was published."""

    digest: str | None = None
    statuses: str | None = None
    published_at: datetime | None = None


def home_due(state: HomeState, *, digest: str, statuses: str, now: datetime, cadence: Cadence) -> bool:
    """Whether to publish a user's home tab now, by the card's rule: never when nothing shown changed (Slack resending
    ``app_home_opened`` publishes nothing); a status change (a run ended, a page opened) at once; anything else
    (a step, a metric) at most every ``card_every_s``."""
    if digest == state.digest:
        return False
    if state.published_at is None or statuses != state.statuses:
        return True
    return (now - state.published_at).total_seconds() >= cadence.card_every_s
