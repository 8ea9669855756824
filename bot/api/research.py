"""``/api/v1/research``: research questions opened, planned, started, acted on within their plan, reported and
closed; thin shells over ``ResearchService`` (admin token). ``start`` is the approved action (the ``lab`` server's
``start_research``, behind the approval gate): it names the plan's hash and releases that plan only. A started
plan's first trials start at the leader's next tick, brought forward to now when this replica leads.

Routes::

    GET  /api/v1/research[?limit=N]                          {"research": [...]}
    POST /api/v1/research        {question, owner, channel?, thread_ts?}            {"research": {...}}   201
    GET  /api/v1/research/{id}                                {"research": {...}}
    POST /api/v1/research/{id}/plan[?for=WHO]   a PlanRequest   {"research", "change": needs_approval|applied|same,
                                                                 "needs": [what grew]}
    GET  /api/v1/research/{id}/plans/{hash}                   {"research": {...}} (the plan waiting for approval)
    POST /api/v1/research/{id}/plans/{hash}/start             {"research": {...}}
    POST /api/v1/research/{id}/act[?by=WHO&for=WHO]   {action, arm?, trial?, run_id?}     {"research": {...}}
    POST /api/v1/research/{id}/report[?for=WHO]   {verdict, text, follow_ups?: [{title, description}]}

``for``: the researcher an agent acts for (the ``lab`` server sends it for labbot's agents): planning, acting and
reporting on a question are its owner's agents' alone (403 otherwise); without it, the admin token's holder acts.
    POST /api/v1/research/{id}/close[?by=WHO]                 {"research": {...}}
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from labbot.bot.api.deps import ApiDeps, NotRunning, blocking
from labbot.bot.api.params import by, int_query, read_model
from labbot.common.errors import BadRequest
from labbot.training.research.plan import PlanRequest
from labbot.training.research.service import ResearchService


class OpenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str = Field(max_length=2000)
    owner: str = Field(min_length=1, max_length=100)
    channel: str | None = Field(default=None, max_length=64)
    thread_ts: str | None = Field(default=None, max_length=32)


class ActRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: str = Field(max_length=32)
    arm: str | None = Field(default=None, max_length=32)
    trial: int | None = Field(default=None, ge=0)
    run_id: str | None = Field(default=None, max_length=64)


class FollowUpRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str = Field(min_length=1, max_length=250)
    description: str = Field(default="", max_length=5000)


class ReportRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    verdict: str = Field(max_length=2000)
    text: str = Field(default="", max_length=20_000)
    follow_ups: list[FollowUpRequest] = Field(default_factory=list, max_length=5)


def acting_for(request: Request) -> str | None:
    """``?for=``: the researcher an agent acts for (at most 100 characters), None when not given."""
    who = request.query_params.get("for")
    if who is not None and not 0 < len(who) <= 100:
        raise BadRequest("for is the researcher an agent acts for: 1 to 100 characters")
    return who


def routes(deps: ApiDeps) -> list[Route]:
    admin = deps.admin

    def service() -> ResearchService:
        if deps.research is None:
            raise NotRunning("research is not running on this labbot")
        return deps.research

    async def list_research(request: Request) -> Any:
        limit = int_query(request, "limit", 50, lo=1, hi=1000)
        return {"research": await blocking(service().questions, limit=limit)}

    async def open_question(request: Request) -> Any:
        req = await read_model(request, OpenRequest, "research question")
        doc = await blocking(
            lambda: service().open(req.question, req.owner, channel=req.channel, thread_ts=req.thread_ts)
        )
        return JSONResponse({"research": doc}, status_code=201)

    async def get(request: Request) -> Any:
        return {"research": await blocking(service().get, request.path_params["rid"])}

    async def propose(request: Request) -> Any:
        req = await read_model(request, PlanRequest, "research plan")
        actor = acting_for(request)
        return await blocking(lambda: service().propose(request.path_params["rid"], req, by=actor))

    async def preview(request: Request) -> Any:
        rid, plan_hash = request.path_params["rid"], request.path_params["plan_hash"]
        return {"research": await blocking(service().preview, rid, plan_hash)}

    async def start(request: Request) -> Any:
        rid, plan_hash = request.path_params["rid"], request.path_params["plan_hash"]
        who = by(request)
        doc = await blocking(lambda: service().start(rid, plan_hash, by=who))
        if deps.kick is not None:
            deps.kick()  # the arms' first trials now rather than at the next tick
        return {"research": doc}

    async def act(request: Request) -> Any:
        req = await read_model(request, ActRequest, "action")
        who = by(request)
        rid = request.path_params["rid"]
        actor = acting_for(request)
        doc = await blocking(
            lambda: service().act(rid, req.action, arm=req.arm, trial=req.trial, run_id=req.run_id, by=who, agent=actor)
        )
        return {"research": doc}

    async def report(request: Request) -> Any:
        req = await read_model(request, ReportRequest, "report")
        rid = request.path_params["rid"]
        follow_ups = [f.model_dump() for f in req.follow_ups]
        actor = acting_for(request)
        doc = await blocking(
            lambda: service().report(rid, verdict=req.verdict, text=req.text, follow_ups=follow_ups, by=actor)
        )
        return {"research": doc}

    async def close(request: Request) -> Any:
        who = by(request)
        return {"research": await blocking(lambda: service().close(request.path_params["rid"], by=who))}

    return [
        Route("/api/v1/research", admin(list_research), methods=["GET"]),
        Route("/api/v1/research", admin(open_question), methods=["POST"]),
        Route("/api/v1/research/{rid}", admin(get)),
        Route("/api/v1/research/{rid}/plan", admin(propose), methods=["POST"]),
        Route("/api/v1/research/{rid}/plans/{plan_hash}", admin(preview)),
        Route("/api/v1/research/{rid}/plans/{plan_hash}/start", admin(start), methods=["POST"]),
        Route("/api/v1/research/{rid}/act", admin(act), methods=["POST"]),
        Route("/api/v1/research/{rid}/report", admin(report), methods=["POST"]),
        Route("/api/v1/research/{rid}/close", admin(close), methods=["POST"]),
    ]
