"""The app's edge: a request whose path or query holds what no id or value can be is a 400 before any route reads it.

PostgreSQL's text refuses the NUL character, and every backend refuses text that is not UTF-8 (a lone surrogate is
what a ``%ED%A0%80`` in a path becomes); one of them in an id reached the database as a driver error, a 500 with a
traceback in the log (``/api/v1/runs/%00/telemetry``). One check here, for every route and every id and query
value, instead of one per route: :class:`RefuseUnstorable`, a plain ASGI middleware (it reads no body). The same
rule (``labbot.common.json_input.unstorable``) holds for every string of a JSON body: ``loads_json`` refuses one.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from labbot.bot.web.errors import error_response
from labbot.common.json_input import unstorable

__all__ = ["RefuseUnstorable", "refusal", "unstorable"]


def refusal(path: str, query: bytes) -> str | None:
    """The 400's message for a request's decoded ``path`` and raw ``query`` string, or None to let it through."""
    if why := unstorable(path):
        return f"the path {why}: ids are text without control characters; check the id you were given"
    try:
        pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True, errors="strict")
    except (UnicodeDecodeError, ValueError):
        return "the query string is not valid UTF-8 once decoded: send its values percent-encoded as UTF-8"
    for name, value in pairs:
        if why := unstorable(name) or unstorable(value):
            return f"the query parameter {name[:40]!r} {why}: send text without control characters"
    return None


class RefuseUnstorable:
    """ASGI middleware: :func:`refusal` answered with the app's error body (``bad_request``, 400)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            why = refusal(str(scope.get("path", "")), bytes(scope.get("query_string", b"")))
            if why is not None:
                await error_response(400, "bad_request", why)(scope, receive, send)
                return
        await self.app(scope, receive, send)
