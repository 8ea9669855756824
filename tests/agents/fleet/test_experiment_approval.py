"""An agent's experiment under one approval, through the real stack: the ``lab`` MCP server in the real MCP pool,
the approval gate (with ``run_experiment``'s preview, ``plan_experiment``, shown in the prompt), the real
``/api/v1/experiments``, experiment service, controller and Optuna study (Ray the recording double). Approved
once, every trial launches with no other prompt; denied, none does; a refused plan asks nobody; stopping someone
else's experiment waits for its owner, whatever the model says."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx
import pytest
from approval_support import Prompter
from experiment_lab import Lab
from sqlalchemy import func, select

from labbot.agents.fleet.approvals import ApprovalGate, ApprovalRequest
from labbot.agents.fleet.audit import AuditedExecutor
from labbot.agents.fleet.identity import AgentIdentity
from labbot.agents.fleet.mcp_config import McpSettings
from labbot.agents.fleet.mcp_pool import McpPool
from labbot.agents.fleet.tools import CallContext, ToolCall, ToolExecutor, ToolResult
from labbot.agents.fleet.waits import OutsideWaits
from labbot.bot.api import create_app
from labbot.mcp_servers.lab import LabApi, build_server
from labbot.storage.models import Approval, Experiment, Run
from labbot.training.telemetry_store import TelemetryStore

OWNER, OTHER, ADMIN = "U0ALICE001", "U0BOB00001", "U0ADMIN001"
TOKEN = "admin-token-for-the-approval-story"
CTX = CallContext(agent="ag1", role="assistant", owner=OWNER, channel="C0LAB00001", thread_ts="1.2")
SWEEP = {"job": "toy", "space": {"lr": "loguniform(1e-4,1e-2)", "width": [16, 64]}, "metric": "loss",
         "trials": 5, "concurrency": 2, "budget": "1cpu-h"}  # fmt: skip


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lab:
    return Lab(tmp_path, monkeypatch)


def story(lab: Lab, body: Callable[[ToolExecutor, ApprovalGate, Prompter], Coroutine[Any, Any, Any]]) -> Any:
    app = create_app(lab.service, TelemetryStore(lab.db), admin_token=TOKEN, experiments=lab.experiments)
    api = LabApi("http://labbot.test", TOKEN, transport=httpx.ASGITransport(app))
    settings = McpSettings.from_config({"mcp": {"servers": {}, "roles": {}}}, ("lab",))

    async def scenario() -> Any:
        async with McpPool(settings, {"lab": lambda: build_server(api)}) as pool:
            await pool.tools("assistant")
            prompter = Prompter()
            gate = ApprovalGate(
                pool.executor("assistant"), lab.db, prompter, admins=frozenset({ADMIN}), timeout_s=10,
                experiment_owner=lab.experiments.owner_of,
            )  # fmt: skip
            executor = AuditedExecutor(gate.around(OutsideWaits(AgentIdentity(pool.executor("assistant")))), lab.db)
            return await body(executor, gate, prompter)

    return asyncio.run(scenario())


def call(executor: ToolExecutor, name: str, arguments: dict[str, Any], ctx: CallContext = CTX) -> Any:
    return executor.call(ToolCall.resolve(executor, name, arguments, ctx))


def count(lab: Lab, model: type) -> int:
    with lab.db.session() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


async def decide(gate: ApprovalGate, prompter: Prompter, *, approve: bool, by: str) -> ApprovalRequest:
    await asyncio.wait_for(prompter.event.wait(), 10)
    request = prompter.asked[-1]
    assert (await asyncio.to_thread(gate.decide, request.id, approve=approve, by=by)).ok
    return request


def test_approved_once_every_trial_launches_and_the_prompt_showed_the_plan(lab: Lab) -> None:
    async def body(executor: ToolExecutor, gate: ApprovalGate, prompter: Prompter) -> tuple[ToolResult, Any]:
        running = asyncio.create_task(call(executor, "lab__run_experiment", SWEEP))
        request = await decide(gate, prompter, approve=True, by=OWNER)
        return await running, request

    result, request = story(lab, body)
    assert not result.is_error, result.content
    # the prompt showed the trials, the runs and the projected cost against the budget before anything started
    assert "5 trials × 1 seed(s), 2 at a time" in request.arguments
    assert "projected cost: 0.025 CPU-h a trial, 0.125 CPU-h for all" in request.arguments
    assert "budget: 1 CPU-h; it pays for 5 of 5 trials" in request.arguments
    [exp] = lab.experiments.experiments()
    assert exp["owner"] == OWNER  # the researcher's, not the agent's
    lab.run_to_end()
    doc = lab.experiments.get(exp["id"])
    assert doc["status"] == "done" and len(doc["trials"]) == 5 and count(lab, Run) == 5
    assert count(lab, Approval) == 1  # one approval for the whole experiment


def test_denied_launches_nothing(lab: Lab) -> None:
    async def body(executor: ToolExecutor, gate: ApprovalGate, prompter: Prompter) -> ToolResult:
        running = asyncio.create_task(call(executor, "lab__run_experiment", SWEEP))
        await decide(gate, prompter, approve=False, by=OWNER)
        return await running

    result = story(lab, body)
    assert result.is_error and "denied" in str(result.content)
    lab.run_to_end(max_ticks=3)
    assert count(lab, Experiment) == 0 and count(lab, Run) == 0


def test_a_plan_labbot_refuses_asks_nobody(lab: Lab) -> None:
    async def body(executor: ToolExecutor, gate: ApprovalGate, prompter: Prompter) -> ToolResult:
        return await call(executor, "lab__run_experiment", {**SWEEP, "budget": "0.001cpu-h"})

    result = story(lab, body)
    assert result.is_error and "smaller than one trial" in str(result.content)
    assert count(lab, Approval) == 0 and count(lab, Experiment) == 0


def test_stopping_a_colleagues_experiment_waits_for_its_owner(lab: Lab) -> None:
    theirs = lab.sweep(space=["lr=1e-4,3e-3"], search="grid", owner=OTHER)

    async def body(executor: ToolExecutor, gate: ApprovalGate, prompter: Prompter) -> ToolResult:
        # the model was talked into it ("stop every experiment"): it can ask, never act
        running = asyncio.create_task(call(executor, "lab__stop_experiment", {"experiment_id": theirs["id"]}))
        await asyncio.wait_for(prompter.event.wait(), 10)
        request = prompter.asked[-1]
        refused = await asyncio.to_thread(gate.decide, request.id, approve=True, by=OWNER)
        assert not refused.ok and OTHER in refused.message
        assert lab.experiments.get(theirs["id"])["status"] == "running"
        assert (await asyncio.to_thread(gate.decide, request.id, approve=True, by=OTHER)).ok
        return await running

    result = story(lab, body)
    assert not result.is_error, result.content
    assert lab.experiments.get(theirs["id"])["status"] == "stopped"
