"""The watchdog and a lost Ray node: the attempt is restarted at once on a surviving node without spending the job's
own restarts, its thread names the node; with no alive node that fits, the run waits in the queue (the reason kept)
and is admitted when one joins; past ``[watchdog] max_node_losses`` it pages. Over the real RunService and SQLite,
Ray's Jobs SDK a recording double that answers with the message Ray 2.60 gives when a job's node dies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from compute_support import RecordingRay, compute_service
from sqlalchemy import select
from support import Clock

from labbot.agents.babysitter.pager import Pager
from labbot.agents.babysitter.policy import PagingPolicy, WatchdogPolicy
from labbot.agents.babysitter.watchdog import Watchdog
from labbot.common.errors import BadRequest
from labbot.storage.models import Delivery, Incident, Run
from labbot.training.launcher import submission_id
from labbot.training.service import RunService
from labbot.training.specs import LaunchRequest

NODE_A = "a95ab0918b0d2f86f98abac4dbc2813e0f686757f02aed9c8b3a7e35"
NODE_B = "719aab1ce5f5304ca65f2be503a2432517d19c58aad443d8f9ca2535"
NEEDS_ACCEL = {"gpu-ish": {"entrypoint": "sleep 600", "description": "a stand-in", "resources": {"accelerator": 1}}}


def _node(node_id: str, *, accel: float = 1, head: bool = False) -> dict[str, Any]:
    return {
        "node_id": node_id,
        "node_name": "10.0.0.7" if node_id == NODE_A else "10.0.0.8",
        "state": "ALIVE",
        "is_head_node": head,
        "resources_total": {"CPU": 1.0, "accelerator": accel, "memory": 1e9},
    }


def _setup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, max_node_losses: int = 5
) -> tuple[RunService, RecordingRay, Watchdog, str]:
    ray = RecordingRay()
    ray.nodes = [_node("h" * 56, accel=0, head=True), _node(NODE_A), _node(NODE_B)]
    service, _ = compute_service(tmp_path, monkeypatch, None, ray=ray, jobs=NEEDS_ACCEL)
    service.checkpoints_shared = True  # a folder every node mounts, declared
    clock = Clock()
    pager = Pager(service.db, PagingPolicy(), slack=True, pagerduty=False, clock=clock)
    policy = WatchdogPolicy(pending_after_s=60, startup_grace_s=0, max_node_losses=max_node_losses)
    dog = Watchdog(service.db, service.launcher, service, pager, policy, address="ray-double", clock=clock)
    run = service.launch(LaunchRequest(job="gpu-ish", owner="U1", max_restarts=0)).run
    service.set_thread(run["id"], "C0LAB", "1700000000.000100")
    ray.driver[run["ray_submission_id"]] = NODE_A
    return service, ray, dog, run["id"]


def _notes(service: RunService, run_id: str) -> list[str]:
    with service.db.session() as s:
        return [str(o.payload.get("text")) for o in s.scalars(select(Delivery).where(Delivery.run_id == run_id))]


def test_a_lost_node_restarts_at_once_elsewhere_without_spending_the_jobs_restarts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, ray, dog, run_id = _setup(tmp_path, monkeypatch)
    dog.tick()
    run = service.get(run_id)
    assert run["node"] == {"id": NODE_A, "name": "10.0.0.7"}  # noted from Ray's driver_node_id
    assert ray.submitted[0]["entrypoint_resources"] == {"accelerator": 1.0}

    ray.lose_node(submission_id(run_id, 1), NODE_A)
    report = dog.tick()
    assert report.restarts_scheduled == 1
    with service.db.session() as s:
        row = s.get_one(Run, run_id)
        assert (row.attempt, row.auto_restarts, row.node_losses) == (2, 0, 1)
        assert row.node_id is None and "lost its node 10.0.0.7 (node a95ab091)" in (row.error or "")
    dog.tick()  # due at once: no backoff for a node's loss
    assert ray.submitted_ids[-1] == submission_id(run_id, 2)
    assert not [i for i in _incidents(service) if i.run_id == run_id], "a lost node is not the job's failure: no page"
    [note] = [t for t in _notes(service, run_id) if "lost its node" in t]
    assert "10.0.0.7 (node a95ab091)" in note and "health check failed" in note
    assert "does not count against the job's automatic restarts (0 of 0 used)" in note


def test_with_no_alive_node_that_fits_the_run_waits_in_the_queue_until_one_joins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, ray, dog, run_id = _setup(tmp_path, monkeypatch)
    ray.nodes = [n for n in ray.nodes if n["node_id"] != NODE_B]  # the other worker is gone already
    ray.lose_node(submission_id(run_id, 1), NODE_A)
    dog.tick()  # the loss: restart scheduled
    dog.tick()  # due: no node fits, queued
    run = service.get(run_id)
    assert (run["status"], run["waiting_for"], run["attempt"]) == ("queued", "a node with accelerator=1", 2)
    assert ray.submitted_ids == [submission_id(run_id, 1)]
    assert any("waits in the queue for a node with accelerator=1" in t for t in _notes(service, run_id))
    for _ in range(3):
        dog.tick()
    assert service.get(run_id)["status"] == "queued", "no node joined: it keeps waiting, unpaged"
    assert not _incidents(service)

    ray.nodes.append(_node(NODE_B))  # a node joins
    report = dog.tick()
    assert report.admitted == [run_id]
    assert ray.submitted_ids[-1] == submission_id(run_id, 2)
    run = service.get(run_id)
    assert run["status"] == "restarting" and run["waiting_for"] is None


def test_nodes_that_keep_dying_under_a_run_page_after_max_node_losses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, ray, dog, run_id = _setup(tmp_path, monkeypatch, max_node_losses=1)
    ray.lose_node(submission_id(run_id, 1), NODE_A)
    dog.tick()
    dog.tick()
    ray.driver[submission_id(run_id, 2)] = NODE_B
    ray.lose_node(submission_id(run_id, 2), NODE_B, ip="10.0.0.8")
    dog.tick()
    [page] = [i for i in _incidents(service) if i.run_id == run_id]
    assert page.kind == "failed" and "max_node_losses" in page.summary and "lost its node 10.0.0.8" in page.summary
    assert service.get(run_id)["status"] == "failed"


def _incidents(service: RunService) -> list[Incident]:
    with service.db.session() as s:
        return list(s.scalars(select(Incident)))


def test_max_node_losses_is_read_from_labbot_toml_and_checked() -> None:
    assert WatchdogPolicy.from_config({}).max_node_losses == 5
    assert WatchdogPolicy.from_config({"watchdog": {"max_node_losses": 0}}).max_node_losses == 0
    for bad in (-1, "3", 2.5, True):
        with pytest.raises(BadRequest, match=r"\[watchdog\] max_node_losses must be a whole number"):
            WatchdogPolicy.from_config({"watchdog": {"max_node_losses": bad}})


def _train_actor(node_id: str, job_id: str, n: int) -> dict[str, Any]:
    return {"actor_id": f"{job_id}{node_id[:6]}{n}", "class_name": "RayTrainWorker", "state": "ALIVE",
            "job_id": job_id, "node_id": node_id}  # fmt: skip


def test_a_node_lost_under_ray_trains_workers_is_told_and_counted_and_the_job_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, ray, dog, run_id = _setup(tmp_path, monkeypatch)
    service.totals_ttl_s = 0.0  # every tick reads the nodes (the service caches them 10 s)
    sid = submission_id(run_id, 1)
    ray.driver[sid] = "h" * 56  # the driver on the head, its two Ray Train workers on A and B
    ray.job_ids[sid] = "02000000"
    ray.actors = [_train_actor(NODE_A, "02000000", 0), _train_actor(NODE_B, "02000000", 1)]
    ray.actors.append({**_train_actor(NODE_A, "03000000", 2), "class_name": "SomeoneElses"})
    dog.tick()
    assert ray.actor_reads == []  # no node lost: Ray's actors are not read

    ray.lose_worker_node(NODE_B)
    report = dog.tick()
    assert ray.actor_reads == [NODE_B]
    assert report.restarts_scheduled == 0 and ray.submitted_ids == [sid]  # Ray Train restarts its workers, not labbot
    with service.db.session() as s:
        row = s.get_one(Run, run_id)
        assert (row.status, row.attempt, row.auto_restarts, row.node_losses) == ("running", 1, 0, 1)
    [note] = [n for n in _notes(service, run_id) if "was lost under" in n]
    assert "node 10.0.0.8 (node 719aab1c) was lost under attempt 1: 1 of its Ray actors (RayTrainWorker)" in note
    assert "Ray Train's own failure handling" in note and "restarts are not spent" in note
    assert service.get(run_id)["node_losses"] == 1

    dog.tick()  # told once; the lost node is not looked at again
    assert ray.actor_reads == [NODE_B] and len([n for n in _notes(service, run_id) if "was lost under" in n]) == 1

    ray.lose_worker_node(NODE_A)  # a node with another job's actor and this run's other worker
    dog.tick()
    [note_a] = [n for n in _notes(service, run_id) if "node a95ab091" in n]
    assert "1 of its Ray actors (RayTrainWorker)" in note_a  # the other job's actor is not this run's
    assert not [i for i in _incidents(service) if i.run_id == run_id]


def test_a_node_lost_with_none_of_the_runs_actors_says_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    service, ray, dog, run_id = _setup(tmp_path, monkeypatch)
    service.totals_ttl_s = 0.0
    sid = submission_id(run_id, 1)
    ray.driver[sid], ray.job_ids[sid] = "h" * 56, "02000000"
    ray.actors = [_train_actor(NODE_B, "05000000", 0)]  # another job's
    dog.tick()
    ray.lose_worker_node(NODE_B)
    dog.tick()
    assert ray.actor_reads == [NODE_B]
    assert not [n for n in _notes(service, run_id) if "was lost under" in n]
    assert service.get(run_id)["node_losses"] == 0
