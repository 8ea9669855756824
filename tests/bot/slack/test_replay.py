"""A signed Slack request replayed while its signature is still valid acts once: a `/lab restart` sent twice restarts
once, a button payload replayed later (past the double-click guard) acts once, and so does a replay that reaches a
restarted labbot or another replica (the trigger ids are in the database). Bolt's real signature check runs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any, cast
from urllib.parse import parse_qs, urlencode

import pytest
from fakes.slack import SlackFake, started
from slack_bolt.request.async_request import AsyncBoltRequest

from labbot.bot.config import SlackSettings
from labbot.bot.slack import app as slack_app
from labbot.bot.slack.handlers import SlackDeps
from labbot.bot.slack.payloads import Workspace, button_click, signed, slash_command
from labbot.bot.slack.tasks import TaskSet
from labbot.storage.db import Database
from labbot.storage.seen import DurableSeenKeys

SECRET = "replay-test-signing-secret"
WS = Workspace(team_id="T0LAB00001", app_id="A0LABBOT01", channel="C0LAB00001")
OWNER = "U0ALICE001"


class RecordingRuns:
    """Stands in for the run service and the run threads: records the stops and restarts the handlers asked for."""

    def __init__(self) -> None:
        self.acts: list[tuple[str, str]] = []

    def get(self, run_id: str) -> dict[str, Any]:
        return {"id": run_id, "owner": OWNER, "attempt": 1}

    def stop(self, run_id: str, *, by: str) -> dict[str, Any]:
        self.acts.append((run_id, "stop"))
        return self.get(run_id)

    def restart(self, run_id: str, *, by: str) -> dict[str, Any]:
        self.acts.append((run_id, "restart"))
        return {**self.get(run_id), "attempt": 2}

    async def record_action(self, run_id: str, text: str) -> None:
        pass


@pytest.fixture
def slack() -> Iterator[SlackFake]:
    with started(check_spec=False) as fake:
        yield fake


def _dispatch_twice(
    slack: SlackFake, db: Database, bodies: list[str], *, restart_between: bool = False
) -> RecordingRuns:
    """Dispatch each body, signed once (a replay: the same body and headers again); with ``restart_between`` each
    request reaches a new app (labbot restarted, or another replica), sharing only the database."""
    runs = RecordingRuns()
    deps = SlackDeps(slack.async_client(), cast(Any, runs), cast(Any, runs), SlackSettings())

    def new_app(tasks: TaskSet) -> Any:
        return slack_app.build_app(
            deps=deps,
            signing_secret=SECRET,
            tasks=tasks,
            triggers=DurableSeenKeys(db, ttl_s=slack_app.REPLAY_TTL_S),
        )

    async def go() -> None:
        tasks = TaskSet()
        app = new_app(tasks)
        signed_once = {body: signed(body, SECRET) for body in bodies}
        for body in bodies:
            if restart_between:
                app = new_app(tasks)
            response = await app.async_dispatch(AsyncBoltRequest(body=body, headers=dict(signed_once[body])))
            assert response.status == 200, response.body
            await asyncio.sleep(0.3)  # Bolt runs the rest of a listener after its ack, as a task of its own
            await tasks.drain()

    asyncio.run(go())
    return runs


def test_a_replayed_signed_restart_acts_once(slack: SlackFake, db: Database) -> None:
    body = slash_command(WS, user=OWNER, user_name="alice", text="restart abc234")
    assert _dispatch_twice(slack, db, [body, body]).acts == [("abc234", "restart")]


def test_a_replay_after_labbot_restarts_or_at_another_replica_acts_once(slack: SlackFake, db: Database) -> None:
    body = slash_command(WS, user=OWNER, user_name="alice", text="restart abc234")
    assert _dispatch_twice(slack, db, [body, body], restart_between=True).acts == [("abc234", "restart")]
    click = button_click(WS, user=OWNER, action_id="run_stop", value="abc234", message_ts="1700000000.000100")
    assert _dispatch_twice(slack, db, [click, click], restart_between=True).acts == [("abc234", "stop")]


def test_a_button_payload_replayed_later_acts_once(
    slack: SlackFake, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = button_click(WS, user=OWNER, action_id="run_restart", value="abc234", message_ts="1700000000.000100")
    # the double-click guard forgets after seconds; a replay comes later than that
    monkeypatch.setattr(slack_app, "SeenKeys", _forgetful_clicks(slack_app.SeenKeys))
    assert _dispatch_twice(slack, db, [body, body]).acts == [("abc234", "restart")]
    # the same payload again, later still: still a replay; two real clicks (two trigger ids) on runs act twice
    first, second = (json.loads(parse_qs(body)["payload"][0]) for _ in range(2))
    first["trigger_id"], second["trigger_id"], second["actions"][0]["value"] = "111.one", "111.two", "def567"
    bodies = [body, *(urlencode({"payload": json.dumps(p)}) for p in (first, second))]
    again = _dispatch_twice(slack, db, bodies)
    assert again.acts == [("abc234", "restart"), ("def567", "restart")]


def _forgetful_clicks(real: type) -> Any:
    """SeenKeys, except the 10-second double-click guard remembers nothing (as if the replay came later)."""

    def make(ttl_s: float, **kwargs: Any) -> Any:
        return real(-1.0, **kwargs) if ttl_s <= 10 else real(ttl_s, **kwargs)

    return make
