"""The outbox's Slack channel: posts pages and notes into run threads, DMs and the on-call channel, and re-renders
the page messages already posted when a page is acknowledged or resolved.

Implements ``labbot.agents.babysitter.outbox.Notifier`` (agents/ never imports bot/). Every post carries Slack message
metadata naming its delivery; when a delivery is tried again after an attempt whose outcome is unknown (a 5xx, a
timeout, a crash mid-send), the conversation is searched for that metadata first, so a page that did reach Slack is not
posted twice. Its client retries only 429s by itself: everything else comes back to the outbox, which retries with
backoff — after that check.

Every write (a post, a page message's update) is made only under the leader lease that claimed the delivery: right
before it, after the calls that come first (opening the DM, that search), ``aguard`` checks the lease again
(``labbot.storage.lease``); refused, ``Fenced`` goes back to the outbox and nothing is written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

import aiohttp
from anyio import to_thread
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from labbot.agents.babysitter.outbox import Envelope, Outcome
from labbot.bot.slack.blocks.pages import page_message
from labbot.bot.slack.client import ObservedWebClient
from labbot.bot.slack.threads import RunThreads
from labbot.common.observe import NO_OBSERVER, Observer
from labbot.storage.lease import aguard
from labbot.storage.models import utcnow
from labbot_client.backoff import retry_after_seconds

log = logging.getLogger(__name__)

METADATA_EVENT = "labbot_delivery"
RETRYABLE_ERRORS = frozenset(
    {"ratelimited", "rate_limited", "service_unavailable", "fatal_error", "internal_error", "request_timeout"}
)


def outbox_client(token: str, api_url: str, *, observer: Observer = NO_OBSERVER) -> AsyncWebClient:
    """A Web API client that retries only rate limits (a 429 never posted anything); the outbox does the rest. Its
    failed calls are counted (``/metrics``)."""
    return ObservedWebClient(
        token=token,
        base_url=api_url,
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=3)],
        observer=observer,
    )


class SlackPageNotifier:
    def __init__(
        self,
        client: AsyncWebClient,
        threads: RunThreads,
        *,
        usergroup: str | None = None,
        file_incidents: bool = False,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.client = client
        self.threads = threads
        self.usergroup = usergroup
        self.file_incidents = file_incidents  # Linear is set up: pages carry a File incident button
        self.clock = clock

    async def deliver(self, envelope: Envelope) -> Outcome:
        try:
            if envelope.action == "refresh":
                return await self._refresh(envelope)
            return await self._post(envelope)
        except SlackApiError as e:
            return _classify(e)
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            return Outcome("retry", f"Slack did not answer: {type(e).__name__}")

    # -- posts -----------------------------------------------------------------------------------------------

    async def _post(self, env: Envelope) -> Outcome:
        where = await self._where(env)
        if isinstance(where, Outcome):
            return where
        channel, thread_ts = where
        if env.attempts > 1:
            found = await self._already_posted(env, channel, thread_ts)
            if found is not None:
                log.info("delivery %s had reached Slack before (%s): not posted again", env.id, found)
                return Outcome("accepted", "found in Slack", result={"channel": channel, "ts": found})
        text, blocks = self._render(env, env.payload)
        await aguard(f"posting {env.what}", token=env.claim_token)
        resp = await self.client.chat_postMessage(
            channel=channel,
            thread_ts=thread_ts,
            text=text,
            blocks=blocks,
            metadata={"event_type": METADATA_EVENT, "event_payload": {"delivery": env.id}},
        )
        return Outcome("accepted", result={"channel": str(resp["channel"]), "ts": str(resp["ts"])})

    async def _where(self, env: Envelope) -> tuple[str, str | None] | Outcome:
        target = env.target
        if target == "thread":
            run_id = (env.run or {}).get("id")
            thread = await to_thread.run_sync(self.threads.thread_of, run_id) if run_id else None
            if thread is None:
                return Outcome("rejected", f"run {run_id} has no Slack thread")
            return thread
        if target.startswith("dm:"):
            resp = await self.client.conversations_open(users=target[3:])
            return str(resp["channel"]["id"]), None
        if target.startswith("channel:"):
            return target[len("channel:") :], None
        return Outcome("rejected", f"unknown Slack target {target!r}")

    async def _already_posted(self, env: Envelope, channel: str, thread_ts: str | None) -> str | None:
        """The ts of a message carrying this delivery's metadata, if an earlier try did post it."""
        oldest = f"{env.created_at.timestamp() - 1:.6f}"
        if thread_ts:
            resp = await self.client.conversations_replies(
                channel=channel, ts=thread_ts, oldest=oldest, include_all_metadata=True, limit=200
            )
        else:
            resp = await self.client.conversations_history(
                channel=channel, oldest=oldest, include_all_metadata=True, limit=200
            )
        for m in resp.get("messages") or []:
            meta = m.get("metadata") or {}
            if meta.get("event_type") == METADATA_EVENT and (meta.get("event_payload") or {}).get("delivery") == env.id:
                return str(m["ts"])
        return None

    def _render(self, env: Envelope, payload: Any) -> tuple[str, list[dict[str, Any]] | None]:
        if payload.get("template") == "page" and env.incident is not None:
            return page_message(
                env.incident,
                env.run,
                level=int(payload.get("level", 0)),
                renotify=int(payload.get("renotify", 0)),
                usergroup=self.usergroup,
                now=self.clock(),
                file_incidents=self.file_incidents,
            )
        return str(payload.get("text", "")), None

    # -- refreshes -------------------------------------------------------------------------------------------

    async def _refresh(self, env: Envelope) -> Outcome:
        for post in env.posts:
            text, blocks = self._render(env, post.get("payload") or {})
            await aguard(f"updating message {post['ts']} for {env.what}", token=env.claim_token)
            try:
                await self.client.chat_update(channel=post["channel"], ts=post["ts"], text=text, blocks=blocks)
            except SlackApiError as e:
                if e.response.get("error") in ("message_not_found", "cant_update_message", "channel_not_found"):
                    continue  # deleted by someone: nothing to show the new state on
                raise
        return Outcome("accepted", result={"updated": len(env.posts)})


def _classify(e: SlackApiError) -> Outcome:
    status = getattr(e.response, "status_code", None)
    error = str(e.response.get("error") or "")
    if status == 429 or error in RETRYABLE_ERRORS or (isinstance(status, int) and status >= 500):
        headers = e.response.headers or {}
        raw = headers.get("Retry-After") or headers.get("retry-after")
        wait = retry_after_seconds(str(raw[0] if isinstance(raw, list) else raw) if raw else None)
        return Outcome("retry", f"Slack answered {status} {error}".strip(), retry_after_s=wait)
    return Outcome("rejected", f"Slack refused it: {error or status}")
