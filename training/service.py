"""The run service: the one place that launches, stops, restarts, reconciles and ingests telemetry for runs.

Every front door (HTTP ``/api/v1`` for the CLI and the ``lab`` MCP server, Slack, agents) goes through here, so
the rules hold whatever the front end: input is checked before anything is written; a run is a row before it is a
Ray job; a Ray failure leaves the run ``failed`` with the reason, never half-created; the same idempotency key
maps to the same run and so to one Ray job. Sits in the control plane: ``training → storage``; blocking calls
(DB, Ray) — the HTTP layer runs them on worker threads.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from labbot.common.durations import format_duration
from labbot.common.errors import Conflict, LabbotError, UnknownRun
from labbot.storage.db import Database
from labbot.storage.models import LaunchKey, Run, RunStatus, utcnow
from labbot.training.launcher import (
    RAY_FAILED,
    RAY_PENDING,
    RAY_RUNNING,
    RAY_STOPPED,
    RAY_SUCCEEDED,
    RayJob,
    RayLauncher,
    Submission,
    submission_id,
)
from labbot.training.registry import JobRegistry
from labbot.training.specs import LaunchRequest, RunConfig, entrypoint_command, resolve_launch
from labbot.training.telemetry_store import redact_token, token_hash
from labbot.training.views import run_view

log = logging.getLogger(__name__)

_ID_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i: ids are read aloud and typed
LOST_AFTER = timedelta(seconds=60)
LOST = "Ray has no job"  # how a lost submission's error begins


def new_run_id() -> str:
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(6))


@dataclass(frozen=True)
class LaunchResult:
    run: dict[str, Any]
    created: bool


class RunService:
    def __init__(
        self,
        db: Database,
        registry: JobRegistry,
        launcher: RayLauncher,
        *,
        control_url: str,
        checkpoint_root: Path,
    ) -> None:
        self.db = db
        self.registry = registry
        self.launcher = launcher
        self.control_url = control_url.rstrip("/")
        self.checkpoint_root = checkpoint_root

    # -- launching -------------------------------------------------------------------------------------------

    def launch(self, req: LaunchRequest) -> LaunchResult:
        spec = self.registry.get(req.job)
        cfg = resolve_launch(spec, req)  # every input check happens before anything is written
        if req.idempotency_key:
            existing = self._run_for_key(req.idempotency_key)
            if existing is not None:
                return LaunchResult(existing, created=False)
        token = secrets.token_urlsafe(32)
        try:
            run_id = self._insert_run(req, cfg, token)
        except _DuplicateKey:
            existing = self._run_for_key(req.idempotency_key or "")
            assert existing is not None
            return LaunchResult(existing, created=False)
        return LaunchResult(self._submit(run_id, attempt=1, token=token), created=True)

    def _run_for_key(self, key: str) -> dict[str, Any] | None:
        with self.db.session() as s:
            row = s.get(LaunchKey, key)
            return run_view(s.get_one(Run, row.run_id)) if row else None

    def _insert_run(self, req: LaunchRequest, cfg: RunConfig, token: str) -> str:
        for _ in range(5):
            run_id = new_run_id()
            try:
                with self.db.session() as s:
                    s.add(
                        Run(
                            id=run_id,
                            job=req.job,
                            name=req.name or f"{req.job}-{run_id}",
                            owner=req.owner,
                            config=cfg.model_dump(),
                            status=RunStatus.PENDING.value,
                            attempt=1,
                            ray_submission_id=submission_id(run_id, 1),
                            telemetry_token_hash=token_hash(token),
                            metrics={},
                            stop_requested=False,
                        )
                    )
                    s.flush()
                    if req.idempotency_key:
                        # same transaction: a concurrent duplicate key rolls its run back, nothing half-created
                        s.add(LaunchKey(key=req.idempotency_key, run_id=run_id))
                        s.flush()
                return run_id
            except IntegrityError as e:
                if req.idempotency_key and "launch_keys" in str(e.orig):
                    raise _DuplicateKey from None
                if "runs" not in str(e.orig):
                    raise
                continue  # run id collision: draw another
        raise LabbotError("could not allocate a run id")

    def checkpoint_dir(self, run_id: str) -> Path:
        return self.checkpoint_root / run_id / "checkpoints"

    def _submit(self, run_id: str, *, attempt: int, token: str) -> dict[str, Any]:
        with self.db.session() as s:
            run = s.get_one(Run, run_id)
            spec = self.registry.get(run.job)
            cfg = RunConfig.model_validate(run.config)
            ckpt = self.checkpoint_dir(run_id)
            ckpt.mkdir(parents=True, exist_ok=True)
            env = dict(spec.env)
            env.update(
                LABBOT_RUN_ID=run_id,
                LABBOT_ATTEMPT=str(attempt),
                LABBOT_TELEMETRY_TOKEN=token,
                LABBOT_CONTROL_URL=self.control_url,
                LABBOT_CHECKPOINT_DIR=str(ckpt),
            )
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
            )
        with self.db.session() as s:
            s.get_one(Run, run_id).attempt_started_at = utcnow()  # the pending timer and stall baselines
        try:
            self.launcher.submit(sub)
        except LabbotError as e:
            self._fail(run_id, e.message)
            raise
        except Exception as e:  # the run must end up failed with a reason, whatever Ray said
            self._fail(run_id, f"Ray rejected the submission: {e}")
            raise LabbotError(f"Ray rejected the submission of run {run_id}: {e}") from None
        return self.get(run_id)

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

    def get(self, run_id: str, *, wait: float = 0.0) -> dict[str, Any]:
        """A run. With ``wait`` > 0, a run that Ray has not started yet is watched (one Ray call every 0.1 s,
        the database touched only on a change) until it starts or ends, or ``wait`` seconds pass."""
        with self.db.session() as s:
            run = self._load(s, run_id)
            sid, status = run.ray_submission_id, RunStatus(run.status)
            view = run_view(run)
        if wait <= 0 or not sid or status not in (RunStatus.PENDING, RunStatus.RESTARTING):
            return view
        deadline = time.monotonic() + wait
        while True:
            job = self.launcher.job(sid)
            if job is not None and job.status != RAY_PENDING:
                with self.db.session() as s:
                    run = self._load(s, run_id)
                    if run.ray_submission_id == sid:
                        _apply_ray_state(run, job)
                    return run_view(run)
            if time.monotonic() >= deadline:
                return self.get(run_id)
            time.sleep(0.1)

    def runs(self, *, status: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        with self.db.session() as s:
            q = select(Run).order_by(Run.created_at.desc()).limit(limit)
            if status:
                q = q.where(Run.status == status)
            return [run_view(r) for r in s.scalars(q)]

    def logs(self, run_id: str, *, tail: int | None = None) -> str:
        """A run's job output, with every secret labbot knows of redacted by the launcher (its environment's, Ray's
        token, the credential shapes): whatever front door shows it — Slack, the CLI, an agent — shows no secret."""
        with self.db.session() as s:
            run = self._load(s, run_id)
            sid, own_token = run.ray_submission_id, run.telemetry_token_hash
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
        return self.get(run_id)

    def restart(self, run_id: str, *, by: str = "cli") -> dict[str, Any]:
        """Stop the current attempt if it still runs, then submit attempt+1, which resumes from the newest
        checkpoint in the run's checkpoint folder."""
        with self.db.session() as s:
            run = self._load(s, run_id)
            old_sid, was_terminal = run.ray_submission_id, RunStatus(run.status).is_terminal
        if old_sid and not was_terminal:
            self.launcher.stop(old_sid)
            self._await_end(old_sid)  # the old attempt must not write checkpoints the new one is reading
        token = secrets.token_urlsafe(32)
        with self.db.session() as s:
            run = self._load(s, run_id)
            run.attempt += 1
            run.ray_submission_id = submission_id(run_id, run.attempt)
            run.status = RunStatus.RESTARTING.value
            run.stop_requested = False
            run.error = None
            run.ended_at = None
            run.telemetry_token_hash = token_hash(token)
            # the new attempt resumes from the checkpoint: progress is counted from there, not the old maximum
            run.last_step, run.last_step_at = run.checkpoint_step, None
            attempt = run.attempt
        log.info("run %s: restart by %s as attempt %d", run_id, by, attempt)
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

    def resubmit(self, run_id: str) -> dict[str, Any]:
        """Submit the current attempt of a run whose automatic restart is due (the watchdog scheduled it).

        The previous attempt is stopped first if it still runs (a hung job), so it writes no checkpoint the new one
        reads. Safe to repeat after a crash: a new telemetry token is issued each time, and Ray's "already exists"
        for our own submission id is success.
        """
        with self.db.session() as s:
            run = self._load(s, run_id)
            attempt = run.attempt
        if attempt > 1:
            previous = submission_id(run_id, attempt - 1)
            job = self.launcher.job(previous)
            if job is not None and job.status not in (RAY_STOPPED, RAY_SUCCEEDED, RAY_FAILED):
                self.launcher.stop(previous)
                self._await_end(previous)
        token = secrets.token_urlsafe(32)
        with self.db.session() as s:
            self._load(s, run_id).telemetry_token_hash = token_hash(token)
        view = self._submit(run_id, attempt=attempt, token=token)
        with self.db.session() as s:
            self._load(s, run_id).restart_at = None
        return view


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
        run.error = f"{job.error_type or 'FAILED'}: {redact_token(job.message, run.telemetry_token_hash)}".strip()
    elif job.status == RAY_STOPPED and not run.stop_requested:
        run.status = RunStatus.STOPPED.value
        message = redact_token(job.message, run.telemetry_token_hash)
        run.error = run.error or f"stopped outside labbot: {message}".strip()
    if run.status != before and RunStatus(run.status).is_terminal:
        run.ended_at = now
    return int(run.status != before)
