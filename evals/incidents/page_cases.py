"""Eval cases made from the lab's own incidents: what labbot saw when it paged, frozen, and the cause its owner wrote.

:func:`freeze` turns a resolved page whose cause was recorded (``/lab resolve PAGE --cause "…"``, or a reply in the
run's thread starting ``cause:`` by the run's owner or the page's resolver) into a case: the page (kind, summary, the
watchdog's facts), the run's job and parameters, the log tail, each metric's last points up to the moment of the page,
and what the investigator's tools read while it investigated (Datadog, Linear, Notion, the codebase — the tool
results, never the investigator's own conclusions). Everything in it is redacted before it is kept: values under
secret-named keys, credential shapes, secret-named assignments in log lines, and the secrets labbot itself holds. The
recorded cause is the case's target; what the model and the judge then read is :mod:`labbot.evals.incidents.cases`'.

The control plane's side (``EvalService.from_incident``): it reads the database, so no in-job module imports it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import select

from labbot.common.errors import BadRequest, LabbotError
from labbot.common.redact import Redactor, redact_json
from labbot.evals.incidents.cases import case_id, tool_results
from labbot.storage.db import Database
from labbot.storage.models import (
    AgentMessage,
    AgentSession,
    Incident,
    IncidentState,
    MetricPoint,
    Run,
    ThreadMessage,
)

POINTS_PER_METRIC = 60  # the window: each metric's last points before the page
MAX_METRICS = 12
LOG_TAIL_LINES = 80
# the investigator agent role's sessions, by its name and by its old one (rows an older labbot wrote): evals does not
# import the fleet (labbot.agents.fleet.roles.RENAMED)
INVESTIGATOR_ROLES = ("investigator", "babysitter")


class UnknownIncident(LabbotError):
    status = 404
    code = "unknown_page"


def freeze(
    db: Database,
    page_id: str,
    *,
    by: str,
    logs: Callable[[str], str] | None = None,
    redactor: Redactor | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The eval case of page ``page_id`` (see the module docstring). BadRequest, with what to do, when the page is
    still open or has no recorded cause; nothing is written here (the caller keeps the case)."""
    redactor = redactor or Redactor()
    with db.session() as s:
        inc = s.get(Incident, page_id)
        if inc is None:
            raise UnknownIncident(f"unknown page {page_id!r}: `/lab pages --all` lists them")
        if inc.state != IncidentState.RESOLVED.value:
            raise BadRequest(
                f"page {page_id} is still {inc.state}: an eval case is made from a resolved page whose cause is "
                f'written down — `/lab resolve {page_id} --cause "what was wrong"` does both'
            )
        cause = inc.cause or _cause_replied(s, inc)
        if not cause:
            raise BadRequest(
                f"page {page_id} has no recorded cause: its owner writes down what was wrong with "
                f'`/lab resolve {page_id} --cause "the data loader deadlocked on a full shm queue"` '
                f'(or `labbot resolve {page_id} --cause "..."`, or a reply in the run\'s thread that starts '
                '"cause:"); then make the case again'
            )
        page = {
            "id": inc.id,
            "kind": inc.kind,
            "severity": inc.severity,
            "summary": inc.summary,
            "detail": {k: v for k, v in (inc.detail or {}).items() if k != "log_tail"},
            "triggered_at": inc.triggered_at.isoformat(),
        }
        detail_tail = str((inc.detail or {}).get("log_tail") or "")
        run_id, triggered_at, resolved_at = inc.run_id, inc.triggered_at, inc.resolved_at
        run = s.get(Run, run_id) if run_id else None
        run_doc = _run_doc(run) if run is not None else None
    log_tail = detail_tail
    if not log_tail and run_id and logs is not None:
        try:
            log_tail = logs(run_id)
        except LabbotError:
            log_tail = ""  # Ray no longer has the job's logs: the case goes without
    case = {
        "id": case_id(page_id),
        "page": page,
        "run": run_doc,
        "log_tail": "\n".join(log_tail.splitlines()[-LOG_TAIL_LINES:]),
        "metrics": _metrics_window(db, run_id, triggered_at) if run_id else {},
        "context": _investigator_context(db, run_id, triggered_at, resolved_at) if run_id else [],
        "cause": cause,
        "frozen_by": by,
        "frozen_at": (now or datetime.now(triggered_at.tzinfo)).isoformat(),
    }
    frozen = redact_json(case, redactor)
    assert isinstance(frozen, dict)
    return frozen


CAUSE_REPLY = re.compile(r"^\s*(?:root\s+)?cause\s*:\s*(?P<cause>\S.*)", re.IGNORECASE | re.DOTALL)


def _cause_replied(s: Any, inc: Incident) -> str | None:
    """The newest reply in the run's thread, after the page, by the run's owner or whoever resolved the page, that
    starts ``cause:`` (the way an engineer writes it down where the page was)."""
    if inc.run_id is None:
        return None
    run = s.get(Run, inc.run_id)
    people = {p for p in (run.owner if run else None, inc.resolved_by) if p}
    rows = s.scalars(
        select(ThreadMessage)
        .where(ThreadMessage.run_id == inc.run_id, ThreadMessage.created_at >= inc.triggered_at)
        .order_by(ThreadMessage.created_at.desc(), ThreadMessage.id.desc())
    )
    for row in rows:
        found = CAUSE_REPLY.match(row.text or "")
        if row.user in people and found and len(found["cause"].strip()) >= 10:
            return " ".join(found["cause"].split())[:2000]
    return None


def _run_doc(run: Run) -> dict[str, Any]:
    config = dict(run.config or {})
    return {
        "id": run.id,
        "job": run.job,
        "name": run.name,
        "params": dict(config.get("params") or {}),
        "status": run.status,
        "attempt": run.attempt,
    }


def _metrics_window(db: Database, run_id: str, until: datetime) -> dict[str, list[list[Any]]]:
    """Each metric's last :data:`POINTS_PER_METRIC` points reported up to ``until`` (NaN as "NaN")."""
    with db.session() as s:
        names = s.scalars(
            select(MetricPoint.name).where(MetricPoint.run_id == run_id, MetricPoint.ts <= until).distinct()
        ).all()
        out: dict[str, list[list[Any]]] = {}
        for name in sorted(names)[:MAX_METRICS]:
            rows = s.execute(
                select(MetricPoint.step, MetricPoint.value)
                .where(MetricPoint.run_id == run_id, MetricPoint.name == name, MetricPoint.ts <= until)
                .order_by(MetricPoint.step.desc(), MetricPoint.id.desc())
                .limit(POINTS_PER_METRIC)
            ).all()
            out[name] = [[int(step), _json_float(value)] for step, value in reversed(rows)]
        return out


def _json_float(value: float | None) -> float | str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return round(float(value), 6)


def _investigator_context(db: Database, run_id: str, since: datetime, until: datetime | None) -> list[dict[str, str]]:
    """What the investigator's tools returned while it investigated this run's page: (tool, result) pairs, oldest
    first. Its own words (the diagnosis it wrote) are left out: the case asks for a diagnosis, it must not hold one."""
    with db.session() as s:
        sessions = s.scalars(
            select(AgentSession.id).where(AgentSession.run_id == run_id, AgentSession.role.in_(INVESTIGATOR_ROLES))
        ).all()
        if not sessions:
            return []
        q = select(AgentMessage).where(AgentMessage.session_id.in_(sessions)).order_by(AgentMessage.id)
        messages = [(m.role, m.content, m.created_at) for m in s.scalars(q)]
    kept = [
        (role, content)
        for role, content, created in messages
        if created >= since and (until is None or created <= until)
    ]
    return tool_results(kept)
