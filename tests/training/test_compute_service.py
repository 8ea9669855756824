"""RunService with [compute] caps: launches admitted or queued race-free (threads, and two services over one database
as two processes would be), a queued run stopped never reaching Ray, the queue surviving a restart in order,
--no-queue refused with the numbers, priorities, purposes, nothing changed without [compute], and a leader that lost
its lease asking Ray nothing (its admitted runs queued again)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from compute_support import RecordingRay, compute_service
from sqlalchemy import func, select, update

from labbot.common.errors import BadRequest, Conflict
from labbot.storage.db import Database, fenced
from labbot.storage.lease import EXPIRED, Fenced, Lease, holder_id
from labbot.storage.models import LeaderLease, Run
from labbot.training import service as service_module
from labbot.training.launcher import Submission
from labbot.training.service import RunService
from labbot.training.specs import LaunchRequest

pytestmark = pytest.mark.databases  # the admission lock holds on SQLite's write lock and PostgreSQL's row lock

CAP = {"training": {"cpus": 3}}  # the `slow` job asks 2 CPUs: one fits, two do not


def _launch_at_once(services: list[RunService], n: int) -> list[dict[str, Any]]:
    barrier = threading.Barrier(n)
    results: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def go(i: int) -> None:
        try:
            barrier.wait()
            results.append(services[i % len(services)].launch(LaunchRequest(job="slow", owner=f"U{i}")).run)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def test_two_launches_at_once_that_each_fit_alone_but_not_together_one_runs_one_queued(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, ray = compute_service(tmp_path, monkeypatch, CAP, database_url=database_url)
    runs = _launch_at_once([service], 2)
    assert sorted(r["status"] for r in runs) == ["pending", "queued"]
    queued = next(r for r in runs if r["status"] == "queued")
    assert queued["queue_position"] == 1 and queued["purpose"] == "training"
    assert len(ray.submitted) == 1, "only the admitted run reached Ray"


def test_eight_launches_at_once_from_two_services_over_one_database_admit_exactly_one(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two RunServices (their own engines and process locks, as two labbot processes) share only the database: the
    admission lock row alone keeps the cap. The decision waits (briefly) for a second one to be made beside it: without
    the lock both would be taken against the same view; with it the second never comes and the wait gives up."""
    together = threading.Barrier(2)
    real_decide = service_module.decide

    def decide_beside_another(*args: Any) -> Any:
        with contextlib.suppress(threading.BrokenBarrierError):
            together.wait(timeout=0.3)
        return real_decide(*args)

    monkeypatch.setattr(service_module, "decide", decide_beside_another)
    ray = RecordingRay()
    one, _ = compute_service(tmp_path, monkeypatch, CAP, ray=ray, database_url=database_url)
    other, _ = compute_service(tmp_path, monkeypatch, CAP, ray=ray, database_url=database_url)
    runs = _launch_at_once([one, other], 8)
    assert sorted(r["status"] for r in runs).count("pending") == 1
    assert len(ray.submitted) == 1
    assert sorted(r["queue_position"] for r in one.runs() if r["status"] == "queued") == list(range(1, 8))


def test_a_queued_run_stopped_before_it_starts_never_reaches_ray(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, ray = compute_service(tmp_path, monkeypatch, CAP, database_url=database_url)
    first = service.launch(LaunchRequest(job="slow", owner="U1")).run
    waiting = service.launch(LaunchRequest(job="slow", owner="U2"))
    assert waiting.run["status"] == "queued" and "it waits 1st in line" in (waiting.queued or "")
    stopped = service.stop(waiting.run["id"], by="U2")
    assert stopped["status"] == "stopped" and "while queued" in stopped["error"]
    ray.finish(first["ray_submission_id"])
    service.stop(first["id"])  # capacity freed (and the queue offered it at once)
    assert service.admit_queued() == []
    assert all(waiting.run["id"] not in sid for sid in ray.submitted_ids + ray.stopped)


def test_a_stop_frees_capacity_for_the_queue_at_once(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, ray = compute_service(tmp_path, monkeypatch, CAP, database_url=database_url)
    first = service.launch(LaunchRequest(job="slow", owner="U1")).run
    second = service.launch(LaunchRequest(job="slow", owner="U2")).run
    service.stop(first["id"])
    assert service.get(second["id"])["status"] == "pending"
    assert ray.submitted_ids[-1] == second["ray_submission_id"]


def test_the_queue_survives_a_restart_in_order(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ray = RecordingRay()
    service, _ = compute_service(tmp_path, monkeypatch, {"training": {"runs": 1}}, ray=ray, database_url=database_url)
    running = service.launch(LaunchRequest(job="slow", owner="U0")).run
    queued = [service.launch(LaunchRequest(job="slow", owner=f"U{i}")).run["id"] for i in range(1, 5)]
    service.set_priority(queued[2], 5)  # an admin moved the third to the head
    service.db.dispose()

    again, _ = compute_service(
        tmp_path, monkeypatch, {"training": {"runs": 1}}, ray=ray, database_url=database_url
    )  # labbot restarted
    assert [r["id"] for r in sorted(again.runs(status="queued"), key=lambda r: r["queue_position"])] == [
        queued[2], queued[0], queued[1], queued[3],
    ]  # fmt: skip
    order = []
    current = running
    for _ in queued:
        ray.finish(current["ray_submission_id"])
        with again.db.session() as s:  # what the watchdog's reconcile does when Ray says SUCCEEDED
            s.get_one(Run, current["id"]).status = "succeeded"
        [admitted] = again.admit_queued()
        order.append(admitted)
        current = again.get(admitted)
    assert order == [queued[2], queued[0], queued[1], queued[3]]


def test_no_queue_is_refused_with_the_numbers_and_nothing_is_written(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, ray = compute_service(
        tmp_path, monkeypatch, {"training": {"runs": 1, "cpus": 3}}, database_url=database_url
    )
    service.launch(LaunchRequest(job="slow", owner="U1"))
    with pytest.raises(Conflict) as e:
        service.launch(LaunchRequest(job="slow", owner="U2", no_queue=True, idempotency_key="k1"))
    assert e.value.status == 409
    assert e.value.message == (
        "not launched: training is at 1 of 1 run and 2 of 3 CPUs; this launch needs 2 CPUs; "
        "without --no-queue it would wait 1st in line"
    )
    with service.db.session() as s:
        assert s.scalar(select(func.count()).select_from(Run)) == 1
    assert len(ray.submitted) == 1


def test_a_launch_over_an_explicit_cap_is_refused_at_once(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, _ = compute_service(tmp_path, monkeypatch, {"training": {"gpus": 1}}, database_url=database_url)
    with pytest.raises(BadRequest, match="this launch needs 2 GPUs but training is capped at 1 GPU; it could never"):
        service.launch(LaunchRequest(job="slow", owner="U1", gpus=2))


def test_a_share_reads_rays_totals_briefly_cached(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, ray = compute_service(
        tmp_path, monkeypatch, {"training": {"share": 0.25}}, ray=RecordingRay(cpus=8), database_url=database_url
    )
    statuses = [service.launch(LaunchRequest(job="slow", owner="U1")).run["status"] for _ in range(3)]
    assert statuses == ["pending", "queued", "queued"]  # 0.25 of 8 CPUs: one 2-CPU run
    assert ray.node_reads == 1
    ray.nodes.append({"state": "ALIVE", "resources_total": {"CPU": 8}})  # the cluster grew
    service.totals_ttl_s = 0
    assert service.admit_queued() != [] and ray.node_reads == 2


def test_purpose_comes_from_the_job_or_the_launch_and_is_checked(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, _ = compute_service(
        tmp_path,
        monkeypatch,
        None,
        jobs={"probe": {"entrypoint": "true", "purpose": "data"}},
        database_url=database_url,
    )
    assert service.launch(LaunchRequest(job="slow", owner="U1")).run["purpose"] == "training"
    assert service.launch(LaunchRequest(job="probe", owner="U1")).run["purpose"] == "data"
    run = service.launch(LaunchRequest(job="slow", owner="U1", purpose="research")).run
    assert (run["purpose"], run["priority"], run["queue_position"]) == ("research", 0, None)
    with service.db.session() as s:
        assert s.get_one(Run, run["id"]).purpose == "research"
    with pytest.raises(BadRequest, match="purpose 'fun' is not a purpose; purposes: training, eval, data, research"):
        service.launch(LaunchRequest(job="slow", owner="U1", purpose="fun"))
    assert service.registry.get("eval").purpose == "eval" and service.registry.get("eval-generate").purpose == "data"


def test_without_compute_nothing_waits_and_ray_is_asked_for_its_nodes_once(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, ray = compute_service(tmp_path, monkeypatch, None, database_url=database_url)
    runs = _launch_at_once([service], 6)
    assert {r["status"] for r in runs} == {"pending"} and len(ray.submitted) == 6
    # no totals to decide from; the one read is whether the cluster has more than one node (checkpoints in a local
    # folder), cached like the totals
    assert ray.node_reads == 1 and service.admit_queued() == []
    service.checkpoints_shared = True
    service.totals_ttl_s = 0
    _launch_at_once([service], 2)
    assert ray.node_reads == 1  # checkpoints every node reaches: nothing to ask


def test_priority_is_checked_and_a_restart_of_a_queued_run_is_refused(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, _ = compute_service(tmp_path, monkeypatch, CAP, database_url=database_url)
    service.launch(LaunchRequest(job="slow", owner="U1"))
    waiting = service.launch(LaunchRequest(job="slow", owner="U2")).run
    with pytest.raises(BadRequest, match="from -1000 to 1000"):
        service.set_priority(waiting["id"], 5000)
    with pytest.raises(Conflict, match="is queued for training and has not started"):
        service.restart(waiting["id"])
    service.stop(waiting["id"])
    with pytest.raises(Conflict, match="already stopped; a priority orders only queued runs"):
        service.set_priority(waiting["id"], 1)


def test_capacity_shows_use_against_each_cap_who_and_the_queue(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, _ = compute_service(tmp_path, monkeypatch, CAP, database_url=database_url)
    first = service.launch(LaunchRequest(job="slow", owner="U1")).run
    second = service.launch(LaunchRequest(job="slow", owner="U2")).run
    doc = service.capacity()
    assert doc["caps_set"] and {k: doc["cluster"][k] for k in ("cpus", "gpus")} == {"cpus": 16.0, "gpus": 4.0}
    assert [n["resources"] for n in doc["cluster"]["nodes"]] == [{"CPU": 16.0, "GPU": 4.0}]  # Ray's memory left out
    [training] = doc["purposes"]
    assert training["limits"]["cpus"] == 3 and training["use"] == {"runs": 1, "cpus": 2.0, "gpus": 0.0}
    assert [r["run_id"] for r in training["running"]] == [first["id"]] and training["owners"] == ["U1"]
    assert training["queued"] == [{"run_id": second["id"], "owner": "U2", "cpus": 2.0, "gpus": 0.0}]


# -- the leader lease: the queue's admissions are a singleton's (the watchdog's tick) ----------------------------


def _leases(db: Database) -> tuple[Lease, Callable[[], Lease]]:
    """Replica a leads (its clock stood still: only the database can tell it it lost); the second is the takeover:
    a's row expired (as its TTL would), then taken by replica b with the next token."""
    a = Lease(db, holder=holder_id("replica-a"), ttl_s=30.0, clock=lambda: 0.0)
    with fenced(None):
        assert a.step()

    def take_over() -> Lease:
        with fenced(None):
            with db.session() as s:
                s.execute(update(LeaderLease).values(expires_at=EXPIRED))
            b = Lease(db, holder=holder_id("replica-b"), ttl_s=30.0)
            assert b.step()
        return b

    return a, take_over


def test_a_singletons_ray_calls_are_refused_once_its_lease_is_lost_and_an_api_requests_are_not(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, ray = compute_service(tmp_path, monkeypatch, CAP, database_url=database_url)
    a, take_over = _leases(service.db)
    sub = Submission(submission_id="labbot-zz9-1", entrypoint="sleep 1", runtime_env={}, metadata={})
    with fenced(a):
        service.launcher.stop("labbot-zz8-1")  # while it leads: made
        take_over()
        with pytest.raises(Fenced, match="the submission of labbot-zz9-1 to Ray is refused"):
            service.launcher.submit(sub)
        with pytest.raises(Fenced, match="stopping labbot-zz8-2 on Ray is refused"):
            service.launcher.stop("labbot-zz8-2")
    assert ray.submitted == [] and ray.stopped == ["labbot-zz8-1"]
    service.launcher.stop("labbot-zz8-3")  # outside a fence (an API request, any replica's): nothing to check
    assert ray.stopped == ["labbot-zz8-1", "labbot-zz8-3"]


def test_runs_admitted_by_a_leader_superseded_before_submitting_them_go_back_to_the_queue(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watchdog's admission decides under the lease, then submits: a leader superseded in between asks Ray
    nothing, and the runs it admitted are queued again (not left pending without a job, to be failed as lost), for
    the new leader to admit."""
    service, ray = compute_service(tmp_path, monkeypatch, {"training": {"runs": 2}}, database_url=database_url)
    running = service.launch(LaunchRequest(job="slow", owner="U0")).run
    service.launch(LaunchRequest(job="slow", owner="U1"))
    queued = [service.launch(LaunchRequest(job="slow", owner=f"U{i}")).run["id"] for i in (2, 3)]
    with service.db.session() as s:  # the running ones end (what the watchdog's reconcile records)
        s.execute(update(Run).where(Run.status == "pending").values(status="succeeded"))
    submitted = list(ray.submitted_ids)
    a, take_over = _leases(service.db)
    taken: list[Lease] = []
    send = service._send

    def superseded_first(run_id: str, **kwargs: Any) -> None:
        if not taken:
            taken.append(take_over())  # a paused between the admission's commit and its submission
        send(run_id, **kwargs)

    monkeypatch.setattr(service, "_send", superseded_first)
    with pytest.raises(Fenced), fenced(a):
        service.admit_queued()
    assert ray.submitted_ids == submitted, "Ray was asked nothing"
    assert [service.get(r)["status"] for r in queued] == ["queued", "queued"]
    assert running["ray_submission_id"] in submitted

    with fenced(taken[0]):
        assert service.admit_queued() == queued  # the new leader admits them, in their order
    assert ray.submitted_ids[-2:] == [service.get(r)["ray_submission_id"] for r in queued]


def test_the_nodes_with_cpus_are_counted_alive_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    service, ray = compute_service(tmp_path, monkeypatch, None)
    service.totals_ttl_s = 0.0
    assert service.nodes_with_cpus() == 1
    ray.nodes.append({"state": "ALIVE", "is_head_node": True, "resources_total": {"CPU": 0.0, "memory": 1e9}})
    ray.nodes.append({"state": "DEAD", "resources_total": {"CPU": 4.0}})
    assert service.nodes_with_cpus() == 1  # a head with no CPU and a dead node run nothing
    ray.nodes.append({"state": "ALIVE", "resources_total": {"CPU": 1.0}})
    assert service.nodes_with_cpus() == 2
