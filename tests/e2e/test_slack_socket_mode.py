"""Socket Mode: with SLACK_APP_TOKEN set, `labbot serve` opens Slack's websocket (through `apps.connections.open` at
SLACK_API_URL) with the official AsyncSocketModeHandler; a slash command arriving over it is acked within 3 s and
launches the run with its card in the channel. No HTTP door exists without a signing secret."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import httpx
from fakes.slack import SlackFake
from support import Serve, wait_for

from labbot.training.ray_cluster import RayConnection


def test_slash_command_over_socket_mode(tmp_path: Path, ray_head: RayConnection) -> None:
    fake = SlackFake()
    url = fake.start()
    env = {"SLACK_BOT_TOKEN": fake.bot_token, "SLACK_APP_TOKEN": "xapp-1-A0LABBOT01-test", "SLACK_API_URL": url}
    serve = Serve(tmp_path / "home", ray_address=ray_head.address, ray_token=ray_head.token, extra_env=env).start()
    try:
        wait_for(lambda: fake.socket.connected, timeout=30, what="labbot's Socket Mode connection")
        payload = {
            "token": "unused",
            "team_id": fake.team_id,
            "team_domain": "lab",
            "channel_id": fake.default_channel,
            "channel_name": "lab",
            "user_id": "U0ALICE001",
            "user_name": "alice",
            "command": "/lab",
            "text": "launch tiny-lm steps=20",
            "api_app_id": fake.app_id,
            "response_url": "https://hooks.slack.invalid/commands/unused",
            "trigger_id": f"{uuid.uuid4().int % 10**12}.socket",
        }
        start = time.monotonic()
        envelope = fake.socket.send("slash_commands", payload)
        wait_for(lambda: fake.socket.ack(envelope) is not None, timeout=3, interval=0.02, what="the ack")
        assert time.monotonic() - start < 3
        card = wait_for(
            lambda: next((m for m in fake.messages(fake.default_channel) if m.bot_id), None),
            timeout=30,
            what="the run card",
        )
        assert "tiny-lm" in card.text
        # Socket Mode only: POST /slack/events does not exist, so nothing unsigned gets in
        r = httpx.post(f"{serve.url}/slack/events", content=b"command=%2Flab&text=runs")
        assert r.status_code == 404
        assert httpx.get(f"{serve.url}/readyz").json()["slack"] == "socket"  # on loopback: /readyz says it
        fake.check_against_spec()
    finally:
        serve.stop()
        fake.stop()
