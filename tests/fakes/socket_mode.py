"""Socket Mode for the Slack fake: ``apps.connections.open`` hands out a websocket on the fake, over which envelopes
(slash commands, events, interactivity) go to the app and its acks come back, as with Slack's own.

Test-only (``labbot console`` drives the app over signed HTTP, never Socket Mode): `SlackFake` (``fakes/slack.py``)
serves `SocketHub.endpoint` at ``/socket/{conn}`` and answers ``apps.connections.open`` with `SocketHub.open`, and
the tests of labbot's Socket Mode connect the official ``AsyncSocketModeHandler`` to it unchanged.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect


class SocketHub:
    def __init__(self, app_token_prefix: str = "xapp-") -> None:
        self.app_token_prefix = app_token_prefix
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sockets: dict[str, WebSocket] = {}
        self._acks: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._opened: set[str] = set()

    def open(self, ws_base: str) -> str:
        """A fresh connection URL (what ``apps.connections.open`` answers)."""
        conn = uuid.uuid4().hex[:12]
        with self._lock:
            self._opened.add(conn)
        return f"{ws_base}/socket/{conn}"

    @property
    def connected(self) -> int:
        with self._lock:
            return len(self._sockets)

    async def endpoint(self, websocket: WebSocket) -> None:
        conn = websocket.path_params["conn"]
        with self._lock:
            known = conn in self._opened
        if not known:
            await websocket.close(code=4001)
            return
        await websocket.accept()
        self._loop = asyncio.get_running_loop()
        await websocket.send_text(json.dumps({"type": "hello", "num_connections": 1, "debug_info": {}}))
        with self._lock:
            self._sockets[conn] = websocket
        try:
            while True:
                message = json.loads(await websocket.receive_text())
                if "envelope_id" in message:
                    with self._lock:
                        self._acks[message["envelope_id"]] = message.get("payload") or {}
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            with self._lock:
                self._sockets.pop(conn, None)

    def send(self, kind: str, payload: dict[str, Any], *, accepts_response_payload: bool = True) -> str:
        """Deliver an envelope (``slash_commands``, ``events_api``, ``interactive``) to a connected app; returns
        its envelope id. Callable from any thread."""
        with self._lock:
            sockets = list(self._sockets.values())
        if not sockets or self._loop is None:
            raise RuntimeError("no Socket Mode connection: is the app running with an app token?")
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": accepts_response_payload,
            "retry_attempt": 0,
            "retry_reason": "",
        }
        future = asyncio.run_coroutine_threadsafe(sockets[0].send_text(json.dumps(envelope)), self._loop)
        future.result(timeout=10)
        return envelope_id

    def ack(self, envelope_id: str) -> dict[str, Any] | None:
        """What the app acked the envelope with (None until it did)."""
        with self._lock:
            return self._acks.get(envelope_id)
