"""``POST /slack/events``, the door of Slack's HTTP mode, checked before Bolt sees a byte.

In this order, each refusal answered as JSON (``labbot.bot.api.errors``) without reading further, and without the
body ever going to a log:

1. a declared Content-Length over ``MAX_SLACK_BODY`` (Slack's own payloads are a few KiB): 413, nothing read;
2. the signing headers: missing is 401; ``X-Slack-Request-Timestamp`` that is not unix seconds or
   ``X-Slack-Signature`` that is not ``v0=`` and 64 hex digits is 400 saying which; a timestamp outside Slack's
   5-minute window is 401 (stale or replayed);
3. the body, read up to ``MAX_SLACK_BODY``: past it, 413 and reading stops (a chunked body declares no length);
4. the v0 HMAC-SHA256 of the body under the signing secret: wrong is 401.

Only a request that passed all four reaches Bolt, so Bolt's own verification (which logs the body of a request
that fails it) is switched off in ``labbot.bot.slack.app.build_app``: this is the one check.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Callable

from slack_bolt.adapter.starlette.async_handler import to_async_bolt_request, to_starlette_response
from slack_bolt.async_app import AsyncApp
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from labbot.bot.api.body import BodyTooLarge, declared_length, read_limited
from labbot.bot.api.errors import error_response
from labbot.common.errors import BadRequest, LabbotError, Unauthorized
from labbot.common.humanize import format_bytes

__all__ = ["MAX_SLACK_BODY", "WINDOW_S", "check_signature", "events_route"]

MAX_SLACK_BODY = 1 << 20  # Slack's events, commands and interactions are KiB; a view submission stays well under
WINDOW_S = 5 * 60  # Slack's replay window
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")
_TOO_LARGE = "Slack's requests are small: this is not one"


def check_headers(request: Request, now: float) -> tuple[str, str]:
    """The request's (timestamp, signature) if well formed and fresh; Unauthorized or BadRequest otherwise."""
    ts = request.headers.get("x-slack-request-timestamp")
    sig = request.headers.get("x-slack-signature")
    if not ts or not sig:
        raise Unauthorized("not signed by Slack: X-Slack-Request-Timestamp and X-Slack-Signature are required")
    if not (ts.isascii() and ts.isdigit() and len(ts) <= 12):
        raise BadRequest(f"X-Slack-Request-Timestamp must be unix seconds (ASCII digits), got {ts[:40]!r}")
    if not _SIGNATURE.fullmatch(sig):
        raise BadRequest("X-Slack-Signature must be 'v0=' followed by 64 lowercase hex digits")
    if abs(now - int(ts)) > WINDOW_S:
        raise Unauthorized("X-Slack-Request-Timestamp is outside Slack's 5-minute window: stale or replayed")
    return ts, sig


def check_signature(secret: str, ts: str, sig: str, body: bytes) -> None:
    """Unauthorized unless ``sig`` is Slack's v0 signature of ``body`` at ``ts`` under ``secret``."""
    base = b"v0:" + ts.encode() + b":" + body
    expected = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), sig.encode()):
        raise Unauthorized("the Slack signature does not match: not signed with this app's signing secret")


async def verified_body(request: Request, secret: str, *, now: float, limit: int = MAX_SLACK_BODY) -> bytes:
    declared = declared_length(request)
    if declared is not None and declared > limit:
        raise BodyTooLarge(f"body of {format_bytes(declared)} is over the {format_bytes(limit)} limit; {_TOO_LARGE}")
    ts, sig = check_headers(request, now)  # before a byte of the body is read
    body = await read_limited(request, limit, hint=_TOO_LARGE)
    check_signature(secret, ts, sig, body)
    return body


def events_route(
    app: AsyncApp, signing_secret: str, *, limit: int = MAX_SLACK_BODY, clock: Callable[[], float] = time.time
) -> Route:
    """The route that hands verified requests to ``app`` (whose own verification is off)."""

    async def endpoint(request: Request) -> Response:
        try:
            body = await verified_body(request, signing_secret, now=clock(), limit=limit)
            try:
                bolt_request = to_async_bolt_request(request, body)  # decodes and parses the (signed) body
            except (ValueError, RecursionError):  # not UTF-8, or a payload that is not JSON
                raise BadRequest("the body is not a Slack payload (UTF-8 form or JSON)") from None
        except LabbotError as e:
            return error_response(e.status, e.code, e.message)
        return to_starlette_response(await app.async_dispatch(bolt_request))

    return Route("/slack/events", endpoint, methods=["POST"])
