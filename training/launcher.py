"""The Ray launcher: labbot's only door to the Ray Jobs API (``ray.job_submission.JobSubmissionClient``).

Every call carries the bearer token explicitly (Ray reads its own token environment once, at import time) and
runs under a deadline, because the SDK's HTTP calls have no timeout of their own: an unreachable dashboard becomes
``RayUnavailable`` naming the address within ``timeout`` seconds. Submissions are idempotent:
``submission_id = labbot-{run}-{attempt}``, and Ray's "already exists" answer for our own run is success. What a job
wrote comes back redacted (its logs, the log tail in a failed job's message): a job that prints its environment or a
key shows ``[redacted]`` wherever labbot posts it. A submission or a stop made by a singleton (the watchdog's restarts
and re-stops, the queue's admissions) is made only while this replica holds the leader lease: checked right before
the call (``labbot.storage.lease.guard``; outside a singleton, nothing is checked).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ray.job_submission import JobSubmissionClient  # heavy (≈1 s): imported with the control plane, not

from labbot.common.durations import format_duration

# lazily on a worker thread, where it would hold the GIL while the event loop is answering Slack
from labbot.common.errors import Conflict, RayUnavailable
from labbot.common.redact import Redactor
from labbot.storage.lease import guard
from labbot.training.ray_cluster import RayConnection

log = logging.getLogger(__name__)
T = TypeVar("T")

# Ray's job states, as labbot reads them
RAY_PENDING, RAY_RUNNING, RAY_STOPPED, RAY_SUCCEEDED, RAY_FAILED = (
    "PENDING",
    "RUNNING",
    "STOPPED",
    "SUCCEEDED",
    "FAILED",
)


def submission_id(run_id: str, attempt: int) -> str:
    return f"labbot-{run_id}-{attempt}"


@dataclass(frozen=True)
class Submission:
    submission_id: str
    entrypoint: str
    runtime_env: dict[str, Any]
    metadata: dict[str, str]
    num_gpus: float = 0
    num_cpus: float | None = None  # entrypoint_num_cpus; None: Ray's default (none reserved)
    resources: dict[str, float] = field(default_factory=dict)  # entrypoint_resources: a node's custom resources


@dataclass(frozen=True)
class RayJob:
    """What labbot needs of Ray's JobDetails."""

    submission_id: str
    status: str
    message: str = ""
    error_type: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    start_time: float | None = None
    end_time: float | None = None
    driver_node_id: str | None = None  # the node the entrypoint runs on (Ray's JobDetails), once it started
    job_id: str | None = None  # Ray's id of the driver's job (hex), once it started: what its actors carry


@dataclass(frozen=True)
class RayNode:
    """One node of the cluster as Ray's state API lists it."""

    node_id: str
    name: str  # Ray's node_name: the node's IP, or the pod's name on KubeRay
    alive: bool
    is_head: bool
    resources: dict[str, float]
    state_message: str = ""

    def fits(self, need: dict[str, float]) -> bool:
        """Whether this node has at least ``need`` of each resource (``CPU``, ``GPU``, custom ones) in total: it
        could run the ask once what runs there ends."""
        return self.alive and all(self.resources.get(k, 0.0) + 1e-9 >= v for k, v in need.items() if v > 0)

    def words(self) -> str:
        """``192.0.2.7 (node 3f2a9c1d)``: how a thread names a node."""
        return f"{self.name} (node {self.node_id[:8]})"


@dataclass(frozen=True)
class RayActor:
    """One actor as Ray's state API lists it (a dead one stays listed, with the node it ran on)."""

    actor_id: str
    class_name: str  # ``RayTrainWorker`` for Ray Train's workers
    state: str  # ALIVE, DEAD, RESTARTING, PENDING_CREATION, ...
    job_id: str
    node_id: str


def _as_job(details: Any) -> RayJob:
    status = details.status
    return RayJob(
        submission_id=details.submission_id or "",
        status=str(getattr(status, "value", status)),
        message=details.message or "",
        error_type=getattr(details, "error_type", None),
        metadata=dict(details.metadata or {}),
        start_time=details.start_time / 1000 if details.start_time else None,
        end_time=details.end_time / 1000 if details.end_time else None,
        driver_node_id=getattr(details, "driver_node_id", None) or None,
        job_id=getattr(details, "job_id", None) or None,
    )


def _job_from_json(doc: dict[str, Any]) -> RayJob:
    """A RayJob from the dashboard's JSON for one job (the fields of Ray's JobDetails that labbot reads)."""
    start, end = doc.get("start_time"), doc.get("end_time")
    return RayJob(
        submission_id=str(doc.get("submission_id") or ""),
        status=str(doc.get("status") or ""),
        message=str(doc.get("message") or ""),
        error_type=doc.get("error_type"),
        metadata=dict(doc.get("metadata") or {}),
        start_time=start / 1000 if start else None,
        end_time=end / 1000 if end else None,
        driver_node_id=str(doc.get("driver_node_id") or "") or None,
        job_id=str(doc.get("job_id") or "") or None,
    )


class RayLauncher:
    def __init__(self, connection: RayConnection, *, timeout: float = 10.0) -> None:
        self.connection = connection
        self.timeout = timeout
        self._client: Any = None
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="ray-api")
        self.redact = Redactor([connection.token])  # labbot's secrets (its environment's, Ray's token)

    @property
    def address(self) -> str:
        return self.connection.address

    def _call(self, what: str, fn: Callable[[Any], T], *, timeout: float | None = None) -> T:
        """Run ``fn(client)`` on a worker thread with a deadline (``timeout``, else the launcher's); connection
        trouble becomes RayUnavailable."""
        timeout = self.timeout if timeout is None else timeout

        def attempt() -> T:
            if self._client is None:
                self._client = JobSubmissionClient(self.address, headers=dict(self.connection.headers))
            return fn(self._client)

        future = self._pool.submit(attempt)
        try:
            return future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            self._client = None
            raise RayUnavailable(
                f"Ray did not answer at {self.address} within {format_duration(timeout)} while trying to {what}; "
                "check RAY_ADDRESS and that the cluster's dashboard is up"
            ) from None
        except (ConnectionError, OSError) as e:
            self._client = None
            raise RayUnavailable(
                f"Ray is unreachable at {self.address} ({type(e).__name__}) while trying to {what}; "
                "check RAY_ADDRESS and that the cluster's dashboard is up"
            ) from None
        except Exception as e:
            if type(e).__name__ == "AuthenticationError":
                self._client = None
                raise RayUnavailable(
                    f"Ray at {self.address} refused labbot's token while trying to {what}; "
                    "set RAY_AUTH_TOKEN to the cluster's token"
                ) from None
            if _is_connection_error(e):
                self._client = None
                raise RayUnavailable(
                    f"Ray is unreachable at {self.address} while trying to {what}; "
                    "check RAY_ADDRESS and that the cluster's dashboard is up"
                ) from None
            raise

    def submit(self, sub: Submission) -> str:
        """Submit once; if Ray already has this submission id for this run, that is success. A singleton's
        submission is refused (``Fenced``) once this replica no longer holds the leader lease."""

        def go(client: Any) -> str:
            kwargs: dict[str, Any] = {
                "entrypoint": sub.entrypoint,
                "submission_id": sub.submission_id,
                "runtime_env": sub.runtime_env,
                "metadata": sub.metadata,
            }
            if sub.num_gpus:
                kwargs["entrypoint_num_gpus"] = sub.num_gpus
            if sub.num_cpus is not None:
                kwargs["entrypoint_num_cpus"] = sub.num_cpus
            if sub.resources:
                kwargs["entrypoint_resources"] = dict(sub.resources)
            try:
                return str(client.submit_job(**kwargs))
            except RuntimeError as e:
                if "already exists" not in str(e):
                    raise
                existing = client.get_job_info(sub.submission_id)
                if (existing.metadata or {}).get("labbot_run_id") != sub.metadata.get("labbot_run_id"):
                    raise Conflict(
                        f"Ray already has a job {sub.submission_id} that is not this run's "
                        "(another labbot database on the same cluster?)"
                    ) from None
                log.info("submission %s already on Ray: treated as submitted", sub.submission_id)
                return sub.submission_id

        guard(f"the submission of {sub.submission_id} to Ray")  # here: the call's own thread has no fence
        return self._call(f"submit {sub.submission_id}", go)

    def job(self, sid: str) -> RayJob | None:
        def go(client: Any) -> RayJob | None:
            try:
                return self._redacted(_as_job(client.get_job_info(sid)))
            except RuntimeError as e:
                if "404" in str(e) or "does not exist" in str(e):
                    return None
                raise

        return self._call(f"read job {sid}", go)

    def jobs(self) -> dict[str, RayJob]:
        """Every labbot job Ray knows, by submission id: one ``list_jobs`` call."""

        def go(client: Any) -> dict[str, RayJob]:
            # list_jobs() validates every job Ray ever ran into pydantic JobDetails (≈40 µs each): the watchdog
            # calls this every tick, so the same request (the SDK's own, authenticated) is read as plain JSON and
            # only labbot's jobs are kept
            r = client._do_request("GET", "/api/jobs/")
            if r.status_code != 200:
                client._raise_error(r)
            out = {}
            for doc in r.json():
                sid = doc.get("submission_id") or ""
                if sid.startswith("labbot-"):
                    out[sid] = self._redacted(_job_from_json(doc))
            return out

        return self._call("list jobs", go)

    def ping(self, *, timeout: float = 2.0) -> str:
        """The cheapest call that proves the Jobs API answers labbot's token: Ray's version (``/readyz``)."""
        return str(self._call("answer a readiness check", lambda client: client.get_version(), timeout=timeout))

    def cluster_resources(self) -> dict[str, float]:
        """The cluster's total resources as Ray counts them: the ``resources_total`` of every alive node, summed
        (``CPU``, ``GPU``, ...), from the dashboard's state API (``GET /api/v0/nodes``) with labbot's token."""
        return sum_resources(self.nodes())

    def nodes(self) -> list[RayNode]:
        """Every node Ray knows, alive or dead (a dead one stays listed a while, with Ray's reason), from the
        dashboard's state API (``GET /api/v0/nodes``) with labbot's token."""

        def go(client: Any) -> list[RayNode]:
            r = client._do_request("GET", "/api/v0/nodes?limit=10000&detail=false")
            if r.status_code != 200:
                client._raise_error(r)
            return nodes_of(r.json())

        return self._call("read the cluster's nodes", go)

    def actors_on(self, node_id: str) -> list[RayActor]:
        """Every actor Ray placed on ``node_id`` (alive or dead, any job's), from the dashboard's state API (``GET
        /api/v0/actors`` filtered by node) with labbot's token: after a node is lost, whose actors died with it."""

        def go(client: Any) -> list[RayActor]:
            query = f"limit=10000&detail=false&filter_keys=node_id&filter_predicates=%3D&filter_values={node_id}"
            r = client._do_request("GET", f"/api/v0/actors?{query}")
            if r.status_code != 200:
                client._raise_error(r)
            return actors_of(r.json())

        return self._call(f"read the actors of node {node_id[:8]}", go)

    def _redacted(self, job: RayJob) -> RayJob:
        """A failed job's message carries the tail of its logs: redacted like the logs."""
        message = self.redact(job.message)
        return job if message == job.message else dataclasses.replace(job, message=message)

    def stop(self, sid: str) -> bool:
        """Ask Ray to stop a job; a singleton's stop is refused (``Fenced``) once this replica is not the leader."""
        guard(f"stopping {sid} on Ray")
        return bool(self._call(f"stop {sid}", lambda client: client.stop_job(sid)))

    def logs(self, sid: str) -> str:
        def go(client: Any) -> str:
            try:
                return self.redact(str(client.get_job_logs(sid)))
            except RuntimeError as e:
                if "404" in str(e) or "does not exist" in str(e):
                    return ""
                raise

        return self._call(f"read the logs of {sid}", go)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def nodes_of(doc: Any) -> list[RayNode]:
    """The nodes in the state API's answer (``{"data": {"result": {"result": [node, ...]}}}``); anything not of that
    shape is no node, a resource that is not a number is left out."""
    data = doc.get("data") if isinstance(doc, dict) else None
    inner = data.get("result") if isinstance(data, dict) else None
    raw = inner.get("result") if isinstance(inner, dict) else None
    out = []
    for node in raw if isinstance(raw, list) else []:
        if not isinstance(node, dict):
            continue
        total = node.get("resources_total")
        resources = {
            str(k): float(v)
            for k, v in (total.items() if isinstance(total, dict) else ())
            if isinstance(v, int | float) and not isinstance(v, bool)
        }
        out.append(
            RayNode(
                node_id=str(node.get("node_id") or ""),
                name=str(node.get("node_name") or node.get("node_ip") or "?"),
                alive=node.get("state", "ALIVE") == "ALIVE",
                is_head=bool(node.get("is_head_node")),
                resources=resources,
                state_message=str(node.get("state_message") or ""),
            )
        )
    return out


def actors_of(doc: Any) -> list[RayActor]:
    """The actors in the state API's answer (the shape of :func:`nodes_of`'s); anything else is no actor."""
    data = doc.get("data") if isinstance(doc, dict) else None
    inner = data.get("result") if isinstance(data, dict) else None
    raw = inner.get("result") if isinstance(inner, dict) else None
    return [
        RayActor(
            actor_id=str(a.get("actor_id") or ""),
            class_name=str(a.get("class_name") or ""),
            state=str(a.get("state") or ""),
            job_id=str(a.get("job_id") or ""),
            node_id=str(a.get("node_id") or ""),
        )
        for a in (raw if isinstance(raw, list) else [])
        if isinstance(a, dict)
    ]


def sum_resources(nodes: list[RayNode]) -> dict[str, float]:
    """The summed resources of the alive nodes (``CPU``, ``GPU``, custom ones)."""
    out: dict[str, float] = {}
    for node in nodes:
        if node.alive:
            for name, value in node.resources.items():
                out[name] = out.get(name, 0.0) + value
    return out


def _is_connection_error(e: BaseException) -> bool:
    """requests' ConnectionError is not the builtin one; match it (and its causes) by name."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if type(cur).__name__ in {"ConnectionError", "ConnectTimeout", "ReadTimeout", "MaxRetryError"}:
            return True
        cur = cur.__cause__ or cur.__context__
    return False
