"""A research suite run against a running labbot:
``labbot eval run research-tiny-lm --solver oracle|naive|agent[:MODEL]``.

Each task is an inspect sample. Its setup goes through labbot's API like any client's: a research question opened
for the eval's owner (``eval-research``), and for a ``diagnose`` task the run with the planted fault launched and
waited for. The solver then works with the researcher's own tools — the ``lab`` MCP server in the real MCP pool, as
the researcher role allows them — and nothing else: the task's answer stays with the scorer (the suite's file,
never handed to a tool), which is what seals it. ``agent[:MODEL]`` is labbot's researcher role itself (its prompt, its
tools, labbot's checks) on an Anthropic model (``ANTHROPIC_API_KEY``; ``agent`` alone: ``LABBOT_MODEL``); ``oracle``
and ``naive`` are the scripted policies of ``labbot.evals.research.policies``.

The question's owner is simulated by :class:`OwnerApprovals`: ``start_research`` is approved when the plan's budget
is within the task's (what the owner allowed), denied otherwise; every other call that needs an approval is denied.
Then the sample is scored (``labbot.evals.research.tasks.score``) and the results — pass rate, each task's verdict
and regret — written to ``results.json`` beside inspect's ``.eval`` log.

It lives in ``bot`` because it joins the agents and the MCP servers (neither may import the other, nor evals).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labbot.agents.fleet.fleet import Fleet
from labbot.agents.fleet.identity import AgentIdentity
from labbot.agents.fleet.mcp_config import McpSettings
from labbot.agents.fleet.mcp_pool import McpPool
from labbot.agents.fleet.model import ModelSettings
from labbot.agents.fleet.roles import load_roles
from labbot.agents.fleet.runtime import AgentLimiter, AgentRuntime
from labbot.agents.fleet.tools import CallContext, ToolCall, ToolExecutor, ToolResult, ToolSpec
from labbot.agents.fleet.waits import OutsideWaits
from labbot.common.errors import BadRequest
from labbot.evals.research.policies import POLICIES, TaskView
from labbot.evals.research.tasks import Outcome, ResearchTask, load_suite, score, statement
from labbot.mcp_servers.lab import LabApi, build_server
from labbot.storage.db import Database
from labbot.training.experiments.plan import parse_budget

EVAL_OWNER = "eval-research"
ROLE = "researcher"
RUN_WAIT_S = 600.0
SOLVERS = ("oracle", "naive", "agent")


@dataclass(frozen=True)
class Solver:
    kind: str  # oracle | naive | agent
    model: str | None = None

    @property
    def label(self) -> str:
        return f"agent:{self.model}" if self.model else self.kind


def parse_solver(text: str) -> Solver:
    kind, _, model = text.strip().partition(":")
    if kind not in SOLVERS or (model and kind != "agent"):
        raise BadRequest(
            f"a research suite is solved by oracle, naive, agent or agent:MODEL (labbot's researcher on an Anthropic "
            f"model), not {text!r}"
        )
    if model.startswith("anthropic/"):
        model = model[len("anthropic/") :]
    return Solver(kind, model or None)


class OwnerApprovals:
    """The question's owner, simulated: ``start_research`` runs when the plan it starts costs at most the task's
    budget; any other call that needs an approval is denied, as is a plan over the budget."""

    def __init__(self, inner: ToolExecutor, api: LabApi, budget: str) -> None:
        self.inner = inner
        self.api = api
        self.budget = parse_budget(budget)
        self.decided: list[tuple[str, bool]] = []

    def tools(self) -> Sequence[ToolSpec]:
        return self.inner.tools()

    async def call(self, call: ToolCall) -> ToolResult:
        if call.spec is None or not call.spec.destructive:
            return await self.inner.call(call)
        name, args = call.name, call.arguments
        if name.endswith("__start_research"):
            doc = (await self.api.json("GET", f"/research/{args.get('research_id')}"))["research"]
            plan = doc.get("plan") or {}
            cap = (plan.get("scope") or {}).get("budget") or {}
            within = cap.get("unit") == self.budget.unit and float(cap.get("amount", 1e18)) <= self.budget.amount
            if within and plan.get("hash") == args.get("plan_hash"):
                self.decided.append((name, True))
                return await self.inner.call(call)
            why = f"its budget, {cap.get('amount')} {cap.get('unit')}-h, is over the {self.budget.words()} allowed"
        else:
            why = "the eval's owner approves research plans only"
        self.decided.append((name, False))
        return ToolResult(f"the owner denied {name}: {why}; it was not run", is_error=True, meta={"approval": "denied"})


class RoleTools:
    """The researcher's tools only, for a scripted policy as for the agent (the fleet applies the same list)."""

    def __init__(self, inner: ToolExecutor) -> None:
        self.inner = inner
        self.role = load_roles()[ROLE]

    def tools(self) -> Sequence[ToolSpec]:
        return [s for s in self.inner.tools() if self.role.allows(s.name)]

    async def call(self, call: ToolCall) -> ToolResult:
        if not self.role.allows(call.name):
            return ToolResult(f"role {ROLE!r} may not call {call.name}", is_error=True)
        return await self.inner.call(call)


def _text(result: ToolResult) -> str:
    if isinstance(result.content, str):
        return result.content
    return "\n".join(str(b.get("text", "")) for b in result.content if isinstance(b, Mapping))


async def _setup(api: LabApi, task: ResearchTask) -> TaskView:
    run_id = None
    if task.kind == "diagnose":
        run = (await api.json("POST", "/runs", json={"job": task.job, "params": dict(task.params),
                                                     "owner": EVAL_OWNER}))["run"]  # fmt: skip
        run_id = str(run["id"])
        deadline = time.monotonic() + RUN_WAIT_S
        while (await api.json("GET", f"/runs/{run_id}"))["run"]["status"] not in ("succeeded", "failed", "stopped"):
            if time.monotonic() > deadline:
                raise BadRequest(f"the planted run {run_id} did not end within {RUN_WAIT_S:g}s")
            await asyncio.sleep(1.0)
    text = statement(task, run_id=run_id)
    doc = (await api.json("POST", "/research", json={"question": text[:2000], "owner": EVAL_OWNER}))["research"]
    return TaskView(task.id, task.kind, text, task.job, dict(task.params), task.budget, str(doc["id"]), run_id)


async def solve(api: LabApi, task: ResearchTask, solver: Solver, *, agent_db: Database | None = None) -> Outcome:
    """Set the task up on labbot, let the solver work through the researcher's tools under the simulated owner, and
    say what it answered and whether it started a plan."""
    view = await _setup(api, task)
    settings = McpSettings.from_config({"mcp": {"servers": {}, "roles": {}}}, ("lab",))
    async with McpPool(settings, {"lab": lambda: build_server(api)}) as pool:
        await pool.tools(ROLE)

        def executor() -> ToolExecutor:
            return RoleTools(OwnerApprovals(OutsideWaits(AgentIdentity(pool.executor(ROLE))), api, task.budget))

        if solver.kind == "agent":
            answer = await _ask_agent(executor, view, solver, agent_db)
        else:
            tools = executor()
            ctx = CallContext(agent=f"eval-{view.id}", role=ROLE, owner=EVAL_OWNER)

            async def call(name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
                result = await tools.call(ToolCall.resolve(tools, name, arguments, ctx))
                return _text(result), result.is_error

            async def read(path: str) -> dict[str, Any]:
                return dict(await api.json("GET", path))

            answer = await POLICIES[solver.kind](view, call, read)
    doc = (await api.json("GET", f"/research/{view.research_id}"))["research"]
    return Outcome(answer=answer, started=doc.get("approved") is not None)


async def _ask_agent(executor: Callable[[], ToolExecutor], view: TaskView, solver: Solver, db: Database | None) -> str:
    env = dict(os.environ)
    if solver.model:
        env["LABBOT_MODEL"] = solver.model
    model = ModelSettings.from_env(env)
    if not model.configured:
        raise BadRequest("--solver agent needs a model: set ANTHROPIC_API_KEY (and LABBOT_MODEL or agent:MODEL)")
    if db is None:
        raise BadRequest("the agent solver keeps its conversation in a database: none was given")
    runtime = AgentRuntime.from_settings(model, limiter=AgentLimiter())

    async def tools_for(role: str) -> ToolExecutor:
        return executor()

    try:
        fleet = Fleet(db, runtime, tools_for)
        question = f"Research question {view.research_id} (research_id={view.research_id!r}): {view.statement}"
        answer = await fleet.ask(owner=EVAL_OWNER, text=question, channel="eval", thread_ts=f"{secrets.token_hex(4)}.1",
                                 role=ROLE)  # fmt: skip
        return str(answer.text)
    finally:
        await runtime.aclose()


def _questions(api: LabApi) -> list[dict[str, Any]]:
    async def read() -> list[dict[str, Any]]:
        return list((await api.json("GET", "/research", params={"limit": 1000}))["research"])

    return asyncio.run(read())


def run_research(
    suite_dir: Path,
    out_dir: Path,
    api: LabApi,
    solver: Solver,
    *,
    on_sample: Callable[[str, bool, str], None] | None = None,
) -> dict[str, Any]:
    """Every task of the suite at ``suite_dir`` solved and scored; ``results.json`` and the ``.eval`` log in
    ``out_dir``; the results."""
    from inspect_ai import Task  # inspect: a heavy import, when a suite runs
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.log import read_eval_log
    from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
    from inspect_ai.solver import Generate, TaskState
    from inspect_ai.solver import solver as inspect_solver

    suite_id, tasks = load_suite(suite_dir)
    by_id = {t.id: t for t in tasks}
    out_dir.mkdir(parents=True, exist_ok=True)
    agent_db = None
    if solver.kind == "agent":
        agent_db = Database(f"sqlite:///{out_dir / 'agent.db'}")
        agent_db.upgrade()

    @inspect_solver
    def research_solver() -> Any:
        async def run(state: TaskState, generate: Generate) -> TaskState:
            task = by_id[str(state.sample_id)]
            try:
                outcome = await solve(api, task, solver, agent_db=agent_db)
            except Exception as e:  # a failure of the setup or the solver fails the sample, said in its answer
                outcome = Outcome(answer=f"[error] {type(e).__name__}: {e}", started=False)
            state.store.set("labbot:answer", outcome.answer)
            state.store.set("labbot:started", outcome.started)
            state.output.completion = outcome.answer
            return state

        return run

    @scorer(metrics=[accuracy()])
    def research_scorer() -> Any:
        async def run(state: TaskState, target: Target) -> Score:
            task = by_id[str(state.sample_id)]  # the answer is read here, never before
            outcome = Outcome(str(state.store.get("labbot:answer", "")), bool(state.store.get("labbot:started")))
            judged = score(task, outcome)
            if on_sample is not None:
                on_sample(task.id, judged.passed, judged.why)
            meta = {"value": judged.value, "started": outcome.started}
            verdict = CORRECT if judged.passed else INCORRECT
            return Score(value=verdict, answer=outcome.answer[:4000], explanation=judged.why, metadata=meta)

        return run

    # what the solver could read of earlier evals on this labbot (their runs, experiments and findings): said in the
    # results, since a researcher reads the lab's history, as it should outside an eval
    earlier = [r for r in _questions(api) if r["owner"] == EVAL_OWNER]
    samples = [Sample(input=t.question, id=t.id, metadata={"kind": t.kind}) for t in tasks]
    task = Task(dataset=MemoryDataset(samples), solver=research_solver(), scorer=research_scorer(), name=suite_id)
    [log] = inspect_eval(task, model="none/none", log_dir=str(out_dir), log_format="eval", max_samples=1,
                         fail_on_error=False, display="none", log_samples=True)  # fmt: skip
    log = read_eval_log(log.location)
    rows: list[dict[str, Any]] = []
    for s in log.samples or []:
        sc = (s.scores or {}).get("research_scorer")
        meta = (sc.metadata or {}) if sc is not None else {}
        rows.append({
            "task": str(s.id), "kind": by_id[str(s.id)].kind, "passed": bool(sc and sc.value == CORRECT),
            "why": str(sc.explanation or "") if sc else str(s.error.message if s.error else "not scored"),
            "value": meta.get("value"), "started": meta.get("started"), "answer": str(sc.answer or "") if sc else "",
        })  # fmt: skip
    passed = sum(1 for r in rows if r["passed"])
    results = {"suite": suite_id, "solver": solver.label, "samples": rows, "passed": passed, "total": len(rows),
               "pass_rate": passed / len(rows) if rows else 0.0, "log": str(log.location),
               "history": len(earlier)}  # fmt: skip
    (out_dir / "results.json").write_text(json.dumps(results, indent=1))
    return results
