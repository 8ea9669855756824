"""The control plane's side of the leader lease: singletons run only on the leader, inside the fence; a follower's
button-driven drain leaves the outbox to the leader; a new leader recovers the outbox once, and again when it took
the lease back under a new token. A real ``ControlPlane``
(SQLite, Ray unreachable: nothing here needs it)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from labbot.bot.config import Settings
from labbot.bot.serve import ControlPlane
from labbot.storage.db import Database, fenced
from labbot.storage.lease import Lease, holder_id
from labbot.storage.models import Delivery, SeenKey

UNREACHABLE_RAY = "http://127.0.0.1:9"


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[ControlPlane]:
    env = {"LABBOT_HOME": str(tmp_path / "home"), "RAY_ADDRESS": UNREACHABLE_RAY}
    built = ControlPlane.build(Settings.from_env(env))
    try:
        yield built
    finally:
        built.close()


def test_a_singleton_runs_on_the_leader_inside_the_fence_and_not_on_a_follower(plane: ControlPlane) -> None:
    lease = plane.lease
    assert lease is not None and lease.held()  # SQLite: the sole replica took it in build()
    calls: list[str] = []

    async def job() -> None:
        calls.append("ran")
        with plane.db.session() as s:  # fenced: the token is checked first
            s.add(SeenKey(key="singleton:write", seen_at=datetime.now(UTC)))

    asyncio.run(plane.singleton(job)())
    assert calls == ["ran"]
    lease.release()
    assert not plane.is_leader()
    asyncio.run(plane.singleton(job)())  # a follower: not run at all
    assert calls == ["ran"]


def test_a_singleton_whose_lease_was_taken_mid_way_has_its_write_refused_and_said(
    plane: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    lease = plane.lease
    assert lease is not None
    other = Database(plane.db.url)
    try:

        async def job() -> None:
            with fenced(None):  # … another replica takes it, between this job's start and its write
                lease.release()
                assert Lease(other, holder=holder_id("other"), ttl_s=30).step()
            lease._token, lease._deadline = 1, float("inf")  # as a paused replica still believes
            with plane.db.session() as s:
                s.add(SeenKey(key="singleton:late", seen_at=datetime.now(UTC)))

        with caplog.at_level(logging.WARNING, logger="labbot"):
            asyncio.run(plane.singleton(job)())  # Fenced: caught and logged, not raised into the scheduler
        with plane.db.session() as s:
            assert s.get(SeenKey, "singleton:late") is None
        assert any("lost the singletons lease" in r.getMessage() for r in caplog.records)
    finally:
        other.dispose()


def test_becoming_leader_recovers_cut_off_deliveries_once_and_a_follower_leaves_them(plane: ControlPlane) -> None:
    lease = plane.lease
    assert lease is not None
    with plane.db.session() as s:
        s.add(
            Delivery(
                key="cut-off", channel="slack", action="post", target="thread", payload={}, state="sending",
                attempts=1, next_attempt_at=datetime.now(UTC), created_at=datetime.now(UTC),
            )
        )  # fmt: skip
    lease.release()
    asyncio.run(plane.lead())  # free: taken, and the outbox's cut-off delivery goes back to the queue
    assert plane.is_leader()
    with plane.db.session() as s:
        assert s.query(Delivery).filter_by(key="cut-off").one().state == "pending"
        s.query(Delivery).filter_by(key="cut-off").one().state = "sending"  # sent again, cut off again
    asyncio.run(plane.lead())  # still leader: a renewal, no second recovery under its own feet
    with plane.db.session() as s:
        assert s.query(Delivery).filter_by(key="cut-off").one().state == "sending"
    lease.release()
    asyncio.run(plane.drain_outbox_if_leader())  # a follower's button: nothing drained, nothing claimed
    with plane.db.session() as s:
        assert s.query(Delivery).filter_by(key="cut-off").one().state == "sending"


def test_a_lease_taken_back_under_a_new_token_between_two_checks_recovers_the_outbox(plane: ControlPlane) -> None:
    """Lost and taken back between two lease checks (the lead never seen as lost): deliveries claimed under the old
    token were cut off all the same, and the outbox refuses to record them under the new one, so they go back to the
    queue."""
    lease = plane.lease
    assert lease is not None
    asyncio.run(plane.lead())
    assert plane.is_leader() and lease.token == 1
    with plane.db.session() as s:
        s.add(
            Delivery(
                key="claimed-under-1", channel="slack", action="post", target="thread", payload={}, state="sending",
                attempts=1, claim_token=1, next_attempt_at=datetime.now(UTC), created_at=datetime.now(UTC),
            )
        )  # fmt: skip
    lease.release()
    assert lease.step() and lease.token == 2  # taken back before `lead` looked
    asyncio.run(plane.lead())
    with plane.db.session() as s:
        assert s.query(Delivery).filter_by(key="claimed-under-1").one().state == "pending"
