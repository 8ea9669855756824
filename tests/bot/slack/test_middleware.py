"""The guards in front of Slack's listeners, called directly: ``DropRepeats`` lets an event through once and drops
Slack's retries of it and messages from bots; ``ReplayGuard`` acts on a trigger id once."""

from __future__ import annotations

import asyncio
from typing import Any

from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse

from labbot.bot.slack.dedup import SeenKeys
from labbot.bot.slack.middleware import DropRepeats, ReplayGuard


def _request(body: dict[str, Any]) -> AsyncBoltRequest:
    return AsyncBoltRequest(body=body, mode="socket_mode")


def _through(drop: DropRepeats, body: dict[str, Any]) -> tuple[bool, BoltResponse | None]:
    """Whether the request went on to the listeners (``next``), and what the middleware answered."""
    passed: list[bool] = []

    async def next_() -> None:
        passed.append(True)

    answer = asyncio.run(drop(_request(body), BoltResponse(status=200), next_))
    return bool(passed), answer


def test_an_event_goes_through_once_and_its_retries_are_answered_200() -> None:
    drop = DropRepeats()
    event = {"type": "event_callback", "event_id": "Ev01", "event": {"type": "message", "text": "hi"}}
    assert _through(drop, event) == (True, None)
    passed, answer = _through(drop, event)  # Slack's retry: same event id
    assert not passed and answer is not None and answer.status == 200
    assert _through(drop, {**event, "event_id": "Ev02"}) == (True, None)


def test_messages_from_bots_never_reach_the_listeners() -> None:
    drop = DropRepeats()
    for n, event in enumerate([{"type": "message", "bot_id": "B01"}, {"type": "message", "subtype": "bot_message"}]):
        passed, answer = _through(drop, {"event_id": f"Ev{n}", "event": event})
        assert not passed and answer is not None and answer.status == 200


def test_commands_and_clicks_pass_whatever_their_shape() -> None:
    drop = DropRepeats()
    assert _through(drop, {"command": "/lab", "text": "runs"}) == (True, None)
    assert _through(drop, {"command": "/lab", "text": "runs"}) == (True, None)  # no event id: not an event retry


def test_an_event_forgotten_after_its_ttl_goes_through_again() -> None:
    now = [0.0]
    drop = DropRepeats(SeenKeys(ttl_s=60, clock=lambda: now[0]))
    event = {"event_id": "Ev01", "event": {"type": "message"}}
    assert _through(drop, event)[0]
    now[0] = 61.0
    assert _through(drop, event)[0]


def test_a_trigger_id_is_acted_on_once_per_kind() -> None:
    guard = ReplayGuard(SeenKeys(ttl_s=3600))

    async def go() -> list[bool]:
        command = {"trigger_id": "123.456"}
        click = {"actions": [{"action_ts": "789.000"}]}
        return [
            await guard.replayed("command", command),
            await guard.replayed("command", command),
            await guard.replayed("action", command),  # another kind: its own key
            await guard.replayed("action", click),
            await guard.replayed("action", click),
            await guard.replayed("command", {}),  # no trigger: never a replay
            await guard.replayed("command", {}),
        ]

    assert asyncio.run(go()) == [False, True, False, False, True, False, False]
