"""The emulator's Web API methods for Slack's AI-app surfaces: streamed messages, assistant threads and the home tab.

``chat.startStream`` / ``chat.appendStream`` / ``chat.stopStream`` write one message in a thread as it grows (its
``text`` is the markdown so far; ``stopStream`` may put blocks under it); ``assistant.threads.setStatus`` and
``assistant.threads.setSuggestedPrompts`` keep a thread's status line ("is reading the run's logs…") and the
prompts the assistant container offers; ``views.publish`` keeps each user's home tab. Arguments are checked the way
slack_sdk sends them and Slack refuses them (Slack's 2021 OpenAPI document predates these methods, so slack_sdk's
signatures are the reference: ``tests/bot/console/test_emulator_surfaces.py``).

`SurfaceMethods` is mixed into `labbot.bot.console.methods.SlackWorkspace`, which routes the methods here.
"""

from __future__ import annotations

import uuid
from typing import Any

from labbot.bot.console.blocks import MARKDOWN_TOTAL_MAX, VIEW_MAX_BLOCKS, block_errors
from labbot.bot.console.model import ApiError, Channel, Message
from labbot.bot.console.workspace import Params, WorkspaceState, check_message_blocks

CHUNK_TYPES = frozenset({"markdown_text", "task_update", "plan_update"})
TASK_STATUSES = frozenset({"pending", "in_progress", "complete", "error"})
PROMPTS_MAX = 4
STATUS_MAX = 50


def _text(p: Params, key: str) -> str | None:
    value = p.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError("invalid_arguments", detail=f"{key} must be a string")
    return value


def _required(p: Params, key: str) -> str:
    value = _text(p, key)
    if not value:
        raise ApiError("invalid_arguments", detail=f"{key} is required")
    return value


def streamed_text(p: Params) -> str | None:
    """The markdown one stream call adds: ``markdown_text`` and the ``markdown_text`` chunks, in order; None when
    the call carries neither."""
    text = _text(p, "markdown_text")
    chunks = p.get("chunks")
    if chunks is None:
        pieces = [] if text is None else [text]
    else:
        if not isinstance(chunks, list) or not all(isinstance(c, dict) for c in chunks):
            raise ApiError("invalid_chunks", detail="chunks must be an array of objects")
        pieces = [] if text is None else [text]
        for chunk in chunks:
            if chunk.get("type") not in CHUNK_TYPES:
                raise ApiError("invalid_chunks", detail=f"unsupported chunk type {chunk.get('type')!r}")
            if chunk.get("type") == "markdown_text":
                pieces.append(str(chunk.get("text") or ""))
    if not pieces:
        return None
    added = "".join(pieces)
    if len(added) > MARKDOWN_TOTAL_MAX:
        raise ApiError("msg_too_long", detail=f"markdown_text is limited to {MARKDOWN_TOTAL_MAX} characters a call")
    return added


def streamed_tasks(p: Params) -> list[dict[str, str]]:
    """The ``task_update`` and ``plan_update`` chunks of one stream call, checked as Slack checks them."""
    out: list[dict[str, str]] = []
    for chunk in p.get("chunks") or []:
        kind = chunk.get("type") if isinstance(chunk, dict) else None
        if kind == "plan_update":
            if not isinstance(chunk.get("title"), str) or not chunk["title"].strip():
                raise ApiError("invalid_chunks", detail="a plan_update chunk needs a title")
            out.append({"type": kind, "title": chunk["title"]})
        elif kind == "task_update":
            for key in ("id", "title"):
                if not isinstance(chunk.get(key), str) or not chunk[key].strip():
                    raise ApiError("invalid_chunks", detail=f"a task_update chunk needs its {key}")
            if chunk.get("status") not in TASK_STATUSES:
                raise ApiError("invalid_chunks", detail=f"task status {chunk.get('status')!r} is not one of "
                               f"{', '.join(sorted(TASK_STATUSES))}")  # fmt: skip
            out.append({"type": kind, "id": chunk["id"], "title": chunk["title"], "status": chunk["status"]})
    return out


class SurfaceMethods(WorkspaceState):
    """Streams, assistant threads and home tabs (see the module docstring)."""

    # ----------------------------------------------------------------- reading state (console, tests)

    def home_view(self, user_id: str) -> dict[str, Any] | None:
        """The home tab last published for ``user_id`` (with its ``id`` and ``hash``), or None."""
        with self._lock:
            view = self._homes.get(user_id)
            return dict(view) if view else None

    def home_publishes(self, user_id: str) -> int:
        """How many times a home tab was published for ``user_id``."""
        with self._lock:
            return self._home_publishes.get(user_id, 0)

    def assistant_status(self, channel: str, thread_ts: str) -> str:
        """The status line an assistant thread shows now ("" when none)."""
        with self._lock:
            return self._statuses.get((self._channel(channel).id, thread_ts), "")

    def suggested_prompts(self, channel: str, thread_ts: str | None = None) -> list[dict[str, str]]:
        with self._lock:
            return list(self._prompts.get((self._channel(channel).id, thread_ts), []))

    # ----------------------------------------------------------------- streams

    def _stream_message(self, ch: Channel, p: Params) -> Message:
        m = self._own(ch, _required(p, "ts"), "cant_update_message")
        if not m.streaming:
            raise ApiError("message_not_in_streaming_state")
        return m

    def _chat_start_stream(self, p: Params, _: Any) -> Params:
        ch = self._channel(p.get("channel"))
        parent = self._thread_parent(ch, _required(p, "thread_ts"))
        recipient = _text(p, "recipient_user_id")
        if not ch.is_im and not (recipient and _text(p, "recipient_team_id")):
            raise ApiError("invalid_arguments", detail="a stream in a channel names its recipient")
        if recipient is not None and recipient not in self._users:
            raise ApiError("user_not_found")
        mode = _text(p, "task_display_mode")
        if mode is not None and mode not in ("timeline", "plan"):
            raise ApiError("invalid_arguments", detail="task_display_mode is timeline or plan")
        text = streamed_text(p) or ""
        tasks = streamed_tasks(p)
        m = Message(
            self._clock.next(), ch.id, self.bot_user_id, text, bot_id=self.bot_id, app_id=self.app_id,
            streaming=True, streamed=True,
        )  # fmt: skip
        self._apply_tasks(m, tasks)
        self._store(ch, m, parent, "posted")
        self._task_events(m, tasks)
        return {"channel": ch.id, "ts": m.ts}

    @staticmethod
    def _apply_tasks(m: Message, tasks: list[dict[str, str]]) -> None:
        for t in tasks:
            if t["type"] == "plan_update":
                m.plan_title = t["title"]
            else:
                m.tasks[t["id"]] = {"title": t["title"], "status": t["status"]}

    def _task_events(self, m: Message, tasks: list[dict[str, str]]) -> None:
        for t in tasks:
            if t["type"] == "task_update":
                self._pending.append(self._event("task", m, f"{t['status']} {t['title']}"))

    def _chat_append_stream(self, p: Params, _: Any) -> Params:
        ch = self._channel(p.get("channel"))
        m = self._stream_message(ch, p)
        added = streamed_text(p)
        tasks = streamed_tasks(p)
        if not added and not tasks:
            raise ApiError("no_text")
        self._apply_tasks(m, tasks)
        if added:
            m.text += added
            self._pending.append(self._event("appended", m, added))
        self._task_events(m, tasks)
        return {"channel": ch.id, "ts": m.ts}

    def _chat_stop_stream(self, p: Params, _: Any) -> Params:
        ch = self._channel(p.get("channel"))
        m = self._stream_message(ch, p)
        blocks = p.get("blocks")
        check_message_blocks(blocks)
        added = streamed_text(p) or ""
        m.text += added
        m.blocks = list(blocks or [])
        if isinstance(p.get("metadata"), dict):
            m.metadata = p["metadata"]
        m.streaming = False
        if added:
            self._pending.append(self._event("appended", m, added))
        self._emit("updated", m)
        return {"channel": ch.id, "ts": m.ts, "message": self._message_api(ch, m)}

    # ----------------------------------------------------------------- assistant threads

    def _assistant_threads_set_status(self, p: Params, _: Any) -> Params:
        ch = self._channel(p.get("channel_id"))
        parent = self._thread_parent(ch, _required(p, "thread_ts"))
        status = _text(p, "status")
        if status is None:
            raise ApiError("invalid_arguments", detail="status is required (empty clears it)")
        if len(status) > STATUS_MAX:
            raise ApiError("invalid_arguments", detail=f"status is limited to {STATUS_MAX} characters")
        loading = p.get("loading_messages")
        if loading is not None and not (isinstance(loading, list) and all(isinstance(x, str) for x in loading)):
            raise ApiError("invalid_arguments", detail="loading_messages must be an array of strings")
        self._set_status(ch, parent, status)
        return {}

    def _set_status(self, ch: Channel, parent: str, status: str) -> None:
        key = (ch.id, parent)
        if self._statuses.get(key, "") == status:
            return
        if status:
            self._statuses[key] = status
        else:
            self._statuses.pop(key, None)
        self._pending.append(self._event("status", ch.messages[parent], status))

    def _assistant_threads_set_suggested_prompts(self, p: Params, _: Any) -> Params:
        ch = self._channel(p.get("channel_id"))
        thread = _text(p, "thread_ts")
        if thread:
            self._thread_parent(ch, thread)
        prompts = p.get("prompts")
        if not isinstance(prompts, list) or not 0 < len(prompts) <= PROMPTS_MAX:
            raise ApiError("invalid_arguments", detail=f"prompts must be an array of 1 to {PROMPTS_MAX} objects")
        for prompt in prompts:
            if not (isinstance(prompt, dict) and isinstance(prompt.get("title"), str) and prompt.get("message")):
                raise ApiError("invalid_arguments", detail="each prompt needs a title and a message")
        self._prompts[(ch.id, thread or None)] = [{"title": q["title"], "message": str(q["message"])} for q in prompts]
        return {}

    # ----------------------------------------------------------------- the home tab

    def _views_publish(self, p: Params, _: Any) -> Params:
        user = _required(p, "user_id")
        if user not in self._users or self._users[user].is_bot:
            raise ApiError("user_not_found")
        view = p.get("view")
        if not isinstance(view, dict) or view.get("type") != "home":
            raise ApiError("invalid_arguments", detail="view must be a home view object")
        blocks = view.get("blocks")
        errors = block_errors(blocks, max_blocks=VIEW_MAX_BLOCKS)
        if errors:
            raise ApiError("invalid_arguments", errors=errors, response_metadata={"messages": errors})
        old = self._homes.get(user)
        expected = _text(p, "hash")
        if expected is not None and old is not None and expected != old["hash"]:
            raise ApiError("hash_conflict")
        published = {**view, "id": old["id"] if old else self._next_id("V0HM"), "hash": uuid.uuid4().hex[:16]}
        self._homes[user] = published
        self._home_publishes[user] = self._home_publishes.get(user, 0) + 1
        shown = Message(self._clock.next(), "", user, "", list(blocks or []))
        self._pending.append(self._event("home", shown, user))
        return {"view": dict(published)}
