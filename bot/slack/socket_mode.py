"""Socket Mode's door: the envelopes Slack sends over the app's websocket, checked as ``POST /slack/events`` checks a
signed body before Bolt sees them.

Bolt's :class:`AsyncSocketModeHandler` hands every envelope's payload to Bolt as it is; a payload that is not an
object made slack_sdk raise building the request, and one of the wrong shape raised inside Bolt, each a traceback in
the log and an envelope never acked (so Slack sent it again). :class:`GuardedSocketModeHandler` reads the envelopes
itself: one without an ``envelope_id`` is not a request (``hello``, ``disconnect`` are slack_sdk's to handle); one
whose payload is not a Slack payload labbot can act on (``labbot.bot.slack.shapes.refusal``, the door's rules) is
acked empty, with one warning line saying why; an exception out of Bolt is one error line (``http.failure``) and an
empty ack. The websocket itself is authenticated by the app token, so there is no signature to check.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.adapter.socket_mode.async_internals import run_async_bolt_app, send_async_response
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from labbot.bot.slack.http import failure
from labbot.bot.slack.shapes import refusal

__all__ = ["GuardedSocketModeHandler", "envelope_refusal"]

log = logging.getLogger(__name__)


def envelope_refusal(message: dict[str, Any]) -> str | None:
    """Why the envelope ``message`` (with an ``envelope_id``) is not a request labbot acts on, or None (pure)."""
    if not isinstance(message.get("type"), str):
        return "its type is not a string"
    return refusal(message.get("payload"))


class GuardedSocketModeHandler(AsyncSocketModeHandler):
    """Bolt's Socket Mode handler, reading each envelope itself (a message listener of the client, in place of
    Bolt's request listener, which slack_sdk calls only after building the request)."""

    def __init__(self, app: Any, app_token: str) -> None:
        super().__init__(app, app_token)
        self.client.socket_mode_request_listeners.clear()  # Bolt's own handle(), the one there
        self.client.message_listeners.append(self.on_message)

    async def on_message(self, client: AsyncBaseSocketModeClient, message: dict[str, Any], raw: str | None) -> None:
        envelope_id = message.get("envelope_id") if isinstance(message, dict) else None
        if envelope_id is None:
            return  # not a request: hello, disconnect, or what slack_sdk did not parse
        if not isinstance(envelope_id, str):
            log.warning("a Socket Mode envelope whose envelope_id is not a string was ignored (it cannot be acked)")
            return
        if why := envelope_refusal(message):
            log.warning("a Socket Mode envelope was refused: %s", why)
            await client.send_socket_mode_response(SocketModeResponse(envelope_id=envelope_id))
            return
        request = SocketModeRequest(
            type=message["type"],
            envelope_id=envelope_id,
            payload=message["payload"],
            accepts_response_payload=bool(message.get("accepts_response_payload")),
        )
        start = time.time()
        try:
            answer = await run_async_bolt_app(self.app, request)
        except Exception as e:  # the last resort, as at the HTTP door
            log.error("a Socket Mode request failed in Bolt or a listener (%s): acked empty", failure(e))
            await client.send_socket_mode_response(SocketModeResponse(envelope_id=envelope_id))
            return
        await send_async_response(client, request, answer, start)
