"""Slack's agent surfaces for an answer: the text streamed into the thread as the agent writes it
(``chat.startStream`` / ``appendStream`` / ``stopStream``) and the assistant status line saying what the agent is doing
(``assistant.threads.setStatus``: "is reading the run's logs…"). An answer with a plan (the researcher's) streams in
Slack's plan display (``task_display_mode="plan"``): a ``plan_update`` titles it and each tool call is a task
(``task_update``: in progress, then complete or error), beside the text.

A workspace or plan without these methods refuses them (``not_allowed``, ``unknown_method``, ``missing_scope``…);
``SurfaceSupport`` remembers the first refusal of each surface for the life of the process, so every later answer
goes straight to the progress message of ``labbot.bot.slack.agent_threads`` (``method_not_supported_for_channel_type``
is remembered for that kind of conversation only). ``StreamedAnswer`` never loses text: what Slack did not take (a
refusal or a rate limit mid-answer, after the client's retries) is kept, and at the end the message is completed
(``stopStream`` with the rest) or replaced by the whole answer (``chat.update``; else a new message, the partial one
deleted), so the answer arrives complete, once.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, Literal

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from labbot.agents.fleet.runtime import AgentEvent
from labbot.bot.slack.blocks import text_blocks
from labbot.bot.slack.blocks.limits import MAX_BLOCKS
from labbot.bot.slack.blocks.run_card import clip

log = logging.getLogger(__name__)

Surface = Literal["stream", "status"]
REFUSALS = frozenset(
    {
        "not_allowed",
        "not_allowed_token_type",
        "method_not_supported_for_channel_type",
        "unknown_method",
        "missing_scope",
        "feature_not_enabled",
        "team_not_allowed",
        "access_denied",
    }
)
"""Slack's answers meaning "this workspace, plan or app does not offer the method": remembered, not retried."""
PER_CHANNEL_TYPE = "method_not_supported_for_channel_type"
MARKDOWN_MAX = 12_000  # chat.*Stream take at most this much markdown_text a call
PIECES_EVERY_S = 1.0  # the model's pieces go to Slack at most this often (the first at once)…
PIECES_CHARS = 600  # …or when this much is waiting
STATUS_EVERY_S = 2.0
STATUS_MAX = 50


def error_of(e: SlackApiError) -> str:
    return str(e.response.get("error") or "")


def conversation_kind(channel: str) -> str:
    """``im``, ``group`` or ``channel``, from the id's first letter (D…, G…, C…)."""
    return {"D": "im", "G": "group"}.get(channel[:1], "channel")


class SurfaceSupport:
    """Which agent surfaces this workspace offers, learned from the first refusal of each and remembered."""

    def __init__(self) -> None:
        self._refused: dict[str, str] = {}  # surface, or surface:conversation kind -> Slack's error

    def allows(self, surface: Surface, channel: str) -> bool:
        return surface not in self._refused and f"{surface}:{conversation_kind(channel)}" not in self._refused

    def refusal(self, surface: Surface, channel: str, error: str) -> bool:
        """Whether ``error`` means the surface is not offered (then it is remembered, and logged once)."""
        if error not in REFUSALS:
            return False
        key = f"{surface}:{conversation_kind(channel)}" if error == PER_CHANNEL_TYPE else surface
        if key not in self._refused:
            self._refused[key] = error
            log.info("Slack refused %s (%s): labbot uses its progress message there from now on", key, error)
        return True

    @property
    def refused(self) -> dict[str, str]:
        return dict(self._refused)


def status_of(event: AgentEvent) -> str:
    """What the agent is doing, as Slack's status line puts it after the app's name."""
    if event.kind == "retry":
        return "is waiting for the model…"
    if event.kind != "tool_call" or not event.tool:
        return "is thinking…"
    tool = event.tool
    server, _, name = tool.partition("__")
    if "logs" in name:
        return "is reading the run's logs…"
    if "metric" in name:
        return "is reading the run's metrics…"
    if "compare" in name:
        return "is comparing runs…"
    if server == "lab" and "page" in name:
        return "is looking at the pages…"
    if server == "lab" and "run" in name:
        return "is looking at the runs…"
    if server == "lab" and "artifact" in name:
        return "is reading its artifacts…"
    if tool == "delegate":
        return "is asking another agent…"
    where = {"codebase": "the code", "notion": "Notion", "linear": "Linear", "datadog": "Datadog"}.get(server)
    return f"is reading {where}…" if where else clip(f"is calling {tool}…", STATUS_MAX)


TASK_TITLES = {
    "lab__search_findings": "Read what the lab already found",
    "lab__plan_experiment": "Price a candidate experiment",
    "lab__propose_plan": "Propose the plan",
    "lab__show_plan": "Show the plan",
    "lab__start_research": "Ask for the plan's approval and start it",
    "lab__wait_for_research": "Wait for the experiments",
    "lab__research_status": "Read the question's progress",
    "lab__research_act": "Act on a failure, within the plan",
    "lab__check_claims": "Check the report's numbers",
    "lab__submit_report": "Report, every number checked",
}
TASK_TITLE_MAX = 256


def task_title(tool: str) -> str:
    """A tool call as a task of the plan display."""
    if tool in TASK_TITLES:
        return TASK_TITLES[tool]
    words = status_of(AgentEvent("tool_call", "", tool=tool)).removeprefix("is ").rstrip("…")
    return clip(words[:1].upper() + words[1:], TASK_TITLE_MAX)


class Status:
    """The assistant status line of one thread, set when what the agent does changes (at most every
    ``STATUS_EVERY_S``) and cleared at the end; nothing when the workspace refuses it."""

    def __init__(
        self,
        client: AsyncWebClient,
        support: SurfaceSupport,
        channel: str,
        thread_ts: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.support = support
        self.channel = channel
        self.thread_ts = thread_ts
        self.clock = clock
        self.shown = ""
        self.last_set: float | None = None

    async def set(self, status: str, *, now: bool = False) -> None:
        if status == self.shown or not self.support.allows("status", self.channel):
            return
        if not now:  # the first and the last status go at once, and open no window
            t = self.clock()
            if self.last_set is not None and t - self.last_set < STATUS_EVERY_S:
                return
            self.last_set = t
        try:
            await self.client.assistant_threads_setStatus(
                channel_id=self.channel, thread_ts=self.thread_ts, status=clip(status, STATUS_MAX)
            )
            self.shown = status
        except SlackApiError as e:
            if not self.support.refusal("status", self.channel, error_of(e)):
                log.info("status update failed: %s", error_of(e))

    def cleared_by_reply(self) -> None:
        """Slack clears the status when the app posts in the thread."""
        self.shown = ""

    async def clear(self) -> None:
        if self.shown:
            await self.set("", now=True)


class StreamedAnswer:
    """One answer streamed into a thread (see the module docstring). ``write`` adds text as the agent writes it;
    ``finish`` completes the message and returns its ts, or None when Slack refused the stream before it began
    (the caller posts the answer as it does without streaming)."""

    def __init__(
        self,
        client: AsyncWebClient,
        support: SurfaceSupport,
        *,
        channel: str,
        thread_ts: str,
        recipient_user_id: str,
        recipient_team_id: str | None,
        on_start: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
        plan: str | None = None,
    ) -> None:
        self.client = client
        self.clock = clock
        self.plan = clip(plan, TASK_TITLE_MAX) if plan else None  # the plan display's title; None: text alone
        self.turn_start: int | None = None  # where the turn being written piece by piece begins in ``text``
        self.dirty = False  # Slack shows pieces of a try that failed: the whole answer replaces the message at the end
        self.sent_at: float | None = None
        self.support = support
        self.channel = channel
        self.thread_ts = thread_ts
        outside_dm = conversation_kind(channel) != "im" and recipient_team_id  # Slack needs them outside DMs
        self.recipient_user_id = recipient_user_id if outside_dm else None
        self.recipient_team_id = recipient_team_id if outside_dm else None
        self.on_start = on_start
        self.ts: str | None = None
        self.text = ""  # everything written
        self.delivered = 0  # how much of it Slack has
        self.broken = False  # Slack stopped taking appends: the rest goes in at the end
        self.refused = False  # Slack refused the stream before it began
        self.pieces: list[str] = []

    async def write(self, piece: str) -> None:
        """A turn's whole text: after its pieces (``piece``), the turn as the model finished it."""
        piece = piece.strip()
        if self.turn_start is not None:
            start, self.turn_start = self.turn_start, None
            whole = (("\n\n" if start else "") + piece) if piece else ""
            shown = self.text[start : self.delivered].rstrip()  # what Slack already has of this turn
            if shown and not whole.startswith(shown):
                self.dirty = True  # (the model's whole differs from its pieces: repaired at the end)
            self.text = self.text[:start] + whole
            self.delivered = min(self.delivered, len(self.text))
            if piece:
                self.pieces.append(piece)
            if not (self.broken or self.refused or self.dirty):
                await self._send()
            return
        if not piece:
            return
        self.pieces.append(piece)
        self.text += ("\n\n" if self.text else "") + piece
        if not (self.broken or self.refused or self.dirty):
            await self._send()

    async def piece(self, text: str) -> None:
        """A piece of the turn the model is writing: sent at once when it is the answer's first, else with the
        others every ``PIECES_EVERY_S`` (or ``PIECES_CHARS``), so a long answer costs a call a second, not a call a
        token."""
        if self.turn_start is None:
            text = text.lstrip()
            if not text:
                return
            self.turn_start = len(self.text)
            if self.text:
                self.text += "\n\n"
        self.text += text
        if self.broken or self.refused or self.dirty:
            return
        now = self.clock()
        waiting = len(self.text) - self.delivered
        if self.sent_at is None or now - self.sent_at >= PIECES_EVERY_S or waiting >= PIECES_CHARS:
            self.sent_at = now
            await self._send()

    def void_turn(self) -> None:
        """The model's try failed mid-turn (a retry follows): the pieces of that turn are dropped; if Slack already
        shows some, the whole answer replaces the message at the end."""
        if self.turn_start is None:
            return
        if self.delivered > self.turn_start:
            self.dirty = True
        self.text = self.text[: self.turn_start]
        self.delivered = min(self.delivered, len(self.text))
        self.turn_start = None

    async def _send(self) -> None:
        """Hand Slack what it does not have yet, in calls of at most MARKDOWN_MAX characters."""
        while self.delivered < len(self.text):
            chunk = self.text[self.delivered : self.delivered + MARKDOWN_MAX]
            if not await self._add(markdown_text=chunk):
                return
            self.delivered += len(chunk)

    async def task(self, task_id: str, title: str, status: Literal["in_progress", "complete", "error"]) -> None:
        """One task of the plan display (a tool call) started or ended; nothing without a plan, or once Slack
        stopped taking the stream (the text still arrives whole at the end)."""
        if self.plan is None or self.refused or self.broken:
            return
        await self._add(chunks=[{"type": "task_update", "id": task_id, "title": clip(title, TASK_TITLE_MAX),
                                 "status": status}])  # fmt: skip

    async def _add(self, *, markdown_text: str | None = None, chunks: list[dict[str, Any]] | None = None) -> bool:
        """One call that adds to the message: ``chat.startStream`` (with the plan display, when there is a plan)
        while it has not begun, else ``chat.appendStream``. False when Slack refused it: a refusal before the
        message began is remembered (``refused``), one after it stops the appends (``broken``)."""
        try:
            if self.ts is None:
                start: dict[str, Any] = {"task_display_mode": "plan"} if self.plan is not None else {}
                opening = [{"type": "plan_update", "title": self.plan}] if self.plan is not None else []
                if opening or chunks:
                    start["chunks"] = [*opening, *(chunks or [])]
                resp = await self.client.chat_startStream(
                    channel=self.channel,
                    thread_ts=self.thread_ts,
                    markdown_text=markdown_text,
                    recipient_user_id=self.recipient_user_id,
                    recipient_team_id=self.recipient_team_id,
                    **start,
                )
                self.ts = str(resp["ts"])
                self.on_start()
            else:
                await self.client.chat_appendStream(
                    channel=self.channel, ts=self.ts, markdown_text=markdown_text, chunks=chunks
                )
        except SlackApiError as e:
            error = error_of(e)
            refused = self.support.refusal("stream", self.channel, error)
            if self.ts is None:
                self.refused = True
            else:
                self.broken = True
            log.info("streaming into %s stopped (%s%s)", self.thread_ts, error, ", refused" if refused else "")
            return False
        return True

    async def finish(self, answer: str, blocks: list[dict[str, Any]]) -> str | None:
        """Complete the message with ``answer`` (written now unless it was the last thing written) and ``blocks``
        under it; its ts, or None when the stream never began."""
        self.void_turn()  # pieces of a turn that never finished (the run stopped mid-way) are not the answer
        if not self.pieces or self.pieces[-1] != answer.strip():
            await self.write(answer)
        if self.ts is None:
            return None
        if self.dirty:
            return await self._replace(blocks)
        rest = self.text[self.delivered :]
        if len(rest) <= MARKDOWN_MAX:  # one last call takes the rest (after a rate limit too: the window has moved)
            try:
                await self.client.chat_stopStream(
                    channel=self.channel, ts=self.ts, markdown_text=rest or None, blocks=blocks or None
                )
                self.delivered = len(self.text)
                return self.ts
            except SlackApiError as e:
                log.info("could not stop the stream in %s (%s): replacing it", self.thread_ts, error_of(e))
        return await self._replace(blocks)

    async def _replace(self, blocks: list[dict[str, Any]]) -> str:
        """The partial message becomes the whole answer (else a new message does, the partial one deleted)."""
        assert self.ts is not None
        sections = (text_blocks(self.text) or [[]])[0]
        full = [*sections[: MAX_BLOCKS - len(blocks)], *blocks]
        with contextlib.suppress(SlackApiError):  # expired or refused: chat.update below ends it either way
            await self.client.chat_stopStream(channel=self.channel, ts=self.ts)
        try:
            await self.client.chat_update(channel=self.channel, ts=self.ts, text=clip(self.text, 3000), blocks=full)
            return self.ts
        except SlackApiError as e:
            log.info("could not replace the partial answer in %s (%s): posting it anew", self.thread_ts, error_of(e))
        posted = await self.client.chat_postMessage(
            channel=self.channel, thread_ts=self.thread_ts, text=clip(self.text, 3000), blocks=full
        )
        try:
            await self.client.chat_delete(channel=self.channel, ts=self.ts)
        except SlackApiError:
            log.info("the partial answer %s stays beside the whole one", self.ts)
        return str(posted["ts"])
