"""SlackPageNotifier as the outbox's Slack channel, against the Slack emulator, SQLite, the real Pager and Outbox.

Time is a fake clock shared by the pager, the outbox, the notifier and the emulator's message timestamps, so a minute
of Slack answering 500 passes in milliseconds. Every Web API call made in a test must match Slack's published spec
(the ``slack`` fixture checks them when the test ends).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fakes.slack import Call, SlackFake, started
from slack_sdk.http_retry import builtin_async_handlers
from sqlalchemy import select
from support import Clock, NoJitter

from labbot.agents.babysitter.outbox import Outbox
from labbot.agents.babysitter.pager import Pager
from labbot.agents.babysitter.policy import PagingPolicy
from labbot.bot.console.emulator import Message
from labbot.bot.slack.pager_notifier import METADATA_EVENT, SlackPageNotifier, outbox_client
from labbot.bot.slack.thread_plan import Cadence
from labbot.bot.slack.threads import RunThreads
from labbot.storage.db import Database
from labbot.storage.models import Delivery, DeliveryState, Run
from labbot.training.launcher import RayLauncher
from labbot.training.monitoring import Finding
from labbot.training.ray_cluster import RayConnection
from labbot.training.registry import JobRegistry
from labbot.training.run_json import run_view
from labbot.training.service import RunService
from labbot.training.telemetry_store import TelemetryStore

ALICE, BOB = "U0ALICE001", "U0BOB00001"
RUN_ID = "r0pager001"
HUNG = Finding("hung", "page", "step stuck at 40 for 30s", {})
START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
UNREACHABLE_RAY = "http://127.0.0.1:9"  # the notifier never calls Ray; nothing answers there


class Lab:
    """labbot's paging path, wired as ``labbot serve`` wires it, around one running run owned by alice."""

    def __init__(self, tmp_path: Path, slack: SlackFake, clock: Clock, *, oncall_channel: str | None = None) -> None:
        self.slack, self.clock = slack, clock
        self.db = Database(f"sqlite:///{tmp_path / 'labbot.db'}")
        self.db.upgrade()
        service = RunService(
            self.db,
            JobRegistry.from_config({}),
            RayLauncher(RayConnection(UNREACHABLE_RAY, None), timeout=1),
            control_url="http://127.0.0.1:9",
            checkpoint_root=tmp_path / "runs",
        )
        self.threads = RunThreads(slack.async_client(), service, TelemetryStore(self.db), Cadence(), clock=clock)
        self.pager = Pager(
            self.db, PagingPolicy(oncall_channel=oncall_channel), slack=True, pagerduty=False, clock=clock
        )
        client = outbox_client(slack.bot_token, slack.start())
        self.notifier = SlackPageNotifier(client, self.threads, usergroup="S0ONCALL", clock=clock)
        self.outbox = Outbox(self.db, {"slack": self.notifier}, clock=clock, rng=NoJitter())
        self.thread_ts = ""

    def open_run(self) -> None:
        """A running run whose card (the thread's root) is in the lab channel."""
        with self.db.session() as s:
            s.add(
                Run(
                    id=RUN_ID, job="tiny-lm", name="tiny lm", owner=ALICE, config={"params": {"steps": 200}},
                    status="running", telemetry_token_hash="0" * 64, created_at=self.clock(), last_step=40,
                )
            )  # fmt: skip
        with self.db.session() as s:
            run = run_view(s.get_one(Run, RUN_ID))
        self.thread_ts = asyncio.run(self.threads.open_thread(run, self.slack.default_channel))

    def page(self, finding: Finding = HUNG) -> str:
        """The watchdog's tick finding ``finding`` on the run: the page's id."""
        with self.db.session() as s:
            self.pager.judge(s, s.get_one(Run, RUN_ID), {}, [finding], self.clock())
        return str(self.pager.pages(run_id=RUN_ID)[0]["id"])

    def drain(self) -> int:
        return asyncio.run(self.outbox.drain())

    def deliveries(self, **where: Any) -> list[Delivery]:
        with self.db.session() as s:
            q = select(Delivery).filter_by(**where).order_by(Delivery.id)
            return list(s.scalars(q))

    def delivery(self, target: str, action: str = "post") -> Delivery:
        rows = [d for d in self.deliveries(action=action, target=target) if d.payload.get("template") != "note"]
        assert len(rows) == 1, rows
        return rows[0]

    def thread_pages(self) -> list[Message]:
        return self._pages(self.slack.messages(self.slack.default_channel, thread_ts=self.thread_ts))

    def dm_pages(self) -> list[Message]:
        return self._pages(self.slack.messages(self.slack.dm_channel(ALICE)))

    def _pages(self, messages: list[Message]) -> list[Message]:
        """The page messages among ``messages``: those whose metadata names a page delivery (notes carry it too)."""
        pages = {d.id for d in self.deliveries(action="post") if d.payload.get("template") == "page"}
        return [
            m
            for m in messages
            if (m.metadata or {}).get("event_type") == METADATA_EVENT
            and (m.metadata or {}).get("event_payload", {}).get("delivery") in pages
        ]


def _outbox_posts(slack: SlackFake) -> list[Call]:
    """The chat.postMessage calls the notifier made (the run card and its launch line carry no metadata)."""
    return [c for c in slack.calls_to("chat.postMessage") if "metadata" in c.params]


def _action_ids(m: Message) -> list[str]:
    return [e["action_id"] for b in m.blocks if b["type"] == "actions" for e in b["elements"]]


def _context(m: Message) -> str:
    return " ".join(e["text"] for b in m.blocks if b["type"] == "context" for e in b["elements"])


@pytest.fixture
def clock() -> Clock:
    return Clock(START)


@pytest.fixture
def slack(clock: Clock) -> Iterator[SlackFake]:
    """The emulator on a local port; when the test ends, every call it got is checked against Slack's spec."""
    with started(clock=clock.timestamp) as fake:
        yield fake


@pytest.fixture
def lab(tmp_path: Path, slack: SlackFake, clock: Clock) -> Lab:
    lab = Lab(tmp_path, slack, clock)
    lab.open_run()
    return lab


def test_a_page_goes_to_the_runs_thread_and_the_owners_dm_with_its_buttons(lab: Lab, slack: SlackFake) -> None:
    page_id = lab.page()
    assert lab.drain() == 2
    (in_thread,) = lab.thread_pages()
    (in_dm,) = lab.dm_pages()
    for m, target in ((in_thread, "thread"), (in_dm, f"dm:{ALICE}")):
        d = lab.delivery(target)
        assert d.state == DeliveryState.SENT.value and d.attempts == 1
        assert d.result == {"channel": m.channel, "ts": m.ts}
        assert m.metadata == {"event_type": METADATA_EVENT, "event_payload": {"delivery": d.id}}
        assert m.text.startswith(f"<@{ALICE}> hung on run {RUN_ID}: step stuck at 40 for 30s"), m.text
        assert f"Owner: <@{ALICE}>" in m.blocks[0]["text"]["text"]
        assert _action_ids(m) == ["page_ack", "page_resolve", "run_stop"]
        buttons = {e["action_id"]: e["value"] for b in m.blocks if b["type"] == "actions" for e in b["elements"]}
        assert buttons == {"page_ack": page_id, "page_resolve": page_id, "run_stop": RUN_ID}
        assert f"page `{page_id}` · triggered" in _context(m)
    assert in_thread.thread_ts == lab.thread_ts and in_dm.thread_ts is None
    assert not slack.calls_to("conversations.replies") and not slack.calls_to("conversations.history")

    lab.clock.advance(3600)
    assert lab.drain() == 0  # nothing is sent twice
    assert len(lab.thread_pages()) == 1 and len(lab.dm_pages()) == 1


def test_slack_answering_500_for_a_minute_delays_the_page_and_shows_it_once(lab: Lab, slack: SlackFake) -> None:
    slack.fail_next(500, on="chat.postMessage", times=1000)
    lab.page()
    start = lab.clock()
    gaps: list[float] = []
    while lab.clock() - start <= timedelta(seconds=60) or len(gaps) < 3:
        assert lab.drain() == 0
        thread, dm = lab.delivery("thread"), lab.delivery(f"dm:{ALICE}")
        assert thread.state == DeliveryState.PENDING.value and thread.attempts == len(gaps) + 1
        assert "Slack answered 500 internal_error" in (thread.last_error or "")
        assert dm.state == DeliveryState.PENDING.value and dm.attempts == 0  # waits behind it: order holds
        assert lab.thread_pages() == [] and lab.dm_pages() == []
        gaps.append((thread.next_attempt_at - lab.clock()).total_seconds())
        lab.clock.now = thread.next_attempt_at
    assert lab.clock() - start > timedelta(seconds=60)
    assert gaps == sorted(gaps) and gaps[0] > 0 and gaps[-1] <= lab.outbox.max_backoff_s, gaps
    failed = _outbox_posts(slack)
    assert len(failed) == len(gaps) and all(c.status == 500 and c.failed for c in failed)
    assert len(slack.calls_to("conversations.replies")) == len(gaps) - 1  # every try after the first looked first

    slack.clear_failures(on="chat.postMessage")
    assert lab.drain() == 2
    assert len(lab.thread_pages()) == 1 and len(lab.dm_pages()) == 1
    thread = lab.delivery("thread")
    assert thread.state == DeliveryState.SENT.value and thread.attempts == len(gaps) + 1
    assert thread.result["ts"] == lab.thread_pages()[0].ts and thread.last_error is None
    lab.clock.advance(600)
    assert lab.drain() == 0
    assert len(lab.thread_pages()) == 1 and len(lab.dm_pages()) == 1


def test_a_crash_after_slack_accepted_does_not_post_the_page_twice(lab: Lab, slack: SlackFake) -> None:
    lab.page()
    assert lab.drain() == 2
    before = {d.target: dict(d.result) for d in lab.deliveries(action="post")}
    posts = len(_outbox_posts(slack))
    with lab.db.session() as s:  # labbot died between Slack's answer and recording it
        for d in s.scalars(select(Delivery).where(Delivery.action == "post")):
            d.state, d.attempts, d.result, d.sent_at = DeliveryState.SENDING.value, 1, {}, None
    assert lab.outbox.recover() == 2

    assert lab.drain() == 2
    assert len(_outbox_posts(slack)) == posts
    assert len(lab.thread_pages()) == 1 and len(lab.dm_pages()) == 1
    for d in lab.deliveries(action="post"):
        assert d.state == DeliveryState.SENT.value and d.attempts == 2
        assert d.result == before[d.target]
    (replies,) = slack.calls_to("conversations.replies")
    (history,) = slack.calls_to("conversations.history")
    assert replies.params["ts"] == lab.thread_ts and replies.params["include_all_metadata"] in (True, "1", "true")
    assert history.params["channel"] == slack.dm_channel(ALICE)


def test_a_crash_before_slack_got_the_page_posts_it_after_looking(lab: Lab, slack: SlackFake) -> None:
    lab.page()
    assert lab.drain() == 2
    old = lab.delivery("thread").result["ts"]
    slack.client().chat_delete(channel=slack.default_channel, ts=old)  # as if it never reached Slack
    with lab.db.session() as s:
        d = s.get_one(Delivery, lab.delivery("thread").id)
        d.state, d.attempts, d.result = DeliveryState.SENDING.value, 1, {}
    assert lab.outbox.recover() == 1

    lab.clock.advance(1)
    assert lab.drain() == 1
    (page,) = lab.thread_pages()
    assert page.ts != old and lab.delivery("thread").result["ts"] == page.ts
    assert len(slack.calls_to("conversations.replies")) == 1


def test_acknowledging_and_resolving_re_render_every_posted_copy(lab: Lab, slack: SlackFake) -> None:
    page_id = lab.page()
    assert lab.drain() == 2
    lab.clock.advance(120)
    lab.pager.acknowledge(page_id, by=BOB)
    assert lab.drain() == 1
    updates = slack.calls_to("chat.update")
    assert {(c.params["channel"], c.params["ts"]) for c in updates} == {
        (m.channel, m.ts) for m in lab.thread_pages() + lab.dm_pages()
    }
    for m in lab.thread_pages() + lab.dm_pages():
        assert m.edited
        assert f"acknowledged by <@{BOB}> at 12:02 UTC" in _context(m)
        assert _action_ids(m) == ["page_resolve", "run_stop"]
        assert m.blocks[0]["text"]["text"].startswith(":eyes: *hung*")

    lab.pager.resolve(page_id, by=BOB)
    assert lab.drain() == 2  # the note in the thread, the refresh
    assert len(slack.calls_to("chat.update")) == 4
    for m in lab.thread_pages() + lab.dm_pages():
        assert f"resolved by <@{BOB}>" in _context(m) and _action_ids(m) == []
    notes = [m.text for m in slack.messages(slack.default_channel, thread_ts=lab.thread_ts)]
    assert f":white_check_mark: page `{page_id}` resolved by <@{BOB}>." in notes
    assert len(lab.thread_pages()) == 1 and len(lab.dm_pages()) == 1


def test_a_channel_that_does_not_exist_is_dead_and_not_retried(tmp_path: Path, slack: SlackFake, clock: Clock) -> None:
    lab = Lab(tmp_path, slack, clock, oncall_channel="C0NOPE0001")
    with lab.db.session() as s:  # a cluster page: no run, so level 0 is the on-call channel
        lab.pager.judge(s, None, {}, [Finding("infra", "page", "the Ray API has not answered for 2m", {})], clock())
    assert lab.drain() == 0
    (d,) = lab.deliveries()
    assert d.target == "channel:C0NOPE0001"
    assert d.state == DeliveryState.DEAD.value and d.attempts == 1
    assert "channel_not_found" in (d.last_error or "")
    clock.advance(24 * 3600)
    assert lab.drain() == 0
    (call,) = slack.calls_to("chat.postMessage")
    assert call.params["channel"] == "C0NOPE0001" and call.error == "channel_not_found"
    assert lab.deliveries()[0].attempts == 1


def test_a_429_is_retried_after_retry_after(lab: Lab, slack: SlackFake, monkeypatch: pytest.MonkeyPatch) -> None:
    waited: list[float] = []

    async def fake_sleep(seconds: float) -> None:  # the client's own waits between its 429 retries
        waited.append(seconds)
        await asyncio.sleep(0)

    monkeypatch.setattr(builtin_async_handlers, "asyncio", SimpleNamespace(sleep=fake_sleep))
    slack.fail_next(429, on="chat.postMessage", retry_after=7, times=5)
    lab.page()
    assert lab.drain() == 0
    assert len(_outbox_posts(slack)) == 4  # the call and the client's 3 retries
    assert len(waited) == 3 and all(7 <= w < 8 for w in waited), waited
    thread = lab.delivery("thread")
    assert thread.state == DeliveryState.PENDING.value and thread.attempts == 1
    assert "429" in (thread.last_error or "")
    assert thread.next_attempt_at == lab.clock() + timedelta(seconds=7)  # Retry-After, not the 1 s backoff

    lab.clock.advance(6)
    assert lab.drain() == 0
    assert len(_outbox_posts(slack)) == 4  # not due yet

    lab.clock.advance(1)
    assert lab.drain() == 2
    assert [c.status for c in _outbox_posts(slack)] == [429] * 5 + [200, 200]
    assert len(lab.thread_pages()) == 1 and len(lab.dm_pages()) == 1
    assert lab.delivery("thread").attempts == 2
