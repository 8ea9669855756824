"""Eval cases made from people's feedback: an agent's answer a researcher marked 👎 and said what was wrong with.

:func:`freeze_feedback` turns a 👎 with a comment on an agent's answer into a case of the incident suite (the same
path: kept beside the incident cases, run by the ``eval-incidents`` job, graded by the judge model): the researcher's
question, what the agent's tools returned while it answered (the tool results, not its conclusions), the answer that
was marked down and the comment. The model being evaluated reads the question and the tool results and answers; the
judge grades the new answer against the comment (:data:`~labbot.evals.incidents.cases.FEEDBACK_JUDGE_SYSTEM`): correct
when it answers the question without the mistake the researcher described. Everything kept is redacted first, like an
incident case. The control plane's side (``EvalService.from_feedback``): it reads the database, so no in-job module
imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from labbot.common.errors import BadRequest, UnknownFeedback
from labbot.common.redact import Redactor, redact_json
from labbot.evals.incidents.cases import text_of, tool_results
from labbot.storage.db import Database
from labbot.storage.models import AgentMessage, AgentSession, AgentTurn, Feedback, Run

__all__ = ["feedback_case_id", "freeze_feedback"]


def feedback_case_id(feedback_id: str) -> str:
    return f"feedback-{feedback_id}"


def freeze_feedback(
    db: Database, feedback_id: str, *, by: str, redactor: Redactor | None = None, now: datetime | None = None
) -> dict[str, Any]:
    """The eval case of feedback ``feedback_id`` (see the module docstring). BadRequest, saying what would do, for
    a 👍, feedback on a run or eval results, or a 👎 without a comment; nothing is written here."""
    redactor = redactor or Redactor()
    with db.session() as s:
        fb = s.get(Feedback, feedback_id)
        if fb is None:
            raise UnknownFeedback(f"unknown feedback {feedback_id!r}: `labbot feedback` lists them")
        if fb.kind != "answer" or fb.turn_id is None:
            raise BadRequest(
                f"feedback {feedback_id} is on a {fb.kind if fb.kind != 'answer' else 'message'}, not on an agent's "
                "answer: an eval case is made from a 👎 on an answer, with a comment saying what was wrong"
            )
        if fb.vote > 0:
            raise BadRequest(
                f"feedback {feedback_id} is a 👍: an eval case is made from a 👎 (an answer that went wrong) with a "
                "comment saying what was wrong"
            )
        if not (fb.comment or "").strip():
            raise BadRequest(
                f"feedback {feedback_id} has no comment: its voter says what went wrong in the 👎's modal (or "
                f'`POST /api/v1/feedback/{feedback_id}/comment {{"user": ..., "comment": ...}}`), then make the case'
            )
        turn = s.get(AgentTurn, fb.turn_id)
        if turn is None:
            raise BadRequest(f"the answer feedback {feedback_id} is about is no longer kept: no case can be made")
        session = s.get(AgentSession, turn.session_id)
        rows = s.scalars(
            select(AgentMessage)
            .where(
                AgentMessage.session_id == turn.session_id,
                AgentMessage.seq >= turn.first_seq,
                AgentMessage.seq <= turn.last_seq,
            )
            .order_by(AgentMessage.seq)
        ).all()
        messages = [(m.role, m.content) for m in rows]
        run = s.get(Run, session.run_id) if session is not None and session.run_id else None
        run_doc = {"id": run.id, "job": run.job, "params": (run.config or {}).get("params")} if run else None
        comment, model, role, voter = str(fb.comment), turn.model, turn.role, fb.user
    if not messages or messages[0][0] != "user":
        raise BadRequest(f"the answer feedback {feedback_id} is about has no question kept: no case can be made")
    case = {
        "id": feedback_case_id(feedback_id),
        "kind": "feedback",
        "question": _question(messages[0][1]),
        "context": tool_results(messages),
        "answer": _last_text(messages),
        "cause": comment,
        "run": run_doc,
        "answered_by": {"model": model, "role": role},
        "voter": voter,
        "frozen_by": by,
        "frozen_at": (now or datetime.now(UTC)).isoformat(),
    }
    frozen = redact_json(case, redactor)
    assert isinstance(frozen, dict)
    return frozen


def _question(content: Any) -> str:
    """The researcher's message (the last text of the user message that asked: earlier texts are older asks that
    had no answer)."""
    if isinstance(content, list):
        texts = [str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"]
        return texts[-1] if texts else ""
    return text_of(content)


def _last_text(messages: Sequence[tuple[str, Any]]) -> str:
    for role, content in reversed(messages):
        if role == "assistant":
            text = text_of(content).strip()
            if text:
                return text
    return ""
