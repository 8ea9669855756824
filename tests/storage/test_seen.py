"""Acting once across restarts and replicas: ``DurableSeenKeys`` on the database."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from labbot.storage.db import Database
from labbot.storage.models import SeenKey
from labbot.storage.seen import DurableSeenKeys

pytestmark = pytest.mark.databases


def test_a_key_is_new_once_and_stays_seen_for_another_process_on_the_same_database(
    db: Database, database_url: str
) -> None:
    seen = DurableSeenKeys(db, ttl_s=3600)
    assert seen.first_time("command:1.a") is True
    assert seen.first_time("command:1.a") is False
    assert seen.first_time("action:1.a") is True  # the kind is part of the key
    other = Database(database_url)  # labbot restarted, or another replica
    try:
        assert DurableSeenKeys(other, ttl_s=3600).first_time("command:1.a") is False
    finally:
        other.dispose()


def test_racing_callers_see_a_key_first_exactly_once(db: Database) -> None:
    seen = [DurableSeenKeys(db, ttl_s=3600) for _ in range(8)]  # one per replica
    start, firsts = threading.Barrier(len(seen)), []

    def go(keys: DurableSeenKeys) -> None:
        start.wait()
        firsts.append(keys.first_time("command:race"))

    threads = [threading.Thread(target=go, args=(keys,)) for keys in seen]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(firsts) == [False] * 7 + [True]


def test_keys_past_their_time_are_new_again_and_pruned(db: Database) -> None:
    now = [datetime(2026, 12, 1, 12, 0, tzinfo=UTC)]
    seen = DurableSeenKeys(db, ttl_s=60, prune_every_s=0, clock=lambda: now[0])
    assert seen.first_time("command:old") and seen.first_time("command:older")
    now[0] += timedelta(seconds=61)
    assert seen.first_time("command:old") is True  # remembered past its time: acted on again (once)
    assert seen.first_time("command:old") is False
    with db.session() as s:  # the other old row went with the prune that ran before that first call
        assert s.scalar(select(func.count()).select_from(SeenKey)) == 1
    # between prunes, an expired row is renewed in place, for one caller
    rarely = DurableSeenKeys(db, ttl_s=60, prune_every_s=3600, clock=lambda: now[0])
    assert rarely.first_time("action:x") is True
    now[0] += timedelta(seconds=61)
    assert rarely.first_time("action:x") is True and rarely.first_time("action:x") is False


def test_an_overlong_key_is_refused_with_what_fits(db: Database) -> None:
    with pytest.raises(ValueError, match="at most 200 characters, got 201"):
        DurableSeenKeys(db, ttl_s=60).first_time("k" * 201)
