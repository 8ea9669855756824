"""Slack Web API methods of the local emulator: what each answers, with Slack's response shapes and error codes.

`SlackWorkspace.handle(method, params)` applies one authenticated call to the workspace state
(`labbot.bot.console.workspace`) and returns the success body or raises `ApiError`; no HTTP here
(`labbot.bot.console.emulator` serves it). Methods: auth.test,
chat.postMessage/update/postEphemeral/delete/getPermalink, conversations.open/history/replies, users.info,
reactions.add, and the external file upload (files.getUploadURLExternal, the POST to the upload URL,
files.completeUploadExternal) as `files_upload_v2` does it; the AI-app surfaces (chat.startStream/appendStream/
stopStream, assistant.threads.setStatus/setSuggestedPrompts, views.publish) are in `labbot.bot.console.surfaces`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from labbot.bot.console.model import ApiError, Channel, Message, UploadedFile, sniff_type
from labbot.bot.console.surfaces import SurfaceMethods
from labbot.bot.console.workspace import Params

UploadUrlFor = Callable[[str], str]
"""Turns a file id into the URL the client POSTs its bytes to (built from the request, so mounting works)."""


def _opt_str(p: Params, key: str) -> str | None:
    value = p.get(key)
    return None if value is None or value == "" else str(value)


def _req_str(p: Params, key: str, error: str = "invalid_arguments") -> str:
    value = _opt_str(p, key)
    if value is None:
        raise ApiError(error)
    return value


def _flag(p: Params, key: str) -> bool:
    return p.get(key) in (True, 1, "1", "true", "True")


def _int(p: Params, key: str, default: int) -> int:
    value = p.get(key)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ApiError("invalid_arguments", detail=f"{key} must be an integer") from None


def _ts_key(ts: str) -> tuple[int, int]:
    sec, _, frac = ts.partition(".")
    try:
        return int(sec), int(frac.ljust(6, "0")[:6])
    except ValueError:
        raise ApiError("bad_timestamp") from None


def _page(items: list[dict[str, Any]], p: Params) -> tuple[list[dict[str, Any]], str]:
    """Slack cursor pagination over ``items``: (this page, next_cursor or "")."""
    limit = max(1, min(_int(p, "limit", 100), 999))
    cursor = _opt_str(p, "cursor")
    start = 0
    if cursor:
        try:
            start = int(base64.b64decode(cursor).decode().removeprefix("offset:"))
        except ValueError:
            raise ApiError("invalid_cursor") from None
    end = start + limit
    next_cursor = base64.b64encode(f"offset:{end}".encode()).decode() if end < len(items) else ""
    return items[start:end], next_cursor


class SlackWorkspace(SurfaceMethods):
    """The workspace answering Web API methods: Slack's semantics, response shapes and error codes."""

    @property
    def methods(self) -> frozenset[str]:
        """The Web API methods this emulator answers."""
        return frozenset(_HANDLERS)

    def handle(self, method: str, params: Params, upload_url_for: UploadUrlFor | None = None) -> Params:
        """Apply one authenticated Web API call; the success body (``ok: true``) or ApiError."""
        handler = _HANDLERS.get(method)
        if handler is None:
            raise ApiError("unknown_method")
        url_for = upload_url_for or (lambda fid: f"http://127.0.0.1/upload/v1/{fid}")
        return {"ok": True, **self._mutate(lambda: handler(self, params, url_for))}

    def receive_upload(self, file_id: str, data: bytes) -> bool:
        """The bytes POSTed to a file's upload URL; False when the file id was never handed out."""
        with self._lock:
            f = self._files.get(file_id)
            if f is None or f.completed:
                return False
            f.data = data
            f.mimetype, f.filetype = sniff_type(data, f.name)
            return True

    def _auth_test(self, p: Params, _: UploadUrlFor) -> Params:
        return {
            "url": f"https://{self.team_domain}.slack.com/",
            "team": self.team_name,
            "user": self.bot_name,
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _bot_message(self, ch: Channel, p: Params, **extra: Any) -> Message:
        text, blocks, attachments = self._content(p)
        metadata = p.get("metadata") if isinstance(p.get("metadata"), dict) else None
        return Message(
            self._clock.next(), ch.id, self.bot_user_id, text, blocks, bot_id=self.bot_id, app_id=self.app_id,
            attachments=attachments, metadata=metadata, **extra,
        )  # fmt: skip

    def _chat_post_message(self, p: Params, _: UploadUrlFor) -> Params:
        ch = self._channel(p.get("channel"))
        thread = _opt_str(p, "thread_ts")
        parent = self._thread_parent(ch, thread) if thread else None
        broadcast = bool(parent) and _flag(p, "reply_broadcast")
        m = self._bot_message(ch, p, subtype="thread_broadcast" if broadcast else None)
        self._store(ch, m, parent, "posted")
        return {"channel": ch.id, "ts": m.ts, "message": self._message_api(ch, m)}

    def _chat_update(self, p: Params, _: UploadUrlFor) -> Params:
        ch = self._channel(p.get("channel"))
        m = self._own(ch, _opt_str(p, "ts"), "cant_update_message")
        merged = {"text": p.get("text", m.text), "blocks": p.get("blocks", m.blocks)}
        merged["attachments"] = p.get("attachments", m.attachments)
        if p.get("text") is None and p.get("blocks") is None and p.get("attachments") is None:
            raise ApiError("no_text")
        m.text, m.blocks, m.attachments = self._content(merged)
        m.streaming = m.streamed = False  # an updated stream is an ordinary message now, its blocks what shows
        m.edited, m.edited_ts = True, self._clock.next()
        self._emit("updated", m)
        return {"channel": ch.id, "ts": m.ts, "text": m.text, "message": self._message_api(ch, m)}

    def _chat_post_ephemeral(self, p: Params, _: UploadUrlFor) -> Params:
        ch = self._channel(p.get("channel"))
        user = _req_str(p, "user", "user_not_found")
        if user not in self._users:
            raise ApiError("user_not_found")
        if (ch.is_im or ch.is_mpim) and user not in ch.members:
            raise ApiError("user_not_in_channel")
        thread = _opt_str(p, "thread_ts")
        parent = self._thread_parent(ch, thread) if thread else None
        m = self._bot_message(ch, p, thread_ts=parent, ephemeral_to=user)
        ch.ephemeral.append(m)
        self._emit("ephemeral", m)
        return {"message_ts": m.ts}

    def _chat_delete(self, p: Params, _: UploadUrlFor) -> Params:
        ch = self._channel(p.get("channel"))
        m = self._own(ch, _opt_str(p, "ts"), "cant_delete_message")
        has_replies = m.thread_ts == m.ts and any(r.is_reply and r.thread_ts == m.ts for r in ch.messages.values())
        if has_replies:  # Slack keeps a tombstone so the thread survives
            m.subtype, m.text, m.blocks, m.files, m.attachments = "tombstone", "This message was deleted.", [], [], []
        else:
            del ch.messages[m.ts]
        self._emit("deleted", m)
        return {"channel": ch.id, "ts": m.ts}

    def _chat_get_permalink(self, p: Params, _: UploadUrlFor) -> Params:
        ch = self._channel(p.get("channel"))
        ts = _opt_str(p, "message_ts")
        if ts is None or ts not in ch.messages:
            raise ApiError("message_not_found")
        link = f"https://{self.team_domain}.slack.com/archives/{ch.id}/p{ts.replace('.', '')}"
        return {"channel": ch.id, "permalink": link}

    def _conversations_open(self, p: Params, _: UploadUrlFor) -> Params:
        if _opt_str(p, "channel"):
            ch = self._channel(p["channel"])
            return {
                "no_op": True,
                "already_open": True,
                "channel": ch.to_api() if _flag(p, "return_im") else {"id": ch.id},
            }
        raw = p.get("users")
        users = [u.strip() for u in (raw if isinstance(raw, list) else str(raw or "").split(",")) if u.strip()]
        if not users:
            raise ApiError("users_list_not_supplied")
        if len(users) > 8:
            raise ApiError("too_many_users")
        for user in users:
            if user not in self._users:
                raise ApiError("user_not_found")
        if len(users) == 1:
            existed = users[0] in self._dms
            ch = self._open_dm(users[0])
        else:
            members = sorted({*users, self.bot_user_id})
            found = [c for c in self._channels.values() if c.is_mpim and c.members == members]
            existed = bool(found)
            if not found:
                cid = self._next_id("G0MP")
                name = "mpdm-" + "--".join(self._users[u].name for u in members) + "-1"
                self._channels[cid] = Channel(cid, name, self._clock.seconds(), is_mpim=True, members=members)
            ch = found[0] if found else self._channels[cid]
        out: Params = {"channel": ch.to_api() if _flag(p, "return_im") else {"id": ch.id}}
        if existed:
            out.update(no_op=True, already_open=True)
        return out

    def _conversations_history(self, p: Params, _: UploadUrlFor) -> Params:
        ch = self._channel(p.get("channel"))
        inclusive = _flag(p, "inclusive")
        oldest, latest = _opt_str(p, "oldest"), _opt_str(p, "latest")
        lo = _ts_key(oldest) if oldest else None
        hi = _ts_key(latest) if latest else None

        def within(m: Message) -> bool:
            key = _ts_key(m.ts)
            if lo and (key < lo or (key == lo and not inclusive)):
                return False
            return not (hi and (key > hi or (key == hi and not inclusive)))

        items = [self._message_api(ch, m) for m in reversed(ch.messages.values()) if self._in_history(m) and within(m)]
        page, cursor = _page(items, p)
        return {
            "messages": page,
            "has_more": bool(cursor),
            "pin_count": 0,
            "channel_actions_ts": None,
            "channel_actions_count": 0,
            "response_metadata": {"next_cursor": cursor},
        }

    def _conversations_replies(self, p: Params, _: UploadUrlFor) -> Params:
        ch = self._channel(p.get("channel"))
        parent = self._thread_parent(ch, _req_str(p, "ts", "thread_not_found"))
        items = [self._message_api(ch, m) for m in ch.messages.values() if parent in (m.ts, m.thread_ts)]
        page, cursor = _page(items, p)
        return {"messages": page, "has_more": bool(cursor), "response_metadata": {"next_cursor": cursor}}

    def _users_info(self, p: Params, _: UploadUrlFor) -> Params:
        user = self._users.get(_req_str(p, "user", "user_not_found"))
        if user is None:
            raise ApiError("user_not_found")
        return {"user": user.to_api(self.team_id)}

    def _reactions_add(self, p: Params, _: UploadUrlFor) -> Params:
        name = (_opt_str(p, "name") or "").strip(":")
        if not name:
            raise ApiError("invalid_name")
        ch = self._channel(p.get("channel"))
        ts = _req_str(p, "timestamp", "no_item_specified")
        m = ch.messages.get(ts)
        if m is None:
            raise ApiError("message_not_found")
        users = m.reactions.setdefault(name, [])
        if self.bot_user_id in users:
            raise ApiError("already_reacted")
        users.append(self.bot_user_id)
        self._emit("updated", m)
        return {}

    def _views_open(self, p: Params, _: UploadUrlFor) -> Params:
        trigger = _req_str(p, "trigger_id", "invalid_trigger_id")
        view = p.get("view")
        if isinstance(view, str):
            try:
                view = json.loads(view)
            except ValueError:
                raise ApiError("invalid_arguments", detail="view must be a JSON object") from None
        if not isinstance(view, dict) or view.get("type") != "modal":
            raise ApiError("invalid_arguments", detail="view must be a modal view object")
        if not isinstance(view.get("title"), dict) or not isinstance(view.get("blocks"), list):
            raise ApiError("invalid_arguments", detail="a modal needs a title and blocks")
        vid = self._next_id("V0VW")
        opened = {**view, "id": vid, "trigger_id": trigger}
        self._views[vid] = opened
        return {"view": {k: v for k, v in opened.items() if k != "trigger_id"}}

    def _files_get_upload_url_external(self, p: Params, upload_url_for: UploadUrlFor) -> Params:
        filename = _req_str(p, "filename")
        length = _int(p, "length", -1)
        if length < 0:
            raise ApiError("invalid_arguments", detail="length is required")
        fid = self._next_id("F0UP")
        self._files[fid] = UploadedFile(
            fid, filename, length, self.bot_user_id, self._clock.seconds(), title=filename,
            alt_txt=_opt_str(p, "alt_txt"), snippet_type=_opt_str(p, "snippet_type"),
        )  # fmt: skip
        return {"upload_url": upload_url_for(fid), "file_id": fid}

    def _files_complete_upload_external(self, p: Params, _: UploadUrlFor) -> Params:
        entries = p.get("files")
        if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
            raise ApiError("invalid_arguments", detail="files must be a JSON array of {id, title}")
        files: list[UploadedFile] = []
        for entry in entries:
            f = self._files.get(str(entry.get("id")))
            if f is None or f.data is None or f.completed:
                raise ApiError("file_not_found")
            files.append(f)
        targets = [p["channel_id"]] if _opt_str(p, "channel_id") else []
        targets += [c.strip() for c in str(p.get("channels") or "").split(",") if c.strip()]
        channels = [self._channel(t) for t in targets]
        thread = _opt_str(p, "thread_ts")
        if thread and len(channels) != 1:
            raise ApiError("invalid_arguments", detail="thread_ts needs exactly one channel")
        parents = [self._thread_parent(ch, thread) if thread else None for ch in channels]
        for f, entry in zip(files, entries, strict=True):
            f.title = str(entry.get("title") or f.name)
            f.completed = True
            f.channels = [ch.id for ch in channels]
        for ch, parent in zip(channels, parents, strict=True):
            m = Message(
                self._clock.next(), ch.id, self.bot_user_id, str(p.get("initial_comment") or ""),
                files=[f.to_api(self.team_domain) for f in files], bot_id=self.bot_id, app_id=self.app_id,
            )  # fmt: skip
            self._store(ch, m, parent, "file")
        return {"files": [{"id": f.id, "title": f.title} for f in files]}


_HANDLERS: dict[str, Callable[[SlackWorkspace, Params, UploadUrlFor], Params]] = {
    "auth.test": SlackWorkspace._auth_test,
    "chat.postMessage": SlackWorkspace._chat_post_message,
    "chat.update": SlackWorkspace._chat_update,
    "chat.postEphemeral": SlackWorkspace._chat_post_ephemeral,
    "chat.delete": SlackWorkspace._chat_delete,
    "chat.getPermalink": SlackWorkspace._chat_get_permalink,
    "conversations.open": SlackWorkspace._conversations_open,
    "conversations.history": SlackWorkspace._conversations_history,
    "conversations.replies": SlackWorkspace._conversations_replies,
    "users.info": SlackWorkspace._users_info,
    "reactions.add": SlackWorkspace._reactions_add,
    "views.open": SlackWorkspace._views_open,
    "files.getUploadURLExternal": SlackWorkspace._files_get_upload_url_external,
    "files.completeUploadExternal": SlackWorkspace._files_complete_upload_external,
    "chat.startStream": SlackWorkspace._chat_start_stream,
    "chat.appendStream": SlackWorkspace._chat_append_stream,
    "chat.stopStream": SlackWorkspace._chat_stop_stream,
    "assistant.threads.setStatus": SlackWorkspace._assistant_threads_set_status,
    "assistant.threads.setSuggestedPrompts": SlackWorkspace._assistant_threads_set_suggested_prompts,
    "views.publish": SlackWorkspace._views_publish,
}
