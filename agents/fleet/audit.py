"""The audit trail: every tool call an agent makes is a row — agent, role, tool, a digest and a redacted preview of
its arguments, duration, outcome, approver — whatever executor served it. ``labbot audit --json`` reads it.

``AuditedExecutor`` wraps the outermost executor (so denied and timed-out approvals are recorded too). Secrets are
redacted before anything is written (``labbot.agents.fleet.redact``). The row is written on a worker thread
(``anyio.to_thread``), never on the event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from anyio import to_thread
from sqlalchemy import select

from labbot.agents.fleet.redact import digest, preview, redact_text
from labbot.agents.fleet.tools import CallContext, ToolCall, ToolExecutor, ToolResult, ToolSpec
from labbot.storage.db import Database
from labbot.storage.models import ToolCall as ToolCallRow
from labbot.storage.models import utcnow

log = logging.getLogger(__name__)


def _outcome(result: ToolResult) -> str:
    approval = result.meta.get("approval")
    if approval in ("denied", "timeout", "unavailable"):
        return f"not run: {approval}"
    return "error" if result.is_error else "ok"


def _text(result: ToolResult) -> str:
    if isinstance(result.content, str):
        return result.content
    return " ".join(str(b.get("text", "")) for b in result.content if isinstance(b, Mapping))


class AuditedExecutor:
    def __init__(self, inner: ToolExecutor, db: Database, *, clock: Callable[[], datetime] = utcnow) -> None:
        self.inner = inner
        self.db = db
        self.clock = clock

    def tools(self) -> Sequence[ToolSpec]:
        return self.inner.tools()

    async def call(self, call: ToolCall) -> ToolResult:
        """The call, run by the executors inside, then recorded as the model asked for it (its arguments before
        labbot fills any in)."""
        ctx, name, arguments = call.ctx, call.name, call.arguments
        started_at, t0 = self.clock(), time.perf_counter()
        try:
            result = await self.inner.call(call)
        except Exception as e:  # recorded, then the runtime turns it into an is_error result
            await self._record(ctx, name, arguments, started_at, t0, "error", None, f"{type(e).__name__}: {e}")
            raise
        error = redact_text(_text(result))[:1000] if result.is_error else None
        approver = result.meta.get("approver")
        await self._record(ctx, name, arguments, started_at, t0, _outcome(result), approver, error)
        return result

    async def _record(
        self,
        ctx: CallContext,
        name: str,
        arguments: Mapping[str, Any],
        started_at: datetime,
        t0: float,
        outcome: str,
        approver: Any,
        error: str | None,
    ) -> None:
        """The call's row, written on a worker thread (never the event loop); its duration ends here."""
        duration_ms = round((time.perf_counter() - t0) * 1000, 1)
        await to_thread.run_sync(
            lambda: self._write(ctx, name, arguments, started_at, duration_ms, outcome, approver, error)
        )

    def _write(
        self,
        ctx: CallContext,
        name: str,
        arguments: Mapping[str, Any],
        started_at: datetime,
        duration_ms: float,
        outcome: str,
        approver: Any,
        error: str | None,
    ) -> None:
        try:
            with self.db.session() as s:
                s.add(
                    ToolCallRow(
                        agent=ctx.agent,
                        role=ctx.role,
                        owner=ctx.owner,
                        tool=name,
                        args_digest=digest(dict(arguments)),
                        args_preview=preview(dict(arguments)),
                        started_at=started_at,
                        duration_ms=duration_ms,
                        outcome=outcome,
                        approver=str(approver) if approver else None,
                        error=redact_text(error)[:1000] if error else None,
                        run_id=ctx.run_id,
                        thread_ts=ctx.thread_ts,
                    )
                )
        except Exception:  # the audit must never break the call it records; it is logged loudly instead
            log.exception("could not write the audit row of %s", name)


def audit_rows(db: Database, *, limit: int = 100, agent: str | None = None) -> list[dict[str, Any]]:
    """The newest tool calls, as ``labbot audit --json`` shows them."""
    with db.session() as s:
        q = select(ToolCallRow).order_by(ToolCallRow.id.desc()).limit(limit)
        if agent:
            q = q.where(ToolCallRow.agent == agent)
        return [
            {
                "id": r.id,
                "agent": r.agent,
                "role": r.role,
                "owner": r.owner,
                "tool": r.tool,
                "args_digest": r.args_digest,
                "args": r.args_preview,
                "started_at": r.started_at.isoformat(),
                "duration_ms": r.duration_ms,
                "outcome": r.outcome,
                "approver": r.approver,
                "error": r.error,
                "run_id": r.run_id,
            }
            for r in s.scalars(q)
        ]
