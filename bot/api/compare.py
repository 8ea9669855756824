"""``GET /api/v1/compare?a=RUN&b=RUN[&metric=M][&better=lower|higher][&window=N][&by=WHO]`` →
``{"comparison": {...}}`` with ``kind`` ``training`` or ``eval`` (``labbot.evals.comparisons.RunComparer``). Admin
token; what cannot be compared is a 400 naming what differs. Eval runs are compared for ``by`` only when WHO may see
both (as ``/api/v1/evals/compare``: ``labbot.bot.api.evals.viewer_of``); else a 404 like an unknown eval run."""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from starlette.requests import Request
from starlette.routing import Route

from labbot.bot.api.deps import ApiDeps
from labbot.bot.api.evals import viewer_of
from labbot.common.errors import BadRequest
from labbot.evals.comparisons import RunComparer

MAX_WINDOW = 1_000_000


def routes(deps: ApiDeps) -> list[Route]:
    comparer, admin, admins = RunComparer(deps.service, deps.telemetry, deps.evals), deps.admin, deps.admins

    async def compare(request: Request) -> Any:
        q = request.query_params
        viewer, is_admin = viewer_of(request, admins)
        a, b = q.get("a", ""), q.get("b", "")
        if not a or not b:
            raise BadRequest("compare needs two runs: /api/v1/compare?a=RUN_ID&b=RUN_ID[&metric=M][&better=lower]")
        better = q.get("better") or None
        if better is not None and better not in ("lower", "higher"):
            raise BadRequest(f"query parameter better={better[:40]!r} must be lower or higher")
        metric = q.get("metric") or None
        if metric is not None and not 1 <= len(metric) <= 64:
            raise BadRequest("query parameter metric must be a metric's name, 1 to 64 characters")
        window = None
        raw = q.get("window")
        if raw:
            if not (raw.isascii() and raw.isdigit() and len(raw) <= 7 and 1 <= int(raw) <= MAX_WINDOW):
                raise BadRequest(f"query parameter window={raw[:40]!r} must be a whole number from 1 to {MAX_WINDOW}")
            window = int(raw)
        doc = await to_thread.run_sync(
            lambda: comparer.compare(a, b, metric=metric, better=better, window=window, viewer=viewer, admin=is_admin)
        )
        return {"comparison": doc}

    return [Route("/api/v1/compare", admin(compare), methods=["GET"])]
