"""The fleet never blocks the event loop on its database: 20 agent turns at once against a database that takes 50 ms
a query, each turn calling a read-only tool and a destructive one (approved, as a Slack button press is, on a worker
thread) through the production executor stack — audit, approval gate, outside waits, identity — while a probe
sleeps 1 ms at a time on the same loop and records how late it wakes. Its p99 stays under 10 ms; with the fleet's
SQL on the loop each query stalls it (and every other agent, Slack handler and tick) for 50 ms, and the p99 is
seconds.

The slow database is SQLite with a ``before_cursor_execute`` hook that sleeps 50 ms: every statement really takes
that long, on whichever thread runs it. SQLite writes one transaction at a time, so the turns' saves (seven
statements each under the write lock) queue for about 7 s however they are run. A quiet loop during that queue dilutes
the p99, so the hook also records any statement run on the loop's own thread: there must be none. The model is the
Anthropic fake over HTTP, through the real SDK."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from anyio import to_thread
from fakes.anthropic import FakeAnthropic, SeenRequest, Step, text, tool_uses
from sqlalchemy import event, func, select

from labbot.agents.fleet.approvals import ApprovalGate, ApprovalRequest
from labbot.agents.fleet.audit import AuditedExecutor, audit_rows
from labbot.agents.fleet.conversations import Fleet
from labbot.agents.fleet.identity import AgentIdentity
from labbot.agents.fleet.model import ModelSettings
from labbot.agents.fleet.runtime import AgentLimiter, AgentRuntime
from labbot.agents.fleet.tools import ToolCall, ToolExecutor, ToolResult, ToolSpec
from labbot.agents.fleet.waits import OutsideWaits
from labbot.storage.db import Database
from labbot.storage.models import AgentSession

TURNS = 20
QUERY_S = 0.050
PROBE_S = 0.001
P99_LIMIT_MS = 10.0
CHANNEL = "C0LAGS0001"
SCHEMA = {"type": "object", "properties": {"run_id": {"type": "string"}}}
TOOLS = [
    ToolSpec("lab__list_runs", "list runs", SCHEMA, read_only=True, server="lab"),
    ToolSpec("lab__stop_run", "stop a run", SCHEMA, destructive=True, server="lab"),
]


def owner(i: int) -> str:
    return f"U0LAG{i:05d}"


class SlowDatabase:
    """A migrated SQLite database whose every statement takes ``QUERY_S``; counts them, and those run on
    ``loop_thread``."""

    def __init__(self, path: Path) -> None:
        self.db = Database(f"sqlite:///{path}")
        self.db.upgrade()
        self.queries = 0
        self.on_loop: list[str] = []
        self.loop_thread: int | None = None
        event.listen(self.db.engine, "before_cursor_execute", self._slow)

    def _slow(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        self.queries += 1
        if threading.get_ident() == self.loop_thread:
            self.on_loop.append(" ".join(statement.split()[:3]))
        time.sleep(QUERY_S)


class Lab:
    """The tools' far side: answers at once."""

    def tools(self) -> Sequence[ToolSpec]:
        return TOOLS

    async def call(self, call: ToolCall) -> ToolResult:
        return ToolResult(f"{call.name}: done for {call.arguments.get('run_id')}")


class PressesApprove:
    """The approval prompt, answered at once by the run's owner, as bot/ handles the button: ``decide`` on a worker
    thread, then the prompt re-rendered."""

    def __init__(self) -> None:
        self.gate: ApprovalGate | None = None
        self.pressed: list[asyncio.Task[None]] = []

    async def ask(self, request: ApprovalRequest) -> None:
        self.pressed.append(asyncio.create_task(self.press(request)))

    async def press(self, request: ApprovalRequest) -> None:
        assert self.gate is not None
        gate, by = self.gate, request.approvers[0]
        decision = await to_thread.run_sync(lambda: gate.decide(request.id, approve=True, by=by))
        assert decision.ok, decision.message
        await gate.settled(request.id)

    async def settled(self, request: ApprovalRequest) -> None:
        pass


def model(request: SeenRequest) -> Step:
    """Lists the runs and stops the one asked about, then answers."""
    if request.tool_results():
        return text("stopped it")
    run_id = str(request.messages[-1]["content"]).split()[-1]
    return tool_uses(("lab__list_runs", {}), ("lab__stop_run", {"run_id": run_id}))


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(model=model) as server:
        yield server


async def turns_with_probe(slow: SlowDatabase, fake: FakeAnthropic) -> tuple[list[float], list[Any]]:
    db = slow.db
    slow.loop_thread = threading.get_ident()

    def read(run_id: str) -> str:  # like RunService.get: a query
        with db.session() as s:
            s.scalar(select(func.count()).select_from(AgentSession))
        return owner(int(run_id[1:]))

    prompter = PressesApprove()
    gate = ApprovalGate(Lab(), db, prompter, timeout_s=60, run_owner=read)
    prompter.gate = gate

    async def tools_for(role: str) -> ToolExecutor:  # bot/agents_wiring.py's stack
        return AuditedExecutor(gate.around(OutsideWaits(AgentIdentity(Lab()))), db)

    env = {"ANTHROPIC_API_KEY": fake.api_key, "ANTHROPIC_BASE_URL": fake.base_url}
    runtime = AgentRuntime.from_settings(ModelSettings.from_env(env), limiter=AgentLimiter())
    fleet = Fleet(db, runtime, tools_for, run_context=lambda run_id: f"run {run_id}: owner {read(run_id)}")
    lags: list[float] = []
    stop = asyncio.Event()

    async def probe() -> None:
        while not stop.is_set():
            before = time.perf_counter()
            await asyncio.sleep(PROBE_S)
            lags.append((time.perf_counter() - before - PROBE_S) * 1000)

    probing = asyncio.create_task(probe())
    try:
        answers = await asyncio.gather(
            *(
                fleet.ask(owner=owner(i), text=f"stop r{i}", channel=CHANNEL, thread_ts=f"1700.{i:06d}", run_id=f"r{i}")
                for i in range(TURNS)
            )
        )
        await asyncio.gather(*prompter.pressed)
    finally:
        stop.set()
        await probing
        await runtime.aclose()
    return lags, answers


def test_twenty_agent_turns_on_a_slow_database_leave_the_event_loop_free(tmp_path: Path, fake: FakeAnthropic) -> None:
    slow = SlowDatabase(tmp_path / "labbot.db")
    started = time.perf_counter()
    lags, answers = asyncio.run(turns_with_probe(slow, fake))
    took = time.perf_counter() - started

    assert [a.text for a in answers] == ["stopped it"] * TURNS, [a.text for a in answers]
    p50, p99 = statistics.median(lags), statistics.quantiles(lags, n=100)[98]
    assert p99 < P99_LIMIT_MS, (
        f"the event loop's lag: p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {max(lags):.1f} ms over {len(lags)} probes "
        f"({slow.queries} queries of {QUERY_S * 1000:.0f} ms, {took:.1f} s)"
    )
    assert slow.queries >= 15 * TURNS, "each turn's session, history, run, approval, audit rows and answer"
    assert not slow.on_loop, f"{len(slow.on_loop)} of {slow.queries} statements ran on the event loop: {slow.on_loop}"
    rows = audit_rows(slow.db, limit=100)
    stops = sorted((r["owner"], r["approver"], r["outcome"]) for r in rows if r["tool"] == "lab__stop_run")
    assert stops == [(owner(i), owner(i), "ok") for i in range(TURNS)], "each stop ran once, approved by its owner"
    assert sum(r["tool"] == "lab__list_runs" for r in rows) == TURNS
