"""``/api/v1/pages``: the pager's pages listed, shown, acknowledged and resolved; thin shells over
``labbot.agents.babysitter.pager.Pager`` (admin token; 503 ``not_running`` without a pager).

Routes::

    GET  /api/v1/pages[?limit=N&all=1&run=RUN]                 {"pages": [...]}
    GET  /api/v1/pages/{id}                                    {"page": {...}}
    POST /api/v1/pages/{id}/ack[?by=WHO]                       {"page": {...}}
    POST /api/v1/pages/{id}/resolve[?by=WHO]  {"cause"}?       {"page": {...}}
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from labbot.agents.babysitter.pager import Pager
from labbot.bot.api.deps import ApiDeps, NotRunning, blocking
from labbot.bot.api.params import by, int_query
from labbot.bot.web.body import read_limited
from labbot.common.errors import BadRequest
from labbot.common.json_input import loads_json


def routes(deps: ApiDeps) -> list[Route]:
    admin = deps.admin

    def the_pager() -> Pager:
        if deps.pager is None:
            raise NotRunning("paging is not running in this control plane (it was started without a pager)")
        return deps.pager

    async def list_pages(request: Request) -> Any:
        limit = int_query(request, "limit", 50, lo=1, hi=10_000)
        include_resolved = request.query_params.get("all") in ("1", "true", "yes")
        run_id = request.query_params.get("run") or None
        pages = await blocking(the_pager().pages, include_resolved=include_resolved, run_id=run_id, limit=limit)
        return {"pages": pages}

    async def get_page(request: Request) -> Any:
        return {"page": await blocking(the_pager().get, request.path_params["page_id"])}

    async def ack_page(request: Request) -> Any:
        who = by(request)
        return {"page": await blocking(the_pager().acknowledge, request.path_params["page_id"], by=who)}

    async def resolve_page(request: Request) -> Any:
        who = by(request)
        body = await read_limited(request, 16 * 1024)
        doc = loads_json(body) if body.strip() else {}
        if not isinstance(doc, dict) or set(doc) - {"cause"} or not isinstance(doc.get("cause", ""), str):
            raise BadRequest('the body, when there is one, is {"cause": "what was wrong, in a sentence"}')
        pager, page_id = the_pager(), request.path_params["page_id"]
        return {"page": await blocking(lambda: pager.resolve(page_id, by=who, cause=doc.get("cause")))}

    return [
        Route("/api/v1/pages", admin(list_pages)),
        Route("/api/v1/pages/{page_id}", admin(get_page)),
        Route("/api/v1/pages/{page_id}/ack", admin(ack_page), methods=["POST"]),
        Route("/api/v1/pages/{page_id}/resolve", admin(resolve_page), methods=["POST"]),
    ]
