"""``/api/v1/evals``: eval suites and eval runs, thin shells over ``labbot.evals.service.EvalService``.

Routes (admin token)::

    POST /api/v1/evals/suites[?owner=WHO] a suite folder as .tar.gz (raw body)  {"suite": {...}}   201
    POST /api/v1/evals/suites/{suite}/share?by=WHO   shared with the whole lab  {"suite": {...}}
    GET  /api/v1/evals/suites[?by=WHO]                                          {"suites": [...]}
    GET  /api/v1/evals/suites/{suite}[?by=WHO]                                  {"suite": {..., "tasks": [...]}}
    POST /api/v1/evals/runs[?by=WHO]     {"suite", "solver", "owner", "max_samples"?, "name"?, "idempotency_key"?,
                                          "solver_dir"?, "allow_hosts"?, "solver_env"?}   {"eval": {...}}   201
    GET  /api/v1/evals/runs[?limit=N][&by=WHO]                                  {"evals": [...]}
    GET  /api/v1/evals/runs/{run_id}[?by=WHO]                                   {"eval": {...}}
    GET  /api/v1/evals/compare?a=RUN&b=RUN[&by=WHO]   two runs of one suite     {"comparison": {...}}
    POST /api/v1/evals/incidents/{page_id}?by=WHO   a resolved page as a case    {"case": {...}, "suite": {...}} 201
    POST /api/v1/evals/feedback/{id}?by=WHO   a 👎 with a comment as a case      {"case": {...}, "suite": {...}} 201

``solver_dir`` is a name of ``[eval] solver_dirs`` (never a path), ``allow_hosts`` a list of hosts each allowed by
``[eval] solver_hosts``, ``solver_env`` ``{NAME: value}``: the caller's own secrets for its command solver, kept out
of the run's params and of every answer (:mod:`labbot.evals.running.solver_access`).

An eval run is a labbot run of the ``eval`` job: ``/api/v1/runs`` shows it too. Without an eval service the routes
answer 503.

On the read routes ``?by=WHO`` asks for the person a client acts for (the ``lab`` MCP server passes an agent's
researcher): only the suites WHO may run and the eval runs of those suites (``EvalService.visible``: their owners,
admins — ``[roles] admins`` — and everyone once shared); another's run is a 404 exactly like an unknown id, naming
the runs WHO can see. Without ``by`` the caller is the admin-token holder (the CLI): everything.
"""

from __future__ import annotations

import tempfile
from typing import Any

from anyio import to_thread
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from labbot.agents.feedback.store import FeedbackStore
from labbot.bot.api.deps import ApiDeps
from labbot.bot.web.body import read_limited, receive_into
from labbot.common.errors import BadRequest, LabbotError
from labbot.common.humanize import format_bytes
from labbot.common.json_input import loads_json
from labbot.evals.service import EvalService

MAX_SUITE_UPLOAD = 200 << 20
MAX_BODY = 64 * 1024
SPOOL_BYTES = 1 << 20

MAX_BY = 100  # a person's name as labbot keeps it (a run's owner is VARCHAR(100))


class EvalsOff(LabbotError):
    status = 503
    code = "not_running"


def viewer_of(request: Request, admins: frozenset[str]) -> tuple[str | None, bool]:
    """Whom a read is for, from ``?by=``, and whether they are an admin; no ``by``: the admin-token holder, who sees
    everything (``(None, True)``)."""
    by = request.query_params.get("by")
    if by is None:
        return None, True
    if not by.strip() or len(by) > MAX_BY:
        raise BadRequest(
            f"query parameter by names whom the request is for (a Slack user id such as U0123ABCD), 1 to {MAX_BY} "
            "characters; leave it out to ask as the admin-token holder"
        )
    return by, by in admins


class EvalRunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    suite: str
    solver: str = Field(default="gold", min_length=1, max_length=20_000)  # parse_solver says the cap and why
    owner: str = Field(default="api", min_length=1, max_length=200)
    max_samples: int | None = Field(default=None, ge=1, le=64)
    name: str | None = Field(default=None, max_length=200)
    idempotency_key: str | None = Field(default=None, max_length=200)
    solver_dir: str | None = Field(default=None, min_length=1, max_length=200)
    allow_hosts: list[str] = Field(default_factory=list, max_length=32)
    solver_env: dict[str, str] = Field(default_factory=dict, repr=False)


def routes(deps: ApiDeps) -> list[Route]:
    """``deps.admins`` (``[roles] admins``) see every suite and run when a read names one of them in ``?by=``; with
    a database, a case made from feedback is recorded on its feedback row (``FeedbackStore.mark_case``)."""
    evals, admin, admins = deps.evals, deps.admin, deps.admins
    mark_case = FeedbackStore(deps.db).mark_case if deps.db is not None else None

    def service() -> EvalService:
        if evals is None:
            raise EvalsOff("evals are not enabled in this labbot")
        return evals

    async def add_suite(request: Request) -> Any:
        svc = service()
        too_large = f"a suite upload is limited to {format_bytes(MAX_SUITE_UPLOAD)}: generate fewer tasks"
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as body:
            await receive_into(request, body, MAX_SUITE_UPLOAD, too_large=too_large)
            owner = request.query_params.get("owner") or None
            suite = await to_thread.run_sync(lambda: svc.add_suite(body, owner=owner))
        return JSONResponse({"suite": suite}, status_code=201)

    async def list_suites(request: Request) -> Any:
        svc, (viewer, is_admin) = service(), viewer_of(request, admins)
        return {"suites": await to_thread.run_sync(lambda: svc.suites(viewer, admin=is_admin))}

    async def get_suite(request: Request) -> Any:
        svc, suite_id, (viewer, is_admin) = service(), request.path_params["suite_id"], viewer_of(request, admins)
        suite = await to_thread.run_sync(lambda: svc.suite(suite_id, viewer=viewer, admin=is_admin))
        # the suite's runs' pass rates: shown to whoever may see the suite, so only after svc.suite let them
        return {"suite": {**suite, "saturation": await to_thread.run_sync(svc.saturation, suite_id)}}

    async def launch(request: Request) -> Any:
        svc, (viewer, is_admin) = service(), viewer_of(request, admins)
        body = await read_limited(request, MAX_BODY)
        try:
            doc = loads_json(body or b"{}")
            if not isinstance(doc, dict):
                raise BadRequest("the body must be a JSON object")
            req = EvalRunRequest.model_validate(doc)
        except BadRequest as e:
            raise BadRequest(f"bad eval run request: {e.message}") from None
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "body"
            raise BadRequest(f"bad eval run request: {where}: {err['msg']}") from None
        run = await to_thread.run_sync(
            lambda: svc.launch(
                req.suite,
                solver=req.solver,
                owner=req.owner,
                max_samples=req.max_samples,
                name=req.name,
                idempotency_key=req.idempotency_key,
                solver_dir=req.solver_dir,
                allow_hosts=req.allow_hosts,
                solver_env=req.solver_env,
                viewer=viewer,
                admin=is_admin,
            )
        )
        return JSONResponse({"eval": await to_thread.run_sync(svc.results, run["id"])}, status_code=201)

    async def list_runs(request: Request) -> Any:
        raw = request.query_params.get("limit", "50")
        if not (raw.isascii() and raw.isdigit() and 1 <= int(raw[:6]) <= 1000):
            raise BadRequest(f"query parameter limit={raw[:40]!r} must be a whole number from 1 to 1000")
        svc, (viewer, is_admin) = service(), viewer_of(request, admins)
        return {"evals": await to_thread.run_sync(lambda: svc.eval_runs(limit=int(raw), viewer=viewer, admin=is_admin))}

    async def get_run(request: Request) -> Any:
        svc, run_id, (viewer, is_admin) = service(), request.path_params["run_id"], viewer_of(request, admins)
        return {"eval": await to_thread.run_sync(lambda: svc.results(run_id, viewer=viewer, admin=is_admin))}

    async def from_incident(request: Request) -> Any:
        svc, page_id = service(), request.path_params["page_id"]
        by = request.query_params.get("by") or "api"
        made = await to_thread.run_sync(lambda: svc.from_incident(page_id, by=by))
        return JSONResponse(made, status_code=201)

    async def from_feedback(request: Request) -> Any:
        svc, feedback_id = service(), request.path_params["feedback_id"]
        by = request.query_params.get("by") or "api"
        made = await to_thread.run_sync(lambda: svc.from_feedback(feedback_id, by=by))
        if mark_case is not None:
            await to_thread.run_sync(mark_case, feedback_id, str(made["case"]["id"]))
        return JSONResponse(made, status_code=201)

    async def share(request: Request) -> Any:
        svc, suite_id = service(), request.path_params["suite_id"]
        by = request.query_params.get("by") or "api"
        return {"suite": await to_thread.run_sync(lambda: svc.share(suite_id, by=by, admin=True))}

    async def compare(request: Request) -> Any:
        a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
        if not a or not b:
            raise BadRequest("compare needs two eval runs: /api/v1/evals/compare?a=RUN_ID&b=RUN_ID")
        svc, (viewer, is_admin) = service(), viewer_of(request, admins)
        return {"comparison": await to_thread.run_sync(lambda: svc.compare(a, b, viewer=viewer, admin=is_admin))}

    return [
        Route("/api/v1/evals/compare", admin(compare), methods=["GET"]),
        Route("/api/v1/evals/feedback/{feedback_id}", admin(from_feedback), methods=["POST"]),
        Route("/api/v1/evals/incidents/{page_id}", admin(from_incident), methods=["POST"]),
        Route("/api/v1/evals/suites", admin(add_suite), methods=["POST"]),
        Route("/api/v1/evals/suites", admin(list_suites), methods=["GET"]),
        Route("/api/v1/evals/suites/{suite_id}", admin(get_suite), methods=["GET"]),
        Route("/api/v1/evals/suites/{suite_id}/share", admin(share), methods=["POST"]),
        Route("/api/v1/evals/runs", admin(launch), methods=["POST"]),
        Route("/api/v1/evals/runs", admin(list_runs), methods=["GET"]),
        Route("/api/v1/evals/runs/{run_id}", admin(get_run), methods=["GET"]),
    ]
