"""What Slack sends labbot, built locally: slash commands, button clicks (feedback buttons and the Home tab's too),
modal submissions, form-encoded and signed as Slack does, and the Home tab's and assistant container's events.

The console turns what you type into these; tests and benchmarks dispatch them too, so every path through the Bolt
app is the production one (signature check included). Events API envelopes come from ``SlackEmulator.event_payload``.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from labbot.bot.slack.signing import signed_headers

FORM = "application/x-www-form-urlencoded"
JSON = "application/json"


@dataclass(frozen=True)
class Workspace:
    team_id: str
    app_id: str
    channel: str
    channel_name: str = "lab"


def slash_command(ws: Workspace, *, user: str, user_name: str, text: str, command: str = "/lab") -> str:
    return urlencode(
        {
            "token": "unused-verification-token",
            "team_id": ws.team_id,
            "team_domain": "lab",
            "channel_id": ws.channel,
            "channel_name": ws.channel_name,
            "user_id": user,
            "user_name": user_name,
            "command": command,
            "text": text,
            "api_app_id": ws.app_id,
            "response_url": "https://hooks.slack.invalid/commands/unused",
            "trigger_id": f"{uuid.uuid4().int % 10**12}.{uuid.uuid4().hex[:10]}",
        }
    )


def _block_actions(ws: Workspace, user: str, container: dict[str, Any], button: dict[str, str], **where: Any) -> str:
    """A ``block_actions`` interaction: one button of ``container`` pressed by ``user``, form-encoded."""
    payload: dict[str, Any] = {
        "type": "block_actions",
        "team": {"id": ws.team_id, "domain": "lab"},
        "user": {"id": user, "team_id": ws.team_id},
        "api_app_id": ws.app_id,
        "token": "unused-verification-token",
        "container": container,
        "trigger_id": f"{uuid.uuid4().int % 10**12}.{uuid.uuid4().hex[:10]}",
        **where,
        "actions": [{"type": "button", **button, "action_ts": f"{uuid.uuid4().int % 10**10}.000100"}],
    }
    return urlencode({"payload": json.dumps(payload)})


def button_click(ws: Workspace, *, user: str, action_id: str, value: str, message_ts: str) -> str:
    return _block_actions(
        ws,
        user,
        {"type": "message", "message_ts": message_ts, "channel_id": ws.channel},
        {"action_id": action_id, "block_id": "run_actions", "value": value},
        channel={"id": ws.channel, "name": ws.channel_name},
        message={"ts": message_ts, "type": "message"},
        response_url="https://hooks.slack.invalid/actions/unused",
    )


def feedback_click(
    ws: Workspace, *, user: str, value: str, message_ts: str, thread_ts: str | None = None, channel: str | None = None
) -> str:
    """A press of one of Block Kit's feedback buttons (``value``: the pressed button's value)."""
    where = channel or ws.channel
    message: dict[str, Any] = {"ts": message_ts, "type": "message"}
    if thread_ts:
        message["thread_ts"] = thread_ts
    payload: dict[str, Any] = {
        "type": "block_actions",
        "team": {"id": ws.team_id, "domain": "lab"},
        "user": {"id": user, "team_id": ws.team_id},
        "api_app_id": ws.app_id,
        "token": "unused-verification-token",
        "container": {"type": "message", "message_ts": message_ts, "channel_id": where},
        "trigger_id": f"{uuid.uuid4().int % 10**12}.{uuid.uuid4().hex[:10]}",
        "channel": {"id": where, "name": ws.channel_name},
        "message": message,
        "response_url": "https://hooks.slack.invalid/actions/unused",
        "actions": [
            {
                "type": "feedback_buttons",
                "action_id": "answer_feedback",
                "block_id": "feedback",
                "value": value,
                "action_ts": f"{uuid.uuid4().int % 10**10}.000100",
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)})


def view_submission(ws: Workspace, *, user: str, view: dict[str, Any], values: dict[str, dict[str, str]]) -> str:
    """A modal submitted: ``view`` as labbot opened it, ``values`` block id → action id → the text typed."""
    state = {
        block: {action: {"type": "plain_text_input", "value": text} for action, text in actions.items()}
        for block, actions in values.items()
    }
    payload: dict[str, Any] = {
        "type": "view_submission",
        "team": {"id": ws.team_id, "domain": "lab"},
        "user": {"id": user, "team_id": ws.team_id},
        "api_app_id": ws.app_id,
        "token": "unused-verification-token",
        "trigger_id": f"{uuid.uuid4().int % 10**12}.{uuid.uuid4().hex[:10]}",
        "view": {**view, "state": {"values": state}},
    }
    return urlencode({"payload": json.dumps(payload)})


def signed(body: str, secret: str, *, content_type: str = FORM, timestamp: int | None = None) -> dict[str, str]:
    return signed_headers(body, secret, timestamp=timestamp, content_type=content_type)


def _event_envelope(ws: Workspace, event: dict[str, Any], event_id: str | None) -> str:
    return json.dumps(
        {
            "token": "unused-verification-token",
            "team_id": ws.team_id,
            "api_app_id": ws.app_id,
            "event": event,
            "type": "event_callback",
            "event_id": event_id or f"Ev0{uuid.uuid4().hex[:9].upper()}",
            "event_time": int(float(event["event_ts"])),
            "authorizations": [{"team_id": ws.team_id, "user_id": "U0LABBOT01", "is_bot": True}],
        }
    )


def _now_ts() -> str:
    return f"{time.time():.6f}"


def app_home_opened(ws: Workspace, *, user: str, dm: str, tab: str = "home", event_id: str | None = None) -> str:
    """The Events API envelope of ``user`` opening the app's Home tab (``dm``: the app's DM with them), JSON."""
    event = {"type": "app_home_opened", "user": user, "channel": dm, "tab": tab, "event_ts": _now_ts()}
    return _event_envelope(ws, event, event_id)


def assistant_thread_started(ws: Workspace, *, user: str, dm: str, thread_ts: str, event_id: str | None = None) -> str:
    """The envelope of ``user`` opening the assistant container: a new assistant thread in the app's DM, JSON."""
    thread = {"user_id": user, "channel_id": dm, "thread_ts": thread_ts, "context": {}}
    event = {"type": "assistant_thread_started", "assistant_thread": thread, "event_ts": _now_ts()}
    return _event_envelope(ws, event, event_id)


def home_click(ws: Workspace, *, user: str, action_id: str, value: str, view_id: str) -> str:
    """A press of a button on the Home tab (the container is the view; no channel), form-encoded."""
    return _block_actions(
        ws,
        user,
        {"type": "view", "view_id": view_id},
        {"action_id": action_id, "block_id": "home", "value": value},
        view={"id": view_id, "type": "home"},
    )
