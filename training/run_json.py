"""How a run looks from outside: the JSON that the API, the CLI's ``--json`` and Slack show (a contract: fields are
added, never renamed or removed; README "Command line")."""

from __future__ import annotations

from typing import Any

from labbot.storage.models import ACTIVE_STATUSES, Run
from labbot.training.alerts import alerts_of
from labbot.training.remedies import remedy_from_json
from labbot.training.specs import plotted


def run_view(run: Run, *, queue_position: int | None = None) -> dict[str, Any]:
    """A run as the API, the CLI's ``--json`` and Slack see it (JSON-safe). ``queue_position``: a queued run's place
    in its purpose's line (1: next), which the run service knows."""

    def ts(v: Any) -> str | None:
        return v.isoformat() if v is not None else None

    cfg = run.config or {}
    plot, headline = plotted(cfg)
    vitals = run.vitals or {}
    phase = vitals.get("phase") if vitals.get("attempt") == run.attempt and run.status in ACTIVE_STATUSES else None
    return {
        "id": run.id,
        "job": run.job,
        "name": run.name,
        "owner": run.owner,
        "status": run.status,
        "attempt": run.attempt,
        "step": run.last_step,
        "metrics": dict(run.metrics or {}),
        "checkpoint_step": run.checkpoint_step,
        "ray_submission_id": run.ray_submission_id,
        "thread_ts": run.thread_ts,
        "channel": run.channel,
        "error": run.error,
        "params": cfg.get("params", {}),
        "params_given": cfg.get("given"),  # the params the launch set (the rest: the job's defaults); None: not known
        "gpus": cfg.get("gpus", 0),
        "cpus": cfg.get("cpus"),
        "purpose": getattr(run, "purpose", None) or cfg.get("purpose") or "training",
        "priority": run.priority or 0,
        "queue_position": queue_position if run.status == "queued" else None,
        "queued_at": ts(run.queued_at),
        "experiment": run.experiment_id,  # the experiment this run is a trial of (None: launched alone)
        "stall_after_s": cfg.get("stall_after_s"),
        "max_restarts": cfg.get("max_restarts"),
        "plot": plot,
        "headline": headline,
        "alerts": [a.describe() + f" ({a.severity}, as {a.name})" for a in alerts_of(cfg)],
        # what the watchdog does instead of paging (their words), and the remedial attempts it made (the lineage)
        "remedies": [remedy_from_json(r).text() for r in cfg.get("remedies") or []],
        "lineage": list(cfg.get("remedied") or []),
        "created_at": ts(run.created_at),
        "updated_at": ts(run.updated_at),
        "started_at": ts(run.started_at),
        "ended_at": ts(run.ended_at),
        "last_telemetry_at": ts(run.last_telemetry_at),
        "last_step_at": ts(run.last_step_at),
        # what the job says it is doing now (labbot_client's telemetry.phase: warmup, rollout, learn, eval), and since
        # when; None when it said nothing this attempt, or the run is not running
        "phase": phase.get("name") if isinstance(phase, dict) else None,
        "phase_since": phase.get("since") if isinstance(phase, dict) else None,
        # the Ray node the current attempt's entrypoint runs on ({"id", "name"}: an IP or a pod's name); None before
        # Ray placed it
        "node": {"id": run.node_id, "name": run.node_name or run.node_id[:8]} if run.node_id else None,
        # nodes lost under the run: its driver's (labbot restarted the attempt) or its actors' (Ray Train restarted its
        # workers inside the attempt); never counted against max_restarts
        "node_losses": run.node_losses or 0,
        "waiting_for": run.waiting_for,  # a queued run's reason: the node it waits for, in words
    }
