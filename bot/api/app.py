"""The Starlette app: routes of ``/api/v1`` and telemetry ingest, thin shells over ``RunService``,
``TelemetryStore``, the pager (``/api/v1/pages``), the agents' audit trail (``/api/v1/audit``), the per-agent
artifact stores (``/api/v1/artifacts``), evals (``/api/v1/evals``: ``labbot.bot.api.evals``), comparisons of two
runs (``/api/v1/compare``: ``labbot.bot.api.compare``) and feedback and the A/B report (``/api/v1/feedback``,
``/api/v1/ab``: ``labbot.bot.api.feedback``).

Service calls block (SQL, Ray, the artifact filesystem), so they run on worker threads; errors become JSON once, in
``labbot.bot.web.errors`` (the artifact store's own errors are mapped onto labbot's tree here: bad request 400, not
found 404, not the owner 403, over quota 413). A service the composition root did not pass in answers 503.

Artifact routes (admin token; ``agent`` names whose store it is, as the ``lab`` MCP server sends it)::

    GET    /api/v1/artifacts?agent=A[&include_shared=0]    {"artifacts": [...], "usage": {...}}
    POST   /api/v1/artifacts?agent=A&name=N   raw body     {"artifact": {...}}  201 new, 200 replaced the name
    GET    /api/v1/artifacts/{id}?agent=A                  the bytes, with the artifact's content type
    POST   /api/v1/artifacts/{id}/share?agent=A&with=B     {"artifact": {...}}
    DELETE /api/v1/artifacts/{id}?agent=A                  {"deleted": id}

And routes without the admin token: ``GET /plots/{run_id}/loss.png?sig=SIG``, the run's loss plot, and
``GET /plots/{run_id}/metrics.png?sig=SIG``, the metrics its job plots (one panel each), each behind its own signed
link (``labbot.bot.api.plots``), for the Notion report's image; ``GET /healthz`` (alive: ``{"ok": true}`` and
nothing else), ``GET /readyz`` (the database and Ray answer: 200, else 503 naming what failed) and ``GET /metrics``
(Prometheus' text format, ``labbot.bot.metrics``); who may read the last two is ``labbot.bot.api.probes``' rule (a
loopback listener, ``LABBOT_OPEN_PROBES``, or the metrics token; a kubelet gets ``/readyz``'s verdict only).
"""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import IO, Any, BinaryIO, TypeVar
from urllib.parse import quote

from anyio import to_thread
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from labbot.agents.babysitter.pager import Pager
from labbot.agents.fleet.ab import AbTest
from labbot.agents.fleet.audit import audit_rows
from labbot.bot.api.auth import bearer, require_admin
from labbot.bot.api.compare import compare_routes
from labbot.bot.api.evals import eval_routes
from labbot.bot.api.feedback import feedback_routes
from labbot.bot.api.plots import SIGNATURE_HEX, signature_ok, well_formed_signature
from labbot.bot.api.probes import REFUSE_ANONYMOUS, ProbeAccess, Readiness
from labbot.bot.compare import RunComparer
from labbot.bot.feedback.store import FeedbackStore
from labbot.bot.metrics import CONTENT_TYPE, Metrics
from labbot.bot.render.plots import loss_plot_png, metrics_plot_png
from labbot.bot.web.body import read_limited, receive_into
from labbot.bot.web.edge import RefuseUnstorable
from labbot.bot.web.errors import error_response, from_exception
from labbot.common.errors import BadRequest, LabbotError
from labbot.common.humanize import format_bytes
from labbot.common.json_input import loads_json
from labbot.evals.service import EvalService
from labbot.storage.artifacts import (
    ArtifactError,
    ArtifactNotFound,
    ArtifactStore,
    BadArtifactRequest,
    NotShared,
    QuotaExceeded,
)
from labbot.storage.db import Database
from labbot.storage.floats import encode_float
from labbot.training.alerts import alert_from_json
from labbot.training.service import RunService
from labbot.training.specs import LaunchRequest
from labbot.training.telemetry_ingest import MAX_BODY_BYTES, parse_batch
from labbot.training.telemetry_store import TelemetryStore

T = TypeVar("T")
PostFile = Callable[[str, str | None, str, bytes], Awaitable[None]]
Handler = Callable[[Request], Any]
MAX_API_BODY = 64 * 1024
MAX_WAIT_S = 30
MAX_ARTIFACT_BODY = 100 << 20  # one artifact upload; the store's per-agent quota applies on top
SPOOL_BYTES = 1 << 20  # an upload is kept in memory up to this size, then in a temp file
READ_CHUNK = 1 << 20
MAX_CONTENT_TYPE = 100  # Artifact.content_type
MAX_BY = 100  # who acted (`?by=`): acknowledged_by, resolved_by, cause_by are VARCHAR(100), which PostgreSQL enforces


class NotRunning(LabbotError):
    """A service this labbot was started without (the composition root passed ``None``)."""

    status = 503
    code = "not_running"


class ArtifactRefused(LabbotError):
    """One of the artifact store's errors, with the store's message and the HTTP status it maps to."""

    def __init__(self, message: str, *, status: int, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


_ARTIFACT_STATUS: dict[type[ArtifactError], tuple[int, str]] = {
    BadArtifactRequest: (400, "bad_request"),
    ArtifactNotFound: (404, "unknown_artifact"),
    NotShared: (403, "not_owner"),
    QuotaExceeded: (413, "quota_exceeded"),
}


async def _in_store(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call the artifact store on a worker thread; its errors become labbot errors that keep its message."""
    try:
        return await _blocking(fn, *args, **kwargs)
    except ArtifactError as e:
        # a blob missing under the store (changed outside labbot) is the server's fault: 500, still said plainly
        status, code = _ARTIFACT_STATUS.get(type(e), (500, "artifact_store"))
        raise ArtifactRefused(str(e), status=status, code=code) from None


async def _blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await to_thread.run_sync(lambda: fn(*args, **kwargs))


def _by(request: Request) -> str:
    """Who acted, from ``?by=`` (default ``api``): at most ``MAX_BY`` characters, or a 400 saying so."""
    by = request.query_params.get("by") or "api"
    if len(by) > MAX_BY:
        raise BadRequest(f"by is who acted, at most {MAX_BY} characters; got {len(by)}")
    return by


def _int_query(request: Request, name: str, default: int | None, *, lo: int = 0, hi: int = 100_000) -> int | None:
    """The one parser of integer query parameters: ASCII digits only (``str.isdigit`` also takes ``²``, which
    ``int`` refuses), and at most as many digits as ``hi`` has (``int`` of thousands of digits is slow, then
    refused); anything else is 400 saying what would be right."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit() and len(raw) <= len(str(hi))) or not lo <= int(raw) <= hi:
        raise BadRequest(f"query parameter {name}={raw[:40]!r} must be a whole number from {lo} to {hi}")
    return int(raw)


def _required(request: Request, name: str, example: str) -> str:
    value = request.query_params.get(name)
    if not value:
        raise BadRequest(f"query parameter {name} is required: {example}")
    return value


def _agent(request: Request) -> str:
    return _required(request, "agent", "the agent whose store this is, e.g. ?agent=researcher")


def _flag(request: Request, name: str, default: bool) -> bool:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("1", "true", "yes"):
        return True
    if raw.lower() in ("0", "false", "no"):
        return False
    raise BadRequest(f"query parameter {name}={raw!r} must be 1 or 0 (true or false)")


async def _receive_into(request: Request, out: IO[bytes], limit: int) -> None:
    too_large = (
        f"an artifact upload is limited to {format_bytes(limit)} per request: store a smaller file, "
        "or split it into parts"
    )
    await receive_into(request, out, limit, too_large=too_large)


def _chunks(stream: BinaryIO) -> Iterator[bytes]:
    """A blob stream read in chunks (Starlette iterates a sync iterator on a worker thread); closed at the end."""
    try:
        while chunk := stream.read(READ_CHUNK):
            yield chunk
    finally:
        stream.close()


def create_app(
    service: RunService,
    telemetry_store: TelemetryStore,
    *,
    admin_token: str,
    pager: Pager | None = None,
    db: Database | None = None,
    artifacts: ArtifactStore | None = None,
    max_artifact_bytes: int = MAX_ARTIFACT_BODY,
    post_file: PostFile | None = None,
    evals: EvalService | None = None,
    ab: AbTest | None = None,
    extra_routes: Sequence[BaseRoute] = (),
    ready: Callable[[], Awaitable[tuple[bool, dict[str, Any]]]] | None = None,
    metrics: Metrics | None = None,
    probes: ProbeAccess = REFUSE_ANONYMOUS,
    admins: frozenset[str] = frozenset(),
) -> Starlette:
    """The HTTP app. ``db`` serves ``/api/v1/audit`` (read only, through ``labbot.agents.fleet.audit.audit_rows``) and
    ``artifacts`` serves ``/api/v1/artifacts``; either left ``None`` makes its routes answer 503 ``not_running``.
    ``post_file(channel, thread_ts, filename, data)`` uploads into Slack (``/api/v1/artifacts/{id}/post``).
    ``max_artifact_bytes`` caps one upload's body (413 over it). ``ready`` answers ``/readyz`` (``(ready, body)``,
    ``labbot.bot.health.readiness``) and ``metrics`` serves ``/metrics``; either ``None`` answers 503. ``probes`` says
    who may read those two (``labbot.bot.api.probes``; the default refuses anonymous callers: the composition root
    passes the rule of the address it binds). ``admins`` (``[roles] admins``) see every eval suite and run when a read
    names one of them in ``?by=``."""

    def admin(handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def wrapped(request: Request) -> Response:
            try:
                require_admin(request, admin_token)
                result = await handler(request)
            except Exception as e:
                return from_exception(e)
            return result if isinstance(result, Response) else JSONResponse(result)

        return wrapped

    def signed_plot(image: str) -> Callable[[Request], Awaitable[Response]]:
        """The route of one of a run's plot images (``labbot.bot.api.plots.PLOT_IMAGES``), its signature checked."""

        async def plot(request: Request) -> Response:
            run_id, sig = request.path_params["run_id"], request.query_params.get("sig")
            if sig and not well_formed_signature(sig):  # the format is no secret: say what is wrong (400)
                return error_response(
                    400,
                    "bad_request",
                    f"the plot link's sig={sig[:40]!r} is not {SIGNATURE_HEX} hex digits: copy the "
                    "whole link, or ask labbot for a new one",
                )
            if not signature_ok(admin_token, run_id, sig, image):
                return JSONResponse(
                    {
                        "error": {
                            "code": "forbidden",
                            "message": "this plot link is not valid: ask labbot for a new one",
                        }
                    },
                    status_code=403,
                )
            try:
                run = await _blocking(service.get, run_id)
            except Exception as e:
                return from_exception(e)
            starts = await _blocking(telemetry_store.attempt_starts, run_id)
            if image == "loss":
                points = await _blocking(telemetry_store.metrics, run_id, "loss")
                png = await _blocking(loss_plot_png, points, title=f"{run['name']} — loss", attempts=starts)
            else:
                names = list(run["plot"])
                series = await _blocking(telemetry_store.series, run_id, names)
                title = f"{run['name']} — {', '.join(names)}"
                png = await _blocking(metrics_plot_png, series, title=title, attempts=starts)
            return Response(png, media_type="image/png", headers={"Cache-Control": "max-age=300"})

        return plot

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
                    "alerts": [alert_from_json(a).describe() for a in spec.alerts],
                    "watch": dict(spec.watch),
                    "checks": {k: c.accepted() for k, c in spec.checks.items()},
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
        result = await _blocking(service.launch, req)
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
        by = _by(request)
        run_id = request.path_params["run_id"]
        return {"run": await _blocking(lambda: service.set_priority(run_id, priority, by=by))}

    async def capacity(request: Request) -> Any:
        return await _blocking(service.capacity)

    async def get_run(request: Request) -> Any:
        wait = _int_query(request, "wait", 0, hi=MAX_WAIT_S) or 0  # long-poll until Ray starts the run
        return {"run": await _blocking(service.get, request.path_params["run_id"], wait=float(wait))}

    async def stop(request: Request) -> Any:
        by = _by(request)
        return {"run": await _blocking(service.stop, request.path_params["run_id"], by=by)}

    async def restart(request: Request) -> Any:
        by = _by(request)
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
            raise NotRunning("paging is not running in this control plane (it was started without a pager)")
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
        by = _by(request)
        return {"page": await _blocking(the_pager().acknowledge, request.path_params["page_id"], by=by)}

    async def resolve_page(request: Request) -> Any:
        by = _by(request)
        body = await read_limited(request, 16 * 1024)
        doc = loads_json(body) if body.strip() else {}
        if not isinstance(doc, dict) or set(doc) - {"cause"} or not isinstance(doc.get("cause", ""), str):
            raise BadRequest('the body, when there is one, is {"cause": "what was wrong, in a sentence"}')
        pager, page_id = the_pager(), request.path_params["page_id"]
        return {"page": await _blocking(lambda: pager.resolve(page_id, by=by, cause=doc.get("cause")))}

    async def audit(request: Request) -> Any:
        if db is None:
            raise NotRunning("the audit trail is not running in this labbot (it was started without a database)")
        limit = _int_query(request, "limit", 100, lo=1, hi=10_000) or 100
        agent = request.query_params.get("agent") or None
        return {"audit": await _blocking(audit_rows, db, limit=limit, agent=agent)}

    def the_store() -> ArtifactStore:
        if artifacts is None:
            raise NotRunning("the artifact store is not running in this labbot (it was started without one)")
        return artifacts

    async def list_artifacts(request: Request) -> Any:
        store, agent = the_store(), _agent(request)
        include_shared = _flag(request, "include_shared", True)
        listed = await _in_store(store.list, agent, include_shared=include_shared)
        return {"artifacts": listed, "usage": await _in_store(store.usage, agent)}

    async def put_artifact(request: Request) -> Any:
        store, agent = the_store(), _agent(request)
        name = _required(request, "name", "the artifact's name in the agent's store, e.g. ?name=report.md")
        content_type = request.headers.get("content-type") or None  # None: the store guesses from the name
        if content_type and len(content_type) > MAX_CONTENT_TYPE:
            raise BadRequest(f"the Content-Type header is over {MAX_CONTENT_TYPE} characters: send a plain media type")
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as body:  # memory, then a temp file
            await _receive_into(request, body, max_artifact_bytes)
            view = await _in_store(store.put, agent, name, body, content_type)
        created = view["created_at"] == view["updated_at"]  # a put of a name the agent has replaces it, same id
        return JSONResponse({"artifact": view}, status_code=201 if created else 200)

    async def get_artifact(request: Request) -> Any:
        store, agent, artifact_id = the_store(), _agent(request), request.path_params["artifact_id"]

        def work() -> tuple[dict[str, Any] | None, BinaryIO]:
            stream = store.open(agent, artifact_id)  # not found / not shared: raised before anything is listed
            try:
                views = store.list(agent, include_shared=True)
            except BaseException:
                stream.close()
                raise
            return next((v for v in views if v["id"] == artifact_id), None), stream

        view, stream = await _in_store(work)
        if view is None:  # deleted between the open and the listing: the stream still reads the old blob
            view = {"name": artifact_id, "content_type": "application/octet-stream", "sha256": None, "size": None}
        headers = {
            # kept as stored: Starlette would add "; charset=utf-8" to a text/* media_type
            "content-type": view["content_type"],
            "content-disposition": f"inline; filename*=UTF-8''{quote(view['name'], safe='')}",
            "x-artifact-id": artifact_id,
        }
        if view["sha256"]:
            headers["etag"] = f'"{view["sha256"]}"'
        if view["size"] is not None:
            headers["content-length"] = str(view["size"])
        return StreamingResponse(_chunks(stream), headers=headers)

    async def share_artifact(request: Request) -> Any:
        store, agent = the_store(), _agent(request)
        with_agent = _required(request, "with", "the agent to share it with, e.g. ?with=evaluator")
        return {"artifact": await _in_store(store.share, agent, request.path_params["artifact_id"], with_agent)}

    async def post_artifact(request: Request) -> Any:
        """Upload an artifact (the agent's own, or shared with it) into a Slack thread as a file."""
        store, agent, artifact_id = the_store(), _agent(request), request.path_params["artifact_id"]
        if post_file is None:
            raise NotRunning("Slack is not connected to this labbot: there is no thread to post the file in")
        channel = _required(request, "channel", "the Slack channel to post in, e.g. ?channel=C0123")
        thread_ts = request.query_params.get("thread_ts") or None

        def read() -> tuple[dict[str, Any], bytes]:
            data = store.get(agent, artifact_id)  # not found / not shared: refused before anything is posted
            view = next((v for v in store.list(agent, include_shared=True) if v["id"] == artifact_id), None)
            return view or {"name": artifact_id}, data

        view, data = await _in_store(read)
        await post_file(channel, thread_ts, str(view["name"]), data)
        return {"posted": artifact_id, "name": view["name"], "channel": channel, "thread_ts": thread_ts}

    async def delete_artifact(request: Request) -> Any:
        store, agent, artifact_id = the_store(), _agent(request), request.path_params["artifact_id"]
        await _in_store(store.delete, agent, artifact_id)
        return {"deleted": artifact_id}

    routes = [
        *extra_routes,  # first: POST /slack/events is the route under a burst (Slack's 3 s)
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/metrics", metrics_route),
        Route("/api/v1/jobs", admin(jobs)),
        Route("/api/v1/runs", admin(list_runs), methods=["GET"]),
        Route("/api/v1/runs", admin(launch), methods=["POST"]),
        Route("/api/v1/runs/{run_id}", admin(get_run)),
        Route("/api/v1/runs/{run_id}/stop", admin(stop), methods=["POST"]),
        Route("/api/v1/runs/{run_id}/restart", admin(restart), methods=["POST"]),
        Route("/api/v1/runs/{run_id}/priority", admin(set_priority), methods=["POST"]),
        Route("/api/v1/capacity", admin(capacity)),
        Route("/api/v1/runs/{run_id}/logs", admin(logs)),
        Route("/api/v1/runs/{run_id}/metrics/{name}", admin(metric)),
        Route("/api/v1/runs/{run_id}/telemetry", telemetry, methods=["POST"]),
        Route("/api/v1/pages", admin(list_pages)),
        Route("/api/v1/pages/{page_id}", admin(get_page)),
        Route("/api/v1/pages/{page_id}/ack", admin(ack_page), methods=["POST"]),
        Route("/api/v1/pages/{page_id}/resolve", admin(resolve_page), methods=["POST"]),
        Route("/api/v1/audit", admin(audit)),
        Route("/plots/{run_id}/loss.png", signed_plot("loss")),
        Route("/plots/{run_id}/metrics.png", signed_plot("metrics")),
        Route("/api/v1/artifacts", admin(list_artifacts), methods=["GET"]),
        Route("/api/v1/artifacts", admin(put_artifact), methods=["POST"]),
        Route("/api/v1/artifacts/{artifact_id}", admin(get_artifact), methods=["GET"]),
        Route("/api/v1/artifacts/{artifact_id}", admin(delete_artifact), methods=["DELETE"]),
        Route("/api/v1/artifacts/{artifact_id}/share", admin(share_artifact), methods=["POST"]),
        Route("/api/v1/artifacts/{artifact_id}/post", admin(post_artifact), methods=["POST"]),
        *eval_routes(evals, admin, FeedbackStore(db).mark_case if db is not None else None, admins),
        *feedback_routes(db, ab, admin),
        *compare_routes(RunComparer(service, telemetry_store, evals), admin, admins),
    ]
    # ids and query values no database can hold are a 400 here, once for every route (labbot.bot.web.edge)
    return Starlette(routes=routes, middleware=[Middleware(RefuseUnstorable)])


def _first_error(e: Exception) -> str:
    if isinstance(e, ValidationError):
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "body"
        return f"{where}: {err['msg']}"
    return str(e)
