"""The tables: runs, their metric points and launch keys; Slack triggers acted on; run threads; pages and their
deliveries; artifacts; approvals, the audit trail, agent sessions and their answers; people's feedback.

Every state transition of a run is a row update here; the watchdog reads ``runs`` with one indexed query, so the
columns it needs (status, last telemetry, last step advance) live on the run itself, not in the points.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from labbot.storage.floats import NanFloat


class RunStatus(StrEnum):
    QUEUED = "queued"  # over its purpose's [compute] cap: a row only, not on Ray; admitted in queue order
    PENDING = "pending"
    RUNNING = "running"
    STALLED = "stalled"
    RESTARTING = "restarting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"

    @property
    def is_terminal(self) -> bool:
        return self in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.STOPPED)


ACTIVE_STATUSES = tuple(s.value for s in RunStatus if not s.is_terminal and s is not RunStatus.QUEUED)
"""On Ray, or about to be: what the watchdog reconciles and what counts against a purpose's cap (a ``queued`` run is
neither: it is a row waiting for capacity)."""
PURPOSE_DEFAULT = "training"


BigInt = BigInteger().with_variant(Integer, "sqlite")
"""A 64-bit integer: BIGINT on PostgreSQL, INTEGER on SQLite (64-bit there; and SQLite autoincrements only an INTEGER
primary key)."""


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite hands back naive values)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime: labbot stores UTC-aware datetimes only")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    pass


class Run(Base):
    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    job: Mapped[str] = mapped_column(String(100))
    name: Mapped[str] = mapped_column(String(200))
    owner: Mapped[str] = mapped_column(String(100))
    # params, gpus, stall_after_s, max_restarts: what the run was launched with (see labbot.training.specs.RunConfig)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), default=RunStatus.PENDING.value)
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    ray_submission_id: Mapped[str | None] = mapped_column(String(100))
    # sha256 of the per-run telemetry bearer token; the token itself only lives in the job's env
    telemetry_token_hash: Mapped[str] = mapped_column(String(64))
    error: Mapped[str | None] = mapped_column(Text)
    stop_requested: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_telemetry_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_step: Mapped[int | None] = mapped_column(BigInt)  # steps are up to 2**63 - 1 (the telemetry checks)
    last_step_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    checkpoint_step: Mapped[int | None] = mapped_column(BigInt)
    # latest value of each metric, JSON-safe (non-finite floats as strings, see labbot.storage.floats)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    channel: Mapped[str | None] = mapped_column(String(64))
    thread_ts: Mapped[str | None] = mapped_column(String(32))
    # when the current attempt was submitted to Ray (the pending timer and stall baselines start here)
    attempt_started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # the watchdog's running judgment of the telemetry: trailing losses, step rates, a latched divergence
    # (labbot.training.monitoring.observe); kept on the run so one query gives the watchdog all it needs
    vitals: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    auto_restarts: Mapped[int] = mapped_column(Integer, default=0)
    # an automatic restart is scheduled: attempt+1 is submitted at this time (backoff), then it is cleared
    restart_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # what the run is for (training|eval|data|research|serving: labbot.training.capacity.PURPOSES), whose [compute]
    # cap it counts against; its place in that purpose's queue (priority, higher first, then queued_at)
    purpose: Mapped[str] = mapped_column(String(16), default=PURPOSE_DEFAULT)
    priority: Mapped[int] = mapped_column(Integer, default=0)
    queued_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # the experiment this run is a trial of (one seed of one config), or None for a run launched alone
    experiment_id: Mapped[str | None] = mapped_column(String(32), index=True)
    # the Ray node the current attempt's entrypoint runs on (its id, and its name: an IP or a pod's name)
    node_id: Mapped[str | None] = mapped_column(String(64))
    node_name: Mapped[str | None] = mapped_column(String(200))
    # attempts that ended because their node was lost: restarted without spending the job's max_restarts
    node_losses: Mapped[int] = mapped_column(Integer, default=0)
    # a queued run that waits for a node it fits (after a node loss), in words: admitted once one is alive
    waiting_for: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        Index("ix_runs_status", "status"),
        Index("ix_runs_created_at", "created_at"),
        Index("ix_runs_queue", "status", "purpose", "priority", "queued_at"),
    )


class ExperimentStatus(StrEnum):
    RUNNING = "running"  # the controller launches trials while it may
    PAUSED = "paused"  # nothing new is launched; trials on Ray go on
    DONE = "done"  # every trial ended
    STOPPED = "stopped"  # by a person: running trials stopped, the study kept
    BUDGET_SPENT = "budget_spent"  # the budget is used: running trials stopped, the study kept

    @property
    def is_terminal(self) -> bool:
        return self in (ExperimentStatus.DONE, ExperimentStatus.STOPPED, ExperimentStatus.BUDGET_SPENT)


class TrialStatus(StrEnum):
    LAUNCHING = "launching"  # asked of Optuna, its runs being launched (a restart launches them again, idempotently)
    RUNNING = "running"  # its runs (one per seed) are queued or on Ray
    DONE = "done"  # every seed succeeded: scored, told to Optuna as complete
    PRUNED = "pruned"  # Optuna's pruner stopped it; its runs stopped
    FAILED = "failed"  # a seed failed for good (after its restarts), or never reported the objective
    STOPPED = "stopped"  # stopped by a person, or by the experiment's end (budget, stop)

    @property
    def is_terminal(self) -> bool:
        return self not in (TrialStatus.LAUNCHING, TrialStatus.RUNNING)


class Experiment(Base):
    """A question answered by many runs: a job, a search space, an objective, seeds, a search and a pruner, limits
    and a budget (``spec``: ``labbot.training.experiments.plan.ExperimentPlan`` as JSON). Its study lives in the
    same database, in Optuna's own tables (``study_name``); each trial is a row of ``experiment_trials`` and one run
    per seed."""

    __tablename__ = "experiments"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    owner: Mapped[str] = mapped_column(String(100))
    job: Mapped[str] = mapped_column(String(100))
    purpose: Mapped[str] = mapped_column(String(16), default=PURPOSE_DEFAULT)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), default=ExperimentStatus.RUNNING.value)
    study_name: Mapped[str] = mapped_column(String(200))
    reason: Mapped[str | None] = mapped_column(Text)  # why it ended (or was paused), in words
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    channel: Mapped[str | None] = mapped_column(String(64))  # its Slack thread, once posted
    thread_ts: Mapped[str | None] = mapped_column(String(32))
    card_digest: Mapped[str | None] = mapped_column(String(64))  # what its card shows now (skip no-op updates)
    summary_posted: Mapped[bool] = mapped_column(default=False)

    __table_args__ = (Index("ix_experiments_status", "status"),)


class ExperimentTrial(Base):
    """One trial of an experiment: Optuna's trial ``number``, the parameters it asked for, and the run of each seed.
    ``value`` is its score (the objective's mean across seeds) once done; ``reported_step`` the last step whose
    mean across seeds was told to Optuna as an intermediate value."""

    __tablename__ = "experiment_trials"

    experiment_id: Mapped[str] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True)
    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    optuna_trial_id: Mapped[int] = mapped_column(BigInt)
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), default=TrialStatus.LAUNCHING.value)
    run_ids: Mapped[list[str]] = mapped_column(JSON, default=list)  # one per seed, in seed order
    reported_step: Mapped[int | None] = mapped_column(BigInt)
    value: Mapped[float | None] = mapped_column(Float)  # finite: a trial whose score is not is failed
    seed_values: Mapped[list[float]] = mapped_column(JSON, default=list)  # each seed's objective, in seed order
    reason: Mapped[str | None] = mapped_column(Text)  # why it was pruned, failed or stopped
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Finding(Base):
    """What the lab learned from a question: the question, the verdict, a summary whose numbers are claims bound to
    their sources (``labbot.training.claims``), links to what it rests on, and whether it was answered, left
    incomplete or failed (failures are findings too). The document itself is an artifact of the ``findings`` store;
    this row is what ``search_findings`` searches. ``source`` (e.g. ``experiment:x7k2m9p``) records one finding per
    thing it was made from."""

    __tablename__ = "findings"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # experiment | research
    source: Mapped[str | None] = mapped_column(String(200), unique=True)
    question: Mapped[str] = mapped_column(Text)
    verdict: Mapped[str] = mapped_column(Text)
    summary: Mapped[str] = mapped_column(Text)  # Markdown; its numbers as [[VALUE | SOURCE]] claims
    claims: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)  # each claim as checked when recorded
    links: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(16))  # answered | incomplete | failed
    owner: Mapped[str] = mapped_column(String(100))
    artifact_id: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)


class ResearchStatus(StrEnum):
    PLANNING = "planning"  # no plan approved yet (one may be proposed, waiting for its approval)
    RUNNING = "running"  # the approved plan's experiments run (a change may wait for approval)
    ANSWERED = "answered"  # reported, every arm ran to its end
    INCOMPLETE = "incomplete"  # reported with an arm cut short (its budget spent, stopped) or never run
    CLOSED = "closed"  # closed with no report (its owner, or an admin, stopped it)

    @property
    def is_terminal(self) -> bool:
        return self in (ResearchStatus.ANSWERED, ResearchStatus.INCOMPLETE, ResearchStatus.CLOSED)


class Research(Base):
    """A question taken to an answer by the researcher agent (``labbot.training.research``): its plan as last
    proposed (``plan``, ``plan_hash``), the plan a human approved (``approved``, ``approved_hash``; only that one runs),
    the experiment of each of the plan's arms, and the report whose numbers were checked (``report``). ``owner`` is
    who asked: they (or an admin) approve."""

    __tablename__ = "research"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    question: Mapped[str] = mapped_column(Text)
    owner: Mapped[str] = mapped_column(String(100))
    status: Mapped[str] = mapped_column(String(16), default=ResearchStatus.PLANNING.value)
    plan: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # the plan as last proposed (scope + projection)
    plan_hash: Mapped[str | None] = mapped_column(String(64))
    approved: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # the plan that runs
    approved_hash: Mapped[str | None] = mapped_column(String(64))
    arms: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)  # arm name -> experiment id
    report: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # the checked report, once given
    finding_id: Mapped[str | None] = mapped_column(String(32))
    reason: Mapped[str | None] = mapped_column(Text)  # why it ended as it did, in words
    channel: Mapped[str | None] = mapped_column(String(64))  # its Slack thread
    thread_ts: Mapped[str | None] = mapped_column(String(32))
    published: Mapped[bool] = mapped_column(default=False)  # the report posted where it goes (thread, Notion, Linear)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    __table_args__ = (Index("ix_research_status", "status"),)


class AdmissionLock(Base):
    """One row (``id = 1``) that every admission decision updates first, in the transaction that inserts or admits
    the run: SQLite takes its write lock and PostgreSQL the row's lock there, so two launches (threads, processes or
    replicas) decide one after the other against the same view of what runs."""

    __tablename__ = "admission_lock"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    decisions: Mapped[int] = mapped_column(BigInt, default=0)


class LeaderLease(Base):
    """Who runs the singletons (watchdog, outbox, escalation, dead-man ping, queued admission, thread upkeep) among
    the replicas on this database: one row per lease (``singletons``). ``token`` (the fencing token) goes up by one at
    every change of holder; every transaction the singletons open checks it is still theirs (``labbot.storage.lease``).
    Times are the database's clock on PostgreSQL, so replicas' clocks need not agree."""

    __tablename__ = "leader_lease"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    holder: Mapped[str] = mapped_column(String(200))  # replica name:pid:incarnation
    token: Mapped[int] = mapped_column(BigInt)
    acquired_at: Mapped[datetime] = mapped_column(UTCDateTime)
    renewed_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)


class MetricPoint(Base):
    __tablename__ = "metric_points"

    id: Mapped[int] = mapped_column(BigInt, primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    attempt: Mapped[int] = mapped_column(BigInt)  # as the batch says: an old attempt's tail, or a wrong one
    step: Mapped[int] = mapped_column(BigInt)
    name: Mapped[str] = mapped_column(String(64))
    value: Mapped[float] = mapped_column(NanFloat, nullable=True)  # NULL encodes NaN (labbot.storage.floats)
    ts: Mapped[datetime] = mapped_column(UTCDateTime)

    # one value per (run, metric, attempt, step): a telemetry retry after a lost reply stores nothing twice
    __table_args__ = (Index("ux_metric_points_point", "run_id", "name", "attempt", "step", unique=True),)


class RunCheckpoint(Base):
    """A checkpoint a run's job reported writing (a telemetry ``checkpoint`` event), with its health: the run's latest
    value of each metric at or before its step (``metrics``, NaN-safe encoded), so which checkpoint is the last good
    one before a signal is decided from data (``labbot.training.checkpoint_health``)."""

    __tablename__ = "run_checkpoints"

    id: Mapped[int] = mapped_column(BigInt, primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    attempt: Mapped[int] = mapped_column(BigInt)
    step: Mapped[int] = mapped_column(BigInt)
    path: Mapped[str | None] = mapped_column(Text)
    written_at: Mapped[datetime] = mapped_column(UTCDateTime)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    # one row per (run, attempt, step): a telemetry retry after a lost reply records nothing twice
    __table_args__ = (Index("ux_run_checkpoints_step", "run_id", "attempt", "step", unique=True),)


class LaunchKey(Base):
    """One row per idempotency key: the same launch submitted twice maps to the same run."""

    __tablename__ = "launch_keys"

    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class SeenKey(Base):
    """A Slack trigger acted on (``command:TRIGGER_ID``, ``action:TRIGGER_ID``): a signed request replayed inside
    Slack's 5-minute window finds its row, after a restart of labbot too, and on every replica. Pruned by age."""

    __tablename__ = "seen_keys"

    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)


class RunThread(Base):
    """A run's Slack thread: where its card is, and what has been posted there (so nothing posts twice, even
    across a restart of labbot)."""

    __tablename__ = "run_threads"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    channel: Mapped[str] = mapped_column(String(64))
    card_ts: Mapped[str] = mapped_column(String(32))  # the card is the thread's root message
    card_digest: Mapped[str | None] = mapped_column(String(64))  # what the card shows now (skip no-op updates)
    card_updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    progress_posted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    progress_step: Mapped[int | None] = mapped_column(BigInt)
    plots_posted: Mapped[list[int]] = mapped_column(JSON, default=list)  # milestone percents already plotted
    attempt_seen: Mapped[int] = mapped_column(Integer, default=1)
    status_seen: Mapped[str] = mapped_column(String(16))
    summary_posted: Mapped[bool] = mapped_column(default=False)
    no_agent_said: Mapped[bool] = mapped_column(default=False)
    history: Mapped[list[str]] = mapped_column(JSON, default=list)  # "who did what" lines shown on the card

    __table_args__ = (Index("ix_run_threads_channel_ts", "channel", "card_ts", unique=True),)


class ThreadMessage(Base):
    """A human's reply in a run's thread, kept with the run (the thread's agent session keeps its own history)."""

    __tablename__ = "thread_messages"

    id: Mapped[int] = mapped_column(BigInt, primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    channel: Mapped[str] = mapped_column(String(64))
    ts: Mapped[str] = mapped_column(String(32))
    user: Mapped[str] = mapped_column(String(64))
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    __table_args__ = (Index("ux_thread_messages_channel_ts", "channel", "ts", unique=True),)


class IncidentState(StrEnum):
    TRIGGERED = "triggered"
    ACKNOWLEDGED = "acknowledged"
    RESOLVED = "resolved"


OPEN_INCIDENT_STATES = (IncidentState.TRIGGERED.value, IncidentState.ACKNOWLEDGED.value)


class Incident(Base):
    """A page: one row per (run, condition) dedup key, ever. Its state cycles triggered → acknowledged → resolved;
    a condition that returns re-opens the same row (quietly within the flap window, as a new occurrence after it).
    ``key`` is also PagerDuty's ``dedup_key``."""

    __tablename__ = "incidents"

    id: Mapped[str] = mapped_column(String(16), primary_key=True)  # short, typed by humans: `/lab ack ID`
    key: Mapped[str] = mapped_column(String(200), unique=True)
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))  # None: the cluster
    kind: Mapped[str] = mapped_column(String(16))  # silent|hung|failed|pending|diverged|slow|infra
    severity: Mapped[str] = mapped_column(String(8))  # page|warning
    state: Mapped[str] = mapped_column(String(16), default=IncidentState.TRIGGERED.value)
    summary: Mapped[str] = mapped_column(Text)
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    escalation_level: Mapped[int] = mapped_column(Integer, default=0)
    occurrence: Mapped[int] = mapped_column(Integer, default=1)  # a new occurrence pages from level 0 again
    reopened: Mapped[int] = mapped_column(Integer, default=0)  # flaps within the window, this occurrence
    condition_active: Mapped[bool] = mapped_column(default=True)  # what the watchdog saw on its last look
    pagerduty_open: Mapped[bool] = mapped_column(default=False)  # a trigger was sent for this occurrence
    triggered_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    acknowledged_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    acknowledged_by: Mapped[str | None] = mapped_column(String(100))
    resolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    resolved_by: Mapped[str | None] = mapped_column(String(100))
    next_escalation_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    next_renotify_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    renotified: Mapped[int] = mapped_column(Integer, default=0)
    # where else the page lives: {"linear": {"id", "identifier", "url", "by"}} once someone files it there
    links: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    # what its owner wrote down as the cause (`/lab resolve PAGE --cause "..."`): what an incident eval case is
    # scored against
    cause: Mapped[str | None] = mapped_column(Text, default=None)
    cause_by: Mapped[str | None] = mapped_column(String(100))
    cause_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    __table_args__ = (Index("ix_incidents_run_id", "run_id"), Index("ix_incidents_state", "state"))


class DeliveryState(StrEnum):
    PENDING = "pending"
    SENDING = "sending"  # handed to the receiver; found so after a crash, the outcome is unknown (checked first)
    SENT = "sent"
    DEAD = "dead"  # the receiver refused it for good (a 400, a channel that does not exist): logged, not retried


class Delivery(Base):
    """The outbox: every notification is a row before it is sent; a sender retries it with backoff until the
    receiver accepts it. ``key`` makes enqueueing idempotent (the same page step is never queued twice)."""

    __tablename__ = "deliveries"

    id: Mapped[int] = mapped_column(BigInt, primary_key=True)
    key: Mapped[str] = mapped_column(String(200), unique=True)
    incident_id: Mapped[str | None] = mapped_column(ForeignKey("incidents.id", ondelete="CASCADE"))
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    channel: Mapped[str] = mapped_column(String(16))  # slack|pagerduty
    action: Mapped[str] = mapped_column(String(24))  # slack: post|refresh; pagerduty: trigger|acknowledge|resolve
    target: Mapped[str] = mapped_column(String(100))  # slack: thread | dm:USER | channel:CHANNEL
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    state: Mapped[str] = mapped_column(String(12), default=DeliveryState.PENDING.value)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_error: Mapped[str | None] = mapped_column(Text)
    result: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # e.g. the Slack message's channel and ts
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # the leader lease's fencing token the delivery was claimed under (``sending``): only under it is it sent, and
    # its outcome recorded (None: claimed outside a fence)
    claim_token: Mapped[int | None] = mapped_column(BigInt)

    __table_args__ = (
        Index("ix_deliveries_due", "state", "next_attempt_at"),
        Index("ix_deliveries_incident_id", "incident_id"),
    )


class Artifact(Base):
    """One named file in an agent's artifact store (labbot.storage.artifacts). The bytes live in a content-addressed
    blob (``blobs/<sha[:2]>/<sha>`` under LABBOT_ARTIFACTS_URL), shared by every row with the same sha256; names are
    per agent, and a put of a name the agent already has replaces that row's content (same id, shares kept)."""

    __tablename__ = "artifacts"

    id: Mapped[str] = mapped_column(String(16), primary_key=True)  # short, typed by humans like run ids
    owner_agent: Mapped[str] = mapped_column(String(100))  # the agent whose store holds it (and whose quota)
    name: Mapped[str] = mapped_column(String(200))
    sha256: Mapped[str] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(BigInteger)
    content_type: Mapped[str] = mapped_column(String(100))
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    # the unique (owner, name) index also serves "an agent's artifacts" and its quota sum; by sha: "is this blob
    # still referenced" on delete
    __table_args__ = (
        Index("ux_artifacts_owner_name", "owner_agent", "name", unique=True),
        Index("ix_artifacts_sha256", "sha256"),
    )


class ArtifactShare(Base):
    """An artifact one agent shared with another: the other may read it (not share, replace or delete it)."""

    __tablename__ = "artifact_shares"

    artifact_id: Mapped[str] = mapped_column(ForeignKey("artifacts.id", ondelete="CASCADE"), primary_key=True)
    shared_with: Mapped[str] = mapped_column(String(100), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    __table_args__ = (Index("ix_artifact_shares_shared_with", "shared_with"),)


class Approval(Base):
    """A destructive tool call waiting for (or settled by) a human's Approve / Deny (labbot.agents.fleet.approvals)."""

    __tablename__ = "approvals"

    id: Mapped[str] = mapped_column(String(16), primary_key=True)
    agent: Mapped[str] = mapped_column(String(64))
    role: Mapped[str] = mapped_column(String(64))
    tool: Mapped[str] = mapped_column(String(100))
    arguments: Mapped[str] = mapped_column(Text)  # redacted preview, as the approver saw it
    approvers: Mapped[list[str]] = mapped_column(JSON, default=list)  # besides admins
    channel: Mapped[str | None] = mapped_column(String(64))
    thread_ts: Mapped[str | None] = mapped_column(String(32))
    message_ts: Mapped[str | None] = mapped_column(String(32))  # the prompt's message, to update it when settled
    run_id: Mapped[str | None] = mapped_column(String(32))
    state: Mapped[str] = mapped_column(String(12), default="pending")  # pending|approved|denied|expired
    decided_by: Mapped[str | None] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    __table_args__ = (Index("ix_approvals_state", "state"),)


class ToolCall(Base):
    """The audit trail: one row per tool call an agent made (labbot.agents.fleet.audit); arguments only as digest +
    redacted
    preview."""

    __tablename__ = "tool_calls"

    id: Mapped[int] = mapped_column(BigInt, primary_key=True)
    agent: Mapped[str] = mapped_column(String(64))
    role: Mapped[str] = mapped_column(String(64))
    owner: Mapped[str] = mapped_column(String(100))
    tool: Mapped[str] = mapped_column(String(100))
    args_digest: Mapped[str] = mapped_column(String(64))
    args_preview: Mapped[str] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    duration_ms: Mapped[float] = mapped_column(Float)
    outcome: Mapped[str] = mapped_column(String(32))  # ok|error|not run: denied|not run: timeout|not run: unavailable
    approver: Mapped[str | None] = mapped_column(String(100))
    error: Mapped[str | None] = mapped_column(Text)
    run_id: Mapped[str | None] = mapped_column(String(32))
    thread_ts: Mapped[str | None] = mapped_column(String(32))

    __table_args__ = (Index("ix_tool_calls_agent", "agent"), Index("ix_tool_calls_started_at", "started_at"))


class AgentSession(Base):
    """A conversation with labbot's agents (labbot.agents.fleet.sessions): one per Slack thread, so a reply in the
    thread carries
    on where the last answer left off, across restarts. Its role and run are fixed when it starts."""

    __tablename__ = "agent_sessions"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    channel: Mapped[str | None] = mapped_column(String(64))
    thread_ts: Mapped[str | None] = mapped_column(String(32))  # None with channel None: a session with no thread
    role: Mapped[str] = mapped_column(String(64))
    owner: Mapped[str] = mapped_column(String(100))  # who started it
    run_id: Mapped[str | None] = mapped_column(String(32))  # set when the thread is a run's
    # the model that answers in this session, fixed when it starts (None: the configured model, sessions from
    # before A/B tests); ab_arm is "A" or "B" when [agents.ab] split it
    model: Mapped[str | None] = mapped_column(String(100))
    ab_arm: Mapped[str | None] = mapped_column(String(1))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    # one session per thread; rows without a thread (NULLs) never collide, on SQLite and Postgres alike
    __table_args__ = (Index("ux_agent_sessions_thread", "channel", "thread_ts", unique=True),)


class AgentMessage(Base):
    """One message of a session's history, exactly as the Messages API takes it (role and content blocks)."""

    __tablename__ = "agent_messages"

    id: Mapped[int] = mapped_column(BigInt, primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("agent_sessions.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)  # 0-based position in the history
    role: Mapped[str] = mapped_column(String(16))  # user|assistant
    content: Mapped[Any] = mapped_column(JSON)  # a string or a list of content blocks
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    # also serves "a session's history in order"
    __table_args__ = (Index("ux_agent_messages_session_seq", "session_id", "seq", unique=True),)


class AgentTurn(Base):
    """One answer of an agent session: who asked, which model and role answered, what it cost, and the Slack
    message it became (feedback on that message is feedback on this answer)."""

    __tablename__ = "agent_turns"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("agent_sessions.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)  # 1 for the session's first answer
    owner: Mapped[str] = mapped_column(String(100))  # who asked
    role: Mapped[str] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(100))
    ab_arm: Mapped[str | None] = mapped_column(String(1))
    stop: Mapped[str] = mapped_column(String(40))
    model_calls: Mapped[int] = mapped_column(Integer, default=0)
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    elapsed_s: Mapped[float] = mapped_column(Float, default=0.0)
    # where the question ends and the answer begins in the session's history (agent_messages.seq)
    first_seq: Mapped[int] = mapped_column(Integer, default=0)
    last_seq: Mapped[int] = mapped_column(Integer, default=0)
    channel: Mapped[str | None] = mapped_column(String(64))
    message_ts: Mapped[str | None] = mapped_column(String(32))  # the answer's Slack message, once posted
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    __table_args__ = (
        Index("ux_agent_turns_session_seq", "session_id", "seq", unique=True),
        Index("ix_agent_turns_message", "channel", "message_ts"),
        Index("ix_agent_turns_created_at", "created_at"),
    )


class VotableMessage(Base):
    """A message labbot posted that people may vote on and that is not a run's card or an agent's answer (those are
    found through ``run_threads`` and ``agent_turns``): an eval run's results."""

    __tablename__ = "votable_messages"

    channel: Mapped[str] = mapped_column(String(64), primary_key=True)
    ts: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # eval
    run_id: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Feedback(Base):
    """One person's vote on one thing labbot posted: an agent's answer (``kind`` answer: its turn, model and role
    kept), a run's card (run) or an eval run's results (eval). One row per (message, voter): pressing again, changing
    the vote or Slack retrying the event updates it, the latest vote wins."""

    __tablename__ = "feedback"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # answer|run|eval
    channel: Mapped[str] = mapped_column(String(64))
    message_ts: Mapped[str] = mapped_column(String(32))
    user: Mapped[str] = mapped_column(String(100))
    vote: Mapped[int] = mapped_column(Integer)  # +1 or -1
    source: Mapped[str] = mapped_column(String(16))  # button|reaction|api
    comment: Mapped[str | None] = mapped_column(Text)
    turn_id: Mapped[str | None] = mapped_column(ForeignKey("agent_turns.id", ondelete="SET NULL"))
    session_id: Mapped[str | None] = mapped_column(String(32))
    model: Mapped[str | None] = mapped_column(String(100))
    role: Mapped[str | None] = mapped_column(String(64))
    ab_arm: Mapped[str | None] = mapped_column(String(1))
    run_id: Mapped[str | None] = mapped_column(String(32))
    # an eval case made from it (`eval from-feedback`): its id
    case_id: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    __table_args__ = (
        Index("ux_feedback_message_user", "channel", "message_ts", "user", unique=True),
        Index("ix_feedback_created_at", "created_at"),
        Index("ix_feedback_arm", "ab_arm", "model"),
    )
