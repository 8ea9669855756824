"""A run restarted after it ended keeps its thread: the card follows the new attempt (no more a stale `restarting`
with its buttons), the thread is told the attempt started, and the new end gets its own final plot and summary. The
real thread keeper against the Slack emulator; the run's rows are moved as ``RunService.restart`` moves them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.slack import started
from thread_lab import Lab, reward

from labbot.storage.models import Run, RunStatus


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    with started() as fake:
        yield Lab(tmp_path, fake)


def _restart(lab: Lab, run_id: str, *, checkpoint_step: int) -> None:
    """What ``RunService.restart`` writes for an ended run: attempt+1, ``restarting``, no end, no error."""
    with lab.db.session() as s:
        run = s.get_one(Run, run_id)
        run.attempt += 1
        run.status, run.ended_at, run.error = RunStatus.RESTARTING.value, None, None
        run.checkpoint_step = run.last_step = checkpoint_step


def _card(lab: Lab, card_ts: str) -> str:
    card = lab.slack.message(lab.slack.default_channel, card_ts)
    assert card is not None
    return str(card.text) + str(card.blocks)


@pytest.mark.parametrize("ended", [RunStatus.STOPPED, RunStatus.FAILED])
def test_a_run_restarted_after_it_ended_gets_its_card_notice_and_a_summary_of_its_own(
    lab: Lab, ended: RunStatus
) -> None:
    card_ts = lab.launch("rl0001", "rl-demo")
    lab.report("rl0001", range(1, 31), lambda s: {"reward": reward(s)})
    lab.end("rl0001", ended)
    lab.tick()  # the first end: final plot and summary
    assert [f["name"] for f, _ in lab.files(card_ts)] == ["rl0001-reward+pass_rate-final.png"]
    assert ended.value in _card(lab, card_ts)

    _restart(lab, "rl0001", checkpoint_step=30)
    lab.tick()
    assert "attempt 2 started, resuming from checkpoint step 30" in lab.slack.texts(thread_ts=card_ts)[-1]
    card = _card(lab, card_ts)
    assert "restarting" in card and "*Attempt*\\n2" in card

    with lab.db.session() as s:
        s.get_one(Run, "rl0001").status = RunStatus.RUNNING.value
    lab.tick()
    assert "running" in _card(lab, card_ts)
    lab.report("rl0001", range(31, 101), lambda s: {"reward": reward(s)})
    lab.end("rl0001")
    lab.tick()  # the second end: a final plot and a summary of its own
    names = [f["name"] for f, _ in lab.files(card_ts)]
    assert names == ["rl0001-reward+pass_rate-final.png"] * 2
    assert "succeeded" in _card(lab, card_ts)
    assert lab.tick() == 0, "and then nothing more"
