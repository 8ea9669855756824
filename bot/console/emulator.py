"""A local Slack Web API emulator: what `labbot console` (and the test suite) points the real slack_sdk at.

`SlackEmulator` serves Slack's Web API at ``POST {base}/api/{method}`` from a Starlette app (`emulator.app`, to
mount or serve in-process) or from its own uvicorn thread (`url = emulator.start()` → ``http://127.0.0.1:PORT/api/``,
the ``base_url`` for `WebClient`/`AsyncWebClient`). It decodes form, multipart and JSON bodies the way Slack does,
checks the bot token, and produces Events API envelopes for simulated human messages (`user_message`,
`event_payload`) that the console and tests deliver to the Bolt app themselves.

Every Web API call is answered through `SlackEmulator.serve_call`, which here just answers it; the test fake
(``tests/fakes/slack.py``) overrides it to record calls and inject failures, and `routes` to add Socket Mode.

Slack's semantics live in `labbot.bot.console.methods` (the methods), `labbot.bot.console.workspace` (state) and
`labbot.bot.console.blocks` (Block Kit limits); the data model in `labbot.bot.console.model`.
"""

from __future__ import annotations

import contextlib
import email.parser
import email.policy
import json
import logging
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from labbot.bot.background_server import BackgroundServer
from labbot.bot.console.methods import SlackWorkspace
from labbot.bot.console.model import ApiError, EmulatorEvent, Message, UploadedFile, User
from labbot.bot.console.workspace import DEFAULT_CHANNEL_ID, DEFAULT_USERS

__all__ = [
    "DEFAULT_CHANNEL_ID",
    "DEFAULT_USERS",
    "Answer",
    "ApiError",
    "EmulatorEvent",
    "Message",
    "SlackEmulator",
    "UploadedFile",
    "User",
]

log = logging.getLogger(__name__)


class Answer(NamedTuple):
    """How one Web API call is answered: HTTP status and JSON body."""

    status: int
    body: dict[str, Any]

    def response(self) -> Response:
        return JSONResponse(self.body, status_code=self.status)


JSON_FIELDS = frozenset(
    {"blocks", "attachments", "files", "metadata", "unfurls", "user_auth_blocks", "outputs"}
    | {"chunks", "prompts", "view"}  # the streaming, assistant and home tab methods (labbot.bot.console.surfaces)
)
"""Parameters Slack accepts as JSON text inside form data; decoded before they are applied."""
_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")


class SlackEmulator(SlackWorkspace):
    """Slack's Web API for one workspace with labbot installed, over HTTP; see the module docstring.

    ``channels``: id → name, the first one is `default_channel` (default ``{"C0LAB00001": "lab"}``); ``users``: the
    humans, as id → name or `User`s (default alice ``U0ALICE001`` and bob ``U0BOB00001``); the bot user is always
    there. ``verification_token`` goes into Events API envelopes; ``clock`` drives message timestamps.
    """

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
        verification_token: str = "emulator-verification-token",
    ) -> None:
        super().__init__(
            bot_token=bot_token, team_id=team_id, team_name=team_name, bot_user_id=bot_user_id, bot_id=bot_id,
            bot_name=bot_name, app_id=app_id, channels=channels, users=users, clock=clock,
        )  # fmt: skip
        self.verification_token = verification_token
        self.url: str | None = None
        self._event_seq = 0
        self.app = Starlette(routes=self.routes())
        self._serving = BackgroundServer(self.app, "Slack emulator")

    def routes(self) -> list[BaseRoute]:
        """The emulator's HTTP routes: the Web API and the upload URLs files.getUploadURLExternal hands out."""
        return [
            Route("/api/{method:str}", self._api, methods=["GET", "POST"]),
            Route("/upload/v1/{file_id:str}", self._upload, methods=["POST"], name="upload"),
        ]

    async def serve_call(
        self, method: str, params: dict[str, Any], request: Request, answer: Callable[[], Answer]
    ) -> Response:
        """Answer one Web API call (``params`` decoded, the token taken out): ``answer()`` applies it as Slack would.
        Here nothing else happens; a subclass may record the call, or answer it otherwise."""
        return answer().response()

    # ----------------------------------------------------------------- HTTP

    async def _api(self, request: Request) -> Response:
        method = request.path_params["method"]
        try:
            params = await _decode(request)
        except ApiError as e:
            refused = Answer(200, e.body())
            return await self.serve_call(method, {}, request, lambda: refused)
        token = params.pop("token", None)
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            token = auth[7:].strip()
        return await self.serve_call(method, params, request, lambda: self._apply(method, params, token, request))

    def _apply(self, method: str, params: dict[str, Any], token: str | None, request: Request) -> Answer:
        try:
            if method not in self.methods:
                raise ApiError("unknown_method")
            if not token:
                raise ApiError("not_authed")
            if token != self.bot_token:
                raise ApiError("invalid_auth")
            return Answer(200, self.handle(method, params, lambda fid: str(request.url_for("upload", file_id=fid))))
        except ApiError as e:
            return Answer(200, e.body())
        except Exception:
            log.exception("slack emulator failed on %s", method)
            return Answer(500, {"ok": False, "error": "internal_error"})

    async def _upload(self, request: Request) -> Response:
        """The upload URL files.getUploadURLExternal hands out: the raw bytes of one file (any content type)."""
        data = await request.body()
        if not self.receive_upload(request.path_params["file_id"], data):
            return PlainTextResponse("file not found", status_code=404)
        return PlainTextResponse(f"OK - {len(data)}")

    # ----------------------------------------------------------------- Events API payloads

    def event_payload(
        self,
        message: Message,
        *,
        team_id: str | None = None,
        api_app_id: str | None = None,
        event_id: str | None = None,
        event_type: str | None = None,
    ) -> dict[str, Any]:
        """The Events API ``event_callback`` envelope Slack would deliver for ``message``.

        ``event_type`` defaults to ``app_mention`` when the text mentions the bot (``<@BOTID>``), else ``message``.
        """
        team = team_id or self.team_id
        kind = event_type or ("app_mention" if f"<@{self.bot_user_id}>" in message.text else "message")
        with self._lock:
            ch = self._channel(message.channel)
            parent = ch.messages.get(message.thread_ts) if message.is_reply and message.thread_ts else None
            self._event_seq += 1
            seq = self._event_seq
        event: dict[str, Any] = {
            "type": kind,
            "user": message.user,
            "text": message.text,
            "ts": message.ts,
            "channel": message.channel,
            "event_ts": message.ts,
            "team": team,
            "blocks": message.blocks or _rich_text(message.text),
        }
        if message.bot_id:
            event.update(bot_id=message.bot_id, app_id=message.app_id)
        else:
            event["client_msg_id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{message.channel}/{message.ts}"))
        if kind == "message":
            event["channel_type"] = ch.channel_type
            subtype = message.subtype or ("file_share" if message.files else None)
            if subtype:
                event["subtype"] = subtype
        if message.thread_ts:
            event["thread_ts"] = message.thread_ts
        if parent is not None:
            event["parent_user_id"] = parent.user
        if message.files:
            event.update(files=message.files, upload=False)
        return {
            "token": self.verification_token,
            "team_id": team,
            "context_team_id": team,
            "api_app_id": api_app_id or self.app_id,
            "event": event,
            "type": "event_callback",
            "event_id": event_id or f"Ev0EMU{seq:06d}",
            "event_time": int(message.ts.split(".")[0]),
            "authed_users": [self.bot_user_id],
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": team,
                    "user_id": self.bot_user_id,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": f"4-emulator-{team}-{message.channel}",
        }

    def reaction_payload(
        self, message: Message, *, user: str, reaction: str, removed: bool = False, event_id: str | None = None
    ) -> dict[str, Any]:
        """The Events API envelope of ``user`` putting (or, ``removed``, taking off) ``reaction`` on ``message``;
        the reaction is applied to the emulated message too."""
        with self._lock:
            ch = self._channel(message.channel)
            stored = ch.messages.get(message.ts)
            if stored is not None:
                users = stored.reactions.setdefault(reaction, [])
                if removed and user in users:
                    users.remove(user)
                elif not removed and user not in users:
                    users.append(user)
            self._event_seq += 1
            seq = self._event_seq
            now = self._clock.next()
        event = {
            "type": "reaction_removed" if removed else "reaction_added",
            "user": user,
            "reaction": reaction,
            "item": {"type": "message", "channel": message.channel, "ts": message.ts},
            "item_user": message.user,
            "event_ts": now,
        }
        return {
            "token": self.verification_token,
            "team_id": self.team_id,
            "context_team_id": self.team_id,
            "api_app_id": self.app_id,
            "event": event,
            "type": "event_callback",
            "event_id": event_id or f"Ev0EMU{seq:06d}",
            "event_time": int(now.split(".")[0]),
            "authed_users": [self.bot_user_id],
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": self.team_id,
                    "user_id": self.bot_user_id,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": f"4-emulator-{self.team_id}-{message.channel}",
        }

    # ----------------------------------------------------------------- serving

    def start(self, *, host: str = "127.0.0.1", port: int = 0, timeout: float = 10.0) -> str:
        """Serve on ``host:port`` (0: any free port) from a daemon thread; returns the Web API base URL."""
        if self._serving.running and self.url is not None:
            return self.url
        bound = self._serving.start(host=host, port=port, timeout=timeout)
        self.url = f"http://{host}:{bound}/api/"
        return self.url

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving (the workspace's state stays readable)."""
        self._serving.stop(timeout)
        self.url = None

    def __enter__(self) -> SlackEmulator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _decode(request: Request) -> dict[str, Any]:
    """Query string plus body (JSON, urlencoded or multipart), with JSON-in-form fields decoded."""
    params: dict[str, Any] = dict(parse_qsl(request.url.query, keep_blank_values=True))
    body = await request.body()
    ctype = request.headers.get("content-type", "").lower()
    if ctype.startswith("application/json"):
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            raise ApiError("invalid_json") from None
        if not isinstance(data, dict):
            raise ApiError("json_not_object")
        params.update(data)
        return params
    if ctype.startswith("multipart/form-data"):
        params.update(_multipart(ctype, body))
    elif body:
        try:
            params.update(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
        except UnicodeDecodeError:
            raise ApiError("invalid_charset") from None
    for key in JSON_FIELDS & params.keys():
        value = params[key]
        if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
            with contextlib.suppress(ValueError):  # left as text: the method answers invalid_blocks_format
                params[key] = json.loads(value)
    return params


def _multipart(ctype: str, body: bytes) -> dict[str, Any]:
    """Form fields of a multipart body; file parts as bytes."""
    parser = email.parser.BytesParser(policy=email.policy.HTTP)
    msg = parser.parsebytes(f"Content-Type: {ctype}\r\nMIME-Version: 1.0\r\n\r\n".encode() + body)
    if not msg.is_multipart():
        raise ApiError("invalid_form_data")
    fields: dict[str, Any] = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        fields[name] = data if part.get_filename() else data.decode("utf-8", "replace")
    return fields


def _rich_text(text: str) -> list[dict[str, Any]]:
    """The rich_text block a Slack client sends with a typed message (user mentions as user elements)."""
    elements: list[dict[str, Any]] = []
    pos = 0
    for match in _MENTION.finditer(text):
        if match.start() > pos:
            elements.append({"type": "text", "text": text[pos : match.start()]})
        elements.append({"type": "user", "user_id": match.group(1)})
        pos = match.end()
    if pos < len(text):
        elements.append({"type": "text", "text": text[pos:]})
    block_id = uuid.uuid5(uuid.NAMESPACE_OID, text).hex[:5]
    return [
        {"type": "rich_text", "block_id": block_id, "elements": [{"type": "rich_text_section", "elements": elements}]}
    ]
