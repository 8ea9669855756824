"""``POST /slack/events``, the door of Slack's HTTP mode, checked before Bolt sees a byte.

In this order, each refusal answered as JSON (``labbot.bot.web.errors``) without reading further, and without the
body ever going to a log:

1. a declared Content-Length over ``MAX_SLACK_BODY`` (Slack's own payloads are a few KiB): 413, nothing read;
2. the signing headers: missing is 401; ``X-Slack-Request-Timestamp`` that is not unix seconds or
   ``X-Slack-Signature`` that is not ``v0=`` and 64 hex digits is 400 saying which; a timestamp outside Slack's
   5-minute window is 401 (stale or replayed);
3. the body, read up to ``MAX_SLACK_BODY``: past it, 413 and reading stops (a chunked body declares no length);
4. the v0 HMAC-SHA256 of the body under the signing secret: wrong is 401;
5. the body parsed as Bolt parses it, strictly (``labbot.bot.slack.shapes.read``): not UTF-8, not JSON, JSON nested
   too deep or holding NaN/Infinity is 400;
6. its shape (``labbot.bot.slack.shapes.refusal``): anything that is not a Slack payload labbot can act on — an
   array, a ``payload`` field that is not an object, a NUL in a string, a field Bolt or a listener reads missing or
   of the wrong type — is 400 saying which field and what it should be, with one warning line in the log (the
   reason, never the body).

Only a request that passed all six reaches Bolt, so Bolt's own verification (which logs the body of a request that
fails it) is switched off in ``labbot.bot.slack.app.build_app``: this is the one check. Bolt is handed the payload
this door checked, as JSON (and none of the ``X-Slack-Bolt-*`` headers, Bolt's own between its lazy listeners): one
parse, so what Bolt acts on is what was checked. An exception that still escapes Bolt and the listeners (a bug the
shape rules did not foresee) is a 400 ``not a Slack payload labbot can act on`` and one error line naming the
exception and where it was raised (:func:`failure`), no traceback; Bolt's own error handler says the same
(``build_app``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from slack_bolt.adapter.starlette.async_handler import to_starlette_response
from slack_bolt.async_app import AsyncApp, AsyncBoltRequest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from labbot.bot.slack.shapes import JSON_TYPE, read, refusal
from labbot.bot.web.body import BodyTooLarge, declared_length, read_limited
from labbot.bot.web.errors import error_response
from labbot.common.errors import BadRequest, LabbotError, Unauthorized
from labbot.common.humanize import format_bytes

__all__ = ["MAX_SLACK_BODY", "NOT_ACTIONABLE", "WINDOW_S", "check_signature", "events_route", "failure", "payload_of"]

log = logging.getLogger(__name__)

MAX_SLACK_BODY = 1 << 20  # Slack's events, commands and interactions are KiB; a view submission stays well under
WINDOW_S = 5 * 60  # Slack's replay window
NOT_ACTIONABLE = "not a Slack payload labbot can act on"
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")
_TOO_LARGE = "Slack's requests are small: this is not one"


class NotAPayload(BadRequest):
    """A signed body that is not a Slack payload labbot can act on (logged: it came with the signing secret)."""


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


def payload_of(body: bytes, content_type: str | None) -> dict[str, Any]:
    """The signed ``body`` as the payload it holds (steps 5 and 6), or NotAPayload saying why not."""
    try:
        payload = read(body.decode("utf-8"), (content_type or "").split(";")[0].strip().lower() or None)
    except UnicodeDecodeError:
        raise NotAPayload(f"{NOT_ACTIONABLE}: the body is not UTF-8 (Slack sends form fields or JSON)") from None
    except BadRequest as e:
        raise NotAPayload(f"{NOT_ACTIONABLE}: {e.message}") from None
    if why := refusal(payload):
        raise NotAPayload(f"{NOT_ACTIONABLE}: {why}")
    return dict(payload)


def _place(frame: traceback.FrameSummary) -> str:
    return f"{'/'.join(Path(frame.filename).parts[-3:])}:{frame.lineno} ({frame.name})"


def failure(error: BaseException) -> str:
    """``error`` in one line, for the log: its type, where it was raised and the innermost frame of labbot's own code
    it passed through — enough to find the bug, with no traceback and nothing of the request (not even the
    exception's message, which may quote it)."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return type(error).__name__
    said = f"{type(error).__name__} raised at {_place(frames[-1])}"
    ours = [f for f in frames if "labbot" in Path(f.filename).parts]
    if ours and ours[-1] is not frames[-1]:
        said += f", from {_place(ours[-1])}"
    return said


def bolt_request(request: Request, payload: dict[str, Any]) -> AsyncBoltRequest:
    """What Bolt is handed: the checked payload as JSON, and the request's headers but those of the body (it is not
    the body Slack signed any more: that was checked) and Bolt's own ``X-Slack-Bolt-*``."""
    headers: dict[str, str | Sequence[str]] = {
        name: value
        for name, value in request.headers.items()
        if name not in ("content-type", "content-length") and not name.startswith("x-slack-bolt-")
    }
    headers["content-type"] = JSON_TYPE
    return AsyncBoltRequest(body=json.dumps(payload), headers=headers)


def events_route(
    app: AsyncApp, signing_secret: str, *, limit: int = MAX_SLACK_BODY, clock: Callable[[], float] = time.time
) -> Route:
    """The route that hands verified requests to ``app`` (whose own verification is off)."""

    async def endpoint(request: Request) -> Response:
        try:
            body = await verified_body(request, signing_secret, now=clock(), limit=limit)
            payload = payload_of(body, request.headers.get("content-type"))
        except NotAPayload as e:
            log.warning("a signed Slack request was refused: %s", e.message)
            return error_response(e.status, e.code, e.message)
        except LabbotError as e:
            return error_response(e.status, e.code, e.message)
        try:
            answer = await app.async_dispatch(bolt_request(request, payload))
        except Exception as e:  # the last resort: the shape rules let through what Bolt or a listener cannot take
            log.error("a Slack request failed in Bolt or a listener (%s): answered 400", failure(e))
            return error_response(400, "bad_request", NOT_ACTIONABLE)
        return to_starlette_response(answer)

    return Route("/slack/events", endpoint, methods=["POST"])
