"""``/api/v1/feedback`` and ``/api/v1/ab``: people's votes, and the A/B report of the agents' models; thin shells over
``labbot.agents.feedback``.

Routes (admin token)::

    GET  /api/v1/feedback[?limit=N&kind=answer|run|eval&vote=up|down&model=M&run=RUN]   {"feedback": [...]}
    GET  /api/v1/feedback/{id}                                                         {"feedback": {...}}
    POST /api/v1/feedback/{id}/comment   {"user": WHO, "comment": TEXT}  the voter's   {"feedback": {...}}
    GET  /api/v1/ab                       the A/B test of [agents.ab]                   {"ab": {...}}

Without a database the routes answer 503; ``/api/v1/ab`` without ``[agents.ab]`` says so (``configured: false``).
"""

from __future__ import annotations

from typing import Any

from anyio import to_thread
from starlette.requests import Request
from starlette.routing import Route

from labbot.agents.feedback.report import ab_document
from labbot.agents.feedback.store import FeedbackStore
from labbot.bot.api.deps import ApiDeps
from labbot.bot.web.body import read_limited
from labbot.common.errors import BadRequest, LabbotError
from labbot.common.json_input import loads_json

MAX_BODY = 16 * 1024


class FeedbackOff(LabbotError):
    status = 503
    code = "not_running"


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit", "50")
    if not (raw.isascii() and raw.isdigit() and 1 <= int(raw[:6]) <= 1000):
        raise BadRequest(f"query parameter limit={raw[:40]!r} must be a whole number from 1 to 1000")
    return int(raw)


def routes(deps: ApiDeps) -> list[Route]:
    db, ab, admin = deps.db, deps.ab, deps.admin

    def store() -> FeedbackStore:
        if db is None:
            raise FeedbackOff("feedback is not kept in this labbot (it was started without a database)")
        return FeedbackStore(db)

    async def list_feedback(request: Request) -> Any:
        st, q = store(), request.query_params
        limit = _limit(request)
        rows = await to_thread.run_sync(
            lambda: st.recent(
                limit=limit,
                kind=q.get("kind") or None,
                vote=q.get("vote") or None,
                model=q.get("model") or None,
                run_id=q.get("run") or None,
            )
        )
        return {"feedback": rows}

    async def get_feedback(request: Request) -> Any:
        st = store()
        return {"feedback": await to_thread.run_sync(st.get, request.path_params["feedback_id"])}

    async def comment(request: Request) -> Any:
        st, feedback_id = store(), request.path_params["feedback_id"]
        doc = loads_json(await read_limited(request, MAX_BODY) or b"{}")
        if (
            not isinstance(doc, dict)
            or set(doc) != {"user", "comment"}
            or not all(isinstance(doc[k], str) and doc[k].strip() for k in ("user", "comment"))
        ):
            raise BadRequest('the body is {"user": "the voter", "comment": "what went wrong, in a sentence"}')
        row = await to_thread.run_sync(lambda: st.comment(feedback_id, user=doc["user"], text=doc["comment"]))
        return {"feedback": row}

    async def get_ab(request: Request) -> Any:
        st = store()
        return {"ab": await to_thread.run_sync(ab_document, st, ab)}

    return [
        Route("/api/v1/feedback", admin(list_feedback), methods=["GET"]),
        Route("/api/v1/feedback/{feedback_id}", admin(get_feedback), methods=["GET"]),
        Route("/api/v1/feedback/{feedback_id}/comment", admin(comment), methods=["POST"]),
        Route("/api/v1/ab", admin(get_ab), methods=["GET"]),
    ]
