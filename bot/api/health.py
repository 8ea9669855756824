"""``GET /healthz`` (alive: ``{"ok": true}`` and nothing else), ``GET /readyz`` (the database and Ray answer: 200,
else 503 naming what failed) and ``GET /metrics`` (Prometheus' text format, ``labbot.bot.metrics``). No admin token:
who may read the last two is ``labbot.bot.api.probes``' rule (a loopback listener, ``LABBOT_OPEN_PROBES``, or the
metrics token; a kubelet gets ``/readyz``'s verdict only)."""

from __future__ import annotations

from anyio import to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from labbot.bot.api.deps import ApiDeps
from labbot.bot.api.probes import Readiness
from labbot.bot.metrics import CONTENT_TYPE
from labbot.bot.web.errors import error_response


def routes(deps: ApiDeps) -> list[Route]:
    probes, ready, metrics = deps.probes, deps.ready, deps.metrics

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})  # alive; nothing about the process (readyz, for whom may read it)

    async def readyz(request: Request) -> Response:
        shown = probes.readiness(request)
        if shown is Readiness.REFUSED:
            return probes.refused_readiness()
        if ready is None:
            return error_response(503, "not_running", "readiness is not checked by this labbot")
        ok, body = await ready()
        return JSONResponse(body if shown is Readiness.DETAIL else {"ok": ok}, status_code=200 if ok else 503)

    async def metrics_route(request: Request) -> Response:
        refused = probes.metrics(request)
        if refused is not None:
            return refused
        if metrics is None:
            return error_response(503, "not_running", "metrics are not collected by this labbot")
        body = await to_thread.run_sync(metrics.render)  # the database collector queries: never on the loop
        return Response(body, media_type=CONTENT_TYPE)

    return [Route("/healthz", healthz), Route("/readyz", readyz), Route("/metrics", metrics_route)]
