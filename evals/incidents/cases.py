"""Eval cases made from the lab's own incidents: what labbot saw when it paged, frozen, and the cause its owner wrote.

:func:`freeze` turns a resolved page whose cause was recorded (``/lab resolve PAGE --cause "…"``, or a reply in the
run's thread starting ``cause:`` by the run's owner or the page's resolver) into a case: the
page (kind, summary, the watchdog's facts), the run's job and parameters, the log tail, each metric's last points up
to the moment of the page, and what the babysitter's tools read while it investigated (Datadog, Linear, Notion, the
codebase — the tool results, never the babysitter's own conclusions). Everything in it is redacted before it is
kept: values under secret-named keys, credential shapes, secret-named assignments in log lines, and the secrets
labbot itself holds. The recorded cause is the case's target.

The same suite holds cases made from feedback (``labbot.evals.incidents.feedback_cases``: a 👎 on an agent's answer,
with the researcher's comment as the target); :func:`system_prompt`, :func:`case_prompt`, :func:`judge_system` and
:func:`case_judge_prompt` say what the model and the judge read for either kind.

A model is asked for the diagnosis (:func:`case_prompt`); a judge model compares it with the recorded cause
(:func:`judge_prompt`, :func:`parse_verdict`). The verdict is ``correct``, ``incorrect`` or ``unjudged`` — a judge
that could not be reached or answered anything but the verdict asked for — and ``unjudged`` never counts as passed.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import select

from labbot.common.errors import BadRequest, LabbotError
from labbot.common.redact import Redactor, redact_json
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

CASE_ID = re.compile(r"(?:incident|feedback)-[a-z0-9]{1,16}")  # a page's case, or a 👎's (evals.feedback_cases)
INCIDENT_SUITE_ID = re.compile(r"incidents-[0-9a-f]{12}")
POINTS_PER_METRIC = 60  # the window: each metric's last points before the page
MAX_METRICS = 12
LOG_TAIL_LINES = 80
MAX_CONTEXT_ITEMS = 8
MAX_CONTEXT_CHARS = 2000
BABYSITTER_ROLE = "babysitter"

Verdict = Literal["correct", "incorrect", "unjudged"]


class UnknownIncident(LabbotError):
    status = 404
    code = "unknown_page"


@dataclass(frozen=True)
class Judged:
    verdict: Verdict
    reason: str

    @property
    def passed(self) -> bool:
        return self.verdict == "correct"


def case_id(page_id: str) -> str:
    return f"incident-{page_id}"


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
        "context": _babysitter_context(db, run_id, triggered_at, resolved_at) if run_id else [],
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


def _babysitter_context(db: Database, run_id: str, since: datetime, until: datetime | None) -> list[dict[str, str]]:
    """What the babysitter's tools returned while it investigated this run's page: (tool, result) pairs, oldest
    first. Its own words (the diagnosis it wrote) are left out: the case asks for a diagnosis, it must not hold one."""
    with db.session() as s:
        sessions = s.scalars(
            select(AgentSession.id).where(AgentSession.run_id == run_id, AgentSession.role == BABYSITTER_ROLE)
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


def tool_results(messages: Iterable[tuple[str, Any]]) -> list[dict[str, str]]:
    """The (tool, result) pairs of a stretch of an agent's history, oldest first: each successful tool result with
    the name of the tool the assistant called, at most ``MAX_CONTEXT_ITEMS`` (the last), each clipped."""
    names: dict[str, str] = {}
    found: list[dict[str, str]] = []
    for role, content in messages:
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if role == "assistant" and block.get("type") == "tool_use":
                names[str(block.get("id"))] = str(block.get("name"))
            elif role == "user" and block.get("type") == "tool_result" and not block.get("is_error"):
                text = text_of(block.get("content"))
                if text:
                    tool = names.get(str(block.get("tool_use_id")), "tool")
                    found.append({"tool": tool, "result": text[:MAX_CONTEXT_CHARS]})
    return found[-MAX_CONTEXT_ITEMS:]


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def suite_of(cases: Sequence[dict[str, Any]]) -> str:
    """The incident suite's id: ``incidents-`` and 12 hex digits of its cases' content (so a name is a version; when
    and by whom a case was frozen is not content)."""
    content = [{k: v for k, v in c.items() if k not in ("frozen_at", "frozen_by")} for c in cases]
    canonical = json.dumps(sorted(content, key=lambda c: str(c["id"])), sort_keys=True, separators=(",", ":"))
    return "incidents-" + hashlib.sha256(canonical.encode()).hexdigest()[:12]


# -- asking and judging --------------------------------------------------------------------------------------------

DIAGNOSE_SYSTEM = """\
You are the on-call engineer for a machine-learning research lab's training cluster. A monitor paged about a \
training run. From what it saw — the page, the run's configuration, the log tail, the metrics before the page and \
what was looked up while investigating — say what caused the problem. Answer with the root cause in one or two \
sentences: what broke and why, not what the page already says."""

JUDGE_SYSTEM = """\
You grade diagnoses of incidents on an ML training cluster. You get the root cause the engineers recorded and a \
diagnosis to grade. The diagnosis is CORRECT when it names the same root cause (different words are fine; a more \
specific account of the same cause is fine); INCORRECT when it names another cause, only restates the symptom, or \
hedges across several causes. Answer with one line of JSON and nothing else: \
{"verdict": "correct" or "incorrect", "reason": "one sentence"}"""


FEEDBACK_SYSTEM = """\
You are a research assistant for a machine-learning lab, answering a researcher's question in a Slack thread. You \
get the question and what was looked up for it (tool results). Answer the question directly and correctly from \
that material, in a few sentences."""

FEEDBACK_JUDGE_SYSTEM = """\
You grade answers to researchers' questions in an ML lab. An earlier answer to this question was marked bad, and \
the researcher said what was wrong with it. The new answer is CORRECT when it answers the question without the \
mistake the researcher described (and without another obvious one); INCORRECT when it repeats that mistake, \
dodges the question or hedges across several answers. Answer with one line of JSON and nothing else: \
{"verdict": "correct" or "incorrect", "reason": "one sentence"}"""


def system_prompt(case: dict[str, Any]) -> str:
    """The system prompt of the model being evaluated on ``case``."""
    return FEEDBACK_SYSTEM if case.get("kind") == "feedback" else DIAGNOSE_SYSTEM


def judge_system(case: dict[str, Any]) -> str:
    return FEEDBACK_JUDGE_SYSTEM if case.get("kind") == "feedback" else JUDGE_SYSTEM


def case_judge_prompt(case: dict[str, Any], answer: str) -> str:
    """What the judge reads for ``case``: the recorded cause (an incident), or the question, the answer marked bad
    and the researcher's comment (feedback), then the answer to grade."""
    if case.get("kind") != "feedback":
        return judge_prompt(str(case["cause"]), answer)
    return (
        f"QUESTION:\n{case.get('question', '')}\n\nEARLIER ANSWER, MARKED BAD:\n{case.get('answer', '')}\n\n"
        f"WHAT THE RESEARCHER SAID WAS WRONG:\n{case['cause']}\n\nNEW ANSWER TO GRADE:\n{answer.strip() or '(empty)'}"
    )


def case_prompt(case: dict[str, Any]) -> str:
    """What the model being evaluated reads: the frozen case without its cause (nor, for feedback, the answer that
    was marked bad)."""
    if case.get("kind") == "feedback":
        parts = [f"QUESTION: {case.get('question', '')}"]
        run = case.get("run") or {}
        if run:
            parts.append(f"RUN {run.get('id')} of job {run.get('job')}: " + json.dumps(run.get("params") or {}))
        for item in case.get("context") or []:
            parts.append(f"LOOKED UP with {item['tool']}:\n{item['result']}")
        parts.append("Answer the question.")
        return "\n\n".join(parts)
    page, run = case["page"], case.get("run") or {}
    parts = [
        f"PAGE {page['kind']} ({page['severity']}) at {page['triggered_at']}: {page['summary']}",
        "WATCHDOG FACTS: " + json.dumps(page.get("detail") or {}, sort_keys=True),
    ]
    if run:
        parts.append(f"RUN {run.get('id')} of job {run.get('job')}, attempt {run.get('attempt')}")
        parts.append("PARAMETERS: " + json.dumps(run.get("params") or {}, sort_keys=True))
    if case.get("log_tail"):
        parts.append("LOG TAIL:\n" + str(case["log_tail"]))
    for name, points in (case.get("metrics") or {}).items():
        shown = ", ".join(f"{step}:{value}" for step, value in points)
        parts.append(f"METRIC {name} (step:value): {shown}")
    for item in case.get("context") or []:
        parts.append(f"LOOKED UP with {item['tool']}:\n{item['result']}")
    parts.append("What caused this? Give the root cause.")
    return "\n\n".join(parts)


def judge_prompt(cause: str, diagnosis: str) -> str:
    return f"RECORDED ROOT CAUSE:\n{cause}\n\nDIAGNOSIS TO GRADE:\n{diagnosis.strip() or '(empty)'}"


_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_verdict(text: str | None) -> Judged:
    """The judge's answer read strictly: one JSON object whose ``verdict`` is correct or incorrect. Anything else
    (empty, prose, another verdict, two objects) is ``unjudged`` — never a pass."""
    if not text or not text.strip():
        return Judged("unjudged", "the judge gave no answer")
    found = _JSON_OBJECT.findall(text.strip())
    if len(found) != 1:
        return Judged("unjudged", f"the judge did not answer with one JSON object: {text.strip()[:200]!r}")
    try:
        doc = json.loads(found[0])
    except ValueError:
        return Judged("unjudged", f"the judge's answer is not JSON: {found[0][:200]!r}")
    verdict = str(doc.get("verdict", "")).strip().lower() if isinstance(doc, dict) else ""
    if verdict not in ("correct", "incorrect"):
        return Judged("unjudged", f"the judge's verdict {verdict[:40]!r} is neither correct nor incorrect")
    return Judged(verdict, str(doc.get("reason") or "")[:500])  # type: ignore[arg-type]
