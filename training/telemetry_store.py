"""Telemetry storage: checking a job's per-run bearer token and storing its batches of metric points.

The HTTP layer reads and size-limits the body, ``labbot.training.telemetry_ingest`` validates it, and this stores it:
one bulk insert (a retried batch is stored once) and one update of the run's liveness columns (last telemetry, last step
and when it advanced, checkpoint step, latest metrics) that the watchdog reads.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select

from labbot.common.errors import Unauthorized, UnknownRun
from labbot.common.observe import NO_OBSERVER, Observer
from labbot.storage.db import Database
from labbot.storage.floats import encode_float
from labbot.storage.models import MetricPoint, Run, RunCheckpoint, RunStatus, utcnow
from labbot.training.alerts import alerts_of
from labbot.training.monitoring import observe
from labbot.training.telemetry_ingest import TelemetryBatch


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# the shape of a run's telemetry token (``secrets.token_urlsafe(32)``: 43 URL-safe characters), standing alone
_TOKEN_SHAPE = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])")


def redact_token(text: str, expected_hash: str | None, *, redacted: str = "[redacted]") -> str:
    """``text`` with every occurrence of the token whose hash is ``expected_hash`` replaced: labbot keeps only a
    run's token hash, so a job that prints its environment is caught by hashing each token-shaped word."""
    if not expected_hash or not text:
        return text
    return _TOKEN_SHAPE.sub(
        lambda m: redacted if hmac.compare_digest(token_hash(m.group(0)), expected_hash) else m.group(0), text
    )


def checkpoint_rows(
    run_id: str, batch: TelemetryBatch, known: dict[str, Any], last_step: int | None, now: datetime
) -> list[dict[str, Any]]:
    """The ``run_checkpoints`` rows of a batch's checkpoint events, each with the run's metrics at its step: what the
    control plane had (``known``, as of ``last_step``) when that is not past the checkpoint (a restart re-running
    steps is), updated with the batch's points up to the checkpoint's step (encoded: NaN stays "NaN")."""
    out = []
    points = sorted(batch.points, key=lambda p: p.step)
    for e in batch.events:
        if e.kind != "checkpoint":
            continue
        health = dict(known) if last_step is None or last_step <= e.step else {}
        for p in points:
            if p.step <= e.step:
                health.update({k: encode_float(v) for k, v in p.metrics.items()})
        out.append({"run_id": run_id, "attempt": batch.attempt, "step": e.step, "path": e.path, "written_at": now,
                    "metrics": health})  # fmt: skip
    return out


class TelemetryStore:
    def __init__(self, db: Database, *, observer: Observer = NO_OBSERVER) -> None:
        self.db = db
        self.observer = observer  # counts the points stored (``labbot_telemetry_points_total``)

    def authenticate(self, run_id: str, token: str | None) -> None:
        """Raises Unauthorized unless ``token`` is this run's telemetry token (same answer for unknown runs)."""
        with self.db.session() as s:
            run = s.get(Run, run_id)
            expected = run.telemetry_token_hash if run else None
        if not token or expected is None or not hmac.compare_digest(token_hash(token), expected):
            raise Unauthorized("missing or wrong telemetry token for this run")

    def ingest(self, run_id: str, batch: TelemetryBatch) -> int:
        """Store a (pre-authenticated, validated) batch; returns the number of points stored."""
        stored = self._ingest(run_id, batch)
        if stored:
            self.observer.telemetry_points(stored)  # after the commit: what was stored, not what was tried
        return stored

    def _ingest(self, run_id: str, batch: TelemetryBatch) -> int:
        now = utcnow()
        rows: list[dict[str, Any]] = []
        for p in batch.points:
            for name, value in p.metrics.items():
                rows.append(
                    {
                        "run_id": run_id,
                        "attempt": batch.attempt,
                        "step": p.step,
                        "name": name,
                        "value": value,
                        "ts": p.when,
                    }
                )
        with self.db.session() as s:
            run = s.get_one(Run, run_id)
            if rows:
                s.execute(self.db.insert_ignoring_duplicates(MetricPoint), rows)
            checkpoints = checkpoint_rows(run_id, batch, run.metrics or {}, run.last_step, now)
            if checkpoints:
                s.execute(self.db.insert_ignoring_duplicates(RunCheckpoint), checkpoints)
            if batch.attempt != run.attempt:
                return len(batch.points)  # a previous attempt flushing its tail: kept, but not liveness
            run.last_telemetry_at = now
            if batch.points:
                last = max(batch.points, key=lambda p: p.step)
                if run.last_step is None or last.step > run.last_step:
                    run.last_step = last.step
                    run.last_step_at = now
                merged = dict(run.metrics or {})
                for p in sorted(batch.points, key=lambda p: p.step):
                    merged.update({k: encode_float(v) for k, v in p.metrics.items()})
                run.metrics = merged
            points = [(p.step, p.when, p.metrics) for p in batch.points]
            run.vitals = observe(  # what the watchdog judges
                run.vitals or {}, batch.attempt, points, now=now, alerts=alerts_of(run.config), phase=batch.phase
            )
            ckpts = [e.step for e in batch.events if e.kind == "checkpoint"]
            if ckpts:
                run.checkpoint_step = max([*ckpts, run.checkpoint_step or 0])
            if run.status in (RunStatus.PENDING.value, RunStatus.RESTARTING.value):
                run.status = RunStatus.RUNNING.value  # telemetry proves the attempt runs
                run.started_at = run.started_at or now
        return len(batch.points)

    def checkpoints(self, run_id: str) -> list[dict[str, Any]]:
        """The checkpoints the run's job reported, oldest first, each with its health (the metrics at its step)."""
        with self.db.session() as s:
            if s.get(Run, run_id) is None:
                raise UnknownRun(f"unknown run {run_id!r}; list runs with `labbot runs`")
            q = (
                select(RunCheckpoint)
                .where(RunCheckpoint.run_id == run_id)
                .order_by(RunCheckpoint.step, RunCheckpoint.attempt)
            )
            return [
                {"attempt": c.attempt, "step": c.step, "path": c.path, "written_at": c.written_at.isoformat(),
                 "metrics": dict(c.metrics or {})}
                for c in s.scalars(q)
            ]  # fmt: skip

    def metrics(self, run_id: str, name: str, *, limit: int = 10_000) -> list[tuple[int, float]]:
        with self.db.session() as s:
            if s.get(Run, run_id) is None:
                raise UnknownRun(f"unknown run {run_id!r}; list runs with `labbot runs`")
            q = (
                select(MetricPoint.step, MetricPoint.value)
                .where(MetricPoint.run_id == run_id, MetricPoint.name == name)
                .order_by(MetricPoint.step, MetricPoint.id)
                .limit(limit)
            )
            return [(int(step), float(value)) for step, value in s.execute(q)]

    def series(self, run_id: str, names: Sequence[str]) -> dict[str, list[tuple[int, float]]]:
        """Each named metric's points, one per step in step order (where a restarted attempt re-ran steps, its
        values win): what a run's plot draws. A metric with no points yet is an empty list."""
        out: dict[str, list[tuple[int, float]]] = {}
        for name in names:
            latest: dict[int, float] = {}
            for step, value in self.metrics(run_id, name):
                latest[step] = value  # ordered by step, then insertion: the newest attempt's value comes last
            out[name] = sorted(latest.items())
        return out

    def attempt_starts(self, run_id: str) -> list[tuple[int, int]]:
        """``[(attempt, first step it reported)]``, for marking restarts on a run's plot."""
        with self.db.session() as s:
            q = (
                select(MetricPoint.attempt, func.min(MetricPoint.step))
                .where(MetricPoint.run_id == run_id)
                .group_by(MetricPoint.attempt)
                .order_by(MetricPoint.attempt)
            )
            return [(int(a), int(step)) for a, step in s.execute(q)]
