"""The App Home tab: what it shows (nothing yet, 500 runs), and how often it is published when Slack resends
``app_home_opened`` and things change (the card's rule), through the real Bolt app and slack_sdk client."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from fakes.slack import SlackFake
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from support import Clock

from labbot.agents.babysitter.pager import Pager
from labbot.agents.babysitter.policy import PagingPolicy
from labbot.agents.fleet.sessions import SessionStore
from labbot.bot.config import SlackSettings
from labbot.bot.console.blocks import VIEW_MAX_BLOCKS, block_errors
from labbot.bot.integrations import agents_line
from labbot.bot.slack import app as slack_app
from labbot.bot.slack.blocks.home import RUNS_PER_PAGE, HomeData, home_view
from labbot.bot.slack.handlers import Asker, SlackDeps
from labbot.bot.slack.handlers.runs import stop_or_restart
from labbot.bot.slack.home import AppHome, HomeSources
from labbot.bot.slack.payloads import JSON, signed
from labbot.bot.slack.runtime import web_client
from labbot.bot.slack.tasks import TaskSet
from labbot.bot.slack.thread_plan import Cadence, HomeState, home_due
from labbot.storage.artifacts import ArtifactStore
from labbot.storage.db import Database
from labbot.storage.models import Artifact, Incident, Run
from labbot.storage.seen import DurableSeenKeys
from labbot.training.service import RunService

SECRET = "home-test-signing-secret"
ALICE, BOB = "U0ALICE001", "U0BOB00001"
T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def add_runs(db: Database, owner: str, n: int, *, job: str = "tiny-lm", status: str = "running") -> list[str]:
    ids = [f"r{owner[-4:].lower()}{job[:2]}{i:04d}" for i in range(n)]
    with db.session() as s:
        for i, run_id in enumerate(ids):
            s.add(
                Run(
                    id=run_id, job=job, name=f"{job}-{i}", owner=owner, status=status, attempt=1,
                    config={"params": {"steps": 300}, "headline": "loss"}, telemetry_token_hash="0" * 64,
                    metrics={"loss": 2.5 - i / 1000, "pass_rate": 0.5}, last_step=10 + i,
                    created_at=T0 + timedelta(seconds=i),
                )
            )  # fmt: skip
    return ids


def texts(view: dict[str, Any] | None) -> str:
    """Every text of a view's blocks, one a line."""
    assert view is not None
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("text"), str):
                out.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(view["blocks"])
    return "\n".join(out)


def home_for(slack: SlackFake, db: Database, clock: Clock | None = None, **kw: Any) -> AppHome:
    client = web_client(slack.bot_token, slack.start())
    runs = RunService(db, cast(Any, None), cast(Any, None), control_url="http://127.0.0.1:9", checkpoint_root=Path())
    pager = Pager(db, PagingPolicy(), slack=True, pagerduty=False)
    artifacts = ArtifactStore(db, "memory://home-test")  # only its rows are read
    sources = HomeSources(runs, SessionStore(db), pager, artifacts)
    return AppHome(client, sources, Cadence(card_every_s=120.0), clock=clock or Clock(T0), **kw)


def test_a_user_with_nothing_gets_a_friendly_home(slack: SlackFake, db: Database) -> None:
    home = home_for(slack, db, agents=agents_line(None))
    assert asyncio.run(home.opened(ALICE))
    view = slack.home_view(ALICE)
    assert view is not None and view["type"] == "home"
    text = texts(view)
    assert "Nothing of yours here yet" in text and "/lab launch tiny-lm" in text
    assert "*Agents*: off — no model is configured" in text, "a newcomer sees the agents are off, and why"


def test_500_runs_show_the_newest_page_within_block_kits_limits_and_a_way_to_see_more(
    slack: SlackFake, db: Database
) -> None:
    add_runs(db, ALICE, 500)
    add_runs(db, BOB, 3)
    home = home_for(slack, db)
    asyncio.run(home.opened(ALICE))
    view = slack.home_view(ALICE)
    assert (
        view is not None and len(view["blocks"]) <= VIEW_MAX_BLOCKS and not block_errors(view["blocks"], max_blocks=100)
    )
    text = texts(view)
    assert "1–10 of 500" in text
    assert "tiny-lm-499" in text and "tiny-lm-489" not in text and "rbob" not in text  # newest first, hers only
    older = [e for b in view["blocks"] if b.get("block_id") == "home_runs_pager" for e in b["elements"]]
    assert [e["text"]["text"] for e in older] == ["Older runs"]
    asyncio.run(home.show_page(ALICE, 49))  # the last page
    last = texts(slack.home_view(ALICE))
    assert "491–500 of 500" in last and "*tiny-lm-0*" in last
    asyncio.run(home.show_page(ALICE, 1000))  # past the end: the last page
    assert slack.home_publishes(ALICE) == 2  # the same view as shown: not published again


def test_the_home_shows_pages_agents_artifacts_evals_and_capacity(slack: SlackFake, db: Database) -> None:
    [run_id] = add_runs(db, ALICE, 1)
    add_runs(db, ALICE, 1, job="eval", status="succeeded")
    with db.session() as s:
        s.add(Incident(id="pg1", key=f"labbot-{run_id}-hung", run_id=run_id, kind="hung", severity="page",
                       summary="no step for 10 min", detail={}))  # fmt: skip
        s.add(Incident(id="pg2", key="labbot-cluster-infra", run_id=None, kind="infra", severity="page",
                       summary="Ray does not answer", detail={}))  # fmt: skip
        s.add(Artifact(id="art1", owner_agent=f"{ALICE}/assistant", name="diagnosis.md", sha256="0" * 64, size=3,
                       content_type="text/markdown", meta={}))  # fmt: skip
    SessionStore(db).open(channel="C0LAB00001", thread_ts="1764590000.000100", role="assistant", owner=ALICE,
                          run_id=run_id)  # fmt: skip
    capacity = {"purposes": [{"purpose": "training", "capped": True, "limits": {"runs": 4, "cpus": 8, "gpus": 0},
                              "use": {"runs": 1, "cpus": 2, "gpus": 0}, "queued": []}]}  # fmt: skip
    home = home_for(slack, db, capacity=lambda: capacity, admins={BOB})
    asyncio.run(home.opened(ALICE))
    text = texts(slack.home_view(ALICE))
    assert "pg1" in text and "pg2" not in text  # her run's page; the cluster's is for who is on call (admins)
    assert "diagnosis.md" in text and "pass rate 50%" in text and "runs 1/4" in text
    assert f"assistant in <#C0LAB00001> · run `{run_id}`" in text  # her agent's thread
    asyncio.run(home.opened(BOB))
    assert "pg2" in texts(slack.home_view(BOB))


def test_home_due_is_the_cards_rule() -> None:
    cadence = Cadence(card_every_s=120.0)
    shown = HomeState(digest="a", statuses="s", published_at=T0)
    assert home_due(HomeState(), digest="a", statuses="s", now=T0, cadence=cadence)  # never shown
    assert not home_due(shown, digest="a", statuses="s", now=T0 + timedelta(hours=1), cadence=cadence)  # no change
    assert home_due(shown, digest="b", statuses="t", now=T0 + timedelta(seconds=1), cadence=cadence)  # a status
    assert not home_due(shown, digest="b", statuses="s", now=T0 + timedelta(seconds=119), cadence=cadence)  # a step
    assert home_due(shown, digest="b", statuses="s", now=T0 + timedelta(seconds=120), cadence=cadence)


def opened_event(user: str, n: int) -> str:
    return json.dumps(
        {
            "token": "t", "team_id": "T0LAB00001", "api_app_id": "A0LABBOT01", "type": "event_callback",
            "event_id": f"Ev0HOME{n:05d}", "event_time": 1764590000 + n,
            "event": {"type": "app_home_opened", "user": user, "channel": "D0DM0000001", "tab": "home",
                      "event_ts": f"1764590000.{n:06d}"},
        }
    )  # fmt: skip


def test_app_home_opened_again_and_again_publishes_once_per_change(slack: SlackFake, db: Database) -> None:
    [run_id] = add_runs(db, ALICE, 1)
    clock = Clock(T0)
    home = home_for(slack, db, clock)
    client = web_client(slack.bot_token, slack.start())

    async def go() -> None:
        tasks = TaskSet()
        app: AsyncApp = slack_app.build_app(
            deps=SlackDeps(client, cast(Any, None), cast(Any, None), SlackSettings()), signing_secret=SECRET,
            tasks=tasks, triggers=DurableSeenKeys(db, ttl_s=slack_app.REPLAY_TTL_S), home=home,
        )  # fmt: skip

        async def opened(n: int) -> None:
            body = opened_event(ALICE, n)
            headers = dict(signed(body, SECRET, content_type=JSON))
            assert (await app.async_dispatch(AsyncBoltRequest(body=body, headers=headers))).status == 200

        async def handled(count: int) -> None:
            """Bolt runs the listener after the ack: await it, then the publishing it spawned."""
            for _ in range(200):
                if home.opened_count >= count:
                    break
                await asyncio.sleep(0.01)
            await tasks.drain()
            assert home.opened_count == count

        for n in range(5):  # Slack resends it: new event ids, nothing changed
            await opened(n)
            await handled(n + 1)
        await asyncio.gather(*(opened(n) for n in range(5, 10)))  # at once, too
        await handled(10)
        assert slack.home_publishes(ALICE) == 1

        with db.session() as s:  # only the step moves: within card_every_s, not published
            s.get_one(Run, run_id).last_step = 99
        clock.now += timedelta(seconds=30)
        await opened(10)
        await handled(11)
        assert await home.tick() == 0 and slack.home_publishes(ALICE) == 1
        clock.now += timedelta(seconds=120)
        assert await home.tick() == 1 and slack.home_publishes(ALICE) == 2
        with db.session() as s:  # the run ended: at once
            s.get_one(Run, run_id).status = "succeeded"
        clock.now += timedelta(seconds=1)
        assert await home.tick() == 1 and slack.home_publishes(ALICE) == 3
        await opened(11)
        await handled(12)
        assert await home.tick() == 0 and slack.home_publishes(ALICE) == 3

    asyncio.run(go())
    assert [c.params["user_id"] for c in slack.calls_to("views.publish")] == [ALICE] * 3


def test_the_empty_view_is_valid_block_kit() -> None:
    view = home_view(HomeData(user=ALICE), updated="12:00 UTC")
    assert not block_errors(view["blocks"], max_blocks=100) and RUNS_PER_PAGE * 2 + 10 <= 100


class RunsStub:
    """The run service and the run threads, as far as a Stop button needs them."""

    def get(self, run_id: str) -> dict[str, Any]:
        return {"id": run_id, "owner": ALICE, "attempt": 1}

    def stop(self, run_id: str, *, by: str) -> dict[str, Any]:
        return self.get(run_id)

    async def record_action(self, run_id: str, text: str) -> None:
        pass


def test_a_button_on_the_home_tab_is_answered_in_the_apps_dm(slack: SlackFake) -> None:
    stub = RunsStub()
    deps = SlackDeps(slack.async_client(), cast(Any, stub), cast(Any, stub), SlackSettings())
    asyncio.run(stop_or_restart(deps, "k3xq7p", "stop", Asker(ALICE, "")))  # a view has no channel
    [told] = slack.messages(slack.dm_channel(ALICE))
    assert "run `k3xq7p`: stopped the run" in told.text
