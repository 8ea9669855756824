"""``/api/v1/findings``: what the lab learned — every ended experiment's finding, and those agents record — searched
by words, read, recorded (its numbers checked by the claim ledger first: a finding whose numbers the store does not
bear out is refused, 400, naming each); thin shells over ``FindingStore`` (admin token).

Routes::

    GET  /api/v1/findings[?q=WORDS&limit=N]     {"findings": [...]}  best match first (newest first without q)
    GET  /api/v1/findings/{id}                   {"finding": {...}}
    POST /api/v1/findings   {question, verdict, summary, status, owner, links?}   {"finding": {...}}   201
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from labbot.bot.api.deps import ApiDeps, NotRunning, blocking
from labbot.bot.api.params import int_query
from labbot.bot.web.body import read_limited
from labbot.common.errors import BadRequest
from labbot.common.json_input import loads_json
from labbot.training.findings import FindingStore

FIELDS = {"question", "verdict", "summary", "status", "owner", "links"}


def routes(deps: ApiDeps) -> list[Route]:
    def store() -> FindingStore:
        if deps.findings is None:
            raise NotRunning("findings are not kept on this labbot")
        return deps.findings

    async def search(request: Request) -> Any:
        limit = int_query(request, "limit", 10, lo=1, hi=200)
        query = request.query_params.get("q") or ""
        return {"findings": await blocking(store().search, query, limit=limit)}

    async def get(request: Request) -> Any:
        return {"finding": await blocking(store().get, request.path_params["finding_id"])}

    async def record(request: Request) -> Any:
        doc = loads_json(await read_limited(request, 64 * 1024) or b"{}")
        if not isinstance(doc, dict) or not {"question", "verdict"} <= set(doc) or set(doc) - FIELDS:
            raise BadRequest(
                "the body is {question, verdict, summary, status (answered|incomplete|failed), owner, links}; "
                "its numbers written [[VALUE | SOURCE]]"
            )
        if not all(isinstance(doc.get(k, ""), str) for k in FIELDS - {"links"}) or not isinstance(
            doc.get("links", {}), dict
        ):
            raise BadRequest("question, verdict, summary, status and owner are text; links an object")
        made = await blocking(
            lambda: store().record(
                question=doc["question"],
                verdict=doc["verdict"],
                summary=doc.get("summary", ""),
                status=doc.get("status", "answered"),
                owner=doc.get("owner") or "api",
                links=doc.get("links") or {},
            )
        )
        return JSONResponse({"finding": made}, status_code=201)

    return [
        Route("/api/v1/findings", deps.admin(search), methods=["GET"]),
        Route("/api/v1/findings", deps.admin(record), methods=["POST"]),
        Route("/api/v1/findings/{finding_id}", deps.admin(get)),
    ]
