"""Agent turns on a slow database with a lag probe on the event loop, shared by
tests/agents/fleet/test_loop_lag.py and benchmarks/loop_lag.py.

``turns`` agent turns at once (``Fleet.ask``, each in a run's thread of its own, for a researcher of its own), each
calling a read-only tool and a destructive one through the production executor stack — audit, approval gate,
outside waits, identity (``bot/agents_wiring.py``'s ``tools_for``) — the destructive one approved at once by the
run's owner, as bot/ handles the button: ``decide`` on a worker thread, then the prompt re-rendered. ``run_context``
and the gate's ``run_owner`` read the database, as ``RunService.get`` does in production. Meanwhile a probe on the
same loop sleeps 1 ms at a time and records how late it wakes.

The slow database is SQLite whose every statement sleeps ``query_s`` first (a ``before_cursor_execute`` hook, on
whichever thread runs it): the database really takes that long. The hook also notes the statements run on the event
loop's own thread. The model is the Anthropic fake over HTTP, through the real SDK.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anyio import to_thread
from fakes.anthropic import FakeAnthropic, SeenRequest, Step, text, tool_uses
from sqlalchemy import event, func, select

from labbot.agents.fleet.approvals import ApprovalGate, ApprovalRequest
from labbot.agents.fleet.audit import AuditedExecutor
from labbot.agents.fleet.fleet import Answer, Fleet
from labbot.agents.fleet.identity import AgentIdentity
from labbot.agents.fleet.model import ModelSettings
from labbot.agents.fleet.runtime import AgentLimiter, AgentRuntime
from labbot.agents.fleet.tools import ToolCall, ToolExecutor, ToolResult, ToolSpec
from labbot.agents.fleet.waits import OutsideWaits
from labbot.storage.db import Database
from labbot.storage.models import AgentSession

QUERY_S = 0.050
PROBE_S = 0.001
CHANNEL = "C0LAGS0001"
SCHEMA = {"type": "object", "properties": {"run_id": {"type": "string"}}}
TOOLS = [
    ToolSpec("lab__list_runs", "list runs", SCHEMA, read_only=True, server="lab"),
    ToolSpec("lab__stop_run", "stop a run", SCHEMA, destructive=True, server="lab"),
]
ANSWER = "stopped it"


def owner(i: int) -> str:
    """The researcher of turn ``i`` (and the owner of its run ``r{i}``)."""
    return f"U0LAG{i:05d}"


class SlowDatabase:
    """A migrated SQLite database whose every statement takes ``query_s``; counts them, and those run on
    ``loop_thread``."""

    def __init__(self, path: Path, query_s: float = QUERY_S) -> None:
        self.db = Database(f"sqlite:///{path}")
        self.db.upgrade()
        self.query_s = query_s
        self.queries = 0
        self.on_loop: list[str] = []
        self.loop_thread: int | None = None
        event.listen(self.db.engine, "before_cursor_execute", self._slow)

    def _slow(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        self.queries += 1
        if threading.get_ident() == self.loop_thread:
            self.on_loop.append(" ".join(statement.split()[:3]))
        time.sleep(self.query_s)


class Lab:
    """The tools' far side: answers at once."""

    def tools(self) -> Sequence[ToolSpec]:
        return TOOLS

    async def call(self, call: ToolCall) -> ToolResult:
        return ToolResult(f"{call.name}: done for {call.arguments.get('run_id')}")


class PressesApprove:
    """The approval prompt, answered at once by the run's owner, as bot/ handles the button."""

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
        return text(ANSWER)
    run_id = str(request.messages[-1]["content"]).split()[-1]
    return tool_uses(("lab__list_runs", {}), ("lab__stop_run", {"run_id": run_id}))


@dataclass
class Measured:
    answers: list[Answer]
    lags_ms: list[float] = field(default_factory=list)  # how late each 1 ms sleep of the probe woke
    took_s: float = 0.0

    @property
    def p50(self) -> float:
        return statistics.median(self.lags_ms)

    @property
    def p99(self) -> float:
        return statistics.quantiles(self.lags_ms, n=100)[98]


async def turns_with_probe(slow: SlowDatabase, fake: FakeAnthropic, turns: int) -> Measured:
    """The scenario (see the module docstring) on ``slow``, with ``fake`` answering as ``model``."""
    db = slow.db
    slow.loop_thread = threading.get_ident()

    def read(run_id: str) -> str:  # like RunService.get: a query
        with db.session() as s:
            s.scalar(select(func.count()).select_from(AgentSession))
        return owner(int(run_id[1:]))

    prompter = PressesApprove()
    gate = ApprovalGate(Lab(), db, prompter, timeout_s=120, run_owner=read)
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

    started = time.perf_counter()
    probing = asyncio.create_task(probe())
    try:
        answers = await asyncio.gather(
            *(
                fleet.ask(owner=owner(i), text=f"stop r{i}", channel=CHANNEL, thread_ts=f"1700.{i:06d}", run_id=f"r{i}")
                for i in range(turns)
            )
        )
        await asyncio.gather(*prompter.pressed)
    finally:
        stop.set()
        await probing
        await runtime.aclose()
    return Measured(list(answers), lags, time.perf_counter() - started)
