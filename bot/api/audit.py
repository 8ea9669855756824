"""``GET /api/v1/audit[?limit=N&agent=A]`` → ``{"audit": [...]}``: the agents' tool calls, newest first, arguments
redacted (read only, through ``labbot.agents.fleet.audit.audit_rows``; admin token; 503 without a database)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from labbot.agents.fleet.audit import audit_rows
from labbot.bot.api.deps import ApiDeps, NotRunning, blocking
from labbot.bot.api.params import int_query


def routes(deps: ApiDeps) -> list[Route]:
    db = deps.db

    async def audit(request: Request) -> Any:
        if db is None:
            raise NotRunning("the audit trail is not running in this labbot (it was started without a database)")
        limit = int_query(request, "limit", 100, lo=1, hi=10_000) or 100
        agent = request.query_params.get("agent") or None
        return {"audit": await blocking(audit_rows, db, limit=limit, agent=agent)}

    return [Route("/api/v1/audit", deps.admin(audit))]
