"""``/api/v1/jobs``, ``/api/v1/runs`` and ``/api/v1/capacity``: the jobs that can be launched, runs launched, shown,
stopped, restarted, moved in their purpose's queue, and their logs; thin shells over ``RunService`` (admin token).

Routes::

    GET  /api/v1/jobs                                         {"jobs": [...]}
    GET  /api/v1/runs[?limit=N&status=S]                      {"runs": [...]}
    POST /api/v1/runs      a LaunchRequest (Idempotency-Key)  {"run", "created", "queued"?}   201 new, 200 again
    GET  /api/v1/runs/{id}[?wait=S]    long-polls to RUNNING  {"run": {...}}
    POST /api/v1/runs/{id}/stop|restart[?by=WHO]              {"run": {...}}
    POST /api/v1/runs/{id}/priority[?by=WHO]  {"priority": N} {"run": {...}}
    GET  /api/v1/capacity                                     each purpose's use against its cap, the queue
    GET  /api/v1/runs/{id}/logs[?tail=N&attempt=K]            the job's logs (an attempt's), plain text
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from labbot.bot.api.deps import ApiDeps, blocking
from labbot.bot.api.params import by, int_query
from labbot.bot.web.body import read_limited
from labbot.common.errors import BadRequest
from labbot.common.json_input import loads_json
from labbot.training.alerts import alert_from_json
from labbot.training.remedies import remedy_from_json
from labbot.training.specs import LaunchRequest

MAX_API_BODY = 64 * 1024
MAX_WAIT_S = 30


def routes(deps: ApiDeps) -> list[Route]:
    service, admin = deps.service, deps.admin

    async def jobs(request: Request) -> Any:
        return {
            "jobs": [
                {
                    "name": spec.name,
                    "description": spec.description,
                    "entrypoint": spec.entrypoint,
                    "gpus": spec.gpus,
                    "params": spec.params,
                    "stall_after_s": spec.stall_after,
                    "max_restarts": spec.max_restarts,
                    "plot": list(spec.plot),
                    "headline": spec.headline_metric,
                    "reports": spec.reported_metrics,  # what an experiment's objective may be
                    "alerts": [alert_from_json(a).describe() for a in spec.alerts],
                    "watch": dict(spec.watch),
                    "remedies": [remedy_from_json(r).text() for r in spec.remedies],
                    # what a remedy may change (None: any parameter)
                    "remedy_params": spec.remedy_params,
                    "checks": {k: c.accepted() for k, c in spec.checks.items()},
                }
                for spec in service.registry.all()
            ]
        }

    async def list_runs(request: Request) -> Any:
        limit = int_query(request, "limit", 50, lo=1, hi=10_000)
        status = request.query_params.get("status") or None
        return {"runs": await blocking(service.runs, status=status, limit=limit)}

    async def launch(request: Request) -> Any:
        body = await read_limited(request, MAX_API_BODY)
        try:
            doc = loads_json(body or b"{}")
        except BadRequest as e:
            raise BadRequest(f"bad launch request: {e.message}") from None
        try:
            if not isinstance(doc, dict):
                raise ValueError("not an object")
            if request.headers.get("idempotency-key"):
                doc.setdefault("idempotency_key", request.headers["idempotency-key"])
            req = LaunchRequest.model_validate(doc)
        except (ValueError, ValidationError) as e:
            raise BadRequest(f"bad launch request: {_first_error(e)}") from None
        result = await blocking(service.launch, req)
        doc = {"run": result.run, "created": result.created}
        if result.queued:
            doc["queued"] = result.queued  # why it waits: its purpose's numbers and its place in line
        return JSONResponse(doc, status_code=201 if result.created else 200)

    async def set_priority(request: Request) -> Any:
        """An admin moves a run in its purpose's queue: ``{"priority": N}`` (the admin token is an admin's)."""
        body = await read_limited(request, 16 * 1024)
        doc = loads_json(body or b"{}")
        priority = doc.get("priority") if isinstance(doc, dict) else None
        if (
            not isinstance(doc, dict)
            or set(doc) != {"priority"}
            or isinstance(priority, bool)
            or not isinstance(priority, int)
        ):
            raise BadRequest('the body is {"priority": N}, N a whole number from -1000 to 1000 (higher goes first)')
        who = by(request)
        run_id = request.path_params["run_id"]
        return {"run": await blocking(lambda: service.set_priority(run_id, priority, by=who))}

    async def capacity(request: Request) -> Any:
        return await blocking(service.capacity)

    async def get_run(request: Request) -> Any:
        wait = int_query(request, "wait", 0, hi=MAX_WAIT_S) or 0  # long-poll until Ray starts the run
        return {"run": await blocking(service.get, request.path_params["run_id"], wait=float(wait))}

    async def stop(request: Request) -> Any:
        who = by(request)
        return {"run": await blocking(service.stop, request.path_params["run_id"], by=who)}

    async def restart(request: Request) -> Any:
        who = by(request)
        return {"run": await blocking(service.restart, request.path_params["run_id"], by=who)}

    async def logs(request: Request) -> Any:
        tail = int_query(request, "tail", None)
        attempt = int_query(request, "attempt", None, lo=1)
        text = await blocking(service.logs, request.path_params["run_id"], tail=tail, attempt=attempt)
        return PlainTextResponse(text)

    return [
        Route("/api/v1/jobs", admin(jobs)),
        Route("/api/v1/runs", admin(list_runs), methods=["GET"]),
        Route("/api/v1/runs", admin(launch), methods=["POST"]),
        Route("/api/v1/runs/{run_id}", admin(get_run)),
        Route("/api/v1/runs/{run_id}/stop", admin(stop), methods=["POST"]),
        Route("/api/v1/runs/{run_id}/restart", admin(restart), methods=["POST"]),
        Route("/api/v1/runs/{run_id}/priority", admin(set_priority), methods=["POST"]),
        Route("/api/v1/capacity", admin(capacity)),
        Route("/api/v1/runs/{run_id}/logs", admin(logs)),
    ]


def _first_error(e: Exception) -> str:
    if isinstance(e, ValidationError):
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "body"
        return f"{where}: {err['msg']}"
    return str(e)
