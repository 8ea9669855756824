"""A run's telemetry: its job posts batches with the run's own token (``POST /api/v1/runs/{id}/telemetry``, the
in-job client's route: 401 before the body is looked at, 413 over ``MAX_BODY_BYTES``), and an admin reads one
metric's points (``GET /api/v1/runs/{id}/metrics/{name}`` → ``{"name", "points": [[step, value], ...]}``, NaN and
infinities as strings) and the checkpoints the job reported with their health (``GET /api/v1/runs/{id}/checkpoints``
→ ``{"checkpoints": [{"attempt", "step", "path", "written_at", "metrics"}, ...]}``, oldest first); thin shells over
``TelemetryStore``."""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from labbot.bot.api.auth import bearer
from labbot.bot.api.deps import ApiDeps, blocking
from labbot.bot.web.body import read_limited
from labbot.bot.web.errors import error_response, from_exception
from labbot.common.errors import LabbotError
from labbot.storage.floats import encode_float
from labbot.training.telemetry_ingest import MAX_BODY_BYTES, parse_batch


def routes(deps: ApiDeps) -> list[Route]:
    store = deps.telemetry

    async def metric(request: Request) -> Any:
        points = await blocking(store.metrics, request.path_params["run_id"], request.path_params["name"])
        return {"name": request.path_params["name"], "points": [[s, encode_float(v)] for s, v in points]}

    async def checkpoints(request: Request) -> Any:
        return {"checkpoints": await blocking(store.checkpoints, request.path_params["run_id"])}

    async def ingest(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            token = bearer(request)
            body = await read_limited(request, MAX_BODY_BYTES)

            def work() -> int:
                store.authenticate(run_id, token)  # 401 before the body is even looked at
                return store.ingest(run_id, parse_batch(body))

            accepted = await to_thread.run_sync(work)
        except LabbotError as e:
            return error_response(e.status, e.code, e.message)
        except Exception as e:
            return from_exception(e)
        return JSONResponse({"accepted": accepted})

    return [
        Route("/api/v1/runs/{run_id}/metrics/{name}", deps.admin(metric)),
        Route("/api/v1/runs/{run_id}/checkpoints", deps.admin(checkpoints)),
        Route("/api/v1/runs/{run_id}/telemetry", ingest, methods=["POST"]),
    ]
