"""labbot.bot.slack.thread_plan: what a run's thread needs, tick by tick — and how many Web API calls that costs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from labbot.bot.slack.thread_plan import Cadence, Plan, ThreadState, plan

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _run(**kw: Any) -> dict[str, Any]:
    run = {
        "id": "abc123",
        "name": "tiny-lm-abc123",
        "status": "running",
        "attempt": 1,
        "step": 10,
        "metrics": {"loss": 2.0},
        "checkpoint_step": None,
        "error": None,
        "params": {"steps": 1000},
        "started_at": T0.isoformat(),
    }
    return run | kw


def _apply(state: ThreadState, run: dict[str, Any], p: Plan, now: datetime) -> ThreadState:
    """What RunThreads records after carrying a plan out."""
    return ThreadState(
        card_digest=p.card_digest if p.update_card else state.card_digest,
        card_updated_at=now if p.update_card else state.card_updated_at,
        progress_posted_at=now if p.progress else state.progress_posted_at,
        progress_step=run["step"] if p.progress else state.progress_step,
        plots_posted=(*state.plots_posted, *p.milestones_passed),
        attempt_seen=run["attempt"],
        status_seen=run["status"],
        summary_posted=state.summary_posted or p.summary,
    )


def calls(p: Plan) -> int:
    return int(p.update_card) + int(p.progress) + int(p.restarted) + 3 * bool(p.plot_milestone) + 4 * int(p.summary)


def test_status_change_updates_the_card_at_once() -> None:
    state = ThreadState(card_digest="old", card_updated_at=T0, status_seen="pending")
    p = plan(_run(), state, history=[], now=T0 + timedelta(seconds=1), cadence=Cadence())
    assert p.update_card and not p.progress


def test_card_updates_are_rate_limited_while_nothing_but_the_step_changes() -> None:
    state = ThreadState(card_digest="x", card_updated_at=T0, status_seen="running")
    assert not plan(_run(step=11), state, history=[], now=T0 + timedelta(seconds=30), cadence=Cadence()).update_card
    assert plan(_run(step=11), state, history=[], now=T0 + timedelta(seconds=121), cadence=Cadence()).update_card


def test_progress_lines_at_most_every_interval_and_only_when_the_step_moved() -> None:
    cad = Cadence(progress_every_s=600)
    state = ThreadState(status_seen="running", card_digest="x", card_updated_at=T0)
    assert not plan(_run(), state, history=[], now=T0 + timedelta(seconds=300), cadence=cad).progress
    p = plan(_run(), state, history=[], now=T0 + timedelta(seconds=601), cadence=cad)
    assert p.progress
    later = _apply(state, _run(), p, T0 + timedelta(seconds=601))
    assert not plan(_run(), later, history=[], now=T0 + timedelta(seconds=1300), cadence=cad).progress  # no step
    assert plan(_run(step=11), later, history=[], now=T0 + timedelta(seconds=1300), cadence=cad).progress


def test_milestone_plot_once_and_summary_at_the_end() -> None:
    cad = Cadence(plot_milestones=(25, 50))
    state = ThreadState(status_seen="running", card_digest="x", card_updated_at=T0)
    p = plan(_run(step=600), state, history=[], now=T0, cadence=cad)
    assert p.plot_milestone == 50  # both due: one plot, the latest milestone
    state = _apply(state, _run(step=600), p, T0)
    assert plan(_run(step=700), state, history=[], now=T0, cadence=cad).plot_milestone is None
    end = plan(_run(step=1000, status="succeeded"), state, history=[], now=T0, cadence=cad)
    assert end.summary and end.update_card
    state = _apply(state, _run(status="succeeded"), end, T0)
    assert plan(_run(status="succeeded"), state, history=[], now=T0, cadence=cad).empty  # never twice


def test_restart_is_told_in_the_thread() -> None:
    state = ThreadState(status_seen="failed", attempt_seen=1, card_digest="x", card_updated_at=T0)
    p = plan(_run(status="restarting", attempt=2), state, history=[], now=T0, cadence=Cadence())
    assert p.restarted and p.update_card


def test_history_changes_the_card() -> None:
    state = ThreadState(status_seen="running", card_updated_at=T0)
    base = plan(_run(), state, history=[], now=T0, cadence=Cadence()).card_digest
    assert plan(_run(), state, history=["<@U1> stopped the run"], now=T0, cadence=Cadence()).card_digest != base


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=5, max_value=120))
def test_calls_per_run_hour_stay_under_one_a_minute(tick_s: int) -> None:
    """A run that trains steadily for an hour and then finishes, ticked every ``tick_s`` seconds at default
    cadence, costs fewer than 60 Slack Web API calls."""
    cad = Cadence()
    state = ThreadState(status_seen="pending", card_updated_at=T0, card_digest=None)
    total = 0
    for t in range(0, 3600, tick_s):
        now = T0 + timedelta(seconds=t)
        run = _run(step=1 + t // 4, metrics={"loss": 3.0 - t / 3600})  # a new step every 4 s: 900 steps an hour
        p = plan(run, state, history=[], now=now, cadence=cad)
        total += calls(p)
        state = _apply(state, run, p, now)
    end = plan(_run(step=1000, status="succeeded"), state, history=[], now=T0 + timedelta(hours=1), cadence=cad)
    total += calls(end)
    assert total < 60, total


def test_a_run_restarted_after_its_summary_is_tended_again() -> None:
    ended = ThreadState(card_digest="x", card_updated_at=T0, status_seen="stopped", summary_posted=True)
    now = T0 + timedelta(seconds=5)
    assert plan(_run(status="stopped"), ended, history=[], now=now, cadence=Cadence()).empty, "ended: nothing"
    p = plan(_run(status="restarting", attempt=2), ended, history=[], now=now, cadence=Cadence())
    assert p.reopened and p.restarted and p.update_card and not p.summary
    queued = plan(_run(status="queued", attempt=2), ended, history=[], now=now, cadence=Cadence())
    assert queued.reopened and not queued.restarted, "a restart that waits in the queue is said when it leaves it"
    state = _apply(ended, _run(status="restarting", attempt=2), p, now)
    state = ThreadState(**{**state.__dict__, "summary_posted": False})  # what RunThreads remembers of a reopening
    done = plan(_run(status="succeeded", attempt=2), state, history=[], now=now, cadence=Cadence())
    assert done.summary, "the new end has a summary of its own"


def test_the_first_step_updates_the_card_at_once_then_the_cadence_holds() -> None:
    from labbot.bot.slack.thread_plan import card_digest

    started = _run(step=None, metrics={})
    shown = card_digest(started, [])  # the card as the status change drew it: `Step —`
    state = ThreadState(card_digest=shown, card_updated_at=T0, status_seen="running", attempt_seen=1)
    p = plan(_run(step=3, metrics={"loss": 4.1}), state, history=[], now=T0 + timedelta(seconds=5), cadence=Cadence())
    assert p.update_card, "not `Step —` for the two minutes of the card's cadence"
    state = ThreadState(card_digest=p.card_digest, card_updated_at=T0 + timedelta(seconds=5), status_seen="running")
    later = plan(
        _run(step=9, metrics={"loss": 3.0}), state, history=[], now=T0 + timedelta(seconds=30), cadence=Cadence()
    )
    assert not later.update_card, "after the first step, the card's cadence again"


def test_a_phase_before_the_first_step_is_shown_at_once_and_the_first_step_after_it_too() -> None:
    """tiny-rl's warm-up: a minute or more with no step. The card says the phase the job named as soon as it names
    it (not `Step —` for the card's cadence), and the first step after it still updates the card at once."""
    from labbot.bot.slack.blocks.run_card import step_text
    from labbot.bot.slack.thread_plan import card_digest

    started = _run(step=None, metrics={})
    state = ThreadState(card_digest=card_digest(started, []), card_updated_at=T0, status_seen="running")
    warming = _run(step=None, metrics={}, phase="warmup")
    p = plan(warming, state, history=[], now=T0 + timedelta(seconds=3), cadence=Cadence())
    assert p.update_card and "warmup" in step_text(warming)
    state = ThreadState(card_digest=p.card_digest, card_updated_at=T0 + timedelta(seconds=3), status_seen="running")
    same = plan(warming, state, history=[], now=T0 + timedelta(seconds=6), cadence=Cadence())
    assert not same.update_card, "the same phase again changes nothing"
    evaluating = plan(_run(step=None, metrics={}, phase="eval"), state, history=[], now=T0 + timedelta(seconds=9),
                      cadence=Cadence())  # fmt: skip
    assert evaluating.update_card, "a new phase before the first step is news too"
    first = _run(step=0, metrics={"pass_rate": 0.9}, phase="rollout")
    assert "rollout" not in step_text(first), "after the first step the card shows the step, not the phase"
    p = plan(first, state, history=[], now=T0 + timedelta(seconds=12), cadence=Cadence())
    assert p.update_card, "the first step after a phase is shown at once"
    state = ThreadState(card_digest=p.card_digest, card_updated_at=T0 + timedelta(seconds=12), status_seen="running")
    cycling = plan(_run(step=1, metrics={"pass_rate": 0.9}, phase="learn"), state, history=[],
                   now=T0 + timedelta(seconds=15), cadence=Cadence())  # fmt: skip
    assert not cycling.update_card, "RL's phases cycling each step do not redraw the card"
