"""What `/lab` subcommands and the card's buttons do, once acked: each one a call into the run service, answered
ephemerally to the person who asked (or in the run's thread, for what everyone should see).

Permissions: ``stop`` and ``restart`` need the run's owner or an admin (``[roles] admins`` in labbot.toml).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from anyio import to_thread
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.cli import render
from bot.commands import LAB, Parsed, help_text, usage
from bot.config import SlackSettings
from bot.slack.blocks import ephemeral_error, run_card, text_blocks
from bot.slack.threads import RunThreads
from training.errors import LabbotError
from training.service import RunService
from training.specs import LaunchRequest

log = logging.getLogger(__name__)
LOGS_INLINE_SECTIONS = 4  # longer logs are a file: a wall of ephemeral text helps nobody


@dataclass
class Asker:
    """Who asked, and where to answer them."""

    user: str
    channel: str
    trigger_id: str | None = None


class LabActions:
    def __init__(
        self, client: AsyncWebClient, service: RunService, threads: RunThreads, settings: SlackSettings
    ) -> None:
        self.client = client
        self.service = service
        self.threads = threads
        self.settings = settings

    def is_admin(self, user: str) -> bool:
        return user in self.settings.admins

    async def tell(self, who: Asker, text: str, blocks: list[dict[str, Any]] | None = None) -> None:
        """An ephemeral answer: only the asker sees it."""
        try:
            await self.client.chat_postEphemeral(channel=who.channel, user=who.user, text=text, blocks=blocks)
        except SlackApiError as e:
            log.warning("could not answer %s in %s: %s", who.user, who.channel, e.response.get("error"))

    async def fail(self, who: Asker, message: str, parsed: Parsed | None = None) -> None:
        text, blocks = ephemeral_error(
            message, usage(parsed.command, self.settings.command) if parsed is not None else None
        )
        await self.tell(who, text, blocks)

    async def run(self, parsed: Parsed, who: Asker) -> None:
        name = parsed.command.name
        try:
            handler = getattr(self, f"_do_{name}")
            await handler(parsed, who)
        except LabbotError as e:
            await self.fail(who, e.message, parsed if e.status < 500 else None)
        except Exception:
            log.exception("/lab %s failed", name)
            await self.fail(who, f"`{self.settings.command} {name}` failed inside labbot; the error is in its log")

    # -- subcommands -----------------------------------------------------------------------------------------

    async def _do_launch(self, parsed: Parsed, who: Asker) -> None:
        opts = parsed.options
        req = LaunchRequest(
            job=parsed.args["job"],
            name=opts.get("name"),
            owner=who.user,
            params=dict(parsed.params),
            gpus=opts.get("gpus"),
            stall_after=opts.get("stall_after"),
            max_restarts=opts.get("max_restarts"),
            # the same slash command delivered twice (a retry) carries the same trigger id: one run
            idempotency_key=f"slack-{who.trigger_id}" if who.trigger_id else None,
        )
        result = await to_thread.run_sync(self.service.launch, req)
        run = result.run
        if not result.created:
            await self.tell(who, f"run `{run['id']}` was already launched by this command")
            return
        await self.threads.open_thread(run, who.channel)

    async def _do_runs(self, parsed: Parsed, who: Asker) -> None:
        status = parsed.options.get("status")
        limit = parsed.options.get("limit") or 20
        runs = await to_thread.run_sync(lambda: self.service.runs(status=status, limit=limit))
        if parsed.options.get("mine"):
            runs = [r for r in runs if r["owner"] == who.user]
        if not runs:
            await self.tell(who, f"no runs yet — launch one with `{self.settings.command} launch tiny-lm`")
            return
        text = "```\n" + render.runs_table(runs) + "\n```"
        for blocks in text_blocks(text)[:1]:
            await self.tell(who, f"{len(runs)} runs", blocks)

    async def _do_status(self, parsed: Parsed, who: Asker) -> None:
        run = await to_thread.run_sync(self.service.get, parsed.args["run_id"])
        text, blocks = run_card(run)
        thread = await to_thread.run_sync(self.threads.thread_of, run["id"])
        if thread:
            link = await self._permalink(*thread)
            if link:
                blocks = [*blocks, {"type": "context", "elements": [{"type": "mrkdwn", "text": f"<{link}|thread>"}]}]
        await self.tell(who, text, blocks)

    async def _do_stop(self, parsed: Parsed, who: Asker) -> None:
        await self.act(parsed.args["run_id"], "stop", who)

    async def _do_restart(self, parsed: Parsed, who: Asker) -> None:
        await self.act(parsed.args["run_id"], "restart", who)

    async def _do_logs(self, parsed: Parsed, who: Asker) -> None:
        run_id = parsed.args["run_id"]
        tail = parsed.options.get("tail") or 50
        text = await to_thread.run_sync(lambda: self.service.logs(run_id, tail=tail))
        body = f"```\n{text or '(no output yet)'}\n```"
        messages = text_blocks(body)
        if len(messages) == 1 and len(messages[0]) <= LOGS_INLINE_SECTIONS:
            await self.tell(who, f"logs of {run_id}", messages[0])
            return
        # too long for a message: a file, in the run's thread when it has one
        channel, thread_ts = await to_thread.run_sync(self.threads.thread_of, run_id) or (who.channel, None)
        await self.client.files_upload_v2(
            channel=channel, thread_ts=thread_ts, content=text, filename=f"{run_id}-logs.txt", title=f"logs of {run_id}"
        )
        await self.tell(who, f"the last {tail} lines of `{run_id}`'s logs are in a file in its thread")

    async def _do_help(self, parsed: Parsed, who: Asker) -> None:  # normally answered in the ack itself
        topic = parsed.args.get("command")
        await self.tell(
            who, help_text(LAB, is_admin=self.is_admin(who.user), command_name=self.settings.command, topic=topic)
        )

    # -- stop / restart, from a command or a button ----------------------------------------------------------

    async def act(self, run_id: str, verb: str, who: Asker) -> None:
        run = await to_thread.run_sync(self.service.get, run_id)
        if not (who.user == run["owner"] or self.is_admin(who.user)):
            owner = f"<@{run['owner']}>" if run["owner"].startswith("U") else run["owner"]
            await self.tell(who, f":no_entry: only the run's owner ({owner}) or an admin can {verb} run `{run_id}`")
            return
        fn = self.service.stop if verb == "stop" else self.service.restart
        by = f"slack:{who.user}"
        run = await to_thread.run_sync(lambda: fn(run_id, by=by))
        past = "stopped the run" if verb == "stop" else f"restarted the run (attempt {run['attempt']})"
        await self.threads.record_action(run_id, f"<@{who.user}> {past}")
        await self.tell(who, f"run `{run_id}`: {past}")

    async def _permalink(self, channel: str, ts: str) -> str | None:
        try:
            resp = await self.client.chat_getPermalink(channel=channel, message_ts=ts)
            return str(resp["permalink"])
        except SlackApiError:
            return None
