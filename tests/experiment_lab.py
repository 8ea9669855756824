"""An experiment's world for tests: the real run service, experiment service, controller, Optuna study and
database, over the recording Ray double (``tests/compute_support.py``). Runs "train" when a test says so: each job
on Ray reports its next points of a known curve through the real telemetry store, and succeeds at its last step;
the watchdog's reconciling (``reconcile_run``) brings the runs in line with Ray, then the controller ticks.

The toy job's loss is a known function of its parameters, so a test knows the best config: lowest at
``lr = 1e-2.5`` and the widest ``width``, plus a decaying transient and a seed's small offset.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from compute_support import RecordingRay, compute_service
from sqlalchemy import select

from labbot.storage.artifacts import ArtifactStore
from labbot.storage.models import Run, RunStatus, utcnow
from labbot.training.claims import StoreSources
from labbot.training.experiments.controller import StepReport
from labbot.training.experiments.plan import ExperimentRequest
from labbot.training.experiments.service import ExperimentService
from labbot.training.experiments.study import Studies
from labbot.training.findings import FindingStore
from labbot.training.service import reconcile_run
from labbot.training.telemetry_ingest import parse_batch
from labbot.training.telemetry_store import TelemetryStore

TOY = {
    "toy": {
        "entrypoint": "sleep 600",
        "description": "a curve known in advance",
        "params": {"lr": 1e-3, "width": 64, "steps": 90, "seed": 0, "log_every": 10, "mode": "ok"},
        "reports": ["loss", "acc"],
        "step_seconds": 1.0,
    }
}


def toy_loss(params: dict[str, Any], step: int) -> float:
    if params.get("mode") == "nan" and step >= 30:
        return math.nan
    lr, width, seed = float(params["lr"]), int(params["width"]), int(params["seed"])
    base = (math.log10(lr) + 2.5) ** 2 + 6.4 / width
    return base + 2.0 * math.exp(-step / 20) + 0.001 * ((seed * 7919) % 13)


class Lab:
    def __init__(
        self,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        *,
        compute: dict[str, Any] | None = None,
        database_url: str | None = None,
        ray: RecordingRay | None = None,
    ) -> None:
        self.service, self.ray = compute_service(
            tmp_path, monkeypatch, compute, ray=ray, jobs=TOY, database_url=database_url
        )
        self.db = self.service.db
        self.service.totals_ttl_s = 0.0
        self.studies = Studies(self.db.engine.url.render_as_string(hide_password=False))
        self.offset = timedelta(0)  # how far the controller's clock is ahead of the wall clock (budget tests)
        self.telemetry = TelemetryStore(self.db)
        self.artifacts = ArtifactStore(self.db, str(tmp_path / "artifacts"))
        # what the lab learned: each ended experiment's finding, its numbers checked against these same stores
        self.findings = FindingStore(
            self.db, self.artifacts, StoreSources(self.telemetry.series, lambda exp_id: self.experiments.get(exp_id))
        )
        self.experiments = ExperimentService(
            self.db, self.service, self.studies, clock=self.clock, findings=self.findings
        )
        self.progress: dict[str, int] = {}  # submission id → last step reported
        self.fail_at: dict[str, int] = {}  # run id → the step at which its job fails
        self.hold: set[str] = set()  # run ids whose jobs report nothing more (hung)

    def clock(self) -> datetime:
        return utcnow() + self.offset

    def sweep(self, **kw: Any) -> dict[str, Any]:
        kw.setdefault("job", "toy")
        kw.setdefault("metric", "loss")
        return self.experiments.create(ExperimentRequest(**kw))

    def tick(self) -> StepReport:
        self.sync()
        return self.experiments.controller.tick()

    def sync(self) -> None:
        """The watchdog's reconciling: every active run moved to what Ray says of it."""
        with self.db.session() as s:
            for run in s.scalars(select(Run).where(Run.status.notin_(("succeeded", "failed", "stopped", "queued")))):
                job = self.service.launcher.job(run.ray_submission_id or "")
                reconcile_run(run, job, run.updated_at)
        self.service.admit_queued()

    def train(self, points: int = 1) -> None:
        """Each job running on Ray reports its next ``points`` points; one at its last step succeeds."""
        for sub in list(self.ray.submitted):
            sid = str(sub["submission_id"])
            if self.ray.status.get(sid) != "RUNNING":
                continue
            env = sub["runtime_env"]["env_vars"]
            run_id, token = env["LABBOT_RUN_ID"], env["LABBOT_TELEMETRY_TOKEN"]
            if run_id in self.hold:
                continue
            params = self._params(run_id)
            every, last = int(params["log_every"]), int(params["steps"])
            for _ in range(points):
                step = self.progress.get(sid, 0) + every
                if step > last:
                    break
                if self.fail_at.get(run_id) == step:
                    self.ray.status[sid] = "FAILED"
                    break
                self.telemetry.authenticate(run_id, token)
                body = {"attempt": int(env["LABBOT_ATTEMPT"]), "points": [
                    {"step": step, "metrics": {"loss": _json_float(self.loss(params, step))}}
                ]}  # fmt: skip
                self.telemetry.ingest(run_id, parse_batch(json.dumps(body).encode()))
                self.progress[sid] = step
                if step + every > last:
                    self.ray.finish(sid)
                    break

    def loss(self, params: dict[str, Any], step: int) -> float:
        """What a run with ``params`` reports at ``step`` (the toy curve; a benchmark replays recorded curves)."""
        return toy_loss(params, step)

    def _params(self, run_id: str) -> dict[str, Any]:
        with self.db.session() as s:
            return dict(s.get_one(Run, run_id).config["params"])

    def run_to_end(self, *, max_ticks: int = 200, points: int = 1) -> list[StepReport]:
        reports = []
        for _ in range(max_ticks):
            reports.append(self.tick())
            exp_open = [e for e in self.experiments.experiments() if e["status"] in ("running", "paused")]
            if not exp_open and not self.active_runs():
                break
            self.train(points)
        return reports

    def active_runs(self) -> list[str]:
        with self.db.session() as s:
            done = (RunStatus.SUCCEEDED.value, RunStatus.FAILED.value, RunStatus.STOPPED.value)
            return list(s.scalars(select(Run.id).where(Run.status.notin_(done))))

    def runs_of(self, exp_id: str) -> list[Run]:
        with self.db.session() as s:
            rows = list(s.scalars(select(Run).where(Run.experiment_id == exp_id).order_by(Run.created_at)))
            s.expunge_all()
            return rows


def _json_float(v: float) -> Any:
    return v if math.isfinite(v) else "NaN"
