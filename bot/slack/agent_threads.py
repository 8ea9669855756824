"""Agents in Slack threads: a mention, ``/lab ask``, a reply in a run thread or a message in the assistant container
goes to the agent fleet; the answer is streamed into the thread as the agent writes it, with the assistant status
saying what it does (``labbot.bot.slack.streams``), or, where the workspace refuses streaming, the work is shown in
one progress message, updated at most every couple of seconds, then replaced by the answer. The answer carries
👍/👎 feedback buttons (``labbot.bot.slack.feedback``); destructive tool calls are asked in the thread with
Approve / Deny buttons.

``AgentThreads`` is what the Bolt handlers call (after their ack); ``SlackApprovalPrompter`` implements
``labbot.agents.fleet.approvals.ApprovalPrompter``. Without a model configured, a mention gets a plain answer saying how
to set one up, and everything else works as before.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any, Protocol

from anyio import to_thread
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from labbot.agents.fleet.approvals import ApprovalMessages, ApprovalRequest
from labbot.agents.fleet.model import NO_MODEL_MESSAGE
from labbot.agents.fleet.runtime import AgentEvent
from labbot.agents.fleet.sessions import SessionStore
from labbot.bot.slack.blocks import text_blocks
from labbot.bot.slack.blocks.limits import MAX_BLOCKS
from labbot.bot.slack.blocks.run_card import clip, escape, mention
from labbot.bot.slack.feedback import feedback_block
from labbot.bot.slack.streams import (
    Status,
    StreamedAnswer,
    SurfaceSupport,
    conversation_kind,
    status_of,
    task_title,
)
from labbot.storage.db import Database
from labbot.storage.run_threads import RunThreadStore

log = logging.getLogger(__name__)

PROGRESS_EVERY_S = 2.0
MENTION = re.compile(r"<@[A-Z0-9]+>")
SLACK_USER = re.compile(r"[UW][A-Z0-9]{2,}")
PLAN_ROLE = "researcher"  # whose answers stream in Slack's plan display: its tool calls as the plan's tasks
BRIEF = re.compile(r"^Research question \S+ \(research_id='\w+'\)[^:]*:\s*")  # /lab research's opening, not the title


class AsksFleet(Protocol):
    async def ask(
        self,
        *,
        owner: str,
        text: str,
        channel: str | None,
        thread_ts: str | None,
        run_id: str | None = None,
        role: str = "assistant",
        on_event: Any = None,
    ) -> Any: ...


class AgentThreads:
    def __init__(
        self,
        client: AsyncWebClient,
        db: Database,
        fleet: AsksFleet | None,
        *,
        support: SurfaceSupport | None = None,
        team_id: str | None = None,
    ) -> None:
        self.client = client
        self.db = db
        self.sessions = SessionStore(db)
        self.run_threads = RunThreadStore(db)
        self.fleet = fleet
        self.support = support or SurfaceSupport()  # which of Slack's agent surfaces answer, once learned
        self._team_id = team_id

    @property
    def configured(self) -> bool:
        return self.fleet is not None

    def has_session(self, channel: str, thread_ts: str) -> bool:
        """Whether an agent already talks in this thread (started by a mention or /lab ask)."""
        return self.sessions.find(channel, thread_ts) is not None

    def thread_of_run(self, run_id: str) -> tuple[str, str] | None:
        return self.run_threads.thread_of(run_id)

    def run_of_thread(self, channel: str, thread_ts: str) -> str | None:
        return self.run_threads.run_of_thread(channel, thread_ts)

    async def answer(
        self, *, user: str, text: str, channel: str, thread_ts: str, role: str = "assistant", run_id: str | None = None
    ) -> None:
        """Ask the fleet in this thread and post what it says: streamed as it is written, with the assistant status
        saying what the agent does; where Slack refuses streaming, one progress message, updated, then replaced."""
        question = MENTION.sub("", text).strip()
        if self.fleet is None:
            await self.client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=NO_MODEL_MESSAGE)
            return
        if not question:
            await self.client.chat_postMessage(
                channel=channel, thread_ts=thread_ts, text="Ask me something about your runs, code or pages."
            )
            return
        if run_id is None:
            run_id = await to_thread.run_sync(self.run_of_thread, channel, thread_ts)
        plan = await to_thread.run_sync(self.plan_title, channel, thread_ts, role, question)
        shown = ThreadAnswer(self, user=user, channel=channel, thread_ts=thread_ts, plan=plan)
        await shown.begin()
        try:
            answer = await self.fleet.ask(
                owner=user,
                text=question,
                channel=channel,
                thread_ts=thread_ts,
                run_id=run_id,
                role=role,
                on_event=shown.on_event,
            )
            reply = str(getattr(answer, "text", "") or "(no answer)")
            turn_id = getattr(answer, "turn_id", None)
        except Exception:
            log.exception("the agent failed in thread %s", thread_ts)
            reply = ":warning: the agent failed inside labbot; the error is in labbot's log. Ask again in a moment."
            turn_id = None
        await shown.finish(reply, turn_id)

    def plan_title(self, channel: str, thread_ts: str, role: str, question: str) -> str | None:
        """The plan display's title for an answer of the researcher (the role asked for, or the thread's session's),
        else None: other roles stream their text alone. Blocking: it may read the thread's session."""
        session = self.sessions.find(channel, thread_ts)
        if (session.role if session is not None else role) != PLAN_ROLE:
            return None
        return f"Research: {BRIEF.sub('', question, count=1)}"

    async def team_id(self) -> str | None:
        """The workspace's id (streams outside DMs name their recipient's team): asked of Slack once."""
        if self._team_id is None:
            try:
                self._team_id = str((await self.client.auth_test()).get("team_id") or "")
            except SlackApiError as e:
                log.info("auth.test failed: %s", e.response.get("error"))
                return None
        return self._team_id or None

    async def _post_answer(
        self,
        channel: str,
        thread_ts: str,
        progress_ts: str | None,
        reply: str,
        summary: str,
        turn_id: str | None = None,
    ) -> None:
        """The answer replaces the progress message (continued in more messages when long); the last carries the
        👍/👎 buttons of the answer's turn, and the first is recorded as the answer's message."""
        messages = text_blocks(reply) or [[]]
        if summary:
            messages[0] = [*messages[0], summary_block(summary)]
        if turn_id is not None:
            if len(messages[-1]) < MAX_BLOCKS:
                messages[-1] = [*messages[-1], feedback_block(turn_id)]
            else:
                messages.append([feedback_block(turn_id)])
        first, rest = messages[0], messages[1:]
        answer_ts = None
        if progress_ts is not None:
            if turn_id is not None:  # before its 👍/👎 show: a quick vote finds the turn
                await self.posted(turn_id, channel, progress_ts)
            try:  # the progress message becomes the answer: the thread shows no leftover "working on it"
                await self.client.chat_update(channel=channel, ts=progress_ts, text=clip(reply, 3000), blocks=first)
                answer_ts = progress_ts
            except SlackApiError:
                pass
        if answer_ts is None:
            posted = await self.client.chat_postMessage(
                channel=channel, thread_ts=thread_ts, text=clip(reply, 3000), blocks=first
            )
            answer_ts = str(posted["ts"])
            if turn_id is not None:
                await self.posted(turn_id, channel, answer_ts)
        for more in rest:
            await self.client.chat_postMessage(channel=channel, thread_ts=thread_ts, text="(continued)", blocks=more)

    async def posted(self, turn_id: str, channel: str, ts: str) -> None:
        await to_thread.run_sync(self.sessions.posted, turn_id, channel, ts)


def summary_block(summary: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": summary}]}


def tool_summary(tools: list[str]) -> str:
    if not tools:
        return ""
    unique = list(dict.fromkeys(tools))
    return f"used {len(tools)} tool call(s): " + ", ".join(f"`{t}`" for t in unique[:8])


class ThreadAnswer:
    """How one answer is shown while the agent works: streamed (``labbot.bot.slack.streams``) with the assistant
    status, or, where the workspace refuses streaming (remembered from the first refusal), today's progress
    message."""

    def __init__(
        self, talks: AgentThreads, *, user: str, channel: str, thread_ts: str, plan: str | None = None
    ) -> None:
        self.talks = talks
        self.plan = plan  # the plan display's title (the researcher's answers), else text alone
        self.open_tasks: list[tuple[str, str]] = []  # (tool, task id) of the tool calls still running, oldest first
        self.client = talks.client
        self.user = user
        self.channel = channel
        self.thread_ts = thread_ts
        self.status = Status(self.client, talks.support, channel, thread_ts)
        self.stream: StreamedAnswer | None = None
        self.progress: Progress | None = None
        self.tools: list[str] = []

    async def begin(self) -> None:
        # a stream is addressed to the human who asked; labbot's own asks (the investigator's) have none
        if not self.talks.support.allows("stream", self.channel) or not SLACK_USER.fullmatch(self.user):
            await self._progress()
            return
        team = await self.talks.team_id() if conversation_kind(self.channel) != "im" else None
        self.stream = StreamedAnswer(
            self.client,
            self.talks.support,
            channel=self.channel,
            thread_ts=self.thread_ts,
            recipient_user_id=self.user,
            recipient_team_id=team,
            on_start=self.status.cleared_by_reply,
            plan=self.plan,
        )
        await self.status.set("is thinking…", now=True)

    async def _progress(self) -> None:
        posted = await self.client.chat_postMessage(
            channel=self.channel, thread_ts=self.thread_ts, text=":hourglass_flowing_sand: working on it…"
        )
        self.progress = Progress(self.client, self.channel, str(posted["ts"]))

    async def on_event(self, event: AgentEvent) -> None:
        if event.kind == "tool_call" and event.tool:
            self.tools.append(event.tool)
        if event.kind in ("tool_call", "tool_done") and event.tool and self.stream is not None:
            await self._task(event)
        if event.kind in ("text", "text_delta"):
            if self.stream is not None and not self.stream.refused:
                if event.kind == "text":
                    await self.stream.write(event.text)
                else:
                    await self.stream.piece(event.text)
                if self.stream.refused and self.progress is None:  # refused as it began: the progress message
                    await self._progress()
            return
        if event.kind == "retry" and self.stream is not None:
            self.stream.void_turn()  # the model's try failed mid-turn: what it wrote of that turn is void
        if self.progress is not None:
            await self.progress.on_event(event)
        else:
            await self.status.set(status_of(event))

    async def _task(self, event: AgentEvent) -> None:
        """A tool call as a task of the plan display: in progress when called, complete (or error) when done."""
        assert self.stream is not None and event.tool is not None
        if event.kind == "tool_call":
            task_id = f"t{len(self.tools)}"
            self.open_tasks.append((event.tool, task_id))
            await self.stream.task(task_id, task_title(event.tool), "in_progress")
            return
        found = next((t for t in self.open_tasks if t[0] == event.tool), None)
        if found is not None:
            self.open_tasks.remove(found)
            await self.stream.task(found[1], task_title(event.tool), "error" if event.is_error else "complete")

    async def finish(self, reply: str, turn_id: str | None) -> None:
        summary = tool_summary(self.tools)
        if self.stream is not None and not self.stream.refused:
            blocks = [summary_block(summary)] if summary else []
            if turn_id is not None:
                blocks.append(feedback_block(turn_id))
            if turn_id is not None and self.stream.ts is not None:  # before its 👍/👎 show: a vote finds the turn
                await self.talks.posted(turn_id, self.channel, self.stream.ts)
            started = self.stream.ts
            ts = await self.stream.finish(reply, blocks)
            if ts is not None:
                if turn_id is not None and ts != started:
                    await self.talks.posted(turn_id, self.channel, ts)
                await self.status.clear()
                return
        progress_ts = self.progress.ts if self.progress is not None else None
        await self.talks._post_answer(self.channel, self.thread_ts, progress_ts, reply, summary, turn_id)
        await self.status.clear()


class Progress:
    """The progress message: the agent's latest step, updated at most every ``PROGRESS_EVERY_S``."""

    def __init__(self, client: AsyncWebClient, channel: str, ts: str, clock: Callable[[], float] = time.monotonic):
        self.client = client
        self.channel = channel
        self.ts = ts
        self.clock = clock
        self.last_update = 0.0

    async def on_event(self, event: AgentEvent) -> None:
        if event.kind in ("text", "text_delta"):
            return  # the answer replaces this message at the end
        now = self.clock()
        if now - self.last_update < PROGRESS_EVERY_S:
            return
        self.last_update = now
        text = f":hourglass_flowing_sand: {escape(event.text)}…"
        try:
            await self.client.chat_update(channel=self.channel, ts=self.ts, text=text)
        except SlackApiError as e:
            log.info("progress update failed: %s", e.response.get("error"))


def approval_blocks(request: ApprovalRequest) -> tuple[str, list[dict[str, Any]]]:
    """The prompt for a destructive tool call, or (once decided) what became of it."""
    approvers = " or ".join([*(mention(u) for u in request.approvers), "an admin"])
    head = f":raised_hand: The *{escape(request.role)}* agent wants to run `{escape(request.tool)}`"
    args = f"```\n{clip(escape(request.arguments), 2800)}\n```"
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": head}},
        {"type": "section", "text": {"type": "mrkdwn", "text": args}},
    ]
    if request.state == "pending":
        blocks.append(
            {"type": "context", "elements": [{"type": "mrkdwn", "text": f"needs {approvers} · request `{request.id}`"}]}
        )
        blocks.append(
            {
                "type": "actions",
                "block_id": f"approval_{request.id}",
                "elements": [
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Approve"},
                        "style": "primary",
                        "action_id": "approval_approve",
                        "value": request.id,
                    },
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Deny"},
                        "style": "danger",
                        "action_id": "approval_deny",
                        "value": request.id,
                    },
                ],
            }
        )
        text = f"{request.role} agent wants to run {request.tool}: needs {approvers}"
    else:
        verdict = {
            "approved": ":white_check_mark: approved",
            "denied": ":no_entry: denied",
            "expired": ":hourglass: expired",
        }
        by = request.decided_by or "?"
        who = mention(by) if by.startswith(("U", "W")) else escape(by)
        line = f"{verdict.get(request.state, request.state)} by {who} · request `{request.id}`"
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": line}]})
        text = f"{request.tool}: {request.state} by {by}"
    return text, blocks


class SlackApprovalPrompter:
    """``ApprovalPrompter`` in Slack: the prompt is posted in the agent's thread and updated once decided."""

    def __init__(self, client: AsyncWebClient, db: Database) -> None:
        self.client = client
        self.db = db
        self.messages = ApprovalMessages(db)

    async def ask(self, request: ApprovalRequest) -> None:
        text, blocks = approval_blocks(request)
        resp = await self.client.chat_postMessage(
            channel=str(request.channel), thread_ts=request.thread_ts, text=text, blocks=blocks
        )
        await to_thread.run_sync(self.messages.remember, request.id, str(resp["ts"]))

    async def settled(self, request: ApprovalRequest) -> None:
        ts = await to_thread.run_sync(self.messages.message_ts, request.id)
        if ts and request.channel:
            text, blocks = approval_blocks(request)
            await self.client.chat_update(channel=request.channel, ts=ts, text=text, blocks=blocks)
