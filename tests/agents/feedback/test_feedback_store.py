"""Feedback rows: one per message and voter, the latest vote; what a message is; the numbers an A/B report reads."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from labbot.agents.feedback.store import FeedbackStore, vote_of_reaction
from labbot.agents.fleet.sessions import SessionStore, TurnRecord, new_turn_id
from labbot.common.errors import BadRequest, UnknownFeedback
from labbot.storage.db import Database
from labbot.storage.models import Feedback, Run, RunThread, utcnow

pytestmark = pytest.mark.databases

CHANNEL = "C0LAB00001"
ALICE, BOB = "U0ALICE001", "U0BOB00001"


def answered(db: Database, *, thread: str, model: str = "m-a", arm: str | None = None, ts: str | None = None) -> str:
    """A session in ``thread`` with one answer posted at ``ts``; the turn's id."""
    sessions = SessionStore(db)
    session, _ = sessions.open(
        channel=CHANNEL, thread_ts=thread, role="assistant", owner=ALICE, run_id=None, model=model, ab_arm=arm
    )
    history = [{"role": "user", "content": f"<@{ALICE}>: why?"}, {"role": "assistant", "content": "because"}]
    turn = TurnRecord(new_turn_id(), ALICE, "assistant", model, arm, "end_turn", 2, 1500, 4.5, 0, 1, CHANNEL)
    sessions.save(session.id, history, [], turn)
    sessions.posted(turn.id, CHANNEL, ts or f"{thread}1")
    return turn.id


def rows(db: Database) -> list[Feedback]:
    with db.session() as s:
        out = list(s.query(Feedback).all())
        s.expunge_all()
        return out


def test_a_vote_pressed_twice_changed_or_retried_is_one_row_with_the_latest_vote(db: Database) -> None:
    answered(db, thread="100.1", ts="100.2")
    store = FeedbackStore(db)
    first = store.vote(channel=CHANNEL, ts="100.2", user=ALICE, vote=1, source="button")
    assert first is not None and first["vote"] == "up" and first["kind"] == "answer"
    store.vote(channel=CHANNEL, ts="100.2", user=ALICE, vote=1, source="button")  # pressed twice
    store.vote(channel=CHANNEL, ts="100.2", user=ALICE, vote=1, source="button")  # Slack's retry of the same press
    changed = store.vote(channel=CHANNEL, ts="100.2", user=ALICE, vote=-1, source="reaction")  # changed her mind
    assert changed is not None
    [row] = rows(db)
    assert (row.id, row.vote, row.source, row.user) == (first["id"], -1, "reaction", ALICE)
    assert row.model == "m-a" and row.role == "assistant" and row.turn_id is not None
    # another voter on the same answer is another row
    store.vote(channel=CHANNEL, ts="100.2", user=BOB, vote=1, source="button")
    assert sorted((r.user, r.vote) for r in rows(db)) == [(ALICE, -1), (BOB, 1)]


def test_votes_racing_from_many_threads_end_in_one_row(db: Database) -> None:
    answered(db, thread="200.1", ts="200.2")
    store = FeedbackStore(db)
    start = threading.Barrier(8)

    def press(vote: int) -> None:
        start.wait()
        store.vote(channel=CHANNEL, ts="200.2", user=ALICE, vote=vote, source="button")

    threads = [threading.Thread(target=press, args=(1 if i % 2 else -1,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    [row] = rows(db)
    assert row.vote in (1, -1)


def test_what_a_message_is(db: Database) -> None:
    turn = answered(db, thread="300.1", ts="300.2", model="m-b", arm="B")
    with db.session() as s:
        now = utcnow()
        s.add(Run(id="r1", job="tiny-lm", name="n", owner=ALICE, config={}, telemetry_token_hash="x", created_at=now))
        s.flush()
        s.add(RunThread(run_id="r1", channel=CHANNEL, card_ts="400.1", status_seen="running"))
    store = FeedbackStore(db)
    store.remember(CHANNEL, "500.1", "eval", "r1")
    store.remember(CHANNEL, "500.1", "eval", "r1")  # twice: once
    answer = store.target(CHANNEL, "300.2")
    assert answer is not None and (answer.kind, answer.turn_id, answer.model, answer.ab_arm) == (
        "answer",
        turn,
        "m-b",
        "B",
    )
    card = store.target(CHANNEL, "400.1")
    assert card is not None and (card.kind, card.run_id) == ("run", "r1")
    results = store.target(CHANNEL, "500.1")
    assert results is not None and (results.kind, results.run_id) == ("eval", "r1")
    # anything else: nothing is written
    assert store.target(CHANNEL, "999.9") is None
    assert store.vote(channel=CHANNEL, ts="999.9", user=ALICE, vote=1, source="reaction") is None
    assert rows(db) == []


def test_a_reaction_taken_back_takes_back_its_vote_only(db: Database) -> None:
    answered(db, thread="600.1", ts="600.2")
    store = FeedbackStore(db)
    store.vote(channel=CHANNEL, ts="600.2", user=ALICE, vote=1, source="reaction")
    assert not store.unvote(channel=CHANNEL, ts="600.2", user=ALICE, vote=-1)  # not the vote it made
    assert store.unvote(channel=CHANNEL, ts="600.2", user=ALICE, vote=1)
    assert rows(db) == []
    store.vote(channel=CHANNEL, ts="600.2", user=ALICE, vote=1, source="button")
    assert not store.unvote(channel=CHANNEL, ts="600.2", user=ALICE, vote=1)  # a button's vote stays
    assert len(rows(db)) == 1


def test_only_the_voter_comments_and_an_empty_comment_is_refused(db: Database) -> None:
    answered(db, thread="700.1", ts="700.2")
    store = FeedbackStore(db)
    row = store.vote(channel=CHANNEL, ts="700.2", user=ALICE, vote=-1, source="button")
    assert row is not None
    with pytest.raises(BadRequest, match="only they can comment"):
        store.comment(row["id"], user=BOB, text="it was fine")
    with pytest.raises(BadRequest, match="empty"):
        store.comment(row["id"], user=ALICE, text="   ")
    with pytest.raises(UnknownFeedback, match="labbot feedback"):
        store.comment("fbnope22", user=ALICE, text="x")
    done = store.comment(row["id"], user=ALICE, text="  it blamed the loader; the LR was 10x too high ")
    assert done["comment"] == "it blamed the loader; the LR was 10x too high"
    assert store.get(row["id"])["comment"] == done["comment"]
    assert [r["id"] for r in store.recent(vote="down")] == [row["id"]] and store.recent(vote="up") == []
    with pytest.raises(BadRequest, match="up or down"):
        store.recent(vote="meh")
    with pytest.raises(BadRequest, match="answer, run, eval"):
        store.recent(kind="page")


def test_arm_numbers_count_each_arms_answers_and_votes(db: Database) -> None:
    store = FeedbackStore(db)
    for i in range(3):
        answered(db, thread=f"80{i}.1", ts=f"80{i}.2", model="m-a", arm="A")
    answered(db, thread="810.1", ts="810.2", model="m-b", arm="B")
    answered(db, thread="820.1", ts="820.2", model="m-a", arm=None)  # not in the test
    store.vote(channel=CHANNEL, ts="800.2", user=ALICE, vote=1, source="button")
    store.vote(channel=CHANNEL, ts="801.2", user=ALICE, vote=-1, source="button")
    store.vote(channel=CHANNEL, ts="801.2", user=BOB, vote=1, source="reaction")
    store.vote(channel=CHANNEL, ts="810.2", user=BOB, vote=-1, source="button")
    store.vote(channel=CHANNEL, ts="820.2", user=BOB, vote=-1, source="button")
    a, b = store.arm_numbers(("m-a", "m-b"))
    assert (a["arm"], a["answers"], a["up"], a["down"]) == ("A", 3, 2, 1)
    assert (b["arm"], b["answers"], b["up"], b["down"]) == ("B", 1, 0, 1)
    assert a["tokens_per_answer"] == 1500 and a["model_calls_per_answer"] == 2 and a["seconds_per_answer"] == 4.5
    later = store.arm_numbers(("m-a", "m-b"), since=utcnow() + timedelta(hours=1))
    assert [(x["answers"], x["up"] + x["down"]) for x in later] == [(0, 0), (0, 0)]


@pytest.mark.parametrize(
    ("name", "vote"),
    [("+1", 1), ("thumbsup", 1), ("+1::skin-tone-4", 1), ("-1", -1), ("thumbsdown::skin-tone-2", -1), ("tada", None)],
)
def test_which_reactions_are_votes(name: str, vote: int | None) -> None:
    assert vote_of_reaction(name) == vote
