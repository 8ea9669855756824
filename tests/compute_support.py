"""A RunService with ``[compute]`` caps over a real SQLite database and the real ``RayLauncher``, whose Jobs SDK client
is a recording double (the way ``tests/training/test_log_redaction.py`` swaps it): submissions are kept instead of
made, jobs move when a test says so, and the state API's node list is the cluster a test declares."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support import make_service

from labbot.training.capacity import ComputePolicy
from labbot.training.ray_cluster import RayConnection
from labbot.training.service import RunService

SLOW = {"slow": {"entrypoint": "sleep 600", "description": "a stand-in job", "cpus": 2}}


def node_died_message(node_id: str, ip: str) -> str:
    """Ray 2.60's message for a job whose node died under it (as a real multi-node cluster reported it)."""
    return (
        "Job supervisor actor died: The actor died unexpectedly before finishing this task.\n\tclass_name: "
        "JobSupervisor\n\tactor_id: c4070549c0601d4a49848d1801000000\n\tpid: 8841\n\tname: "
        "_ray_internal_job_actor_labbot-r-1\n\tnamespace: SUPERVISOR_ACTOR_RAY_NAMESPACE\n\tip: "
        f"{ip}\nThe actor died because its node has died. Node Id: {node_id}\n\tthe actor's node was terminated "
        "unexpectedly: health check failed due to missing too many heartbeats"
    )


class _Response:
    def __init__(self, doc: Any, status: int = 200) -> None:
        self.status_code = status
        self._doc = doc

    def json(self) -> Any:
        return self._doc


class RecordingRay:
    """What ``JobSubmissionClient`` answers, in memory: ``submitted`` in order, each job's status by submission id."""

    def __init__(self, *, cpus: float = 16, gpus: float = 4) -> None:
        self.submitted: list[dict[str, Any]] = []
        self.status: dict[str, str] = {}
        self.stopped: list[str] = []
        self.nodes = [{"state": "ALIVE", "resources_total": {"CPU": cpus, "GPU": gpus, "memory": 1e9}}]
        self.node_reads = 0
        self.messages: dict[str, tuple[str | None, str]] = {}  # a failed job's (error_type, message)
        self.driver: dict[str, str] = {}  # the node each job's entrypoint runs on
        self.job_ids: dict[str, str] = {}  # each job's Ray job id (hex), as the Jobs API gives it once it started
        self.actors: list[
            dict[str, Any]
        ] = []  # what the state API lists: {actor_id, class_name, state, job_id, node_id}
        self.actor_reads: list[str] = []  # the node each actors read asked about
        self._lock = threading.Lock()

    def submit_job(self, **kwargs: Any) -> str:
        with self._lock:
            self.submitted.append(kwargs)
            self.status[kwargs["submission_id"]] = "RUNNING"
        return str(kwargs["submission_id"])

    def get_job_info(self, sid: str) -> Any:
        if sid not in self.status:
            raise RuntimeError(f"Job {sid} does not exist")
        return self._details(sid)

    def _details(self, sid: str) -> Any:
        return SimpleNamespace(
            submission_id=sid, status=self.status[sid], message="", error_type=None, metadata={},
            start_time=None, end_time=None,
        )  # fmt: skip

    def stop_job(self, sid: str) -> bool:
        self.stopped.append(sid)
        if sid in self.status:
            self.status[sid] = "STOPPED"
        return True

    def get_job_logs(self, sid: str) -> str:
        return ""

    def finish(self, sid: str) -> None:
        self.status[sid] = "SUCCEEDED"

    def lose_node(self, sid: str, node_id: str, ip: str = "10.0.0.7") -> None:
        """The job's node dies under it: Ray's words for it (its supervisor actor died with the node)."""
        self.status[sid] = "FAILED"
        self.messages[sid] = ("JOB_SUPERVISOR_ACTOR_DIED", node_died_message(node_id, ip))
        for node in self.nodes:
            if node.get("node_id") == node_id:
                node["state"] = "DEAD"

    def lose_worker_node(self, node_id: str) -> None:
        """A node dies under a job's actors, not under its driver: the job goes on (Ray Train restarts them)."""
        for node in self.nodes:
            if node.get("node_id") == node_id:
                node["state"] = "DEAD"
        for actor in self.actors:
            if actor["node_id"] == node_id:
                actor["state"] = "DEAD"

    def _do_request(self, method: str, path: str, **_: Any) -> _Response:
        if path.startswith("/api/v0/actors"):
            node = path.split("filter_values=")[1].split("&")[0]
            self.actor_reads.append(node)
            found = [a for a in self.actors if a["node_id"] == node]
            return _Response({"result": True, "data": {"result": {"result": found, "total": len(found)}}})
        if path.startswith("/api/v0/nodes"):
            self.node_reads += 1
            return _Response({"result": True, "data": {"result": {"result": self.nodes, "total": len(self.nodes)}}})
        if path.startswith("/api/jobs"):
            return _Response(
                [
                    {
                        "submission_id": sid,
                        "status": st,
                        "message": self.messages.get(sid, (None, ""))[1],
                        "error_type": self.messages.get(sid, (None, ""))[0],
                        "metadata": {},
                        "driver_node_id": self.driver.get(sid),
                        "job_id": self.job_ids.get(sid),
                    }
                    for sid, st in list(self.status.items())
                ]
            )
        return _Response({"error": "not found"}, 404)

    def _raise_error(self, r: _Response) -> None:
        raise RuntimeError(f"Request failed with status code {r.status_code}")

    @property
    def submitted_ids(self) -> list[str]:
        return [str(s["submission_id"]) for s in self.submitted]


def compute_service(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    compute: dict[str, Any] | None,
    *,
    ray: RecordingRay | None = None,
    jobs: dict[str, Any] | None = None,
    database_url: str | None = None,
) -> tuple[RunService, RecordingRay]:
    """A RunService over the database at ``database_url`` (else ``tmp_path``'s SQLite) with ``[compute]`` =
    ``compute`` and the recording Ray double."""
    service = make_service(
        tmp_path, RayConnection("http://127.0.0.1:9", "tok"), {**SLOW, **(jobs or {})}, database_url=database_url
    )
    service.compute = ComputePolicy.from_config(compute)
    ray = ray or RecordingRay()
    monkeypatch.setattr(service.launcher, "_call", lambda what, fn: fn(ray))
    return service, ray
