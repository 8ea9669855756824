"""The leader lease (``labbot.storage.lease``) on SQLite and the real PostgreSQL server: one holder at a time, a
takeover only after expiry (or a release), fenced writes refused once the lease is lost, and side effects outside
the database too (``guard``/``aguard``: by the database, by the deadline, by the claiming token), a stopped leader's
open transaction closed by PostgreSQL so the takeover gets through, and SQLite's second replica refused."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from databases import refuse_connections
from sqlalchemy import event, func, select
from support import wait_for

from labbot.common.errors import DatabaseUnavailable
from labbot.storage.db import Database, fenced
from labbot.storage.lease import Fenced, Lease, SecondReplica, aguard, claim_token, guard, holder_id
from labbot.storage.models import LeaderLease, SeenKey

pytestmark = pytest.mark.databases


class Frozen:
    """A monotonic clock that stands still: a replica that checked its deadline and was then paused (what it
    believes is what it saw before the pause), so only the database's token can stop it."""

    def __call__(self) -> float:
        return 0.0


def mark(db: Database, key: str) -> None:
    """A write a singleton makes."""
    with db.session() as s:
        s.add(SeenKey(key=key, seen_at=datetime.now(UTC)))


def marked(db: Database, key: str) -> bool:
    with db.session() as s:
        return s.get(SeenKey, key) is not None


@pytest.fixture
def other_db(database_url: str) -> Iterator[Database]:
    """The same database as another replica's handle (its own pool)."""
    other = Database(database_url)
    yield other
    other.dispose()


def test_one_holder_renews_and_the_other_follows_until_the_lease_expires(db: Database, other_db: Database) -> None:
    a = Lease(db, holder=holder_id("replica-a"), ttl_s=1.0)
    b = Lease(other_db, holder=holder_id("replica-b"), ttl_s=1.0)
    assert a.step() is True and a.token == 1 and a.held()
    assert b.step() is False and not b.held() and b.token is None
    assert b.last.holder == a.holder  # the follower knows who leads (/readyz says so)
    for _ in range(3):  # renewed within the TTL, the lease stays A's
        time.sleep(0.3)
        assert a.step() is True and b.step() is False
    # A stops renewing (killed): its own deadline passes first, then B takes it with the next token
    wait_for(lambda: not a.held(), timeout=5, what="A's local deadline")
    wait_for(b.step, timeout=5, interval=0.05, what="B taking the expired lease")
    assert b.token == 2 and b.held()
    assert a.step() is False and a.token is None  # A back: its renewal finds B's token, it follows
    with db.session() as s:
        row = s.get_one(LeaderLease, "singletons")
        assert (row.holder, row.token) == (b.holder, 2)


def test_a_released_lease_is_taken_at_the_next_step_not_after_the_ttl(db: Database, other_db: Database) -> None:
    a = Lease(db, holder=holder_id("replica-a"), ttl_s=60.0)
    b = Lease(other_db, holder=holder_id("replica-b"), ttl_s=60.0)
    assert a.step() and not b.step()
    a.release()
    assert not a.held()
    assert b.step() is True and b.token == 2


def test_fenced_writes_pass_while_held_and_are_refused_once_another_took_the_lease(
    db: Database, other_db: Database
) -> None:
    paused = Lease(db, holder=holder_id("replica-a"), ttl_s=1.0, clock=Frozen())
    assert paused.step()
    with fenced(paused):
        mark(db, "lease:before")  # the leader writes
    assert marked(db, "lease:before")
    # B's own lease long enough that a loaded machine's pause before its post is not B's expiry (it once was)
    b = Lease(other_db, holder=holder_id("replica-b"), ttl_s=30.0)
    wait_for(b.step, timeout=5, interval=0.05, what="B taking the lease A stopped renewing")
    assert paused.held()  # by its own (stopped) clock A still leads: only the fence can stop it
    with pytest.raises(Fenced, match="lost the singletons lease"), fenced(paused):
        mark(db, "lease:after")
    assert not marked(db, "lease:after")  # refused, not committed
    with fenced(b):
        mark(db, "lease:new-leader")  # the new leader's writes go through
    with pytest.raises(Fenced, match="does not hold"), fenced(paused):
        mark(db, "lease:again")  # A knows now
    mark(db, "lease:unfenced")  # outside the fence (an API request on A) nothing is checked


def test_a_fenced_write_after_the_local_deadline_is_refused_before_it_reaches_the_database(db: Database) -> None:
    now = [0.0]
    lease = Lease(db, holder=holder_id("replica-a"), ttl_s=2.0, clock=lambda: now[0])
    assert lease.step()
    now[0] = 1.5  # past ttl - margin (2.0 - 0.5): it may not act as leader any more, even though nobody took over
    with pytest.raises(Fenced, match="does not hold"), fenced(lease):
        mark(db, "lease:late")
    assert not marked(db, "lease:late")
    now[0] = 1.6
    assert lease.step() and lease.token == 1  # still its row: renewed under the same token


def test_a_side_effect_is_guarded_by_the_database_then_the_deadline_and_the_claiming_token(
    db: Database, other_db: Database
) -> None:
    """``guard`` (and ``aguard``) before a side effect outside the database: nothing outside a fence; inside one,
    refused once another replica took the lease (the paused replica's clock has not moved: the database says), once
    the local deadline passed, and for work claimed under a token this replica no longer holds."""
    guard("a post outside any fence")  # an API request's: no lease to check, nothing asked of the database
    assert claim_token() is None
    now = [0.0]
    paused = Lease(db, holder=holder_id("replica-a"), ttl_s=1.0, clock=lambda: now[0])
    assert paused.step()
    with fenced(paused):
        guard("a post")
        asyncio.run(aguard("a post", token=1))
        assert claim_token() == 1
        with pytest.raises(Fenced, match="claimed under the singletons lease's token 7"):
            guard("delivery 3", token=7)
        now[0] = 0.8  # past ttl - margin (1.0 - 0.25), and nobody took over
        with pytest.raises(Fenced, match="does not hold the singletons lease now: a late post is refused"):
            guard("a late post")
    now[0] = 0.0  # as a replica paused and resumed believes
    # B's own lease long enough that a loaded machine's pause before its post is not B's expiry (it once was)
    b = Lease(other_db, holder=holder_id("replica-b"), ttl_s=30.0)
    wait_for(b.step, timeout=5, interval=0.05, what="B taking the lease A stopped renewing")
    assert paused.held()
    with fenced(paused), pytest.raises(Fenced, match=r"lost the singletons lease .*: posting the page is refused"):
        asyncio.run(aguard("posting the page", token=1))
    with fenced(b):
        guard("the new leader's post", token=2)


def test_a_fenced_session_of_another_database_is_not_this_leases_to_check(db: Database, tmp_path: object) -> None:
    lease = Lease(db, holder=holder_id("replica-a"), ttl_s=5.0)
    assert not lease.held()
    other = Database(f"sqlite:///{tmp_path}/other.db")
    try:
        other.upgrade()
        with fenced(lease):
            mark(other, "lease:elsewhere")
        assert marked(other, "lease:elsewhere")
    finally:
        other.dispose()


def test_racing_replicas_take_a_free_lease_once(database_url: str) -> None:
    handles = [Database(database_url) for _ in range(6)]
    leases = [Lease(h, holder=holder_id(f"replica-{i}"), ttl_s=30.0) for i, h in enumerate(handles)]
    barrier = threading.Barrier(len(leases))
    won: list[bool] = [False] * len(leases)

    def race(i: int) -> None:
        barrier.wait()
        won[i] = leases[i].step()

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(leases))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(won) == 1
        with handles[0].session() as s:
            assert s.scalar(select(func.count()).select_from(LeaderLease)) == 1
    finally:
        for h in handles:
            h.dispose()


# -- SQLite: one replica ---------------------------------------------------------------------------------------


def test_sqlite_refuses_a_second_live_replica_and_takes_over_from_a_dead_one(db: Database, backend: str) -> None:
    if backend != "sqlite":
        pytest.skip("SQLite's rule: PostgreSQL takes any number of replicas")
    name = holder_id("host-a").split(":")[0]
    alive = subprocess.Popen(["sleep", "60"])  # another live process on this host holds it
    try:
        first = Lease(db, holder=f"{name}:{alive.pid}:aaaa0000", ttl_s=30.0)
        assert first.step()
        second = Lease(db, holder=f"{name}:{os.getpid()}:bbbb1111", ttl_s=30.0)
        with pytest.raises(SecondReplica) as refused:
            second.claim_sole(database="sqlite:///labbot.db")
        message = refused.value.message
        assert f"{alive.pid}" in message and "SQLite serves one replica" in message
        assert "LABBOT_DATABASE_URL=postgresql://" in message
        alive.kill()
        alive.wait()
        assert second.claim_sole(database="sqlite:///labbot.db") == 2  # its holder was killed: taken at once
    finally:
        alive.kill()
        alive.wait()
    again = Lease(db, holder=f"{name}:{os.getpid()}:cccc2222", ttl_s=30.0)  # this pid, a later incarnation
    assert again.claim_sole(database="sqlite:///labbot.db") == 3
    elsewhere = Lease(db, holder=f"other-host:{os.getpid()}:dddd3333", ttl_s=30.0)
    with pytest.raises(SecondReplica):  # a holder on another host: not expired, so alive for all it knows
        elsewhere.claim_sole(database="sqlite:///labbot.db")


# -- PostgreSQL: a stopped leader, the database away --------------------------------------------------------------


def test_a_leader_stopped_mid_transaction_is_cut_by_postgresql_and_its_write_lost(
    db: Database, other_db: Database, backend: str
) -> None:
    if backend != "postgresql":
        pytest.skip("idle_in_transaction_session_timeout is PostgreSQL's")
    paused = Lease(db, holder=holder_id("replica-a"), ttl_s=1.0, idle_timeout_s=2.0, clock=Frozen())
    assert paused.step()
    outcome: list[BaseException | None] = []
    in_transaction = threading.Event()

    def stopped_mid_write() -> None:
        try:
            with fenced(paused), db.session() as s:
                s.add(SeenKey(key="lease:stopped", seen_at=datetime.now(UTC)))
                s.flush()
                in_transaction.set()
                time.sleep(4)  # SIGSTOP: the transaction stays open, holding the row FOR KEY SHARE
        except BaseException as e:
            outcome.append(e)
        else:
            outcome.append(None)

    t = threading.Thread(target=stopped_mid_write)
    t.start()
    assert in_transaction.wait(10)
    b = Lease(other_db, holder=holder_id("replica-b"), ttl_s=1.0, lock_timeout_s=0.3)
    started = time.monotonic()
    took = wait_for(b.step, timeout=15, interval=0.1, what="B taking over once PostgreSQL closed A's transaction")
    assert took and b.token == 2
    assert time.monotonic() - started < 8  # ≈ the idle timeout (2 s), not A's pause
    t.join(20)
    assert outcome and isinstance(outcome[0], DatabaseUnavailable)  # A's commit: its connection was closed
    assert not marked(other_db, "lease:stopped")


def test_renewal_does_not_wait_for_the_holders_own_open_transaction(
    db: Database, other_db: Database, backend: str
) -> None:
    if backend != "postgresql":
        pytest.skip("row locks: PostgreSQL's")
    lease = Lease(db, holder=holder_id("replica-a"), ttl_s=5.0)
    assert lease.step()
    release = threading.Event()
    opened = threading.Event()

    def long_tick() -> None:
        with fenced(lease), db.session() as s:
            s.add(SeenKey(key="lease:tick", seen_at=datetime.now(UTC)))
            s.flush()
            opened.set()
            release.wait(10)

    t = threading.Thread(target=long_tick)
    t.start()
    try:
        assert opened.wait(10)
        started = time.monotonic()
        assert lease.step()  # FOR NO KEY UPDATE does not conflict with the tick's FOR KEY SHARE
        assert time.monotonic() - started < 1.0
        follower = Lease(other_db, holder=holder_id("replica-b"), ttl_s=5.0, lock_timeout_s=0.2)
        assert follower.step() is False  # not expired (and the row is locked): it follows, quickly
    finally:
        release.set()
        t.join(10)
    assert marked(db, "lease:tick")


def test_the_database_away_is_a_503_error_and_the_lease_holds_until_its_deadline(
    db: Database, database_url: str, backend: str
) -> None:
    if backend != "postgresql":
        pytest.skip("a server to refuse connections: PostgreSQL's")
    lease = Lease(db, holder=holder_id("replica-a"), ttl_s=3.0)
    assert lease.step()
    refuse_connections(database_url)
    try:
        with pytest.raises(DatabaseUnavailable) as away:
            mark(db, "lease:away")
        assert away.value.status == 503 and "try again" in away.value.message
        assert lease.step() is True  # cannot renew: leads on until its own deadline…
        wait_for(lambda: not lease.step(), timeout=10, what="the deadline passing with the database away")
    finally:
        refuse_connections(database_url, refuse=False)
    wait_for(lease.step, timeout=10, what="the lease again once the database answers")
    mark(db, "lease:back")


def test_the_holders_own_deadline_ends_before_the_databases_expiry(db: Database) -> None:
    """A leader that stops renewing stops acting before anyone else may start: what it has left by its own clock is
    less than what the row has left by the database's, by at least the margin."""
    lease = Lease(db, holder=holder_id("replica-a"), ttl_s=6.0)
    for _ in range(3):
        assert lease.step()
        mine = lease.seconds_left()
        with db.session() as s:
            row = s.get_one(LeaderLease, "singletons")
            now = s.execute(select(func.now())).scalar_one() if db.dialect == "postgresql" else datetime.now(UTC)
            theirs = (row.expires_at - now.astimezone(UTC)).total_seconds()
        assert mine <= theirs - lease.margin_s + 0.05, (mine, theirs)
        time.sleep(0.2)


def test_a_leader_stopped_mid_renewal_does_not_hold_the_takeover_up(
    db: Database, other_db: Database, backend: str
) -> None:
    if backend != "postgresql":
        pytest.skip("row locks and idle_in_transaction_session_timeout: PostgreSQL's")
    paused = Lease(db, holder=holder_id("replica-a"), ttl_s=1.0, idle_timeout_s=2.0)
    assert paused.step()
    updated = threading.Event()

    def stop_after_the_update(conn: Any, clause: Any, *_: Any) -> None:
        if not updated.is_set() and "UPDATE leader_lease" in str(clause):
            updated.set()
            time.sleep(5)  # SIGSTOP between the renewal's UPDATE (the row's lock taken) and its COMMIT

    event.listen(db.engine, "after_execute", stop_after_the_update)
    renewed: list[bool] = []
    t = threading.Thread(target=lambda: renewed.append(paused.step()))
    t.start()
    try:
        assert updated.wait(10)
        b = Lease(other_db, holder=holder_id("replica-b"), ttl_s=1.0, lock_timeout_s=0.3)
        started = time.monotonic()
        wait_for(b.step, timeout=15, interval=0.1, what="B taking over past A's renewal")
        assert time.monotonic() - started < 8 and b.token == 2
    finally:
        t.join(20)
        event.remove(db.engine, "after_execute", stop_after_the_update)
    assert renewed == [False]  # A's renewal never committed: it follows
    assert b.step() is True and paused.step() is False  # B renewed: A, back, follows
