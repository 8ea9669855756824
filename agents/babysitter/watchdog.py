"""The watchdog: every tick, one Ray ``list_jobs`` call and one indexed query, whatever the number of runs (plus,
only when some runs need a change, one more query loading just those; while runs run, the cluster's nodes, read at
most every ``RunService.totals_ttl_s``, and Ray's actors of a node only when it was just lost). While no run is
watched, a tick asks Ray only every ``idle_look_s`` (for the infra page) and otherwise makes one small query to know
that still none is.

A tick brings each active run (and each run with an open page; never a ``queued`` one, which is not on Ray) in line
with Ray (``labbot.training.service.reconcile_run``) and notes the node its attempt runs on, judges it with the pure
rules of ``labbot.training.monitoring``, schedules automatic restarts from the checkpoint (``restart_on``, up to
``max_restarts``, with backoff; each step told in the thread), restarts at once an attempt whose Ray node was lost
(not the job's failure: its own restarts are not spent, the thread names the node; when no alive node fits the run,
it waits in the queue for one), says when a node was lost under a running job's actors but not its driver (Ray
Train's workers: Ray Train restarts them from the checkpoint inside the attempt; the run counts the node), and hands
the rest to the pager — all in one transaction, so a finding and the pages
it causes are committed together. Ray calls that act (stopping a PENDING job again, submitting a due restart) happen
after the commit. When Ray does not answer, the runs are left alone (the job may be fine; the cluster is not) and,
past ``infra_after``, that is itself a page. Last, capacity freed goes to the queue: queued runs that fit their
purpose's cap now are submitted (``RunService.admit_queued``), so a run waits at most one tick after capacity frees.

Runs on a worker thread (blocking DB and Ray calls); the server's scheduler calls :meth:`Watchdog.tick`, a singleton:
its Ray calls that act are made only under the leader lease (the launcher checks it right before each), and a
refusal (``Fenced``) ends the tick there, raised: a restart not submitted stays due (``restart_at``) for the next
leader, runs admitted but not submitted go back to the queue.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, or_, select
from sqlalchemy.orm import Session

from labbot.agents.babysitter.pager import Pager, incident_condition
from labbot.agents.babysitter.policy import WatchdogPolicy
from labbot.common.durations import format_duration
from labbot.common.errors import LabbotError, RayUnavailable
from labbot.storage.db import Database
from labbot.storage.lease import Fenced
from labbot.storage.models import (
    ACTIVE_STATUSES,
    OPEN_INCIDENT_STATES,
    Incident,
    IncidentState,
    Run,
    RunCheckpoint,
    RunStatus,
    utcnow,
)
from labbot.training import remedies as remedy_rules
from labbot.training.alerts import alerts_missing_after, alerts_of
from labbot.training.checkpoint_health import last_good
from labbot.training.launcher import RAY_FAILED, RAY_PENDING, RAY_RUNNING, RayJob, RayLauncher, submission_id
from labbot.training.monitoring import (
    FAILED,
    HUNG,
    INFRA,
    PAGE,
    RL_THRESHOLDS,
    SILENT,
    Finding,
    RunState,
    Thresholds,
    evaluate,
    infra_finding,
    lost_node_of,
    missing_alert_metrics,
)
from labbot.training.service import LOST, RunService, reconcile_run

log = logging.getLogger(__name__)
RAY_TRAIN_WORKERS = ("RayTrainWorker",)  # the class Ray Train's workers are (v1 and v2)

RESTARTABLE = (FAILED, HUNG, SILENT)
WATCHED = (
    Run.id,
    Run.status,
    Run.attempt,
    Run.ray_submission_id,
    Run.config,
    Run.stop_requested,
    Run.error,
    Run.attempt_started_at,
    Run.last_telemetry_at,
    Run.last_step,
    Run.last_step_at,
    Run.vitals,
    Run.restart_at,
    Run.node_id,
)
LOG_TAIL_LINES = 20


def _watch_items(raw: Any) -> tuple[tuple[str, float], ...]:
    """A run's stored RL thresholds as a hashable key (entries that are not a known number are left out)."""
    if not isinstance(raw, dict):
        return ()
    return tuple(
        sorted(
            (k, float(v))
            for k, v in raw.items()
            if k in RL_THRESHOLDS and isinstance(v, int | float) and not isinstance(v, bool)
        )
    )


STOP_RETRY_WINDOW_S = 3600.0  # stops of PENDING jobs are re-issued for this long


@dataclass
class TickReport:
    ray_ok: bool = True
    runs: int = 0
    findings: int = 0
    changed: int = 0
    restarts_scheduled: int = 0
    restarts_submitted: int = 0
    seconds: float = 0.0
    to_stop: list[str] = field(default_factory=list)
    due: list[str] = field(default_factory=list)
    admitted: list[str] = field(default_factory=list)  # queued runs submitted this tick (capacity freed)


class Watchdog:
    def __init__(
        self,
        db: Database,
        launcher: RayLauncher,
        service: RunService,
        pager: Pager,
        policy: WatchdogPolicy,
        *,
        address: str,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.db = db
        self.launcher = launcher
        self.service = service
        self.pager = pager
        self.policy = policy
        self.address = address
        self.clock = clock
        self.down_since: datetime | None = None
        self._told: set[tuple[str, str]] = set()  # (run, alert) whose missing metric was said in the thread
        self._last_ray_look: datetime | None = None  # when a tick last asked Ray for its jobs
        self._watching = False  # whether that look found runs to watch (then the next tick looks again)
        self._node_names: dict[str, str] = {}  # Ray node id → its name (an IP, a pod), read when a new id is seen
        self._alive_nodes: set[str] | None = None  # the alive nodes at the last look while runs ran (None: no look)
        with db.session() as s:  # a cluster page left open by a previous labbot is picked up again
            self._infra_open = s.scalar(self._infra_query()) is not None

    def _infra_query(self) -> Select[Any]:
        return select(Incident).where(Incident.kind == INFRA, Incident.run_id.is_(None))

    # -- a tick ----------------------------------------------------------------------------------------------

    def tick(self) -> TickReport:
        started = time.perf_counter()
        report = TickReport()
        now = self.clock()
        if not self._ray_look_due(now):
            self._admit_queued(report)  # queued runs wait on capacity, not on a look at Ray
            report.seconds = time.perf_counter() - started
            return report
        try:
            self._last_ray_look = now
            jobs = self.launcher.jobs()
        except RayUnavailable as e:
            report.ray_ok = False
            self._ray_down(now, e.message)
            report.seconds = time.perf_counter() - started
            return report
        if self.down_since is not None:
            log.info("the Ray API at %s answers again", self.address)
            self.down_since = None
        with self.db.session() as s:
            if self._infra_open:
                self._judge_infra(s, None, now)
            needs_work: dict[str, dict[str, Incident]] = {}
            watched = self._runs(s, now)
            self._watching = bool(watched)
            for row, incidents in watched:
                report.runs += 1
                if not self._all_well(row, incidents, jobs.get(row.ray_submission_id or ""), now):
                    needs_work[row.id] = incidents
            if needs_work:  # the few runs that change are loaded as objects (one more query), the rest never are
                for run in s.scalars(select(Run).where(Run.id.in_(list(needs_work)))):
                    self._reconcile_and_judge(
                        s, run, needs_work[run.id], jobs.get(run.ray_submission_id or ""), now, report
                    )
            self._nodes_lost_under_runs(s, watched, jobs)
        for sid in report.to_stop:
            try:
                self.launcher.stop(sid)
            except Fenced:
                raise
            except LabbotError as e:
                log.warning("could not stop %s again: %s", sid, e.message)
        for run_id in report.due:
            self._submit_restart(run_id)
            report.restarts_submitted += 1
        self._admit_queued(report)
        report.seconds = time.perf_counter() - started
        return report

    def _ray_look_due(self, now: datetime) -> bool:
        """Whether this tick asks Ray for its jobs: always while a run is watched or Ray is down, else (an idle
        labbot) every ``idle_look_s`` — Ray is still looked at for the infra page, but an idle control plane no longer
        lists every job Ray ever ran each tick (a listing costs the dashboard tens of milliseconds of CPU)."""
        if self.down_since is not None or self._infra_open or self._last_ray_look is None or self._watching:
            return True  # Ray down, or runs watched at the last look: no query needed to know
        if (now - self._last_ray_look).total_seconds() >= self.policy.idle_look_s:
            return True
        with self.db.session() as s:
            return s.scalar(select(self._watched_query(now).exists())) is True

    def _admit_queued(self, report: TickReport) -> None:
        """Capacity this tick freed (runs that ended above, committed) goes to the queue, in order, in this tick. A
        queued run is never reconciled with Ray nor judged (it is not on Ray): it is only admitted."""
        try:
            report.admitted = self.service.admit_queued()
        except Fenced:
            raise
        except LabbotError as e:
            log.warning("queued runs not admitted this tick: %s", e.message)

    def _runs(self, s: Session, now: datetime) -> list[tuple[Any, dict[str, Incident]]]:
        """The one query: active runs, runs with an open page, recently stopped runs (PENDING stops), with every
        incident of theirs (open, or resolved and so able to re-open). Only the columns the rules read: loading
        10,000 full ORM runs (their metrics, every timestamp) would cost more than judging them."""
        q = select(*WATCHED, Incident).outerjoin(Incident, Incident.run_id == Run.id).where(self._watched(now))
        grouped: dict[str, tuple[Any, dict[str, Incident]]] = {}
        for row in s.execute(q):
            entry = grouped.setdefault(row.id, (row, {}))
            if row.Incident is not None:
                entry[1][incident_condition(row.Incident)] = row.Incident
        return list(grouped.values())

    @staticmethod
    def _watched(now: datetime) -> Any:
        """Which runs a tick looks at: active runs, runs with an open page, recently stopped runs (PENDING stops)."""
        with_open_page = select(Incident.run_id).where(
            Incident.state.in_(OPEN_INCIDENT_STATES), Incident.run_id.is_not(None)
        )
        recent = datetime.fromtimestamp(now.timestamp() - STOP_RETRY_WINDOW_S, tz=now.tzinfo)
        return or_(
            Run.status.in_(ACTIVE_STATUSES),
            Run.id.in_(with_open_page),
            and_(Run.stop_requested.is_(True), Run.ended_at > recent),
        )

    def _watched_query(self, now: datetime) -> Select[Any]:
        return select(Run.id).where(self._watched(now))

    def _all_well(self, row: Any, incidents: dict[str, Incident], job: RayJob | None, now: datetime) -> bool:
        """Nothing to change for this run: Ray agrees with its status, no rule finds anything, no page is open."""
        if job is None or row.stop_requested or row.restart_at is not None:
            return False
        if (row.status, job.status) not in (
            (RunStatus.RUNNING.value, RAY_RUNNING),
            (RunStatus.PENDING.value, RAY_PENDING),
        ):
            return False
        if job.driver_node_id and row.node_id != job.driver_node_id:
            return False  # Ray placed the attempt: the node is noted on the run
        if any(i.condition_active or i.state != IncidentState.RESOLVED.value for i in incidents.values()):
            return False
        state = self._state(row, job)
        if state.alerts and any((row.id, a.name) not in self._told for a in missing_alert_metrics(state, now)):
            return False
        return not evaluate(state, now)

    def _reconcile_and_judge(
        self,
        s: Session,
        run: Run,
        incidents: dict[str, Incident],
        job: RayJob | None,
        now: datetime,
        report: TickReport,
    ) -> None:
        """One run that needs work: its status brought in line with Ray's, a due restart noted, the rules run on
        it (restarting it when a rule says so) and its pages opened, cleared or escalated."""
        was_terminal = RunStatus(run.status).is_terminal
        changed, stop_sid = reconcile_run(run, job, now)
        report.changed += changed
        if stop_sid:
            report.to_stop.append(stop_sid)
        if run.restart_at is not None and job is not None:
            run.restart_at = None  # the scheduled attempt is on Ray (labbot died between submitting and noting it)
        if job is not None and job.driver_node_id and run.node_id != job.driver_node_id:
            run.node_id, run.node_name = job.driver_node_id, self._node_name(job.driver_node_id)
        if run.status == RunStatus.RESTARTING.value and run.restart_at is not None:
            if job is None and run.restart_at <= now:
                report.due.append(run.id)
            self.pager.judge(s, run, incidents, [], now)  # the old attempt's conditions are gone with it
            return
        state = self._state(run, job)
        self._tell_missing_metrics(s, run, state, now)
        findings = evaluate(state, now)
        remedied, findings = self._maybe_remedy(s, run, findings, now, report)
        if remedied:
            self.pager.judge(s, run, incidents, [], now)  # the old attempt's conditions are gone with it
            return
        findings = self._maybe_restart(s, run, findings, now, report, was_terminal=was_terminal)
        report.findings += len(findings)
        self._mark_stalled(run, findings)
        findings = self._with_page_time_logs(run, job, incidents, findings)
        self.pager.judge(s, run, incidents, findings, now)
        for inc in incidents.values():
            self.pager.escalate(s, run, inc, now)

    def _state(self, run: Any, job: RayJob | None) -> RunState:
        """What the rules see of a run (an ORM ``Run`` or a row of ``WATCHED`` columns: the same names)."""
        cfg = run.config or {}
        ray_status, error_type, message = (job.status, job.error_type, job.message) if job else (None, None, "")
        if job is None and run.status == RunStatus.FAILED.value and (run.error or "").startswith(LOST):
            ray_status, error_type, message = RAY_FAILED, "JobLost", run.error or ""
        return RunState(
            run_id=run.id,
            status=run.status,
            ray_status=ray_status,
            ray_error_type=error_type,
            ray_message=message,
            attempt=run.attempt,
            attempt_started_at=run.attempt_started_at,
            last_telemetry_at=run.last_telemetry_at,
            last_step=run.last_step,
            last_step_at=run.last_step_at,
            vitals=run.vitals or {},
            thresholds=self._thresholds(
                cfg.get("stall_after_s"), cfg.get("pending_after_s"), _watch_items(cfg.get("watch"))
            ),
            stop_requested=run.stop_requested,
            alerts=alerts_of(cfg),
        )

    @functools.lru_cache(maxsize=256)  # noqa: B019 - a few distinct thresholds, judged for every run every tick
    def _thresholds(
        self, stall_after_s: float | None, pending_after_s: float | None, watch: tuple[tuple[str, float], ...]
    ) -> Thresholds:
        rl = {**dict(self.policy.watch), **dict(watch)}  # the run's (its job's, its launch's) over [watchdog]'s
        if "no_signal_points" in rl:
            rl["no_signal_points"] = int(rl["no_signal_points"])
        return Thresholds(
            stall_after_s=float(stall_after_s or 600.0),
            pending_after_s=float(pending_after_s or self.policy.pending_after_s),
            startup_grace_s=self.policy.startup_grace_s,
            **rl,  # type: ignore[arg-type]
        )

    def _tell_missing_metrics(self, s: Session, run: Run, state: RunState, now: datetime) -> None:
        """An alert on a metric the run never reports is said once in its thread (the outbox key keeps it once
        across labbot restarts too), not paged: it cannot fire, and that is a typo or a job that changed."""
        for alert in missing_alert_metrics(state, now):
            if (run.id, alert.name) in self._told:
                continue
            self._told.add((run.id, alert.name))
            self.pager.tell_thread(
                s,
                run,
                f"alert-missing-{alert.name}",
                f":grey_question: alert *{alert.name}* ({alert.describe()}) watches `{alert.metric}`, which this run "
                f"has not reported in {format_duration(alerts_missing_after(alert))} of telemetry; it cannot fire "
                "until the job reports it.",
            )
            log.warning(
                "run %s: alert %s watches %s, which the run never reports",
                run.id,
                alert.name,
                alert.metric,
                extra={"run_id": run.id},
            )

    @staticmethod
    def _mark_stalled(run: Run, findings: list[Finding]) -> None:
        stalled = any(f.kind in (HUNG, SILENT) for f in findings)
        if stalled and run.status == RunStatus.RUNNING.value:
            run.status = RunStatus.STALLED.value
        elif not stalled and run.status == RunStatus.STALLED.value:
            run.status = RunStatus.RUNNING.value

    # -- remedies --------------------------------------------------------------------------------------------

    def _maybe_remedy(
        self, s: Session, run: Run, findings: list[Finding], now: datetime, report: TickReport
    ) -> tuple[bool, list[Finding]]:
        """A finding the run's remedies act on: roll the run back to its last good checkpoint and schedule the next
        attempt with the remedy's changes (True), all in this tick's transaction — the attempt, its parameters and
        its place in the run's lineage commit together, so a labbot killed after it restarts the run exactly once;
        or, the remedy's attempts used, the finding pages with them listed. Ray stops the old attempt after the
        commit (and ``resubmit`` makes sure of it before the new one starts)."""
        cfg = run.config or {}
        declared = cfg.get("remedies") or []
        if not findings or not declared or run.stop_requested or RunStatus(run.status).is_terminal:
            return False, findings
        remedies = [remedy_rules.remedy_from_json(r) for r in declared]
        history = list(cfg.get("remedied") or [])
        candidates = [(f.kind, f.alert, f.detail.get("reason"), f.detail) for f in findings]
        rows = s.scalars(select(RunCheckpoint).where(RunCheckpoint.run_id == run.id))
        checkpoints = remedy_rules.lineage(
            [{"attempt": c.attempt, "step": c.step, "metrics": c.metrics or {}} for c in rows], history
        )

        def choose(step: int) -> int | None:
            chosen = last_good(checkpoints, step)
            return int(chosen["step"]) if chosen is not None else None

        decision = remedy_rules.decide(remedies, candidates, history, choose, cfg.get("params") or {}, run.last_step)
        if decision is None:
            return False, findings
        finding = next(f for f in findings if f.condition == decision.condition)
        if isinstance(decision, remedy_rules.Exhausted):
            tried = "; ".join(
                f"attempt {h['attempt']} from {_from(h.get('checkpoint_step'))} with "
                + ", ".join(f"{d['param']} {_v(d['from'])} → {_v(d['to'])}" for d in h.get("changes", []))
                for h in decision.attempts
            )
            n = len(decision.attempts)
            paged = dataclasses.replace(
                finding,
                summary=f"{finding.summary} — still, after {n} remedial restart{'s' if n > 1 else ''} ({tried})",
                detail={**finding.detail, "remedies": decision.attempts},
            )
            return False, [paged if f is finding else f for f in findings]
        self._remedy(s, run, finding, decision, remedies[decision.remedy], now, report)
        return True, []

    def _remedy(
        self,
        s: Session,
        run: Run,
        finding: Finding,
        act: remedy_rules.Act,
        remedy: remedy_rules.Remedy,
        now: datetime,
        report: TickReport,
    ) -> None:
        cfg = dict(run.config or {})
        old_attempt, old_sid = run.attempt, run.ray_submission_id
        run.attempt += 1
        entry = {
            "attempt": run.attempt,
            "remedy": act.remedy,
            "condition": act.condition,
            "summary": finding.summary,
            "signal_step": act.signal_step,
            "checkpoint_step": act.checkpoint_step,
            "changes": act.diff,
            "window": finding.detail.get("window"),
            "at": now.isoformat(),
        }
        run.config = {**cfg, "params": act.params, "remedied": [*(cfg.get("remedied") or []), entry]}
        delay = self.policy.backoff(0)
        run.ray_submission_id = submission_id(run.id, run.attempt)
        run.status = RunStatus.RESTARTING.value
        run.ended_at = None
        run.error = f"attempt {old_attempt} {act.condition}: {finding.summary}"[:2000]
        run.restart_at = datetime.fromtimestamp(now.timestamp() + delay, tz=now.tzinfo)
        run.checkpoint_step = act.checkpoint_step
        run.last_step, run.last_step_at = act.checkpoint_step, None
        if old_sid:
            report.to_stop.append(old_sid)
        report.restarts_scheduled += 1
        window = finding.detail.get("window") or []
        metric = finding.detail.get("metric", act.condition)
        shown = ", ".join(f"{_v(v)} at {st}" if st is not None else _v(v) for st, v in window[-6:])
        changes = ", ".join(f"`{d['param']}` {_v(d['from'])} → {_v(d['to'])}" for d in act.diff)
        text = (
            f":adhesive_bandage: *{act.condition}* from step {act.signal_step}: {finding.summary}"
            + (f"\n{metric}: {shown}" if shown else "")
            + f"\nStopping attempt {old_attempt} and restarting it as attempt {run.attempt} from "
            f"{_from(act.checkpoint_step)} (the last good one written before step {act.signal_step}) in "
            f"{format_duration(delay)}, with {changes} — remedy `{remedy.text()}`, attempt {act.attempt_of_remedy} "
            f"of {remedy.max_attempts}."
        )
        self.pager.tell_thread(s, run, f"remedy-{run.attempt}", text)
        log.warning(
            "run %s: %s from step %d; remedial attempt %d from %s with %s",
            run.id,
            act.condition,
            act.signal_step,
            run.attempt,
            _from(act.checkpoint_step),
            changes,
            extra={"run_id": run.id},
        )

    # -- automatic restarts ----------------------------------------------------------------------------------

    def _node_name(self, node_id: str) -> str:
        """A node's name as Ray lists it (its IP, or the pod's name on KubeRay); its short id if Ray does not say."""
        if node_id not in self._node_names:
            try:
                self._node_names.update({n.node_id: n.name for n in self.launcher.nodes()})
            except LabbotError as e:
                log.warning("could not read the cluster's nodes: %s", e.message)
        return self._node_names.get(node_id) or node_id[:8]

    def _nodes_lost_under_runs(
        self, s: Session, watched: list[tuple[Any, dict[str, Incident]]], jobs: Mapping[str, RayJob]
    ) -> None:
        """A node lost under a running job's actors but not under its driver (Ray Train's workers on two nodes, one
        lost): the job goes on — Ray Train's own failure handling (``FailureConfig``) restarts its workers from the
        checkpoint within the attempt — and labbot says so in the thread, naming the node, counts it in the run's
        ``node_losses``, and spends none of the job's restarts. A lost driver's node fails the job instead (that is
        :meth:`_restart_on_another_node`'s). The nodes come from the service's cached read (one per ``totals_ttl_s``),
        and Ray's actors are read only for a node that was alive at the last look and is not now."""
        running = [
            (row, job)
            for row, _ in watched
            if row.status in (RunStatus.PENDING.value, RunStatus.RUNNING.value, RunStatus.STALLED.value)
            and (job := jobs.get(row.ray_submission_id or "")) is not None
            and job.status == RAY_RUNNING
            and job.job_id
        ]
        if not running:
            self._alive_nodes = None  # a node lost while nothing ran is nobody's
            return
        try:
            nodes = self.service.cluster_nodes()
        except LabbotError as e:
            log.warning("could not read the cluster's nodes: %s", e.message)
            return
        for node in nodes:
            self._node_names.setdefault(node.node_id, node.name)
        alive = {n.node_id for n in nodes if n.alive}
        before, self._alive_nodes = self._alive_nodes, alive
        for node_id in sorted((before or set()) - alive):
            try:
                actors = self.launcher.actors_on(node_id)
            except LabbotError as e:
                log.warning("could not read the actors of lost node %s: %s", node_id[:8], e.message)
                continue
            for row, job in running:
                lost = [a.class_name for a in actors if a.job_id == job.job_id]
                if lost and job.driver_node_id != node_id:
                    self._tell_lost_under(s, row.id, node_id, lost)

    def _tell_lost_under(self, s: Session, run_id: str, node_id: str, classes: list[str]) -> None:
        run = s.get(Run, run_id)
        if run is None:
            return
        run.node_losses = (run.node_losses or 0) + 1
        where = f"{self._node_names.get(node_id) or node_id[:8]} (node {node_id[:8]})"
        text = (
            f":satellite_antenna: node {where} was lost under attempt {run.attempt}: {actors_words(classes)} died "
            "with it — the node, not the job. "
            + (
                f"Ray Train's own failure handling (its FailureConfig) restarts the workers from the last checkpoint "
                f"(step {run.checkpoint_step or 0}) within this attempt, on the nodes that fit; "
                if any(c in RAY_TRAIN_WORKERS for c in classes)
                else "The job's driver, on another node, decides what follows; "
            )
            + "the job's own restarts are not spent."
        )
        self.pager.tell_thread(s, run, f"node-lost-{run.attempt}-{node_id[:8]}", text)
        log.warning(
            "run %s: node %s lost under attempt %d's actors (%s)",
            run.id,
            where,
            run.attempt,
            ", ".join(sorted(set(classes))),
            extra={"run_id": run.id},
        )

    def _maybe_restart(
        self, s: Session, run: Run, findings: list[Finding], now: datetime, report: TickReport, *, was_terminal: bool
    ) -> list[Finding]:
        cfg = run.config or {}
        lost = next((f for f in findings if lost_node_of(f) is not None), None)
        if lost is not None and not was_terminal and not run.stop_requested:
            if run.node_losses < self.policy.max_node_losses:
                return self._restart_on_another_node(s, run, lost, findings, now, report)
            n = run.node_losses
            summary = f"{lost.summary} (after {n} lost node{'s' if n != 1 else ''}: [watchdog] max_node_losses)"
            findings = [dataclasses.replace(f, summary=summary) if f is lost else f for f in findings]
            return findings  # nodes keep dying under it: a person looks
        if not was_terminal:  # it failed in this tick: the last lines of its log say why (one Ray call, once)
            findings = [self._with_log_tail(run, f) if f.kind == FAILED else f for f in findings]
        restart_on = cfg.get("restart_on") or list(self.policy.restart_on)
        cause = next((f for f in findings if f.kind in RESTARTABLE and f.kind in restart_on), None)
        if cause is None or run.stop_requested or (was_terminal and cause.kind == FAILED):
            return findings  # a run that was already failed before this tick is paged, not restarted again
        limit = int(cfg.get("max_restarts", 2))
        if run.auto_restarts >= limit:
            if run.auto_restarts == 0:
                return findings
            tail = f" (after {run.auto_restarts} automatic restart{'s' if run.auto_restarts > 1 else ''})"
            return [
                Finding(f.kind, f.severity, f.summary + tail, {**f.detail, "auto_restarts": run.auto_restarts})
                if f is cause
                else f
                for f in findings
            ]
        delay = self.policy.backoff(run.auto_restarts)
        old_attempt = run.attempt
        run.auto_restarts += 1
        run.attempt += 1
        run.ray_submission_id = submission_id(run.id, run.attempt)
        run.status = RunStatus.RESTARTING.value
        run.ended_at = None
        run.error = f"attempt {old_attempt} {cause.kind}: {cause.summary}"[:2000]
        run.restart_at = datetime.fromtimestamp(now.timestamp() + delay, tz=now.tzinfo)
        run.last_step, run.last_step_at = run.checkpoint_step, None
        report.restarts_scheduled += 1
        verb = {FAILED: "failed", HUNG: "is hung", SILENT: "went silent"}[cause.kind]
        tail = str(cause.detail.get("log_tail") or "")
        text = (
            f":recycle: attempt {old_attempt} {verb}: {cause.summary}. Restarting from checkpoint step "
            f"{run.checkpoint_step or 0} in {format_duration(delay)} "
            f"(automatic restart {run.auto_restarts} of {limit})."
        )
        if tail:
            text += f"\n```\n{tail}\n```"
        self.pager.tell_thread(s, run, f"auto-restart-{run.attempt}", text)
        log.warning(
            "run %s: attempt %d %s; restart %d of %d in %s",
            run.id,
            old_attempt,
            verb,
            run.auto_restarts,
            limit,
            format_duration(delay),
            extra={"run_id": run.id},
        )
        return [f for f in findings if f.kind not in RESTARTABLE]

    def _restart_on_another_node(
        self, s: Session, run: Run, cause: Finding, findings: list[Finding], now: datetime, report: TickReport
    ) -> list[Finding]:
        """The attempt's node was lost: the run restarts from its checkpoint at once (no backoff: nothing of the
        job's to wait out), on a surviving node — Ray places it; :meth:`RunService.resubmit` queues it when no alive
        node fits — and the job's own restarts (``max_restarts``) are not spent."""
        lost = lost_node_of(cause)
        assert lost is not None
        name = self._node_names.get(lost.node_id) or run.node_name or lost.ip
        where = f"{name} (node {lost.short_id})" if name else f"node {lost.short_id}"
        old_attempt = run.attempt
        run.node_losses = (run.node_losses or 0) + 1
        run.attempt += 1
        run.ray_submission_id = submission_id(run.id, run.attempt)
        run.status = RunStatus.RESTARTING.value
        run.ended_at = None
        run.error = f"attempt {old_attempt} lost its node {where}" + (f": {lost.why}" if lost.why else "")
        run.restart_at = now
        run.last_step, run.last_step_at = run.checkpoint_step, None
        run.node_id = run.node_name = None
        report.restarts_scheduled += 1
        limit = int((run.config or {}).get("max_restarts", 2))
        why = f" ({lost.why})" if lost.why else ""
        text = (
            f":satellite_antenna: attempt {old_attempt} lost its node {where}{why}: the node, not the job. "
            f"Restarting from checkpoint step {run.checkpoint_step or 0} on a surviving node, as attempt "
            f"{run.attempt}; this does not count against the job's automatic restarts "
            f"({run.auto_restarts} of {limit} used)."
        )
        self.pager.tell_thread(s, run, f"node-lost-{run.attempt}", text)
        log.warning(
            "run %s: attempt %d lost its node %s; restarting as attempt %d",
            run.id,
            old_attempt,
            where,
            run.attempt,
            extra={"run_id": run.id},
        )
        return [f for f in findings if f is not cause]

    def _with_page_time_logs(
        self, run: Run, job: RayJob | None, incidents: Mapping[str, Incident], findings: list[Finding]
    ) -> list[Finding]:
        """A condition about to page (not active yet) carries the job's log tail as it is now: what the page shows,
        and what an eval case made from the page later is frozen with (the logs go on after the page)."""
        if job is None:
            return findings
        out = []
        for f in findings:
            inc = incidents.get(f.condition)
            opening = inc is None or not inc.condition_active
            if opening and f.severity == PAGE and "log_tail" not in f.detail:
                f = self._with_log_tail(run, f)
            out.append(f)
        return out

    def _with_log_tail(self, run: Run, finding: Finding) -> Finding:
        """Ray's error type is in the finding already; the last lines of the job's log say what happened."""
        sid = submission_id(run.id, run.attempt)
        try:
            text = self.launcher.logs(sid)
        except LabbotError:
            return finding
        tail = "\n".join(text.rstrip().splitlines()[-LOG_TAIL_LINES:])[-2500:]
        return dataclasses.replace(finding, detail={**finding.detail, "log_tail": tail})

    def _submit_restart(self, run_id: str) -> None:
        try:
            run = self.service.resubmit(run_id)
            if run.get("status") == RunStatus.QUEUED.value and run.get("waiting_for"):
                self._tell_waiting(run)
                return
            log.info(
                "run %s: attempt %d submitted (automatic restart)", run_id, run["attempt"], extra={"run_id": run_id}
            )
        except Fenced:
            raise  # not submitted: restart_at stays, the next leader submits it when it is due
        except LabbotError as e:
            log.error(
                "run %s: the automatic restart could not be submitted: %s", run_id, e.message, extra={"run_id": run_id}
            )
            now = self.clock()
            with self.db.session() as s:
                row = s.get(Run, run_id)
                if row is None:
                    return
                incidents = {i.kind: i for i in s.scalars(select(Incident).where(Incident.run_id == run_id))}
                finding = Finding(FAILED, PAGE, f"the automatic restart could not be submitted: {e.message}", {})
                self.pager.judge(s, row, incidents, [finding], now, kinds=[FAILED])

    def _tell_waiting(self, view: Mapping[str, Any]) -> None:
        """A restart after a node loss found no alive node that fits the run: it waits in the queue (admitted when
        one joins), and its thread says for what."""
        run_id = str(view["id"])
        text = (
            f":hourglass_flowing_sand: no alive node can run attempt {view['attempt']} now: it waits in the queue "
            f"for {view['waiting_for']}, and starts when such a node joins the cluster."
        )
        with self.db.session() as s:
            row = s.get(Run, run_id)
            if row is not None:
                self.pager.tell_thread(s, row, f"waiting-node-{view['attempt']}", text)
        log.warning("run %s: attempt %d waits for %s", run_id, view["attempt"], view["waiting_for"])

    # -- the cluster itself ----------------------------------------------------------------------------------

    def _ray_down(self, now: datetime, message: str) -> None:
        if self.down_since is None:
            self.down_since = now
            log.warning("%s", message)
        finding = infra_finding(self.down_since, now, self.policy.infra_after_s, self.address)
        with self.db.session() as s:
            if finding is not None or self._infra_open:
                self._judge_infra(s, finding, now)
            # escalation goes on while Ray is away: one query for the open pages and their runs
            q = (
                select(Incident, Run)
                .outerjoin(Run, Incident.run_id == Run.id)
                .where(Incident.state.in_(OPEN_INCIDENT_STATES))
            )
            for inc, run in s.execute(q):
                self.pager.escalate(s, run, inc, now)

    def _judge_infra(self, s: Session, finding: Finding | None, now: datetime) -> None:
        existing = s.scalar(self._infra_query())
        incidents: dict[str, Incident] = {INFRA: existing} if isinstance(existing, Incident) else {}
        self.pager.judge(s, None, incidents, [finding] if finding else [], now, kinds=[INFRA])
        self._infra_open = finding is not None


def actors_words(classes: list[str]) -> str:
    """``2 of its Ray actors (RayTrainWorker ×2)``: what a thread says died on a lost node."""
    counts = Counter(c or "an actor" for c in classes)
    kinds = ", ".join(f"{c} ×{n}" if n > 1 else c for c, n in sorted(counts.items()))
    return f"{len(classes)} of its Ray actors ({kinds})"


def _from(step: Any) -> str:
    return f"checkpoint step {step}" if step is not None else "the start (no good checkpoint before it)"


def _v(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value).lower() if isinstance(value, bool) else str(value)
