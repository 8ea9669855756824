"""The watchdog and the queue: capacity freed in a tick is given to the queue in that tick, a queued run is neither
reconciled with Ray nor paged (it is not on Ray, however long it waits), and a new watchdog over the same database
(labbot restarted) admits the queue in the same order; and a due restart that a leader which lost its lease would
submit is neither submitted nor paged, but left due for the new leader."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from compute_support import RecordingRay, compute_service
from sqlalchemy import select, update
from support import Clock

from labbot.agents.babysitter.pager import Pager
from labbot.agents.babysitter.policy import PagingPolicy, WatchdogPolicy
from labbot.agents.babysitter.watchdog import Watchdog
from labbot.storage.db import fenced
from labbot.storage.lease import EXPIRED, Fenced, Lease, holder_id
from labbot.storage.models import Incident, LeaderLease, Run
from labbot.training import launcher as launcher_module
from labbot.training.launcher import submission_id
from labbot.training.service import RunService
from labbot.training.specs import LaunchRequest


def _watchdog(service: RunService, clock: Clock) -> Watchdog:
    pager = Pager(service.db, PagingPolicy(), slack=True, pagerduty=False, clock=clock)
    policy = WatchdogPolicy(pending_after_s=60, startup_grace_s=0)
    return Watchdog(service.db, service.launcher, service, pager, policy, address="ray-double", clock=clock)


def test_capacity_freed_is_given_to_the_queue_within_one_tick(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    service, ray = compute_service(tmp_path, monkeypatch, {"training": {"runs": 1}})
    clock = Clock()
    dog = _watchdog(service, clock)
    first = service.launch(LaunchRequest(job="slow", owner="U1")).run
    second = service.launch(LaunchRequest(job="slow", owner="U2")).run
    assert dog.tick().admitted == []
    ray.finish(first["ray_submission_id"])
    report = dog.tick()
    assert report.admitted == [second["id"]], "the run that ended this tick made room in this tick"
    assert service.get(first["id"])["status"] == "succeeded"
    assert service.get(second["id"])["status"] == "pending"
    assert ray.submitted_ids == [first["ray_submission_id"], second["ray_submission_id"]]


def test_a_queued_run_is_not_reconciled_with_ray_nor_paged_however_long_it_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, _ = compute_service(tmp_path, monkeypatch, {"training": {"runs": 1}})
    clock = Clock()
    dog = _watchdog(service, clock)
    service.launch(LaunchRequest(job="slow", owner="U1"))
    waiting = service.launch(LaunchRequest(job="slow", owner="U2")).run
    for hours in (1, 2, 3):  # Ray has no job for it: a run on Ray would be 'lost', and pending for hours a page
        clock.now += timedelta(hours=hours)
        dog.tick()
    assert service.get(waiting["id"])["status"] == "queued"
    with service.db.session() as s:
        assert waiting["id"] not in [i.run_id for i in s.scalars(select(Incident))], "the queued run is not paged"


def test_a_restarted_watchdog_admits_the_queue_in_the_same_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ray = RecordingRay()
    service, _ = compute_service(tmp_path, monkeypatch, {"training": {"runs": 1}}, ray=ray)
    running = service.launch(LaunchRequest(job="slow", owner="U0")).run
    queued = [service.launch(LaunchRequest(job="slow", owner=f"U{i}")).run for i in range(1, 4)]
    service.db.dispose()
    again, _ = compute_service(tmp_path, monkeypatch, {"training": {"runs": 1}}, ray=ray)
    dog = _watchdog(again, Clock())
    order = []
    current = running
    for _ in queued:
        ray.finish(current["ray_submission_id"])
        [admitted] = dog.tick().admitted
        order.append(admitted)
        current = again.get(admitted)
    assert order == [q["id"] for q in queued]


def test_a_due_restart_is_not_sent_to_ray_by_a_leader_that_lost_its_lease_and_stays_due(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tick has committed; the leader is superseded right before its first Ray call that acts (the stop of the
    hung attempt before the restart's submission). It asks Ray nothing, pages nothing about a restart that "could not
    be submitted", and the restart stays due: the new leader's tick makes it."""
    service, ray = compute_service(tmp_path, monkeypatch, None)
    clock = Clock()
    dog = _watchdog(service, clock)
    run = service.launch(LaunchRequest(job="slow", owner="U1")).run
    with service.db.session() as s:  # what _maybe_restart scheduled in an earlier tick: attempt 2, due now
        s.execute(
            update(Run)
            .where(Run.id == run["id"])
            .values(
                status="restarting",
                attempt=2,
                ray_submission_id=submission_id(run["id"], 2),
                restart_at=clock.now - timedelta(seconds=1),
            )
        )
    a = Lease(service.db, holder=holder_id("replica-a"), ttl_s=30.0, clock=lambda: 0.0)
    assert a.step()
    taken: list[Lease] = []
    guard = launcher_module.guard

    def superseded_first(what: str, *, token: int | None = None) -> None:
        if not taken:
            with fenced(None):
                with service.db.session() as s:
                    s.execute(update(LeaderLease).values(expires_at=EXPIRED))
                taken.append(Lease(service.db, holder=holder_id("replica-b"), ttl_s=30.0))
                assert taken[0].step()
        guard(what, token=token)

    monkeypatch.setattr(launcher_module, "guard", superseded_first)
    with pytest.raises(Fenced, match=f"stopping {run['ray_submission_id']} on Ray is refused"), fenced(a):
        dog.tick()
    assert ray.stopped == [] and ray.submitted_ids == [run["ray_submission_id"]]
    with service.db.session() as s:
        row = s.get_one(Run, run["id"])
        assert (row.status, row.restart_at is not None) == ("restarting", True), "still due"
        assert list(s.scalars(select(Incident))) == [], "nothing paged about it"

    with fenced(taken[0]):
        assert dog.tick().restarts_submitted == 1
    assert ray.stopped == [run["ray_submission_id"]]
    assert ray.submitted_ids == [run["ray_submission_id"], submission_id(run["id"], 2)]
