"""The Starlette app: routes of ``/api/v1`` and telemetry ingest, thin shells over ``RunService``,
``TelemetryStore`` and the pager (``/api/v1/pages``).

Service calls block (SQL, Ray), so they run on worker threads; errors become JSON once, in ``bot.api.errors``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from anyio import to_thread
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from agents.pager import Pager
from bot.api.auth import bearer, require_admin
from bot.api.body import read_limited
from bot.api.errors import error_response, from_exception
from storage.floats import encode_float
from training.errors import BadRequest, LabbotError
from training.service import RunService
from training.specs import LaunchRequest
from training.telemetry_ingest import MAX_BODY_BYTES, parse_batch
from training.telemetry_store import TelemetryStore

T = TypeVar("T")
Handler = Callable[[Request], Any]
MAX_API_BODY = 64 * 1024
MAX_WAIT_S = 30


async def _blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await to_thread.run_sync(lambda: fn(*args, **kwargs))


def _int_query(request: Request, name: str, default: int | None, *, lo: int = 0, hi: int = 100_000) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not lo <= int(raw) <= hi:
        raise BadRequest(f"query parameter {name}={raw!r} must be a whole number from {lo} to {hi}")
    return int(raw)


def create_app(
    service: RunService,
    telemetry_store: TelemetryStore,
    *,
    admin_token: str,
    health: Callable[[], dict[str, Any]],
    pager: Pager | None = None,
    extra_routes: Sequence[BaseRoute] = (),
) -> Starlette:
    def admin(handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def wrapped(request: Request) -> Response:
            try:
                require_admin(request, admin_token)
                result = await handler(request)
            except Exception as e:
                return from_exception(e)
            return result if isinstance(result, Response) else JSONResponse(result)

        return wrapped

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True, **health()})

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
                }
                for spec in service.registry.all()
            ]
        }

    async def list_runs(request: Request) -> Any:
        limit = _int_query(request, "limit", 50, lo=1, hi=10_000)
        status = request.query_params.get("status") or None
        return {"runs": await _blocking(service.runs, status=status, limit=limit)}

    async def launch(request: Request) -> Any:
        body = await read_limited(request, MAX_API_BODY)
        try:
            doc = json.loads(body or b"{}")
            if not isinstance(doc, dict):
                raise ValueError("not an object")
            if request.headers.get("idempotency-key"):
                doc.setdefault("idempotency_key", request.headers["idempotency-key"])
            req = LaunchRequest.model_validate(doc)
        except (ValueError, ValidationError) as e:
            raise BadRequest(f"bad launch request: {_first_error(e)}") from None
        result = await _blocking(service.launch, req)
        return JSONResponse({"run": result.run, "created": result.created}, status_code=201 if result.created else 200)

    async def get_run(request: Request) -> Any:
        wait = _int_query(request, "wait", 0, hi=MAX_WAIT_S) or 0  # long-poll until Ray starts the run
        return {"run": await _blocking(service.get, request.path_params["run_id"], wait=float(wait))}

    async def stop(request: Request) -> Any:
        by = request.query_params.get("by") or "api"
        return {"run": await _blocking(service.stop, request.path_params["run_id"], by=by)}

    async def restart(request: Request) -> Any:
        by = request.query_params.get("by") or "api"
        return {"run": await _blocking(service.restart, request.path_params["run_id"], by=by)}

    async def logs(request: Request) -> Any:
        tail = _int_query(request, "tail", None)
        text = await _blocking(service.logs, request.path_params["run_id"], tail=tail)
        return PlainTextResponse(text)

    async def metric(request: Request) -> Any:
        points = await _blocking(telemetry_store.metrics, request.path_params["run_id"], request.path_params["name"])
        return {"name": request.path_params["name"], "points": [[s, encode_float(v)] for s, v in points]}

    async def telemetry(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            token = bearer(request)
            body = await read_limited(request, MAX_BODY_BYTES)

            def work() -> int:
                telemetry_store.authenticate(run_id, token)  # 401 before the body is even looked at
                return telemetry_store.ingest(run_id, parse_batch(body))

            accepted = await to_thread.run_sync(work)
        except LabbotError as e:
            return error_response(e.status, e.code, e.message)
        except Exception as e:
            return from_exception(e)
        return JSONResponse({"accepted": accepted})

    def the_pager() -> Pager:
        if pager is None:
            raise LabbotError("paging is not running in this control plane")
        return pager

    async def list_pages(request: Request) -> Any:
        limit = _int_query(request, "limit", 50, lo=1, hi=10_000)
        include_resolved = request.query_params.get("all") in ("1", "true", "yes")
        run_id = request.query_params.get("run") or None
        pages = await _blocking(the_pager().pages, include_resolved=include_resolved, run_id=run_id, limit=limit)
        return {"pages": pages}

    async def get_page(request: Request) -> Any:
        return {"page": await _blocking(the_pager().get, request.path_params["page_id"])}

    async def ack_page(request: Request) -> Any:
        by = request.query_params.get("by") or "api"
        return {"page": await _blocking(the_pager().acknowledge, request.path_params["page_id"], by=by)}

    async def resolve_page(request: Request) -> Any:
        by = request.query_params.get("by") or "api"
        return {"page": await _blocking(the_pager().resolve, request.path_params["page_id"], by=by)}

    routes = [
        *extra_routes,  # first: POST /slack/events is the route under a burst (Slack's 3 s)
        Route("/healthz", healthz),
        Route("/api/v1/jobs", admin(jobs)),
        Route("/api/v1/runs", admin(list_runs), methods=["GET"]),
        Route("/api/v1/runs", admin(launch), methods=["POST"]),
        Route("/api/v1/runs/{run_id}", admin(get_run)),
        Route("/api/v1/runs/{run_id}/stop", admin(stop), methods=["POST"]),
        Route("/api/v1/runs/{run_id}/restart", admin(restart), methods=["POST"]),
        Route("/api/v1/runs/{run_id}/logs", admin(logs)),
        Route("/api/v1/runs/{run_id}/metrics/{name}", admin(metric)),
        Route("/api/v1/runs/{run_id}/telemetry", telemetry, methods=["POST"]),
        Route("/api/v1/pages", admin(list_pages)),
        Route("/api/v1/pages/{page_id}", admin(get_page)),
        Route("/api/v1/pages/{page_id}/ack", admin(ack_page), methods=["POST"]),
        Route("/api/v1/pages/{page_id}/resolve", admin(resolve_page), methods=["POST"]),
    ]
    return Starlette(routes=routes)


def _first_error(e: Exception) -> str:
    if isinstance(e, ValidationError):
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "body"
        return f"{where}: {err['msg']}"
    return str(e)
