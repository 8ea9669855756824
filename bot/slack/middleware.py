"""Guards in front of every Slack listener: :class:`DropRepeats` (Bolt global middleware: Slack's retries of an event
already handled, and messages from bots) and :class:`ReplayGuard` (a command or click whose trigger id was already
acted on: a signed request replayed while its signature is still valid)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from anyio import to_thread
from slack_bolt.middleware.async_middleware import AsyncMiddleware
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse

from labbot.bot.slack.dedup import SeenKeys
from labbot.storage.seen import DurableSeenKeys

log = logging.getLogger(__name__)

EVENTS_TTL_S = 3600.0  # Slack retries an event for minutes; an hour covers every retry


class DropRepeats(AsyncMiddleware):
    """Drops an event already handled (Slack retries one it thinks unanswered: same ``event_id``) and any message
    from a bot, ours included: other bots never trigger labbot. Both are answered 200 so Slack stops retrying."""

    def __init__(self, seen: SeenKeys | None = None) -> None:
        self.seen = seen if seen is not None else SeenKeys(ttl_s=EVENTS_TTL_S)

    async def __call__(
        self, req: AsyncBoltRequest, resp: BoltResponse, next: Callable[[], Awaitable[Any]]
    ) -> BoltResponse | None:
        """A response for a request dropped here; None once the rest of Bolt has had it (``next``)."""
        body = req.body
        event_id = body.get("event_id") if isinstance(body, dict) else None
        if event_id and not self.seen.first_time(str(event_id)):
            log.info("event %s already handled (Slack retry %s)", event_id, req.headers.get("x-slack-retry-num"))
            return BoltResponse(status=200, body="")
        event = body.get("event", {}) if isinstance(body, dict) else {}
        if event.get("bot_id") or event.get("subtype") == "bot_message":
            return BoltResponse(status=200, body="")  # other bots (and our own) never trigger labbot
        await next()
        return None

    async def async_process(
        self, *, req: AsyncBoltRequest, resp: BoltResponse, next: Callable[[], Awaitable[Any]]
    ) -> BoltResponse | None:
        return await self(req, resp, next)


class ReplayGuard:
    """Whether a command or click was already acted on, by its Slack trigger id: kept in the database
    (``DurableSeenKeys``), so a replay is caught by this process after a restart and by another replica too."""

    def __init__(self, triggers: SeenKeys | DurableSeenKeys) -> None:
        self.triggers = triggers

    async def replayed(self, kind: str, body: dict[str, Any]) -> bool:
        """True for a ``kind`` (``command``, ``action``) whose trigger id was seen before; the first time, False."""
        actions = body.get("actions") or [{}]
        trigger = body.get("trigger_id") or actions[0].get("action_ts")
        if not trigger:
            return False
        key = f"{kind}:{str(trigger)[:180]}"
        if await to_thread.run_sync(self.triggers.first_time, key):
            return False
        log.warning("a replayed Slack %s (trigger %s) was ignored", kind, trigger)
        return True
