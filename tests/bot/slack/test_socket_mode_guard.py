"""Socket Mode's door (``labbot.bot.slack.socket_mode``), in process over the Slack fake's websocket: an envelope
whose payload is not a Slack payload labbot can act on — an array, a string, NaN, a view without its type — is acked
empty with one warning line, no traceback, and the connection goes on serving: a slash command after them is
answered as before. The app is built as ``labbot serve`` builds it (``SlackRuntime``), on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import logging
import math
from pathlib import Path
from typing import Any

import pytest
from fakes.slack import SlackFake
from support import SLEEPER, free_port, make_service

from labbot.bot.config import SlackSettings
from labbot.bot.slack.handlers import SlackDeps
from labbot.bot.slack.runtime import SlackCore, SlackRuntime
from labbot.bot.slack.socket_mode import envelope_refusal
from labbot.training.ray_cluster import RayConnection
from labbot.training.telemetry_store import TelemetryStore

ALICE = "U0ALICE001"


def _command(fake: SlackFake, text: str) -> dict[str, Any]:
    return {
        "token": "unused", "team_id": fake.team_id, "team_domain": "lab", "channel_id": fake.default_channel,
        "channel_name": "lab", "user_id": ALICE, "user_name": "alice", "command": "/lab", "text": text,
        "api_app_id": fake.app_id, "response_url": "https://hooks.slack.invalid/commands/1",
        "trigger_id": "1234.5678.socket",
    }  # fmt: skip


MALFORMED: list[tuple[str, Any]] = [
    ("interactive", []),
    ("slash_commands", "runs"),
    ("events_api", {"type": "event_callback", "event": math.nan}),
    ("interactive", {"type": "view_submission", "user": {"id": ALICE},
                     "view": {"id": "V1", "callback_id": "feedback_comment", "state": {"values": {}}}}),
    ("slash_commands", {"command": "/lab", "text": "runs"}),
    ("events_api", {"type": "event_callback", "event": {"type": "message", "text": "a\x00b"}}),
]  # fmt: skip


@pytest.mark.databases
def test_a_malformed_envelope_is_acked_and_logged_in_one_line(
    tmp_path: Path, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    fake = SlackFake(users={ALICE: "alice"})
    fake.start()
    nowhere = RayConnection(address=f"http://127.0.0.1:{free_port()}", token=None)
    service = make_service(tmp_path, nowhere, SLEEPER, database_url=database_url)
    settings = SlackSettings(bot_token=fake.bot_token, app_token="xapp-1-A0LABBOT01-test", api_url=str(fake.url))
    core = SlackCore.build(settings, service, TelemetryStore(service.db))
    runtime = SlackRuntime.build(SlackDeps(core.client, service, core.threads, settings))
    caplog.set_level(logging.INFO)

    async def acked(envelope_id: str) -> dict[str, Any]:
        for _ in range(300):
            if (answer := fake.socket.ack(envelope_id)) is not None:
                return answer
            await asyncio.sleep(0.01)
        raise AssertionError(f"envelope {envelope_id} was never acked")

    async def go() -> None:
        async with runtime.running():
            for _ in range(300):
                if fake.socket.connected:
                    break
                await asyncio.sleep(0.01)
            for kind, payload in MALFORMED:
                envelope = await asyncio.to_thread(fake.socket.send, kind, payload)
                assert await acked(envelope) == {}, (kind, payload)
            envelope = await asyncio.to_thread(fake.socket.send, "slash_commands", _command(fake, "help"))
            assert "launch" in str(await acked(envelope))  # still serving: /lab help answered in the ack

    try:
        asyncio.run(go())
    finally:
        service.launcher.close()
        service.db.dispose()
        fake.stop()
    refused = [r for r in caplog.records if r.name == "labbot.bot.slack.socket_mode"]
    assert len(refused) == len(MALFORMED) and all(r.levelname == "WARNING" for r in refused), caplog.text
    assert "view.type is missing" in caplog.text and "user_id is missing" in caplog.text
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], caplog.text
    assert "Traceback" not in caplog.text


def test_what_an_envelope_must_be() -> None:
    command = {"command": "/lab", "user_id": ALICE, "channel_id": "C1", "text": "runs"}
    assert envelope_refusal({"type": "slash_commands", "envelope_id": "e1", "payload": command}) is None
    assert envelope_refusal({"type": 7, "envelope_id": "e1", "payload": command}) == "its type is not a string"
    assert "the payload is null" in (envelope_refusal({"type": "interactive", "envelope_id": "e1"}) or "")
