"""The experiment service: the one place front doors create, read, pause, resume and stop experiments (and stop one
trial). Every front door (HTTP ``/api/v1/experiments`` for the CLI and the ``lab`` MCP server, Slack) goes through
here; the controller (:mod:`.controller`) does the rest on the leader's tick.

Creating checks everything first (:func:`.plan.resolve_experiment`) and writes nothing on a refusal; then the study
is created in Optuna's storage and the experiment's row written — a study with no row (labbot stopped in between) is
never read. Its first trials are launched by the controller at its next tick (the caller may bring the tick
forward). Blocking (database, Optuna's storage): the HTTP layer runs it on worker threads.
"""

from __future__ import annotations

import contextlib
import secrets
import statistics
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import select

from labbot.common.errors import BadRequest, Conflict, LabbotError, UnknownExperiment
from labbot.storage.db import Database
from labbot.storage.models import Experiment, ExperimentStatus, ExperimentTrial, Run, RunStatus, TrialStatus, utcnow
from labbot.training.experiments.controller import ExperimentController
from labbot.training.experiments.plan import Budget, ExperimentPlan, ExperimentRequest, resolve_experiment
from labbot.training.experiments.scores import aligned_means, rank, score, verdict
from labbot.training.experiments.study import Studies
from labbot.training.findings import FindingStore, experiment_finding
from labbot.training.run_json import run_view
from labbot.training.service import RunService

_ID_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
HISTORY_RUNS = 20  # the job's latest finished runs a step's time is learned from


def new_experiment_id() -> str:
    return "x" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(6))


class ExperimentService:
    def __init__(
        self,
        db: Database,
        runs: RunService,
        studies: Studies,
        *,
        clock: Callable[[], datetime] = utcnow,
        findings: FindingStore | None = None,
    ) -> None:
        """``findings``: where an ended experiment's finding is kept (none: no finding is recorded)."""
        self.db = db
        self.runs = runs
        self.studies = studies
        self.findings = findings
        self.controller = ExperimentController(
            db, runs, studies, clock=clock, on_end=self.record_finding if findings is not None else None
        )
        self.clock = clock

    # -- creating --------------------------------------------------------------------------------------------

    def step_seconds(self, job: str) -> tuple[float | None, str]:
        """What a step of ``job`` takes: the median over its latest finished runs (seconds on Ray ÷ steps), else
        what the job declares; and where the figure came from, in words."""
        with self.db.session() as s:
            rows = s.execute(
                select(Run.started_at, Run.ended_at, Run.last_step)
                .where(Run.job == job, Run.status == RunStatus.SUCCEEDED.value, Run.last_step > 0)
                .order_by(Run.created_at.desc())
                .limit(HISTORY_RUNS)
            ).all()
        rates = [
            (end - start).total_seconds() / steps
            for start, end, steps in rows
            if start is not None and end is not None and steps and end > start
        ]
        if rates:
            return statistics.median(rates), f"the median of its {len(rates)} latest finished run(s)"
        spec = self.runs.registry.get(job)
        if spec.step_seconds is not None:
            return spec.step_seconds, "as the job declares (no finished run to learn from yet)"
        return None, "unknown"

    def plan(self, req: ExperimentRequest, *, search_seed: int | None = None) -> ExperimentPlan:
        """The checked plan of ``req`` with its projected cost; writes nothing (what an approval shows)."""
        spec = self.runs.registry.get(req.job)
        seconds, basis = self.step_seconds(req.job)
        seed = search_seed if search_seed is not None else secrets.randbelow(2**31)
        return resolve_experiment(spec, req, step_seconds=seconds, step_basis=basis, search_seed=seed)

    def create(self, req: ExperimentRequest, *, plan: ExperimentPlan | None = None) -> dict[str, Any]:
        """Start ``req`` (checked by :meth:`plan`, or ``plan`` when the caller checked it already)."""
        plan = plan or self.plan(req)
        with self.db.session() as s:
            for _ in range(5):
                exp_id = new_experiment_id()
                if s.get(Experiment, exp_id) is None:
                    break
            else:
                raise LabbotError("could not allocate an experiment id")
        study = f"labbot-{exp_id}"
        self.studies.create(study, plan.goal)
        with self.db.session() as s:
            s.add(
                Experiment(
                    id=exp_id,
                    name=plan.name,
                    owner=plan.owner,
                    job=plan.job,
                    purpose=plan.purpose,
                    spec=plan.to_json(),
                    status=ExperimentStatus.RUNNING.value,
                    study_name=study,
                    summary_posted=False,
                )
            )
        return self.get(exp_id)

    # -- reading ---------------------------------------------------------------------------------------------

    def _row(self, s: Any, exp_id: str) -> Experiment:
        exp = s.get(Experiment, exp_id)
        if exp is None:
            raise UnknownExperiment(f"unknown experiment {exp_id!r}; list them with `labbot experiments`")
        return exp

    def get(self, exp_id: str) -> dict[str, Any]:
        """An experiment as JSON: its plan, counts, budget used, every trial with its runs, the ranking of its
        scored configs with intervals and the verdict between the best two."""
        with self.db.session() as s:
            exp = self._row(s, exp_id)
            trials = list(
                s.scalars(
                    select(ExperimentTrial)
                    .where(ExperimentTrial.experiment_id == exp_id)
                    .order_by(ExperimentTrial.number)
                )
            )
            run_ids = [r for t in trials for r in t.run_ids]
            runs = {r.id: run_view(r) for r in s.scalars(select(Run).where(Run.id.in_(run_ids)))} if run_ids else {}
            plan = ExperimentPlan.from_row(exp.job, exp.name, exp.owner, exp.purpose, exp.spec)
            doc = _experiment_json(exp, plan)
            doc["trials"] = [_trial_json(t, runs) for t in trials]
        used = self.controller.used_hours(exp_id, plan)
        doc["budget_used"] = {"amount": used, "unit": plan.budget.unit if plan.budget else "cpu"}
        doc["counts"] = counts(doc["trials"], runs, plan.trials)
        doc["results"] = results(doc["trials"], plan)
        return doc

    def experiments(self, *, limit: int = 50) -> list[dict[str, Any]]:
        with self.db.session() as s:
            rows = list(s.scalars(select(Experiment).order_by(Experiment.created_at.desc()).limit(limit)))
            return [
                _experiment_json(e, ExperimentPlan.from_row(e.job, e.name, e.owner, e.purpose, e.spec)) for e in rows
            ]

    def find(self, name: str) -> str | None:
        """The id of the oldest experiment named ``name``, if any (the research service names each arm's
        ``QUESTION/ARM``)."""
        with self.db.session() as s:
            q = select(Experiment.id).where(Experiment.name == name).order_by(Experiment.created_at).limit(1)
            return s.scalar(q)

    def curves(self, exp_id: str) -> dict[int, list[tuple[int, float]]]:
        """Each trial's objective metric against step, the mean across its seeds at the steps every seed reported
        (what its thread's overlay plot draws)."""
        with self.db.session() as s:
            exp = self._row(s, exp_id)
            metric = exp.spec["objective"]["metric"]
            trials = [(t.number, list(t.run_ids)) for t in s.scalars(
                select(ExperimentTrial).where(ExperimentTrial.experiment_id == exp_id)
            )]  # fmt: skip
        out = {}
        for number, run_ids in trials:
            points = self.controller.points(run_ids, metric)
            out[number] = aligned_means([points[r] for r in run_ids], after=None, goal="min") if run_ids else []
        return out

    def dimensions(self, exp_id: str) -> list[tuple[str, bool]]:
        """The searched parameters, each with whether it is drawn on a log scale."""
        with self.db.session() as s:
            exp = self._row(s, exp_id)
            plan = ExperimentPlan.from_row(exp.job, exp.name, exp.owner, exp.purpose, exp.spec)
        return [(d.name, d.kind == "loguniform") for d in plan.space.dimensions]

    def set_thread(self, exp_id: str, channel: str, thread_ts: str) -> None:
        """Record where the experiment's Slack thread is."""
        with self.db.session() as s:
            exp = self._row(s, exp_id)
            exp.channel, exp.thread_ts = channel, thread_ts

    def open_threads(self) -> list[str]:
        """Experiments whose thread still needs upkeep: posted, and their summary not yet (the thread keeper's list)."""
        with self.db.session() as s:
            q = select(Experiment.id).where(Experiment.thread_ts.is_not(None), Experiment.summary_posted.is_(False))
            return list(s.scalars(q))

    def card_posted(self, exp_id: str, digest: str) -> None:
        with self.db.session() as s:
            self._row(s, exp_id).card_digest = digest

    def summary_done(self, exp_id: str) -> None:
        with self.db.session() as s:
            self._row(s, exp_id).summary_posted = True

    def record_finding(self, exp_id: str) -> dict[str, Any] | None:
        """The finding an ended experiment leaves (once: its source is the experiment), its numbers checked."""
        if self.findings is None:
            return None
        doc = self.get(exp_id)
        made = experiment_finding(doc)
        links = {"experiment": exp_id, "study": doc["study"]}
        if doc.get("channel") and doc.get("thread_ts"):
            links["thread"] = f"{doc['channel']}/{doc['thread_ts']}"
        return self.findings.record(
            kind="experiment", source=f"experiment:{exp_id}", owner=doc["owner"], links=links, **made
        )

    def owner_of(self, exp_id: str) -> str:
        with self.db.session() as s:
            return self._row(s, exp_id).owner

    # -- acting ----------------------------------------------------------------------------------------------

    def pause(self, exp_id: str, *, by: str = "cli") -> dict[str, Any]:
        """Launch nothing more; trials on Ray go on (and are followed, pruned and scored)."""
        return self._move(exp_id, ExperimentStatus.RUNNING, ExperimentStatus.PAUSED, f"paused by {by}")

    def resume(self, exp_id: str, *, by: str = "cli") -> dict[str, Any]:
        return self._move(exp_id, ExperimentStatus.PAUSED, ExperimentStatus.RUNNING, f"resumed by {by}")

    def _move(self, exp_id: str, was: ExperimentStatus, to: ExperimentStatus, reason: str) -> dict[str, Any]:
        with self.db.session() as s:
            exp = self._row(s, exp_id)
            if exp.status != was.value:
                verb = "paused" if to is ExperimentStatus.PAUSED else "resumed"
                raise Conflict(f"experiment {exp_id} is {exp.status}; only a {was.value} experiment can be {verb}")
            exp.status, exp.reason = to.value, reason
        return self.get(exp_id)

    def stop(self, exp_id: str, *, by: str = "cli") -> dict[str, Any]:
        """Stop the experiment: running trials stopped, nothing more launched, the study kept."""
        with self.db.session() as s:
            exp = self._row(s, exp_id)
            if ExperimentStatus(exp.status).is_terminal:
                raise Conflict(f"experiment {exp_id} is already {exp.status}; nothing to stop")
        self.controller.end(exp_id, ExperimentStatus.STOPPED, f"stopped by {by}")
        return self.get(exp_id)

    def amend(
        self, exp_id: str, *, trials: int | None = None, concurrency: int | None = None, budget: Budget | None = None
    ) -> dict[str, Any]:
        """Change an experiment's limits (the research service's approved changes): its trials limit, concurrency,
        budget (in the budget's unit). More trials reopen an experiment that had ended because its trials were done;
        a limit below what already ran launches nothing more."""
        with self.db.session() as s:
            exp = self._row(s, exp_id)
            spec = dict(exp.spec)
            if budget is not None:
                was = spec.get("budget")
                if was is not None and was["unit"] != budget.unit:
                    raise BadRequest(f"experiment {exp_id}'s budget is in {was['unit'].upper()}-h, not {budget.unit}")
                spec["budget"] = {"amount": budget.amount, "unit": budget.unit}
            if concurrency is not None:
                spec["concurrency"] = concurrency
            if trials is not None:
                reopen = trials > int(spec["trials"]) and exp.status == ExperimentStatus.DONE.value
                spec["trials"] = trials
                proj = dict(spec["projection"])
                if proj.get("trial_hours") is not None:
                    proj["total_hours"] = proj["trial_hours"] * trials
                spec["projection"] = proj
                if reopen:
                    exp.status, exp.reason, exp.ended_at = ExperimentStatus.RUNNING.value, "more trials approved", None
            exp.spec = spec
        return self.get(exp_id)

    def stop_trial(self, exp_id: str, number: int, *, by: str = "cli") -> dict[str, Any]:
        """Stop one trial's runs; the trial is ``stopped`` (told to Optuna as failed, never a score) and the
        experiment goes on with the next."""
        with self.db.session() as s:
            self._row(s, exp_id)
            trial = s.get(ExperimentTrial, (exp_id, number))
            if trial is None:
                raise BadRequest(f"experiment {exp_id} has no trial #{number}; `labbot experiment {exp_id}` lists them")
            if TrialStatus(trial.status).is_terminal:
                raise Conflict(f"trial #{number} of {exp_id} is already {trial.status}; nothing to stop")
            run_ids = list(trial.run_ids)
        for run_id in run_ids:
            with contextlib.suppress(Conflict):  # that seed had ended
                self.runs.stop(run_id, by=f"{by} (trial #{number} of experiment {exp_id})")
        return self.get(exp_id)


def _ts(v: datetime | None) -> str | None:
    return v.isoformat() if v is not None else None


def _experiment_json(exp: Experiment, plan: ExperimentPlan) -> dict[str, Any]:
    spec = plan.to_json()
    return {
        "id": exp.id,
        "name": exp.name,
        "owner": exp.owner,
        "job": exp.job,
        "purpose": exp.purpose,
        "status": exp.status,
        "reason": exp.reason,
        "space": plan.space.words(),
        "searched": list(plan.space.names),  # the parameters the search varies (the others are fixed)
        "objective": spec["objective"],
        "search": plan.search,
        "prune": plan.prune,
        "seeds": list(plan.seeds),
        "trials_limit": plan.trials,
        "concurrency": plan.concurrency,
        "budget": spec["budget"],
        "projection": spec["projection"],
        "study": exp.study_name,
        "channel": exp.channel,
        "thread_ts": exp.thread_ts,
        "card_digest": exp.card_digest,  # what its Slack card shows now
        "summary_posted": exp.summary_posted,
        "created_at": _ts(exp.created_at),
        "ended_at": _ts(exp.ended_at),
    }


def _trial_json(t: ExperimentTrial, runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "number": t.number,
        "params": dict(t.params),
        "status": t.status,
        "value": t.value,
        "seed_values": list(t.seed_values or []),
        "reported_step": t.reported_step,
        "reason": t.reason,
        "runs": [
            {"id": r, "status": runs[r]["status"], "step": runs[r]["step"]} if r in runs else {"id": r}
            for r in t.run_ids
        ],
    }


def counts(trials: list[dict[str, Any]], runs: dict[str, dict[str, Any]], limit: int) -> dict[str, int]:
    """Trials done / running / pruned / queued / failed / stopped, and those not asked yet."""
    out = {"done": 0, "running": 0, "queued": 0, "pruned": 0, "failed": 0, "stopped": 0}
    for t in trials:
        if t["status"] in (TrialStatus.LAUNCHING.value, TrialStatus.RUNNING.value):
            states = [runs.get(r["id"], {}).get("status") for r in t["runs"]]
            # queued: waiting in labbot's compute queue (or not launched yet); on Ray, starting or not, it runs
            queued = not states or all(st in (None, RunStatus.QUEUED.value) for st in states)
            out["queued" if queued else "running"] += 1
        else:
            out[t["status"]] = out.get(t["status"], 0) + 1
    out["not_started"] = max(0, limit - len(trials))
    return out


def results(trials: list[dict[str, Any]], plan: ExperimentPlan) -> dict[str, Any]:
    """The scored configs ranked (best first) with their intervals, and the verdict between the best two."""
    scored = {t["number"]: t for t in trials if t["status"] == TrialStatus.DONE.value and t["seed_values"]}
    scores = {n: score(t["seed_values"]) for n, t in scored.items()}
    order = rank(scores, goal=plan.goal)
    ranking = [{"trial": n, "params": scored[n]["params"], **scores[n].to_json()} for n in order]
    out: dict[str, Any] = {"ranking": ranking, "best": ranking[0] if ranking else None, "verdict": None}
    if len(order) >= 2:
        out["verdict"] = verdict(
            scored[order[0]]["seed_values"], scored[order[1]]["seed_values"], goal=plan.goal
        ).to_json()
    return out
