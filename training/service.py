"""The run service: the one place that launches, stops, restarts, reconciles and ingests telemetry for runs.

Every front door (HTTP ``/api/v1`` for the CLI and the ``lab`` MCP server, Slack, agents) goes through here, so
the rules hold whatever the front end: input is checked before anything is written; a run is a row before it is a
Ray job; a Ray failure leaves the run ``failed`` with the reason, never half-created; the same idempotency key
maps to the same run and so to one Ray job. Sits in the control plane: ``training → storage``; blocking calls
(DB, Ray) — the HTTP layer runs them on worker threads. Called by a singleton (the watchdog's restarts, the queue's
admissions), a Ray call is made only under the leader lease (the launcher checks it, ``labbot.storage.lease``): a
refusal (``Fenced``) is raised as it is, never taken for Ray's failure (the run is not failed for it), and runs
admitted from the queue but not submitted go back to the queue.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from labbot.common.durations import format_duration
from labbot.common.errors import BadRequest, Conflict, LabbotError, RayUnavailable, UnknownRun
from labbot.storage.db import Database, fenced
from labbot.storage.lease import Fenced
from labbot.storage.models import ACTIVE_STATUSES, AdmissionLock, LaunchKey, Run, RunStatus, utcnow
from labbot.training import failure_reason
from labbot.training.capacity import (
    Ask,
    ComputePolicy,
    Decision,
    Totals,
    admissible,
    decide,
    never_fits,
    positions,
    report,
)
from labbot.training.launcher import (
    RAY_FAILED,
    RAY_PENDING,
    RAY_RUNNING,
    RAY_STOPPED,
    RAY_SUCCEEDED,
    RayJob,
    RayLauncher,
    RayNode,
    Submission,
    submission_id,
    sum_resources,
)
from labbot.training.registry import JobRegistry
from labbot.training.run_json import run_view
from labbot.training.specs import DEFAULT_PURPOSE, LaunchRequest, RunConfig, entrypoint_command, resolve_launch
from labbot.training.telemetry_store import redact_token, token_hash
from labbot_client.checkpoints import roll_back

log = logging.getLogger(__name__)

_ID_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i: ids are read aloud and typed
LOST_AFTER = timedelta(seconds=60)
LOST = "Ray has no job"  # how a lost submission's error begins
TOTALS_TTL_S = 10.0  # the cluster's totals are read from Ray at most this often
PRIORITY_RANGE = (-1000, 1000)


def new_run_id() -> str:
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(6))


@dataclass(frozen=True)
class LaunchResult:
    run: dict[str, Any]
    created: bool
    queued: str | None = None  # why the run waits (its purpose's numbers and its place in line); None: submitted


def ask_of(run_id: str, owner: str, config: dict[str, Any] | None) -> Ask:
    """What a run asks of the cluster, from its stored config: its GPUs, its CPUs (1 when it reserves none)."""
    cfg = config or {}
    cpus = cfg.get("cpus")
    purpose = cfg.get("purpose") or DEFAULT_PURPOSE
    return Ask(run_id, owner, str(purpose), float(1 if cpus is None else cpus), float(cfg.get("gpus") or 0))


class RunService:
    def __init__(
        self,
        db: Database,
        registry: JobRegistry,
        launcher: RayLauncher,
        *,
        control_url: str,
        checkpoint_root: Path,
        compute: ComputePolicy | None = None,
        checkpoint_url: str | None = None,
        job_env: Mapping[str, str] | None = None,
        local_checkpoint_jobs: frozenset[str] = frozenset(),
        checkpoints_shared: bool = False,
    ) -> None:
        """``checkpoint_root`` is a local folder; ``checkpoint_url``, when given, an object store's URL where runs
        keep their checkpoints instead (``s3://bucket/prefix/runs``), and ``job_env`` what a job needs to reach it
        (the AWS variables). Jobs in ``local_checkpoint_jobs`` (the eval jobs, whose results the control plane reads
        from disk) keep ``checkpoint_root`` whatever the URL. ``checkpoints_shared``: ``checkpoint_root`` was declared
        a folder every Ray node mounts (``[training] checkpoint_root``); a default local folder is not, and a
        checkpointing job is refused on a cluster of more than one node (a restart on another node would not find
        its checkpoints)."""
        self.db = db
        self.registry = registry
        self.launcher = launcher
        self.control_url = control_url.rstrip("/")
        self.checkpoint_root = checkpoint_root
        self.checkpoint_url = checkpoint_url.rstrip("/") if checkpoint_url else None
        self.job_env = dict(job_env or {})
        self.local_checkpoint_jobs = local_checkpoint_jobs
        self.checkpoints_shared = checkpoints_shared
        self.compute = compute or ComputePolicy()
        # admission decisions of this process one at a time (the admission_lock row does it across processes)
        self._admission = threading.Lock()
        self._nodes: tuple[float, list[RayNode]] | None = None  # (monotonic time read, the cluster's nodes)
        self.totals_ttl_s = TOTALS_TTL_S

    # -- launching -------------------------------------------------------------------------------------------

    def launch(self, req: LaunchRequest, *, experiment: str | None = None) -> LaunchResult:
        """Launch a run (``experiment``: the experiment it is a trial of, set by the experiment controller only)."""
        spec = self.registry.get(req.job)
        cfg = resolve_launch(spec, req)  # every input check happens before anything is written
        self._check_checkpoints_reach(req.job)
        if self.compute.enabled:
            why = never_fits(self.compute, ask_of("", req.owner, cfg.model_dump()))
            if why:
                raise BadRequest(f"{why}; it could never start: ask for less, or raise the cap in labbot.toml")
        if req.idempotency_key:
            existing = self._run_for_key(req.idempotency_key)
            if existing is not None:
                return LaunchResult(existing, created=False)
        token = secrets.token_urlsafe(32)
        try:
            run_id, decision = self._insert_decided(req, cfg, token, experiment=experiment)
        except _DuplicateKey:
            existing = self._run_for_key(req.idempotency_key or "")
            assert existing is not None
            return LaunchResult(existing, created=False)
        if decision is not None and not decision.admit:
            log.info("run %s queued: %s", run_id, decision.reason(), extra={"run_id": run_id})
            return LaunchResult(self.get(run_id), created=True, queued=decision.reason())
        return LaunchResult(self._submit(run_id, attempt=1, token=token), created=True)

    # -- compute by purpose ----------------------------------------------------------------------------------

    def cluster_nodes(self) -> list[RayNode]:
        """The cluster's nodes as Ray lists them (dead ones included, with Ray's reason), read at most every
        ``totals_ttl_s``; while Ray does not answer, the last ones read (RayUnavailable if there are none yet)."""
        now = time.monotonic()
        if self._nodes is not None and now - self._nodes[0] < self.totals_ttl_s:
            return self._nodes[1]
        try:
            nodes = self.launcher.nodes()
        except RayUnavailable:
            if self._nodes is not None:
                return self._nodes[1]
            raise
        self._nodes = (now, nodes)
        return nodes

    def nodes_with_cpus(self) -> int | None:
        """How many alive nodes have a CPU to run work on (an eval's samples fan out over two or more); None while
        Ray does not answer and no nodes were read yet."""
        try:
            nodes = self.cluster_nodes()
        except RayUnavailable:
            return None
        return sum(1 for n in nodes if n.alive and n.resources.get("CPU", 0.0) >= 1)

    def cluster_totals(self) -> Totals:
        """The CPUs and GPUs of the cluster's alive nodes as Ray counts them: a lost node's leave the totals (and the
        caps drawn from them) with it, a node that joins adds its own (read at most every ``totals_ttl_s``)."""
        resources = sum_resources(self.cluster_nodes())
        return Totals(cpus=resources.get("CPU", 0.0), gpus=resources.get("GPU", 0.0))

    def _check_checkpoints_reach(self, job: str) -> None:
        """A checkpointing job on a cluster of more than one node needs checkpoints every node reaches: refused
        (nothing written) when they are in a local folder nobody declared shared."""
        if self.checkpoint_url or self.checkpoints_shared or job in self.local_checkpoint_jobs:
            return
        try:
            alive = [n for n in self.cluster_nodes() if n.alive]
        except RayUnavailable:
            return  # the submission says Ray is away
        if len(alive) > 1:
            raise BadRequest(
                f"not launched: this Ray cluster has {len(alive)} nodes, and runs keep their checkpoints in "
                f"{self.checkpoint_root}, a folder on labbot's machine: a run restarted on another node would not "
                "find them. Set LABBOT_ARTIFACTS_URL=s3://BUCKET/PREFIX (checkpoints go under its runs/, which every "
                'node reaches), or [training] checkpoint_root = "/a/folder/every/node/mounts" in labbot.toml'
            )

    def _lock_admission(self, s: Session) -> None:
        """The database's side of the admission lock: the transaction's first statement writes the lock row, so
        SQLite takes its write lock and PostgreSQL the row's lock here, until the commit."""
        bump = update(AdmissionLock).where(AdmissionLock.id == 1).values(decisions=AdmissionLock.decisions + 1)
        if s.execute(bump).rowcount == 0:  # type: ignore[attr-defined]
            s.add(AdmissionLock(id=1, decisions=1))
            s.flush()

    @staticmethod
    def _active(s: Session) -> list[Ask]:
        rows = s.execute(select(Run.id, Run.owner, Run.config).where(Run.status.in_(ACTIVE_STATUSES)))
        return [ask_of(r.id, r.owner, r.config) for r in rows]

    @staticmethod
    def _queue(s: Session) -> list[Ask]:
        """Every queued run, in queue order: priority (higher first), then time queued."""
        q = (
            select(Run.id, Run.owner, Run.config)
            .where(Run.status == RunStatus.QUEUED.value)
            .order_by(Run.priority.desc(), Run.queued_at, Run.id)
        )
        return [ask_of(r.id, r.owner, r.config) for r in s.execute(q)]

    def _place(self, s: Session, ask: Ask, *, priority: int = 0) -> Decision:
        """Admit or queue ``ask`` (the admission lock held): the runs of its purpose queued with a priority at least
        its own are ahead of it."""
        self._lock_admission(s)
        totals = self.cluster_totals() if self.compute.needs_totals else None
        ahead_q = (
            select(Run.id)
            .where(Run.status == RunStatus.QUEUED.value, Run.purpose == ask.purpose, Run.priority >= priority)
            .order_by(Run.priority.desc(), Run.queued_at)
        )
        ahead = len(s.scalars(ahead_q).all())
        return decide(self.compute, totals, self._active(s), ahead, ask)

    def admit_queued(self) -> list[str]:
        """Submit the queued runs that fit now, in queue order (the watchdog calls this every tick; a stop calls it
        too). Each becomes ``pending`` in the same locked transaction that decides it, then goes to Ray like any
        launch. Returns the admitted run ids. Without ``[compute]`` every queued run (left from a configuration that
        had caps) is admitted."""
        with self.db.session() as s:  # the common case, nothing queued: one indexed query, no lock
            if s.scalar(select(Run.id).where(Run.status == RunStatus.QUEUED.value).limit(1)) is None:
                return []
        totals = self.cluster_totals() if self.compute.needs_totals else None
        tokens: dict[str, tuple[int, str]] = {}
        with self._admission, self.db.session() as s:
            self._lock_admission(s)
            queue = self._without_a_node(s, self._queue(s))
            ids = admissible(self.compute, totals, self._active(s), queue)
            for run in s.scalars(select(Run).where(Run.id.in_(ids), Run.status == RunStatus.QUEUED.value)):
                token = secrets.token_urlsafe(32)
                run.waiting_for = None
                run.status = RunStatus.PENDING.value if run.attempt == 1 else RunStatus.RESTARTING.value
                run.telemetry_token_hash = token_hash(token)
                run.ray_submission_id = submission_id(run.id, run.attempt)
                tokens[run.id] = (run.attempt, token)
        admitted = []
        for i, run_id in enumerate(ids):
            if run_id not in tokens:
                continue
            attempt, token = tokens[run_id]
            try:
                self._send(run_id, attempt=attempt, token=token)
            except Fenced:  # the lease is lost (the watchdog's tick): this one and the rest are not on Ray
                self._unadmit({r: tokens[r][0] for r in ids[i:] if r in tokens})
                raise
            except LabbotError as e:  # the run is failed with the reason by _submit; the others go on
                log.error(
                    "run %s: admitted from the queue, but the submission failed: %s",
                    run_id,
                    e.message,
                    extra={"run_id": run_id},
                )
            admitted.append(run_id)
            log.info("run %s admitted from the queue", run_id, extra={"run_id": run_id})
        return admitted

    def _without_a_node(self, s: Session, queue: list[Ask]) -> list[Ask]:
        """``queue`` less the runs that wait for a node (after a node loss) that no alive node is yet: one fresh
        read of Ray's nodes, only when such a run is queued."""
        rows = s.execute(
            select(Run.id, Run.config).where(Run.status == RunStatus.QUEUED.value, Run.waiting_for.is_not(None))
        )
        waiting = {run_id: config for run_id, config in rows}
        if not waiting:
            return queue
        nodes = self.launcher.nodes()
        unfit = {run_id for run_id, cfg in waiting.items() if not fits_a_node(nodes, node_need(cfg))}
        return [a for a in queue if a.run_id not in unfit]

    def _unadmit(self, attempts: Mapping[str, int]) -> None:
        """Runs admitted (``pending``/``restarting``) but refused their submission because the lease was lost go back
        to the queue, each only if it is still as admitted (this attempt, not stopped, not failed as lost since), so
        the next leader admits them again rather than failing them as lost. Outside the fence, which refuses every
        write now; a run the new leader or a person changed since is left alone."""
        moved = 0
        with fenced(None), self.db.session() as s:
            for run_id, attempt in attempts.items():
                result: Any = s.execute(
                    update(Run)
                    .where(
                        Run.id == run_id,
                        Run.attempt == attempt,
                        Run.status.in_((RunStatus.PENDING.value, RunStatus.RESTARTING.value)),
                        Run.ray_submission_id == submission_id(run_id, attempt),
                    )
                    .values(status=RunStatus.QUEUED.value)
                )
                moved += result.rowcount
        if moved:
            log.warning("%d run(s) admitted from the queue were not submitted (the lease is lost): queued again", moved)

    def _admit_soon(self) -> None:
        """After a run ends by hand: queued runs that fit now are submitted now rather than at the next tick."""
        try:
            self.admit_queued()
        except LabbotError as e:
            log.warning("queued runs not admitted now (the next watchdog tick tries again): %s", e.message)

    def set_priority(self, run_id: str, priority: int, *, by: str = "cli") -> dict[str, Any]:
        """Move a run in its purpose's queue (higher first). Only a queued run's priority matters; a run on Ray keeps
        it for the record. Who may is checked by the front door (admins)."""
        low, high = PRIORITY_RANGE
        if isinstance(priority, bool) or not isinstance(priority, int) or not low <= priority <= high:
            raise BadRequest(f"priority {priority!r} must be a whole number from {low} to {high} (higher goes first)")
        with self._admission, self.db.session() as s:
            self._lock_admission(s)
            run = self._load(s, run_id)
            if RunStatus(run.status).is_terminal:
                raise Conflict(f"run {run_id} is already {run.status}; a priority orders only queued runs")
            run.priority = priority
        log.info("run %s: priority %d set by %s", run_id, priority, by, extra={"run_id": run_id})
        self.admit_queued()  # a run moved to the head may fit where the old head did not
        return self.get(run_id)

    def capacity(self) -> dict[str, Any]:
        """Use against each purpose's cap, who uses it, what is queued (in order), and the cluster's totals."""
        error = None
        nodes: list[RayNode] = []
        try:
            nodes = [n for n in self.cluster_nodes() if n.alive]
            totals: Totals | None = self.cluster_totals()
        except RayUnavailable as e:
            totals, error = None, e.message
        with self.db.session() as s:
            active, queue = self._active(s), self._queue(s)
        return {
            "caps_set": self.compute.enabled,
            "cluster": (
                {
                    "cpus": totals.cpus,
                    "gpus": totals.gpus,
                    # the alive nodes, each with its own resources: an ask must fit one node, not the sum
                    "nodes": [
                        {"id": n.node_id, "name": n.name, "head": n.is_head, "resources": _shown(n.resources)}
                        for n in nodes
                    ],
                }
                if totals
                else None
            ),
            "cluster_error": error,
            "use": {"runs": len(active), "cpus": sum(a.cpus for a in active), "gpus": sum(a.gpus for a in active)},
            "purposes": report(self.compute, totals, active, queue),
        }

    def _run_for_key(self, key: str) -> dict[str, Any] | None:
        with self.db.session() as s:
            row = s.get(LaunchKey, key)
            return run_view(s.get_one(Run, row.run_id)) if row else None

    def _insert_run(self, req: LaunchRequest, cfg: RunConfig, token: str) -> str:
        return self._insert_decided(req, cfg, token)[0]

    def _insert_decided(
        self, req: LaunchRequest, cfg: RunConfig, token: str, *, experiment: str | None = None
    ) -> tuple[str, Decision | None]:
        """Insert the run; with ``[compute]``, decided (admitted: ``pending``; else ``queued``, or with
        ``no_queue`` refused with the numbers, nothing written) in the same transaction, under the admission lock."""
        for _ in range(5):
            run_id = new_run_id()
            try:
                with self._admission if self.compute.enabled else _NO_LOCK, self.db.session() as s:
                    decision = None
                    status = RunStatus.PENDING.value
                    if self.compute.enabled:
                        decision = self._place(s, ask_of(run_id, req.owner, cfg.model_dump()))
                        if not decision.admit:
                            if req.no_queue:
                                raise Conflict(f"not launched: {decision.reason(no_queue=True)}")
                            status = RunStatus.QUEUED.value
                    s.add(
                        Run(
                            id=run_id,
                            job=req.job,
                            name=req.name or f"{req.job}-{run_id}",
                            owner=req.owner,
                            config=cfg.model_dump(),
                            status=status,
                            attempt=1,
                            ray_submission_id=submission_id(run_id, 1),
                            telemetry_token_hash=token_hash(token),
                            metrics={},
                            stop_requested=False,
                            purpose=cfg.purpose,
                            priority=0,
                            queued_at=utcnow() if status == RunStatus.QUEUED.value else None,
                            experiment_id=experiment,
                        )
                    )
                    s.flush()
                    if req.idempotency_key:
                        # same transaction: a concurrent duplicate key rolls its run back, nothing half-created
                        s.add(LaunchKey(key=req.idempotency_key, run_id=run_id))
                        s.flush()
                return run_id, decision
            except IntegrityError as e:
                if req.idempotency_key and "launch_keys" in str(e.orig):
                    raise _DuplicateKey from None
                if "runs" not in str(e.orig):
                    raise
                continue  # run id collision: draw another
        raise LabbotError("could not allocate a run id")

    def checkpoint_dir(self, run_id: str, job: str | None = None) -> Path | str:
        """A run's checkpoint folder: a local Path, or its URL in the object store (``…/runs/RUN/checkpoints``)."""
        if self.checkpoint_url and job not in self.local_checkpoint_jobs:
            return f"{self.checkpoint_url}/{run_id}/checkpoints"
        return self.checkpoint_root / run_id / "checkpoints"

    def _submit(self, run_id: str, *, attempt: int, token: str) -> dict[str, Any]:
        self._send(run_id, attempt=attempt, token=token)
        return self.get(run_id)

    def _send(self, run_id: str, *, attempt: int, token: str) -> None:
        """The attempt to Ray, unless the run was stopped (or queued) since it was decided. Raises what Ray's refusal
        became (the run failed with it), or ``Fenced``, which comes before Ray is asked (nothing failed for it)."""
        with self.db.session() as s:
            run = s.get_one(Run, run_id)
            if RunStatus(run.status).is_terminal or run.status == RunStatus.QUEUED.value:
                return  # stopped (or queued) since it was decided: nothing goes to Ray
            spec = self.registry.get(run.job)
            cfg = RunConfig.model_validate(run.config)
            ckpt = self.checkpoint_dir(run_id, run.job)
            env: dict[str, str] = {}
            if isinstance(ckpt, Path):
                ckpt.mkdir(parents=True, exist_ok=True)
            else:  # an object store: the job writes there itself, with the AWS variables it needs and no others
                env.update(self.job_env)
            env.update(spec.env)
            env.update(
                LABBOT_RUN_ID=run_id,
                LABBOT_ATTEMPT=str(attempt),
                LABBOT_TELEMETRY_TOKEN=token,
                LABBOT_CONTROL_URL=self.control_url,
                LABBOT_CHECKPOINT_DIR=str(ckpt),
            )
            remedy = remedy_of(run.config, attempt)
            if remedy is not None:
                env["LABBOT_RESUME_STEP"] = str(remedy.get("checkpoint_step") or 0)
            runtime_env: dict[str, Any] = {"env_vars": env}
            if spec.working_dir:
                runtime_env["working_dir"] = spec.working_dir
            sub = Submission(
                submission_id=submission_id(run_id, attempt),
                entrypoint=entrypoint_command(spec, cfg.params),
                runtime_env=runtime_env,
                metadata={
                    "labbot_run_id": run_id,
                    "labbot_job": run.job,
                    "labbot_owner": run.owner,
                    "labbot_attempt": str(attempt),
                },
                num_gpus=cfg.gpus,
                num_cpus=cfg.cpus,
                resources=dict(cfg.resources),
            )
        with self.db.session() as s:
            s.get_one(Run, run_id).attempt_started_at = utcnow()  # the pending timer and stall baselines
        try:
            self.launcher.submit(sub)
        except Fenced:
            raise  # a singleton that lost the lease: Ray was not asked, the run is not failed for it
        except LabbotError as e:
            self._fail(run_id, e.message)
            raise
        except Exception as e:  # the run must end up failed with a reason, whatever Ray said
            self._fail(run_id, f"Ray rejected the submission: {e}")
            raise LabbotError(f"Ray rejected the submission of run {run_id}: {e}") from None

    def _fail(self, run_id: str, reason: str) -> None:
        with self.db.session() as s:
            run = s.get_one(Run, run_id)
            run.status = RunStatus.FAILED.value
            run.error = reason
            run.ended_at = utcnow()

    # -- reading ---------------------------------------------------------------------------------------------

    def _load(self, s: Session, run_id: str) -> Run:
        run = s.get(Run, run_id)
        if run is None:
            raise UnknownRun(f"unknown run {run_id!r}; list runs with `labbot runs`")
        return run

    def _view(self, s: Session, run: Run) -> dict[str, Any]:
        return self._views(s, [run])[0]

    def _views(self, s: Session, runs: Sequence[Run]) -> list[dict[str, Any]]:
        """Runs as JSON; a queued run with its place in its purpose's line (one more query, only when one is)."""
        places: dict[str, int] = {}
        if any(r.status == RunStatus.QUEUED.value for r in runs):
            places = positions(self._queue(s))
        return [run_view(r, queue_position=places.get(r.id)) for r in runs]

    def get(self, run_id: str, *, wait: float = 0.0) -> dict[str, Any]:
        """A run. With ``wait`` > 0, a run that Ray has not started yet is watched (one Ray call every 0.1 s,
        the database touched only on a change) until it starts or ends, or ``wait`` seconds pass; a queued run is
        watched in the database (every 0.2 s) until it is admitted."""
        deadline = time.monotonic() + wait
        while True:
            with self.db.session() as s:
                run = self._load(s, run_id)
                sid, status = run.ray_submission_id, RunStatus(run.status)
                view = self._view(s, run)
            if status != RunStatus.QUEUED or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        if wait <= 0 or not sid or status not in (RunStatus.PENDING, RunStatus.RESTARTING):
            return view
        while True:
            job = self.launcher.job(sid)
            if job is not None and job.status != RAY_PENDING:
                with self.db.session() as s:
                    run = self._load(s, run_id)
                    if run.ray_submission_id == sid:
                        _apply_ray_state(run, job)
                    return self._view(s, run)
            if time.monotonic() >= deadline:
                return self.get(run_id)
            time.sleep(0.1)

    def runs(self, *, status: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        with self.db.session() as s:
            q = select(Run).order_by(Run.created_at.desc()).limit(limit)
            if status:
                q = q.where(Run.status == status)
            return self._views(s, list(s.scalars(q)))

    def owned_runs_page(
        self, owner: str, page: int, per_page: int, *, except_prefix: str
    ) -> tuple[int, int, list[dict[str, Any]]]:
        """A page of ``owner``'s runs, newest first, but for the jobs named ``except_prefix…``: how many there are in
        all, the page shown (the last when ``page`` is past it) and its runs."""
        with self.db.session() as s:
            mine, kept = Run.owner == owner, ~Run.job.startswith(except_prefix)
            total = int(s.scalar(select(func.count()).select_from(Run).where(mine, kept)) or 0)
            page = min(page, max(0, (total - 1) // per_page))
            rows = s.scalars(
                select(Run)
                .where(mine, kept)
                .order_by(Run.created_at.desc(), Run.id)
                .offset(page * per_page)
                .limit(per_page)
            )
            return total, page, [run_view(r) for r in rows]

    def owned_runs_of_jobs(self, owner: str, prefix: str, *, limit: int) -> list[dict[str, Any]]:
        """``owner``'s latest runs of the jobs named ``prefix…`` (the eval jobs), newest first."""
        with self.db.session() as s:
            rows = s.scalars(
                select(Run)
                .where(Run.owner == owner, Run.job.startswith(prefix))
                .order_by(Run.created_at.desc())
                .limit(limit)
            )
            return [run_view(r) for r in rows]

    def logs(self, run_id: str, *, tail: int | None = None, attempt: int | None = None) -> str:
        """A run's job output (its current attempt's, or ``attempt``'s: an automatic restart leaves the crash log in
        attempt 1), with every secret labbot knows of redacted by the launcher (its environment's, Ray's token, the
        credential shapes): whatever front door shows it — Slack, the CLI, an agent — shows no secret."""
        with self.db.session() as s:
            run = self._load(s, run_id)
            sid, own_token = run.ray_submission_id, run.telemetry_token_hash
            if attempt is not None:
                if not 1 <= attempt <= run.attempt:
                    tried = "attempt 1" if run.attempt == 1 else f"attempts 1 to {run.attempt}"
                    raise BadRequest(f"run {run_id} has no attempt {attempt}: it has {tried}")
                sid = submission_id(run_id, attempt) if sid else None
        # the run's own telemetry token too (labbot holds only its hash): a job that prints its environment
        text = redact_token(self.launcher.logs(sid), own_token) if sid else ""
        if tail is not None:
            text = "\n".join(text.splitlines()[-tail:]) if tail > 0 else ""
        return text

    def set_thread(self, run_id: str, channel: str, thread_ts: str) -> None:
        """Record where the run's Slack thread is (shown in its JSON as ``channel`` / ``thread_ts``)."""
        with self.db.session() as s:
            run = self._load(s, run_id)
            run.channel, run.thread_ts = channel, thread_ts

    # -- acting ----------------------------------------------------------------------------------------------

    def stop(self, run_id: str, *, by: str = "cli") -> dict[str, Any]:
        if self._stop_queued(run_id, by):
            return self.get(run_id)
        with self.db.session() as s:
            run = self._load(s, run_id)
            if RunStatus(run.status).is_terminal:
                raise Conflict(f"run {run_id} is already {run.status}; nothing to stop")
            sid = run.ray_submission_id
            if run.restart_at is not None and run.attempt > 1:
                # an automatic restart is scheduled: the new attempt is not on Ray yet, the previous may still run
                sid = submission_id(run_id, run.attempt - 1)
        if sid:
            self.launcher.stop(sid)  # RayUnavailable propagates: nothing changed
        with self.db.session() as s:
            run = self._load(s, run_id)
            run.stop_requested = True  # Ray ignores stop_job on PENDING jobs: the watchdog stops it later
            run.restart_at = None  # an automatic restart that was scheduled is off
            run.status = RunStatus.STOPPED.value
            run.ended_at = utcnow()
            run.error = f"stopped by {by}"
        self._admit_soon()
        return self.get(run_id)

    def _stop_queued(self, run_id: str, by: str) -> bool:
        """A queued run is stopped in the database alone, never reaching Ray. Decided under the admission lock, so a
        tick admitting it at the same moment either wins (the run is then stopped on Ray as usual) or sees it
        stopped."""
        with self.db.session() as s:
            if self._load(s, run_id).status != RunStatus.QUEUED.value:
                return False
        with self._admission, self.db.session() as s:
            self._lock_admission(s)
            run = self._load(s, run_id)
            if run.status != RunStatus.QUEUED.value:
                return False
            run.status = RunStatus.STOPPED.value
            run.ended_at = utcnow()
            run.error = f"stopped by {by} while queued (it never started)"
        log.info("run %s: stopped by %s while queued", run_id, by, extra={"run_id": run_id})
        return True

    def restart(self, run_id: str, *, by: str = "cli") -> dict[str, Any]:
        """Stop the current attempt if it still runs, then submit attempt+1, which resumes from the newest
        checkpoint in the run's checkpoint folder."""
        with self.db.session() as s:
            run = self._load(s, run_id)
            old_sid, was_terminal = run.ray_submission_id, RunStatus(run.status).is_terminal
            if run.status == RunStatus.QUEUED.value and run.waiting_for:
                raise Conflict(
                    f"run {run_id} waits in the queue for {run.waiting_for}: it starts when such a node joins the "
                    "cluster (`stop` drops it)"
                )
            if run.status == RunStatus.QUEUED.value:
                raise Conflict(
                    f"run {run_id} is queued for {run.purpose} and has not started: it starts when capacity frees "
                    "(an admin can move it with `priority`; `stop` drops it)"
                )
        if old_sid and not was_terminal:
            self.launcher.stop(old_sid)
            self._await_end(old_sid)  # the old attempt must not write checkpoints the new one is reading
        token = secrets.token_urlsafe(32)
        # an ended run restarted is new load on the cluster: with [compute] it is admitted or queued like a launch
        placing = self.compute.enabled and was_terminal
        with self._admission if placing else _NO_LOCK, self.db.session() as s:
            decision = self._place(s, ask_of(run_id, run.owner, run.config), priority=run.priority) if placing else None
            run = self._load(s, run_id)
            run.attempt += 1
            run.ray_submission_id = submission_id(run_id, run.attempt)
            run.status = RunStatus.RESTARTING.value
            if decision is not None and not decision.admit:
                run.status, run.queued_at = RunStatus.QUEUED.value, utcnow()
            run.stop_requested = False
            run.error = None
            run.ended_at = None
            run.telemetry_token_hash = token_hash(token)
            # the new attempt resumes from the checkpoint: progress is counted from there, not the old maximum
            run.last_step, run.last_step_at = run.checkpoint_step, None
            attempt = run.attempt
            queued = run.status == RunStatus.QUEUED.value
        if queued:
            log.info(
                "run %s: restart by %s as attempt %d, queued: %s",
                run_id,
                by,
                attempt,
                decision and decision.reason(),
                extra={"run_id": run_id},
            )
            return self.get(run_id)
        log.info("run %s: restart by %s as attempt %d", run_id, by, attempt, extra={"run_id": run_id})
        return self._submit(run_id, attempt=attempt, token=token)

    def _await_end(self, sid: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.launcher.job(sid)
            if job is None or job.status in (RAY_STOPPED, RAY_SUCCEEDED, RAY_FAILED):
                return
            time.sleep(0.2)
        log.warning("%s still running %s after stop; restarting anyway", sid, format_duration(timeout))

    # -- reconciling with Ray --------------------------------------------------------------------------------

    def _wait_for_a_node(self, run_id: str, config: Mapping[str, Any]) -> bool:
        """After a node loss: True (the run is queued, ``waiting_for`` says for what) when no alive node could run
        it now; the queue admits it once one joins (:meth:`admit_queued`). Ray unreadable: not queued (the
        submission itself meets Ray's answer)."""
        need = node_need(config)
        try:
            nodes = self.launcher.nodes()
        except RayUnavailable:
            return False
        if fits_a_node(nodes, need):
            return False
        with self.db.session() as s:
            run = self._load(s, run_id)
            run.status, run.queued_at = RunStatus.QUEUED.value, utcnow()
            run.waiting_for = need_words(need)
            run.restart_at = None
        log.warning("run %s: no alive node fits (%s): queued", run_id, need_words(need), extra={"run_id": run_id})
        return True

    def resubmit(self, run_id: str) -> dict[str, Any]:
        """Submit the current attempt of a run whose automatic restart is due (the watchdog scheduled it).

        The previous attempt is stopped first if it still runs (a hung job), so it writes no checkpoint the new one
        reads. Safe to repeat after a crash: a new telemetry token is issued each time, and Ray's "already exists"
        for our own submission id is success.
        """
        with self.db.session() as s:
            run = self._load(s, run_id)
            attempt, job_name, config = run.attempt, run.job, dict(run.config or {})
            remedy = remedy_of(run.config, attempt)
            lost_a_node = (run.node_losses or 0) > 0
        if lost_a_node and self._wait_for_a_node(run_id, config):
            return self.get(run_id)
        if attempt > 1:
            previous = submission_id(run_id, attempt - 1)
            job = self.launcher.job(previous)
            if job is not None and job.status not in (RAY_STOPPED, RAY_SUCCEEDED, RAY_FAILED):
                self.launcher.stop(previous)
                self._await_end(previous)
        if remedy is not None:  # a remedy's attempt: the checkpoints after the one it goes back to are set aside
            moved = roll_back(
                self.checkpoint_dir(run_id, job_name), remedy.get("checkpoint_step"), label=f"attempt-{attempt}"
            )
            if moved:
                log.info(
                    "run %s: checkpoints of steps %s set aside for attempt %d",
                    run_id,
                    ", ".join(map(str, moved)),
                    attempt,
                    extra={"run_id": run_id},
                )
        token = secrets.token_urlsafe(32)
        with self.db.session() as s:
            self._load(s, run_id).telemetry_token_hash = token_hash(token)
        view = self._submit(run_id, attempt=attempt, token=token)
        with self.db.session() as s:
            self._load(s, run_id).restart_at = None
        return view


def _shown(resources: Mapping[str, float]) -> dict[str, float]:
    """A node's resources as a person reads them: CPUs, GPUs and custom ones, not Ray's bookkeeping (memory, object
    store, ``node:IP`` markers)."""
    hidden = ("memory", "object_store_memory")
    return {k: v for k, v in resources.items() if k not in hidden and not k.startswith("node:")}


def node_need(config: Mapping[str, Any] | None) -> dict[str, float]:
    """What one node must have to run a run's entrypoint (from its stored config): its CPUs and GPUs when it
    reserves any, and its custom resources."""
    cfg = config or {}
    need = {str(k): float(v) for k, v in (cfg.get("resources") or {}).items() if isinstance(v, int | float)}
    if cfg.get("cpus"):
        need["CPU"] = float(cfg["cpus"])
    if cfg.get("gpus"):
        need["GPU"] = float(cfg["gpus"])
    return need


def need_words(need: Mapping[str, float]) -> str:
    """``a node with 1 CPU and accelerator=1``; ``any alive node`` when it needs nothing in particular."""
    words = []
    for name, amount in sorted(need.items(), key=lambda kv: (kv[0] not in ("CPU", "GPU"), kv[0])):
        n = f"{amount:g}"
        words.append(f"{n} {name}{'s' if name in ('CPU', 'GPU') and amount != 1 else ''}" if name in ("CPU", "GPU")
                     else f"{name}={n}")  # fmt: skip
    return f"a node with {' and '.join(words)}" if words else "any alive node"


def fits_a_node(nodes: Sequence[RayNode], need: Mapping[str, float]) -> bool:
    return any(n.fits(dict(need)) for n in nodes)


def remedy_of(config: Mapping[str, Any] | None, attempt: int) -> Mapping[str, Any] | None:
    """The remedial attempt ``attempt`` of a run is, from its lineage (``RunConfig.remedied``); None: not one."""
    for entry in (config or {}).get("remedied") or []:
        if isinstance(entry, Mapping) and entry.get("attempt") == attempt:
            return entry
    return None


def reconcile_run(run: Run, job: RayJob | None, now: datetime) -> tuple[int, str | None]:
    """Bring one run in line with what Ray says of its current attempt (the watchdog calls this every tick).

    Returns (1 if the status changed else 0, a submission id to stop or None): a run stopped while its job was
    PENDING — Ray's stop does nothing then — has its stop issued again until Ray ends the job.
    """
    if job is None:
        if run.status == RunStatus.RESTARTING.value and run.restart_at is not None:
            return 0, None  # an automatic restart is scheduled: the watchdog submits it when due
        if not RunStatus(run.status).is_terminal and now - run.updated_at > LOST_AFTER:
            run.status = RunStatus.FAILED.value
            run.error = f"{LOST} {run.ray_submission_id}: the submission was lost"
            run.ended_at = now
            return 1, None
        return 0, None
    if run.stop_requested and job.status not in (RAY_STOPPED, RAY_SUCCEEDED, RAY_FAILED):
        return 0, job.submission_id
    return _apply_ray_state(run, job), None


class _DuplicateKey(Exception):
    pass


class _NoLock:
    """A lock that is none: launches without [compute] are not serialized (they decide nothing)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_LOCK = _NoLock()


def _apply_ray_state(run: Run, job: RayJob) -> int:
    """Move ``run`` to what Ray says of its current attempt; returns 1 if the status changed."""
    before = run.status
    now = utcnow()
    if job.status == RAY_RUNNING and run.status in (RunStatus.PENDING.value, RunStatus.RESTARTING.value):
        run.status = RunStatus.RUNNING.value
        run.started_at = run.started_at or now
    elif job.status == RAY_SUCCEEDED:
        run.status = RunStatus.SUCCEEDED.value
    elif job.status == RAY_FAILED:
        run.status = RunStatus.FAILED.value
        # the exception's last line and the exit code, not Ray's envelope cut before them (the job's log has the rest)
        run.error = failure_reason.reason(job.error_type, redact_token(job.message, run.telemetry_token_hash))
    elif job.status == RAY_STOPPED and not run.stop_requested:
        run.status = RunStatus.STOPPED.value
        message = redact_token(job.message, run.telemetry_token_hash)
        run.error = run.error or f"stopped outside labbot: {message}".strip()
    if run.status != before and RunStatus(run.status).is_terminal:
        run.ended_at = now
    return int(run.status != before)
