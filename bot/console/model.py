"""Data model of the local Slack Web API emulator: users, channels, messages, files, events.

Plain dataclasses shared by `labbot.bot.console.workspace` (Slack's semantics over this state) and
`labbot.bot.console.emulator` (the HTTP front, serving). Objects handed out by the
emulator are snapshots (copies), so readers in other threads never see a message change under them. Each `to_api()`
renders the shape Slack's Web API answers with.
"""

from __future__ import annotations

import copy
import mimetypes
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

EventKind = Literal["posted", "updated", "deleted", "file", "ephemeral", "appended", "task", "status", "home"]
"""``appended``: a streamed message grew (``detail``: the new text); ``task``: a task of a streamed message's plan
display started or ended (``detail``: ``STATUS TITLE``); ``status``: an assistant thread's status
changed (``detail``; the message is the thread's parent); ``home``: a user's home tab was published (the message
carries the view's blocks, ``user`` the user whose home it is)."""


class ApiError(Exception):
    """A Slack API error answer: ``{"ok": false, "error": error, ...extra}`` with HTTP 200, as Slack does."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"ok": False, "error": self.error, **self.extra}


@dataclass
class User:
    """A workspace member (humans are configured at construction; the bot user is always present)."""

    id: str
    name: str
    real_name: str = ""
    is_bot: bool = False
    bot_id: str | None = None
    tz: str = "UTC"

    def to_api(self, team_id: str) -> dict[str, Any]:
        real_name = self.real_name or self.name
        out: dict[str, Any] = {
            "id": self.id,
            "team_id": team_id,
            "name": self.name,
            "deleted": False,
            "real_name": real_name,
            "tz": self.tz,
            "tz_label": "Coordinated Universal Time",
            "tz_offset": 0,
            "is_admin": False,
            "is_owner": False,
            "is_bot": self.is_bot,
            "is_app_user": False,
            "updated": 1764000000,
            "profile": {
                "real_name": real_name,
                "real_name_normalized": real_name,
                "display_name": self.name,
                "display_name_normalized": self.name,
                "team": team_id,
            },
        }
        if self.bot_id:
            out["profile"]["bot_id"] = self.bot_id
        return out


@dataclass
class Message:
    """A message as the emulator stores it; ``thread_ts`` is set on replies (and on parents that have replies)."""

    ts: str
    channel: str
    user: str
    text: str = ""
    blocks: list[dict[str, Any]] = field(default_factory=list)
    thread_ts: str | None = None
    files: list[dict[str, Any]] = field(default_factory=list)
    edited: bool = False
    edited_ts: str | None = None
    bot_id: str | None = None
    app_id: str | None = None
    subtype: str | None = None
    attachments: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] | None = None
    reactions: dict[str, list[str]] = field(default_factory=dict)
    ephemeral_to: str | None = None
    """For ephemeral messages: the only user who sees it."""
    streaming: bool = False
    """A chat.startStream message not stopped yet: chat.appendStream grows its text."""
    streamed: bool = False
    """Written by chat.startStream: its ``text`` is markdown, its ``blocks`` what chat.stopStream put under it."""
    plan_title: str | None = None
    """A streamed message's plan display (``task_display_mode="plan"``): its title, from a ``plan_update`` chunk."""
    tasks: dict[str, dict[str, str]] = field(default_factory=dict)
    """A streamed message's tasks (``task_update`` chunks) by id, in order: each its ``title`` and ``status``."""

    @property
    def is_reply(self) -> bool:
        return self.thread_ts is not None and self.thread_ts != self.ts

    @property
    def is_bot(self) -> bool:
        return self.bot_id is not None

    def copy(self) -> Message:
        """A snapshot that later changes to the stored message do not reach."""
        return copy.deepcopy(self)


@dataclass
class UploadedFile:
    """A file announced by files.getUploadURLExternal; ``data`` arrives with the POST to its upload URL."""

    id: str
    name: str
    length: int
    user: str
    created: int
    title: str = ""
    alt_txt: str | None = None
    snippet_type: str | None = None
    data: bytes | None = None
    mimetype: str = "application/octet-stream"
    filetype: str = "binary"
    channels: list[str] = field(default_factory=list)
    completed: bool = False

    def to_api(self, team_domain: str) -> dict[str, Any]:
        url = f"https://files.slack.com/files-pri/{self.id}/{self.name}"
        out: dict[str, Any] = {
            "id": self.id,
            "created": self.created,
            "timestamp": self.created,
            "name": self.name,
            "title": self.title or self.name,
            "mimetype": self.mimetype,
            "filetype": self.filetype,
            "pretty_type": self.filetype.upper(),
            "user": self.user,
            "size": len(self.data) if self.data is not None else self.length,
            "mode": "hosted",
            "is_external": False,
            "is_public": bool(self.channels),
            "url_private": url,
            "url_private_download": f"{url}?download=1",
            "permalink": f"https://{team_domain}.slack.com/files/{self.user}/{self.id}/{self.name}",
            "channels": list(self.channels),
        }
        if self.alt_txt:
            out["alt_txt"] = self.alt_txt
        return out


_MAGIC: list[tuple[bytes, str, str]] = [
    (b"\x89PNG\r\n\x1a\n", "image/png", "png"),
    (b"\xff\xd8\xff", "image/jpeg", "jpg"),
    (b"GIF87a", "image/gif", "gif"),
    (b"GIF89a", "image/gif", "gif"),
    (b"%PDF-", "application/pdf", "pdf"),
]


def sniff_type(data: bytes, filename: str) -> tuple[str, str]:
    """(mimetype, Slack filetype) from magic bytes, else from the file name, else text or binary."""
    for magic, mimetype, filetype in _MAGIC:
        if data.startswith(magic):
            return mimetype, filetype
    guessed = mimetypes.guess_type(filename)[0]
    ext = filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    if guessed:
        return guessed, ext or guessed.split("/")[-1]
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "application/octet-stream", "binary"
    return "text/plain", "text"


@dataclass
class Channel:
    """A conversation: a public channel ("C…"), a DM ("D…", with ``user``) or a group DM ("G…")."""

    id: str
    name: str
    created: int
    is_im: bool = False
    is_mpim: bool = False
    user: str | None = None
    members: list[str] = field(default_factory=list)
    messages: dict[str, Message] = field(default_factory=dict)
    """Every message by ts (top-level and replies); insertion order is ts order."""
    ephemeral: list[Message] = field(default_factory=list)

    @property
    def channel_type(self) -> str:
        """The ``channel_type`` Slack puts into message events."""
        return "im" if self.is_im else "mpim" if self.is_mpim else "channel"

    def to_api(self) -> dict[str, Any]:
        if self.is_im:
            return {
                "id": self.id,
                "created": self.created,
                "is_im": True,
                "is_org_shared": False,
                "user": self.user,
                "is_user_deleted": False,
                "priority": 0,
            }
        return {
            "id": self.id,
            "name": self.name,
            "name_normalized": self.name,
            "created": self.created,
            "is_channel": not self.is_mpim,
            "is_group": False,
            "is_im": False,
            "is_mpim": self.is_mpim,
            "is_private": self.is_mpim,
            "is_archived": False,
            "is_general": False,
            "is_shared": False,
            "is_org_shared": False,
            "is_member": True,
            "creator": "",
            "topic": {"value": "", "creator": "", "last_set": 0},
            "purpose": {"value": "", "creator": "", "last_set": 0},
            "num_members": len(self.members),
        }


@dataclass(frozen=True)
class EmulatorEvent:
    """A change notification for subscribers (the console UI): what happened, where, to which message."""

    kind: EventKind
    channel: str
    message: Message
    detail: str = ""


class TsClock:
    """Slack message timestamps ("1764000000.000100"): wall-clock microseconds, strictly increasing."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> str:
        with self._lock:
            now = int(self._clock() * 1_000_000)
            self._last = max(now, self._last + 1)
            return f"{self._last // 1_000_000}.{self._last % 1_000_000:06d}"

    def seconds(self) -> int:
        return int(self._clock())
