"""``handlers.runs.stop_or_restart`` (``/lab stop`` / ``/lab restart`` and the run card's buttons): the run's owner or
an admin, by the same rule the agents' approval gate follows (labbot.training.permissions)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from labbot.bot.config import SlackSettings
from labbot.bot.slack.handlers import Asker, SlackDeps
from labbot.bot.slack.handlers.runs import stop_or_restart

OWNER, OTHER, ADMIN = "U0ALICE001", "U0BOB00001", "U0ADMIN001"


class Fakes:
    def __init__(self) -> None:
        self.told: list[tuple[str, str]] = []
        self.done: list[tuple[str, str, str]] = []

    async def chat_postEphemeral(self, *, channel: str, user: str, text: str, blocks: Any = None) -> None:
        self.told.append((user, text))

    def get(self, run_id: str) -> dict[str, Any]:
        return {"id": run_id, "owner": OWNER, "attempt": 1}

    def stop(self, run_id: str, *, by: str) -> dict[str, Any]:
        self.done.append(("stop", run_id, by))
        return self.get(run_id)

    def restart(self, run_id: str, *, by: str) -> dict[str, Any]:
        self.done.append(("restart", run_id, by))
        return {**self.get(run_id), "attempt": 2}

    async def record_action(self, run_id: str, text: str) -> None:
        pass


@pytest.mark.parametrize("verb", ["stop", "restart"])
def test_only_the_runs_owner_or_an_admin_stops_or_restarts_it(verb: str) -> None:
    fakes = Fakes()
    settings = SlackSettings(admins=frozenset({ADMIN}))
    deps = SlackDeps(fakes, fakes, fakes, settings)  # type: ignore[arg-type]
    asyncio.run(stop_or_restart(deps, "k3xq7p", verb, Asker(OTHER, "C0LAB00001")))
    assert fakes.done == []
    assert f"only the run's owner or an admin (<@{OWNER}> or an admin) can {verb} run `k3xq7p`" in fakes.told[-1][1]
    for who in (OWNER, ADMIN):
        asyncio.run(stop_or_restart(deps, "k3xq7p", verb, Asker(who, "C0LAB00001")))
    assert fakes.done == [(verb, "k3xq7p", f"slack:{OWNER}"), (verb, "k3xq7p", f"slack:{ADMIN}")]
