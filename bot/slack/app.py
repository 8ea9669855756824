"""The Bolt app: every Slack listener of labbot, each one acking first and handing the work to a background task.

Listeners, registered in groups (one ``register_*`` function each): the ``/lab`` slash command (name from
``[slack] command``), the card's Stop / Restart buttons, the pages' Ack / Resolve / File incident buttons, the
agents' Approve / Deny buttons, thread replies and ``@labbot`` mentions, the 👍/👎 buttons under answers, the "what
went wrong?" modal and 👍/👎 reactions (``labbot.bot.slack.feedback``), the App Home tab (``app_home_opened`` and its
page buttons: ``labbot.bot.slack.home``), the assistant container (``assistant_thread_started``: suggested prompts;
messages in the app's DM are questions for the agent). What they do once acked is in ``labbot.bot.slack.handlers``.
Global middleware (``labbot.bot.slack.middleware.DropRepeats``) drops Slack's retries of events already seen (by
``event_id``) and messages from bots; Bolt itself ignores the bot's own events. Requests over HTTP are verified
(size, signature, 5-minute window) before they reach Bolt, at the door (``labbot.bot.slack.http``), so Bolt's own
verification, which logs the body of a request that fails it, is off; Socket Mode needs none (Slack's websocket is
authenticated by the app token). A signed request replayed inside that window acts once: every command and button
is acted on once per Slack ``trigger_id`` (``ReplayGuard``), kept in the database far longer than the window (a
replay after a restart, or at another replica, is caught too), on top of the per-run double-click guard and the
launch's idempotency key.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from anyio import to_thread
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError

from labbot.agents.fleet.model import NO_MODEL_MESSAGE
from labbot.bot.commands import LAB, UsageError, parse
from labbot.bot.slack.blocks import ephemeral_error
from labbot.bot.slack.blocks.home import PAGE_ACTION as HOME_PAGE_ACTION
from labbot.bot.slack.dedup import SeenKeys
from labbot.bot.slack.feedback import ACTION_ID as FEEDBACK_ACTION
from labbot.bot.slack.feedback import MODAL_CALLBACK as FEEDBACK_MODAL
from labbot.bot.slack.feedback import SlackFeedback
from labbot.bot.slack.handlers import Asker, SlackDeps, dispatch
from labbot.bot.slack.handlers.agents import decide_approval
from labbot.bot.slack.handlers.common import run_safely
from labbot.bot.slack.handlers.help import help_for
from labbot.bot.slack.handlers.pages import file_incident, page_action
from labbot.bot.slack.handlers.runs import stop_or_restart
from labbot.bot.slack.home import AppHome
from labbot.bot.slack.http import NOT_ACTIONABLE, failure
from labbot.bot.slack.middleware import EVENTS_TTL_S, DropRepeats, ReplayGuard
from labbot.bot.slack.prompts import suggested_prompts
from labbot.bot.slack.tasks import TaskSet
from labbot.storage.seen import DurableSeenKeys

log = logging.getLogger(__name__)

# how long a command's or click's trigger id is remembered: well past Bolt's 5-minute signature window, so a signed
# request replayed while its signature is still valid finds its id here
REPLAY_TTL_S = 3600.0
DOUBLE_CLICK_S = 10.0  # two clicks of one button by one person this close are one click

NO_AGENT = (
    "No model is configured, so no agent will answer here; I keep your replies with the run. "
    "(Set ANTHROPIC_API_KEY and restart labbot to talk to agents in threads.)"
)

ButtonWork = Callable[[str, Asker], Awaitable[None]]


@dataclass(frozen=True)
class Listeners:
    """What every group of listeners shares: the handlers' dependencies, the task set their work runs in, the
    replay guard and the double-click guard."""

    deps: SlackDeps
    tasks: TaskSet
    replays: ReplayGuard
    clicks: SeenKeys

    async def clicked(self, ack: AsyncAck, body: dict[str, Any], verb: str, work: ButtonWork) -> None:
        """Every button: ack at once; a double click acts once; the work runs after, its errors told to the clicker."""
        await ack()
        if await self.replays.replayed("action", body):
            return
        user, value = body["user"]["id"], str(body["actions"][0].get("value") or "")
        if not value:  # a button labbot did not make: each of its own carries the run, page or approval it acts on
            log.info("a %s click without a value was ignored", verb)
            return
        channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id") or ""
        if not self.clicks.first_time(f"{user}:{verb}:{value}"):
            return  # a double click: acted on once
        who = Asker(user=user, channel=channel)
        self.tasks.spawn(run_safely(self.deps, work(value, who), who), name=f"button {verb}")

    async def say_in_thread(self, channel: str, thread_ts: str, text: str) -> None:
        """labbot's own word in a thread (no agent to answer): Slack's refusal of it (a thread gone, a channel the
        app is not in) is a warning line, not a failed task."""
        try:
            await self.deps.client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text)
        except SlackApiError as e:
            log.warning("could not reply in %s (thread %s): %s", channel, thread_ts, e.response.get("error"))


def build_app(
    *,
    deps: SlackDeps,
    signing_secret: str | None,
    tasks: TaskSet,
    triggers: SeenKeys | DurableSeenKeys,
    feedback: SlackFeedback | None = None,
    home: AppHome | None = None,
) -> AsyncApp:
    """``triggers`` remembers the trigger ids acted on: ``DurableSeenKeys`` in labbot (across restarts and
    replicas)."""
    # HTTP requests are verified at the door (labbot.bot.slack.http.events_route), Socket Mode's by the app token
    app = AsyncApp(
        client=deps.client,
        signing_secret=signing_secret,
        request_verification_enabled=False,
        process_before_response=False,
    )
    app.middleware(DropRepeats(SeenKeys(ttl_s=EVENTS_TTL_S)))
    on = Listeners(deps, tasks, ReplayGuard(triggers), SeenKeys(ttl_s=DOUBLE_CLICK_S))
    register_commands(app, on)
    register_run_buttons(app, on)
    register_page_buttons(app, on)
    register_approval_buttons(app, on)
    register_agent_threads(app, on)
    register_feedback(app, on, feedback)
    register_home(app, on, home)
    register_assistant(app, on)
    register_errors(app)
    return app


def register_commands(app: AsyncApp, on: Listeners) -> None:
    """``/lab``: a usage error or ``help`` is answered in the ack itself; the rest after it (``dispatch``)."""
    deps = on.deps

    @app.command(deps.command)
    async def on_command(ack: AsyncAck, body: dict[str, Any]) -> None:
        user, channel = body["user_id"], body["channel_id"]
        parsed = parse(body.get("text", ""), LAB)
        if isinstance(parsed, UsageError):
            text, blocks = ephemeral_error(parsed.message, parsed.usage)
            await ack(response_type="ephemeral", text=text, blocks=blocks)
            return
        if parsed.command.name == "help":
            await ack(response_type="ephemeral", text=help_for(deps, user, parsed.args.get("command")))
            return
        await ack()  # within Slack's 3 s, whatever the work: the work runs after
        if await on.replays.replayed("command", body):
            return
        who = Asker(user=user, channel=channel, trigger_id=body.get("trigger_id"))
        on.tasks.spawn(dispatch(deps, parsed, who), name=f"lab {parsed.command.name}")


def register_run_buttons(app: AsyncApp, on: Listeners) -> None:
    """The run card's Stop and Restart."""
    deps = on.deps

    def run_verb(verb: str) -> ButtonWork:
        return lambda run_id, who: stop_or_restart(deps, run_id, verb, who)

    @app.action("run_stop")
    async def on_stop(ack: AsyncAck, body: dict[str, Any]) -> None:
        await on.clicked(ack, body, "stop", run_verb("stop"))

    @app.action("run_restart")
    async def on_restart(ack: AsyncAck, body: dict[str, Any]) -> None:
        await on.clicked(ack, body, "restart", run_verb("restart"))


def register_page_buttons(app: AsyncApp, on: Listeners) -> None:
    """A page's Ack, Resolve and File incident."""
    deps = on.deps

    def page_verb(verb: str) -> ButtonWork:
        return lambda page_id, who: page_action(deps, page_id, verb, who)

    @app.action("page_ack")
    async def on_page_ack(ack: AsyncAck, body: dict[str, Any]) -> None:
        await on.clicked(ack, body, "page-ack", page_verb("ack"))

    @app.action("page_resolve")
    async def on_page_resolve(ack: AsyncAck, body: dict[str, Any]) -> None:
        await on.clicked(ack, body, "page-resolve", page_verb("resolve"))

    @app.action("page_file")
    async def on_page_file(ack: AsyncAck, body: dict[str, Any]) -> None:
        await on.clicked(ack, body, "page-file", lambda page_id, who: file_incident(deps, page_id, who))


def register_approval_buttons(app: AsyncApp, on: Listeners) -> None:
    """Approve and Deny under an agent's ask for approval."""
    deps = on.deps

    def decide(approve: bool) -> ButtonWork:
        return lambda approval_id, who: decide_approval(deps, approval_id, approve, who)

    @app.action("approval_approve")
    async def on_approve(ack: AsyncAck, body: dict[str, Any]) -> None:
        await on.clicked(ack, body, "approval", decide(True))

    @app.action("approval_deny")
    async def on_deny(ack: AsyncAck, body: dict[str, Any]) -> None:
        await on.clicked(ack, body, "approval", decide(False))


def register_agent_threads(app: AsyncApp, on: Listeners) -> None:
    """Messages (replies in run threads and agents' threads, the app's DM) and ``@labbot`` mentions."""
    deps = on.deps

    async def in_thread(event: dict[str, Any], bot_user: str | None) -> None:
        thread_ts = event.get("thread_ts")
        talks = deps.conversations
        if event.get("channel_type") == "im":
            # the assistant container (and the app's DM): every message is a question, answered in its thread; with
            # no model, the answer says so (silence reads as a broken bot)
            text = event.get("text", "")
            if text.strip():
                where = str(thread_ts or event["ts"])
                if talks is not None and talks.configured:
                    await talks.answer(user=event.get("user", ""), text=text, channel=event["channel"], thread_ts=where)
                else:
                    await on.say_in_thread(event["channel"], where, NO_MODEL_MESSAGE)
            return
        if not thread_ts or thread_ts == event.get("ts"):
            return
        channel, user, text = event["channel"], event.get("user", ""), event.get("text", "")
        reply = await deps.threads.store_reply(channel, thread_ts, user, event["ts"], text)
        if talks is not None and talks.configured:
            if bot_user and f"<@{bot_user}>" in text:
                return  # a mention: the app_mention event answers it
            in_session = reply is not None or await to_thread.run_sync(talks.has_session, channel, thread_ts)
            if in_session:
                run_id = reply.run_id if reply is not None else None
                await talks.answer(user=user, text=text, channel=channel, thread_ts=thread_ts, run_id=run_id)
            return
        if reply is not None and reply.first_without_agent:
            await on.say_in_thread(channel, thread_ts, NO_AGENT)

    @app.event("message")
    async def on_message(ack: AsyncAck, event: dict[str, Any], context: AsyncBoltContext) -> None:
        await ack()
        if event.get("subtype") not in (None, "thread_broadcast", "file_share"):
            return  # edits, deletions, joins: nothing to do
        on.tasks.spawn(in_thread(event, context.bot_user_id), name="thread reply")

    @app.event("app_mention")
    async def on_mention(ack: AsyncAck, event: dict[str, Any]) -> None:
        await ack()
        text = re.sub(r"<@[A-Z0-9]+>", "", event.get("text", "")).strip()
        talks = deps.conversations
        thread_ts = event.get("thread_ts") or event["ts"]  # a mention in the channel starts a thread on itself
        if talks is None:
            hint = f"Try `{deps.command} help`." if not text else NO_MODEL_MESSAGE
            on.tasks.spawn(on.say_in_thread(event["channel"], thread_ts, hint), name="mention")
            return
        answer = talks.answer(user=event.get("user", ""), text=text, channel=event["channel"], thread_ts=thread_ts)
        on.tasks.spawn(answer, name="agent")


def register_feedback(app: AsyncApp, on: Listeners, feedback: SlackFeedback | None) -> None:
    """👍/👎 buttons, the "what went wrong?" modal and reactions. A vote is idempotent (one row per message and
    voter, the latest vote), so neither the replay guard nor the double-click guard stands in its way: a changed mind
    within seconds must count."""

    @app.action(FEEDBACK_ACTION)
    async def on_feedback(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        if feedback is not None:
            on.tasks.spawn(feedback.button(body), name="feedback")

    @app.view(FEEDBACK_MODAL)
    async def on_feedback_comment(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()  # the modal closes; the comment is stored after
        if feedback is not None:
            on.tasks.spawn(feedback.comment(body), name="feedback comment")

    @app.event("reaction_added")
    async def on_reaction_added(ack: AsyncAck, event: dict[str, Any]) -> None:
        await ack()
        if feedback is not None:
            on.tasks.spawn(feedback.reaction(event, added=True), name="reaction")

    @app.event("reaction_removed")
    async def on_reaction_removed(ack: AsyncAck, event: dict[str, Any]) -> None:
        await ack()
        if feedback is not None:
            on.tasks.spawn(feedback.reaction(event, added=False), name="reaction")


def register_home(app: AsyncApp, on: Listeners, home: AppHome | None) -> None:
    """The App Home tab: opened, and its "Older runs" / "Newer runs" buttons."""

    @app.event("app_home_opened")
    async def on_home_opened(ack: AsyncAck, event: dict[str, Any]) -> None:
        await ack()
        if home is not None and event.get("tab", "home") == "home" and event.get("user"):
            on.tasks.spawn(home.opened(str(event["user"])), name="home tab")

    @app.action(re.compile(rf"^{HOME_PAGE_ACTION}_\d+$"))
    async def on_home_page(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        value = str(body["actions"][0].get("value", "0"))
        if home is not None and value.isdigit():
            on.tasks.spawn(home.show_page(body["user"]["id"], int(value)), name="home tab page")


def register_assistant(app: AsyncApp, on: Listeners) -> None:
    """The assistant container: suggested prompts when a thread starts (its messages are ``message`` events)."""

    @app.event("assistant_thread_started")
    async def on_assistant_thread(ack: AsyncAck, event: dict[str, Any]) -> None:
        await ack()
        thread = event.get("assistant_thread") or {}
        if thread.get("channel_id") and thread.get("thread_ts"):
            on.tasks.spawn(suggested_prompts(on.deps.client, thread), name="suggested prompts")

    @app.event("assistant_thread_context_changed")
    async def on_assistant_context(ack: AsyncAck) -> None:
        await ack()  # the prompts do not depend on the channel the researcher looks at


def register_errors(app: AsyncApp) -> None:
    @app.error
    async def on_error(error: Exception, response: BoltResponse | None) -> BoltResponse | None:
        """What Bolt does with an exception in a middleware or listener: one line in the log, no traceback (the
        door's shape rules keep Slack's input from raising: what still does is a bug, named by type and place);
        a 400 when Slack is still waiting for the answer, nothing more once the listener had acked."""
        log.error("a Slack listener failed (%s)", failure(error))
        if response is None:
            return None
        return BoltResponse(status=400, body={"error": {"code": "bad_request", "message": NOT_ACTIONABLE}})
