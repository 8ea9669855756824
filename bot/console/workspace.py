"""The state of the workspace behind the local Slack Web API emulator, and the Slack rules shared by its methods.

`WorkspaceState` holds channels, messages, users and uploaded files under one lock; console mode and tests read it
(as snapshots), subscribe to its changes and simulate humans (`user_message`). The Web API methods themselves are in
`labbot.bot.console.methods` (`SlackWorkspace`), the HTTP front in `labbot.bot.console.emulator`. Shared here: channel
and thread resolution, message content checks (text, Block Kit limits) and the message shape Slack answers with.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from labbot.bot.console.blocks import MAX_ATTACHMENTS, MESSAGE_TEXT_MAX, block_errors
from labbot.bot.console.model import (
    ApiError,
    Channel,
    EmulatorEvent,
    EventKind,
    Message,
    TsClock,
    UploadedFile,
    User,
)

log = logging.getLogger(__name__)

DEFAULT_CHANNEL_ID = "C0LAB00001"
DEFAULT_USERS: tuple[User, ...] = (
    User("U0ALICE001", "alice", "Alice Liddell"),
    User("U0BOB00001", "bob", "Bob Kahan"),
)
Params = dict[str, Any]
Subscriber = Callable[[EmulatorEvent], None]


def check_message_blocks(blocks: Any) -> None:
    """A message's ``blocks`` (absent, or a list Block Kit accepts), refused the way Slack refuses them."""
    if isinstance(blocks, str):
        raise ApiError("invalid_blocks_format")
    if blocks is not None:
        errors = block_errors(blocks)
        if errors:
            raise ApiError("invalid_blocks", errors=errors, response_metadata={"messages": errors})


class WorkspaceState:
    """One emulated workspace with one bot (labbot) installed in it: its state, read and changed under a lock."""

    def __init__(
        self,
        *,
        bot_token: str = "xoxb-emulator-token",
        team_id: str = "T0LAB00001",
        team_name: str = "lab",
        bot_user_id: str = "U0LABBOT01",
        bot_id: str = "B0LABBOT01",
        bot_name: str = "labbot",
        app_id: str = "A0LABBOT01",
        channels: Mapping[str, str] | None = None,
        users: Mapping[str, str] | Iterable[User] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.bot_token = bot_token
        self.team_id = team_id
        self.team_name = team_name
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.bot_name = bot_name
        self.app_id = app_id
        self._lock = threading.RLock()
        self._clock = TsClock(clock) if clock else TsClock()
        self._users: dict[str, User] = {}
        humans = DEFAULT_USERS if users is None else users
        for user in humans.items() if isinstance(humans, Mapping) else humans:
            u = User(user[0], user[1]) if isinstance(user, tuple) else user
            self._users[u.id] = u
        self._users[bot_user_id] = User(bot_user_id, bot_name, bot_name, is_bot=True, bot_id=bot_id)
        self._channels: dict[str, Channel] = {}
        for cid, name in (channels or {DEFAULT_CHANNEL_ID: "lab"}).items():
            self.add_channel(cid, name)
        self.default_channel = next(iter(self._channels))
        self._dms: dict[str, str] = {}
        self._files: dict[str, UploadedFile] = {}
        self._views: dict[str, dict[str, Any]] = {}  # views.open: modals opened, by view id
        self._homes: dict[str, dict[str, Any]] = {}  # views.publish: each user's home tab
        self._home_publishes: dict[str, int] = {}
        self._statuses: dict[tuple[str, str], str] = {}  # (channel, thread) -> assistant status line
        self._prompts: dict[tuple[str, str | None], list[dict[str, str]]] = {}  # suggested prompts
        self._seq = 0
        self._subscribers: list[Subscriber] = []
        self._pending: list[EmulatorEvent] = []

    # ----------------------------------------------------------------- configuration and reading state

    @property
    def team_domain(self) -> str:
        return self.team_name.lower().replace(" ", "-") or "emulator"

    def add_channel(self, channel_id: str, name: str) -> None:
        with self._lock:
            self._channels[channel_id] = Channel(channel_id, name.lstrip("#"), self._clock.seconds())

    def add_user(self, user: User) -> None:
        with self._lock:
            self._users[user.id] = user

    def channel_id(self, ref: str) -> str:
        """The id of a channel given by id, ``#name`` or name (or a user id: that user's DM with the bot)."""
        with self._lock:
            return self._channel(ref).id

    def channel_label(self, channel_id: str) -> str:
        """How a terminal shows a conversation: ``#name``, or ``DM with NAME``."""
        with self._lock:
            ch = self._channels.get(channel_id)
            if ch is None:
                return channel_id
            if ch.is_im:
                user = self._users.get(ch.user or "")
                return f"DM with {user.name if user else ch.user}"
            return f"#{ch.name}"

    def user_label(self, user_id: str) -> str:
        """How a terminal shows a member: their name (the id when there is no such member)."""
        with self._lock:
            user = self._users.get(user_id)
            return user.name if user else user_id

    def dm_channel(self, user_id: str) -> str:
        """The bot's DM channel with ``user_id`` (opened on first use, then stable)."""
        with self._lock:
            return self._open_dm(user_id).id

    def messages(self, channel: str, *, thread_ts: str | None = None) -> list[Message]:
        """Snapshots, oldest first: the channel's top-level messages (and broadcasts), or one thread."""
        with self._lock:
            ch = self._channel(channel)
            if thread_ts is None:
                return [m.copy() for m in ch.messages.values() if self._in_history(m)]
            parent = self._thread_parent(ch, thread_ts)
            return [m.copy() for m in ch.messages.values() if parent in (m.ts, m.thread_ts)]

    def message(self, channel: str, ts: str) -> Message | None:
        with self._lock:
            m = self._channel(channel).messages.get(ts)
            return m.copy() if m else None

    def ephemeral_messages(self, channel: str, user: str | None = None) -> list[Message]:
        with self._lock:
            return [m.copy() for m in self._channel(channel).ephemeral if user in (None, m.ephemeral_to)]

    def views_opened(self) -> list[dict[str, Any]]:
        """The modals opened (views.open), oldest first, each with its ``id`` and ``trigger_id``."""
        with self._lock:
            return [dict(v) for v in self._views.values()]

    def file(self, file_id: str) -> UploadedFile | None:
        with self._lock:
            f = self._files.get(file_id)
            return copy.deepcopy(f) if f else None

    def file_bytes(self, file_id: str) -> bytes:
        """The bytes uploaded for ``file_id``; KeyError when the file is unknown or its bytes never arrived."""
        with self._lock:
            f = self._files.get(file_id)
            if f is None or f.data is None:
                raise KeyError(file_id)
            return f.data

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback`` after every change (from the thread that made it); returns an unsubscribe function."""
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    # ----------------------------------------------------------------- simulating humans

    def user_message(self, channel: str, user: str, text: str, thread_ts: str | None = None) -> Message:
        """A human posts ``text`` (into the thread of ``thread_ts`` when given); returns the stored message."""

        def post() -> Message:
            if user not in self._users:
                raise ValueError(f"unknown user {user!r}; known: {', '.join(sorted(self._users))}")
            ch = self._channel(channel)
            parent = self._thread_parent(ch, thread_ts) if thread_ts else None
            return self._store(ch, Message(self._clock.next(), ch.id, user, text), parent, "posted")

        try:
            return self._mutate(post)
        except ApiError as e:
            raise ValueError(f"{e.error}: channel {channel!r}, thread_ts {thread_ts!r}") from None

    def _mutate(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` under the lock, then tell subscribers what changed (outside the lock)."""
        with self._lock:
            self._pending = []
            try:
                result = fn()
            finally:
                events, self._pending = self._pending, []
                subscribers = list(self._subscribers)
        for event in events:
            for callback in subscribers:
                try:
                    callback(event)
                except Exception:
                    log.exception("slack emulator subscriber %r failed on %s", callback, event.kind)
        return result

    def _emit(self, kind: EventKind, message: Message) -> None:
        self._pending.append(self._event(kind, message))

    @staticmethod
    def _event(kind: EventKind, message: Message, detail: str = "") -> EmulatorEvent:
        return EmulatorEvent(kind, message.channel, message.copy(), detail)

    def _next_id(self, prefix: str) -> str:
        self._seq += 1
        return f"{prefix}{self._seq:07d}"

    def _channel(self, ref: Any) -> Channel:
        if not ref:
            raise ApiError("channel_not_found")
        ref = str(ref)
        if ref in self._channels:
            return self._channels[ref]
        for ch in self._channels.values():
            if not ch.is_im and ch.name == ref.removeprefix("#"):
                return ch
        if ref in self._users:
            return self._open_dm(ref)
        raise ApiError("channel_not_found")

    def _open_dm(self, user_id: str) -> Channel:
        if user_id not in self._users:
            raise ApiError("user_not_found")
        if user_id not in self._dms:
            cid = self._next_id("D0DM")
            self._channels[cid] = Channel(
                cid, cid, self._clock.seconds(), is_im=True, user=user_id, members=[user_id, self.bot_user_id]
            )
            self._dms[user_id] = cid
        return self._channels[self._dms[user_id]]

    @staticmethod
    def _in_history(m: Message) -> bool:
        return not m.is_reply or m.subtype == "thread_broadcast"

    def _thread_parent(self, ch: Channel, thread_ts: str) -> str:
        m = ch.messages.get(thread_ts)
        if m is None:
            raise ApiError("thread_not_found")
        return m.thread_ts if m.is_reply and m.thread_ts else m.ts

    def _store(self, ch: Channel, m: Message, parent: str | None, kind: EventKind) -> Message:
        if parent:
            m.thread_ts = parent
            ch.messages[parent].thread_ts = parent
        ch.messages[m.ts] = m
        self._emit(kind, m)
        if parent and m.user == self.bot_user_id and self._statuses.pop((ch.id, parent), None):
            # Slack clears an assistant thread's status when the app replies in it
            self._pending.append(self._event("status", ch.messages[parent], ""))
        return m

    def _own(self, ch: Channel, ts: str | None, refusal: str) -> Message:
        m = ch.messages.get(ts or "")
        if m is None:
            raise ApiError("message_not_found")
        if m.user != self.bot_user_id:
            raise ApiError(refusal)
        return m

    def _content(self, p: Params) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
        """(text, blocks, attachments) of a message, refused the way Slack refuses them."""
        text = "" if p.get("text") is None else str(p["text"])
        blocks, attachments = p.get("blocks"), p.get("attachments")
        check_message_blocks(blocks)
        if isinstance(attachments, str) or (attachments is not None and not isinstance(attachments, list)):
            raise ApiError("invalid_attachments")
        if attachments and len(attachments) > MAX_ATTACHMENTS:
            raise ApiError("too_many_attachments")
        if len(text) > MESSAGE_TEXT_MAX:
            raise ApiError("msg_too_long")
        if not text and not blocks and not attachments:
            raise ApiError("no_text")
        return text, list(blocks or []), list(attachments or [])

    def _message_api(self, ch: Channel, m: Message) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "message", "ts": m.ts, "user": m.user, "text": m.text, "team": self.team_id}
        if m.subtype:
            out["subtype"] = m.subtype
        if m.blocks:
            out["blocks"] = m.blocks
        if m.attachments:
            out["attachments"] = m.attachments
        if m.bot_id:
            out.update(bot_id=m.bot_id, app_id=m.app_id)
            out["bot_profile"] = {
                "id": m.bot_id,
                "app_id": m.app_id,
                "name": self.bot_name,
                "team_id": self.team_id,
                "deleted": False,
                "updated": 1764000000,
                "icons": {"image_36": "", "image_48": "", "image_72": ""},
            }
        if m.is_reply and m.thread_ts:
            out["thread_ts"] = m.thread_ts
            parent = ch.messages.get(m.thread_ts)
            if parent:
                out["parent_user_id"] = parent.user
        elif m.thread_ts:
            replies = [r for r in ch.messages.values() if r.is_reply and r.thread_ts == m.ts]
            users = list(dict.fromkeys(r.user for r in replies))
            out.update(thread_ts=m.ts, reply_count=len(replies), reply_users=users, reply_users_count=len(users))
            if replies:
                out["latest_reply"] = replies[-1].ts
        if m.edited:
            out["edited"] = {"user": m.user, "ts": m.edited_ts}
        if m.files:
            out.update(files=m.files, upload=True, display_as_bot=False)
        if m.reactions:
            out["reactions"] = [{"name": k, "users": v, "count": len(v)} for k, v in m.reactions.items()]
        if m.metadata:
            out["metadata"] = m.metadata
        return out
