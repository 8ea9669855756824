"""``POST /api/v1/claims/check``: a report's claims (``[[VALUE | SOURCE]]``) recomputed from the store and judged,
the text corrected, the numbers outside any claim listed (``labbot.training.claims``); the admin token. What an agent
(the ``lab`` server's ``check_claims``) and a person (``labbot check-claims``) run before a report is shown.

Routes::

    POST /api/v1/claims/check   {"text": "..."}   {"report": {"ok", "counts", "claims", "unbound", "corrected"}}
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from labbot.bot.api.deps import ApiDeps, blocking
from labbot.bot.web.body import read_limited
from labbot.common.errors import BadRequest
from labbot.common.json_input import loads_json
from labbot.training.claims import StoreSources, check

MAX_REPORT = 256 * 1024
MAX_CLAIMS = 500


def routes(deps: ApiDeps) -> list[Route]:
    def sources() -> StoreSources:
        def no_experiments(exp_id: str) -> dict[str, Any]:
            raise LookupError("experiments are not running on this labbot")

        experiments = deps.experiments.get if deps.experiments is not None else no_experiments
        evals = deps.evals.results if deps.evals is not None else None
        return StoreSources(deps.telemetry.series, experiments, evals)

    def judged(text: str) -> dict[str, Any]:
        report = check(text, sources())
        if len(report.checked) > MAX_CLAIMS:
            raise BadRequest(f"{len(report.checked)} claims in one report; check at most {MAX_CLAIMS} at a time")
        return report.to_json()

    async def check_claims(request: Request) -> Any:
        body = await read_limited(request, MAX_REPORT)
        doc = loads_json(body or b"{}")
        text = doc.get("text") if isinstance(doc, dict) else None
        if not isinstance(text, str) or set(doc) != {"text"}:
            raise BadRequest('the body is {"text": "..."}: the report, its numbers written [[VALUE | SOURCE]]')
        return {"report": await blocking(judged, text)}

    return [Route("/api/v1/claims/check", deps.admin(check_claims), methods=["POST"])]
