"""The experiment controller: each watchdog tick, on the leader, every open experiment moves one step.

For each experiment that is running or paused (or has ended with trials still to settle):

1. **Adopt** a trial Optuna holds as running that labbot has no row for (labbot stopped between asking and recording
   it): it is recorded and launched, never asked again and never forgotten.
2. **Launch** trials recorded but not launched: one run per seed through ``RunService.launch`` with an idempotency
   key per (experiment, trial, seed), so launching again after a crash maps to the same runs. A run over its
   purpose's cap waits in the compute queue like any run.
3. **Follow** each running trial: the objective's new points, as the mean across seeds at steps every seed has
   reported, are told to Optuna as intermediate values; when the pruner decides, the trial's runs are stopped in
   the same tick (``pruned``). When its runs have ended: every seed succeeded and reported the objective → ``done``
   with its score (told as complete); a seed failed for good (after its restarts) or reported no finite objective →
   ``failed`` (told as failed, never a bad score); stopped by a person → ``stopped``.
4. **Budget**: the CPU- or GPU-hours its runs have used (time on Ray × resources); once it reaches the budget,
   nothing more is launched, running trials are stopped, and the experiment is ``budget_spent`` (the study kept).
5. **Fill**: while running (not paused) and under its limits, new trials are asked of Optuna, recorded (in the
   trial table, under the leader's fence) and launched, up to ``concurrency`` at once and ``trials`` in all.
6. **End**: every trial asked and ended → ``done``.

Blocking (database, Optuna's storage, Ray through the run service): runs on the watchdog's worker thread. A
``Fenced`` refusal (the lease lost) is raised as is; any other failure of one experiment is logged and the others go
on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from optuna.trial import TrialState
from sqlalchemy import select

from labbot.common.errors import BadRequest, LabbotError, RayUnavailable
from labbot.storage.db import Database
from labbot.storage.lease import Fenced
from labbot.storage.models import (
    Experiment,
    ExperimentStatus,
    ExperimentTrial,
    LaunchKey,
    MetricPoint,
    Run,
    RunStatus,
    TrialStatus,
    utcnow,
)
from labbot.training.experiments.plan import ExperimentPlan
from labbot.training.experiments.scores import aligned_means, seed_objective
from labbot.training.experiments.study import Studies
from labbot.training.service import RunService, ask_of
from labbot.training.specs import LaunchRequest

log = logging.getLogger(__name__)

OPEN = (ExperimentStatus.RUNNING.value, ExperimentStatus.PAUSED.value)
UNSETTLED = (TrialStatus.LAUNCHING.value, TrialStatus.RUNNING.value)


@dataclass
class StepReport:
    """What one tick did, over all experiments (the benchmark and tests read it)."""

    experiments: int = 0
    launched: list[tuple[str, int]] = field(default_factory=list)  # (experiment, trial number)
    pruned: list[tuple[str, int]] = field(default_factory=list)
    ended: list[tuple[str, int, str]] = field(default_factory=list)  # (experiment, trial, status)
    finished: list[str] = field(default_factory=list)  # experiments that ended this tick
    seconds: float = 0.0


def trial_key(experiment_id: str, number: int, seed: int) -> str:
    """The idempotency key of one seed's run of one trial."""
    return f"experiment:{experiment_id}:{number}:{seed}"


def launch_request(
    exp: Experiment, plan: ExperimentPlan, number: int, params: dict[str, object], seed: int
) -> LaunchRequest:
    run_params = {**plan.space.fixed, **params}
    if plan.seed_param is not None:
        run_params[plan.seed_param] = seed
    seeds = f" seed {seed}" if len(plan.seeds) > 1 else ""
    return LaunchRequest(
        job=exp.job,
        name=f"{exp.name} #{number}{seeds}"[:200],
        owner=exp.owner,
        params=run_params,  # type: ignore[arg-type]
        purpose=exp.purpose,
        idempotency_key=trial_key(exp.id, number, seed),
    )


class ExperimentController:
    def __init__(
        self,
        db: Database,
        runs: RunService,
        studies: Studies,
        *,
        clock: Callable[[], datetime] = utcnow,
        on_end: Callable[[str], object] | None = None,
    ) -> None:
        self.db = db
        self.runs = runs
        self.studies = studies
        self.clock = clock
        self.on_end = on_end  # called with an experiment's id once it has ended and its trials are settled

    def tick(self) -> StepReport:
        started = time.perf_counter()
        report = StepReport()
        with self.db.session() as s:
            ids = list(
                s.scalars(
                    select(Experiment.id).where(
                        (Experiment.status.in_(OPEN))
                        | Experiment.id.in_(
                            select(ExperimentTrial.experiment_id).where(ExperimentTrial.status.in_(UNSETTLED))
                        )
                    )
                )
            )
        for exp_id in ids:
            report.experiments += 1
            try:
                self.step(exp_id, report)
            except Fenced:
                raise
            except Exception:
                log.exception("experiment %s: this tick's step failed (the next tick tries again)", exp_id)
        report.seconds = time.perf_counter() - started
        return report

    # -- one experiment ------------------------------------------------------------------------------------------

    def _load(self, exp_id: str) -> tuple[Experiment, ExperimentPlan, list[ExperimentTrial]]:
        with self.db.session() as s:
            exp = s.get_one(Experiment, exp_id)
            trials = list(
                s.scalars(
                    select(ExperimentTrial)
                    .where(ExperimentTrial.experiment_id == exp_id)
                    .order_by(ExperimentTrial.number)
                )
            )
            s.expunge_all()
        return exp, ExperimentPlan.from_row(exp.job, exp.name, exp.owner, exp.purpose, exp.spec), trials

    def step(self, exp_id: str, report: StepReport) -> None:
        exp, plan, trials = self._load(exp_id)
        self._adopt(exp, plan, trials)
        exp, plan, trials = self._load(exp_id)
        self.settle_told(exp, plan, trials)
        for trial in trials:
            if trial.status == TrialStatus.LAUNCHING.value and exp.status in OPEN:
                self._launch(exp, plan, trial, report)
            elif trial.status == TrialStatus.LAUNCHING.value:  # the experiment ended before its runs were made
                self._end_trial(exp, plan, trial, TrialStatus.STOPPED, None, f"the experiment is {exp.status}")
        exp, plan, trials = self._load(exp_id)
        for trial in trials:
            if trial.status == TrialStatus.RUNNING.value:
                self._follow(exp, plan, trial, report)
        self._check_budget(exp_id, plan)
        exp, plan, trials = self._load(exp_id)
        if exp.status == ExperimentStatus.RUNNING.value:
            self._fill(exp, plan, trials, report)
            exp, plan, trials = self._load(exp_id)
            self._maybe_done(exp, plan, trials, report)

    def _adopt(self, exp: Experiment, plan: ExperimentPlan, trials: list[ExperimentTrial]) -> None:
        known = {t.number for t in trials}
        for frozen in self.studies.trials(exp.study_name, plan, running=True):
            if frozen.number in known:
                continue
            log.warning(
                "experiment %s: trial #%d was asked of Optuna but not recorded (labbot stopped in between): "
                "recorded and launched now",
                exp.id,
                frozen.number,
            )
            self._record(exp.id, frozen.number, frozen._trial_id, dict(frozen.params))

    def _record(self, exp_id: str, number: int, trial_id: int, params: dict[str, object]) -> None:
        with self.db.session() as s:
            s.add(
                ExperimentTrial(
                    experiment_id=exp_id,
                    number=number,
                    optuna_trial_id=trial_id,
                    params=params,
                    status=TrialStatus.LAUNCHING.value,
                    run_ids=[],
                    seed_values=[],
                )
            )

    def _launch(self, exp: Experiment, plan: ExperimentPlan, trial: ExperimentTrial, report: StepReport) -> None:
        run_ids: list[str] = []
        for seed in plan.seeds:
            req = launch_request(exp, plan, trial.number, dict(trial.params), seed)
            try:
                result = self.runs.launch(req, experiment=exp.id)
            except (Fenced, RayUnavailable):
                raise
            except BadRequest as e:  # the job changed under the experiment (labbot.toml): this config cannot run
                self._end_trial(exp, plan, trial, TrialStatus.FAILED, None, f"not launched: {e.message}")
                return
            except LabbotError as e:  # Ray refused the submission: the run is failed with the reason
                log.warning("experiment %s: trial #%d seed %d: %s", exp.id, trial.number, seed, e.message)
                result = None
            if result is None:  # the run exists, failed with Ray's refusal: the trial fails when it is followed
                with self.db.session() as s:
                    key = s.get(LaunchKey, req.idempotency_key)
                    if key is None:
                        continue
                    run_ids.append(key.run_id)
            else:
                run_ids.append(str(result.run["id"]))
                if not result.created:
                    self._submit_if_lost(result.run)
        with self.db.session() as s:
            row = s.get_one(ExperimentTrial, (exp.id, trial.number))
            row.run_ids = run_ids
            row.status = TrialStatus.RUNNING.value
        trial.run_ids, trial.status = run_ids, TrialStatus.RUNNING.value
        report.launched.append((exp.id, trial.number))
        log.info("experiment %s: trial #%d launched as %s", exp.id, trial.number, ", ".join(run_ids))

    def _submit_if_lost(self, run: dict[str, object]) -> None:
        """A seed's run made before labbot stopped, but never sent to Ray (stopped between the row and the
        submission): sent now, rather than failed as lost a minute later and restarted. Ray's "already exists" for
        its own submission id is success (``RunService.resubmit``), so a submission that did arrive is not doubled."""
        if run.get("status") != RunStatus.PENDING.value or not run.get("ray_submission_id"):
            return
        if self.runs.launcher.job(str(run["ray_submission_id"])) is not None:
            return
        log.warning("run %s was recorded but never reached Ray (labbot stopped in between): submitted now", run["id"])
        self.runs.resubmit(str(run["id"]))

    def points(self, run_ids: list[str], metric: str) -> dict[str, dict[int, float]]:
        """Each run's points of ``metric``, one per step (a restarted attempt's value wins where it re-ran a step)."""
        out: dict[str, dict[int, float]] = {r: {} for r in run_ids}
        with self.db.session() as s:
            q = (
                select(MetricPoint.run_id, MetricPoint.step, MetricPoint.value)
                .where(MetricPoint.run_id.in_(run_ids), MetricPoint.name == metric)
                .order_by(MetricPoint.attempt, MetricPoint.id)
            )
            for run_id, step, value in s.execute(q):
                out[run_id][int(step)] = float(value)
        return out

    def _follow(self, exp: Experiment, plan: ExperimentPlan, trial: ExperimentTrial, report: StepReport) -> None:
        with self.db.session() as s:
            runs = {r.id: (r.status, r.error) for r in s.scalars(select(Run).where(Run.id.in_(trial.run_ids)))}
        points = self.points(trial.run_ids, plan.metric)
        seeds = [points[r] for r in trial.run_ids]
        if any(not RunStatus(runs[r][0]).is_terminal for r in trial.run_ids):
            fresh = aligned_means(seeds, after=trial.reported_step, goal=plan.goal)
            if plan.at_step is not None:
                fresh = [(st, v) for st, v in fresh if st <= plan.at_step]
            if fresh:
                at = self.studies.report(exp.study_name, plan, trial.optuna_trial_id, fresh)
                with self.db.session() as s:
                    s.get_one(ExperimentTrial, (exp.id, trial.number)).reported_step = fresh[-1][0]
                if at is not None:
                    self._prune(exp, plan, trial, at, dict(fresh).get(at), report)
            return
        statuses = [runs[r][0] for r in trial.run_ids]
        if all(st == RunStatus.SUCCEEDED.value for st in statuses):
            values = [seed_objective(sorted(p.items()), at_step=plan.at_step, window=plan.window) for p in seeds]
            missing = [plan.seeds[i] for i, v in enumerate(values) if v is None]
            if missing or not values:
                why = f"seed {', '.join(map(str, missing))} reported no finite {plan.metric}"
                self._end_trial(exp, plan, trial, TrialStatus.FAILED, None, why)
            else:
                finite = [v for v in values if v is not None]
                self._end_trial(exp, plan, trial, TrialStatus.DONE, finite, None)
        elif any(st == RunStatus.FAILED.value for st in statuses):
            failed = next(r for r in trial.run_ids if runs[r][0] == RunStatus.FAILED.value)
            self._end_trial(exp, plan, trial, TrialStatus.FAILED, None, f"run {failed} failed: {runs[failed][1] or ''}")
        else:
            stopped = next(r for r in trial.run_ids if runs[r][0] == RunStatus.STOPPED.value)
            self._end_trial(
                exp, plan, trial, TrialStatus.STOPPED, None, f"run {stopped} {runs[stopped][1] or 'stopped'}"
            )
        report.ended.append((exp.id, trial.number, trial.status))

    def _prune(
        self,
        exp: Experiment,
        plan: ExperimentPlan,
        trial: ExperimentTrial,
        step: int,
        value: float | None,
        report: StepReport,
    ) -> None:
        shown = f"{value:.4g}" if value is not None else "?"
        why = (
            f"pruned by {plan.prune} at step {step}: {plan.metric} {shown} is behind the trials that reached that step"
        )
        for run_id in trial.run_ids:
            self._stop_run(run_id, f"experiment {exp.id} ({why})")
        self._end_trial(exp, plan, trial, TrialStatus.PRUNED, None, why)
        report.pruned.append((exp.id, trial.number))
        log.info("experiment %s: trial #%d %s", exp.id, trial.number, why)

    def _stop_run(self, run_id: str, by: str) -> None:
        try:
            self.runs.stop(run_id, by=by)
        except (Fenced, RayUnavailable):
            raise
        except LabbotError as e:  # already ended: nothing to stop
            log.info("run %s not stopped: %s", run_id, e.message)

    def _end_trial(
        self,
        exp: Experiment,
        plan: ExperimentPlan,
        trial: ExperimentTrial,
        status: TrialStatus,
        values: list[float] | None,
        reason: str | None,
    ) -> None:
        state = {
            TrialStatus.DONE: TrialState.COMPLETE,
            TrialStatus.PRUNED: TrialState.PRUNED,
        }.get(status, TrialState.FAIL)
        value = sum(values) / len(values) if values else None
        with self.db.session() as s:
            row = s.get_one(ExperimentTrial, (exp.id, trial.number))
            if TrialStatus(row.status).is_terminal:
                return
            row.status, row.reason, row.ended_at = status.value, reason, self.clock()
            row.value, row.seed_values = value, list(values or [])
        # after the row: a restart between the two finds the row ended and Optuna's trial still running, and tells it
        self.studies.tell(exp.study_name, plan, trial.number, value=value, state=state)
        trial.status = status.value

    def settle_told(self, exp: Experiment, plan: ExperimentPlan, trials: list[ExperimentTrial]) -> None:
        """Trials ended in labbot but still running in Optuna (labbot stopped between the two): told now."""
        running = {t.number for t in self.studies.trials(exp.study_name, plan, running=True)}
        for t in trials:
            if t.number in running and TrialStatus(t.status).is_terminal:
                state = {TrialStatus.DONE.value: TrialState.COMPLETE, TrialStatus.PRUNED.value: TrialState.PRUNED}
                self.studies.tell(
                    exp.study_name, plan, t.number, value=t.value, state=state.get(t.status, TrialState.FAIL)
                )

    # -- budget, filling and the end -----------------------------------------------------------------------------

    def used_hours(self, exp_id: str, plan: ExperimentPlan) -> float:
        """The budget's unit used so far: each run's time on Ray × its GPUs (or CPUs)."""
        now = self.clock()
        total = 0.0
        with self.db.session() as s:
            for run in s.scalars(select(Run).where(Run.experiment_id == exp_id)):
                if run.started_at is None:
                    continue
                ask = ask_of(run.id, run.owner, run.config)
                per = ask.gpus if plan.budget is not None and plan.budget.unit == "gpu" else ask.cpus
                seconds = ((run.ended_at or now) - run.started_at).total_seconds()
                total += per * max(0.0, seconds) / 3600.0
        return total

    def _check_budget(self, exp_id: str, plan: ExperimentPlan) -> None:
        if plan.budget is None:
            return
        with self.db.session() as s:
            status = s.get_one(Experiment, exp_id).status
        if status not in OPEN:
            return
        used = self.used_hours(exp_id, plan)
        if used < plan.budget.amount:
            return
        why = f"the budget is spent: {used:.3g} of {plan.budget.words()} used"
        self.end(exp_id, ExperimentStatus.BUDGET_SPENT, why)

    def end(self, exp_id: str, status: ExperimentStatus, reason: str) -> None:
        """End an experiment (a person's stop, the budget): nothing more is launched; its trials' runs that still
        run are stopped, and those trials are ``stopped`` with ``reason``; the study is kept."""
        with self.db.session() as s:
            exp = s.get_one(Experiment, exp_id)
            if ExperimentStatus(exp.status).is_terminal:
                return
            exp.status, exp.reason, exp.ended_at = status.value, reason, self.clock()
        exp, plan, trials = self._load(exp_id)
        for trial in trials:
            if TrialStatus(trial.status).is_terminal:
                continue
            for run_id in trial.run_ids:
                self._stop_run(run_id, f"experiment {exp_id} ({reason})")
            self._end_trial(exp, plan, trial, TrialStatus.STOPPED, None, reason)
        log.info("experiment %s: %s (%s)", exp_id, status.value, reason)
        self._ended(exp_id)

    def _ended(self, exp_id: str) -> None:
        """What the lab keeps of an ended experiment (its finding); a failure here is logged, never the tick's."""
        if self.on_end is None:
            return
        try:
            self.on_end(exp_id)
        except Fenced:
            raise
        except Exception:
            log.exception("experiment %s ended, but what it found was not recorded", exp_id)

    def _fill(self, exp: Experiment, plan: ExperimentPlan, trials: list[ExperimentTrial], report: StepReport) -> None:
        active = sum(1 for t in trials if not TrialStatus(t.status).is_terminal)
        asked = len(trials)
        while active < plan.concurrency and asked < plan.trials:
            frozen = self.studies.ask(exp.study_name, plan)
            self._record(exp.id, frozen.number, frozen._trial_id, dict(frozen.params))
            _, _, rows = self._load(exp.id)
            trial = next(t for t in rows if t.number == frozen.number)
            self._launch(exp, plan, trial, report)
            active += 1
            asked += 1

    def _maybe_done(
        self, exp: Experiment, plan: ExperimentPlan, trials: list[ExperimentTrial], report: StepReport
    ) -> None:
        if len(trials) < plan.trials or any(not TrialStatus(t.status).is_terminal for t in trials):
            return
        done = sum(1 for t in trials if t.status == TrialStatus.DONE.value)
        with self.db.session() as s:
            row = s.get_one(Experiment, exp.id)
            if row.status != ExperimentStatus.RUNNING.value:
                return
            row.status = ExperimentStatus.DONE.value
            row.reason = f"all {len(trials)} trials ended ({done} scored)"
            row.ended_at = self.clock()
        report.finished.append(exp.id)
        log.info("experiment %s: done, %d of %d trials scored", exp.id, done, len(trials))
        self._ended(exp.id)
