"""``/api/v1/experiments``: experiments planned, created, listed, shown, paused, resumed and stopped, and one trial
stopped; thin shells over ``ExperimentService`` (admin token). A created experiment's first trials start at the
leader's next tick, brought forward to now on this replica when it leads (``ApiDeps.kick``).

Routes::

    GET  /api/v1/experiments[?limit=N]                         {"experiments": [...]}
    POST /api/v1/experiments          an ExperimentRequest     {"experiment": {...}}          201
    POST /api/v1/experiments/plan     an ExperimentRequest     {"plan": {...}} (checked and projected; nothing made)
    GET  /api/v1/experiments/{id}                              {"experiment": {...}} (trials, ranking, verdict)
    POST /api/v1/experiments/{id}/pause|resume|stop[?by=WHO]   {"experiment": {...}}
    POST /api/v1/experiments/{id}/trials/{n}/stop[?by=WHO]     {"experiment": {...}}
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from labbot.bot.api.deps import ApiDeps, NotRunning, blocking
from labbot.bot.api.params import by, int_query, read_model
from labbot.training.experiments.plan import ExperimentRequest
from labbot.training.experiments.service import ExperimentService


async def read_request(request: Request) -> ExperimentRequest:
    return await read_model(request, ExperimentRequest, "experiment request")


def plan_json(service: ExperimentService, req: ExperimentRequest) -> dict[str, Any]:
    plan = service.plan(req)
    doc = plan.to_json()
    doc.update(job=plan.job, name=plan.name, owner=plan.owner, purpose=plan.purpose, space_words=plan.space.words())
    return doc


def routes(deps: ApiDeps) -> list[Route]:
    admin = deps.admin

    def service() -> ExperimentService:
        if deps.experiments is None:
            raise NotRunning("experiments are not running on this labbot")
        return deps.experiments

    async def list_experiments(request: Request) -> Any:
        limit = int_query(request, "limit", 50, lo=1, hi=1000)
        return {"experiments": await blocking(service().experiments, limit=limit)}

    async def create(request: Request) -> Any:
        req = await read_request(request)
        doc = await blocking(service().create, req)
        if deps.kick is not None:
            deps.kick()  # its first trials now rather than at the next tick
        return JSONResponse({"experiment": doc}, status_code=201)

    async def plan(request: Request) -> Any:
        req = await read_request(request)
        return {"plan": await blocking(plan_json, service(), req)}

    async def get(request: Request) -> Any:
        return {"experiment": await blocking(service().get, request.path_params["exp_id"])}

    def acting(pick: Callable[[ExperimentService], Callable[..., dict[str, Any]]]) -> Any:
        async def act(request: Request) -> Any:
            who = by(request)
            return {"experiment": await blocking(pick(service()), request.path_params["exp_id"], by=who)}

        return act

    async def stop_trial(request: Request) -> Any:
        who = by(request)
        exp_id, number = request.path_params["exp_id"], request.path_params["number"]
        return {"experiment": await blocking(service().stop_trial, exp_id, number, by=who)}

    return [
        Route("/api/v1/experiments", admin(list_experiments), methods=["GET"]),
        Route("/api/v1/experiments", admin(create), methods=["POST"]),
        Route("/api/v1/experiments/plan", admin(plan), methods=["POST"]),
        Route("/api/v1/experiments/{exp_id}", admin(get)),
        Route("/api/v1/experiments/{exp_id}/pause", admin(acting(lambda s: s.pause)), methods=["POST"]),
        Route("/api/v1/experiments/{exp_id}/resume", admin(acting(lambda s: s.resume)), methods=["POST"]),
        Route("/api/v1/experiments/{exp_id}/stop", admin(acting(lambda s: s.stop)), methods=["POST"]),
        Route("/api/v1/experiments/{exp_id}/trials/{number:int}/stop", admin(stop_trial), methods=["POST"]),
    ]
