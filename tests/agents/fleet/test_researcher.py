"""The researcher, through the real stack with a scripted model: the Anthropic fake over HTTP answering as the model,
the fleet and its role allow-list, the ``lab`` MCP server in the real MCP pool, the approval gate, the real
``/api/v1/research`` and ``/api/v1/experiments`` over the research and experiment services, the controller and
Optuna (Ray the recording double, the runs' curves known: ``tests/experiment_lab.py``); the publisher writes to
Slack, Notion and Linear fakes at their HTTP edges through the real notion and linear servers.

A question goes to a checked answer under one approval — a page during it handled within the plan, a misquoted
number refused before anything is posted — and what the model tries beyond its plan (more trials, a launch of its
own, an action the plan does not list, an approval by someone who does not own the question) is refused by labbot."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from approval_support import Prompter
from experiment_lab import Lab
from fakes.anthropic import FakeAnthropic, SeenRequest, Step, text, tool_use
from fakes.linear import API_KEY as LINEAR_KEY
from fakes.linear import LinearFake
from fakes.notion import NotionFake
from fakes.slack import SlackFake, started
from sqlalchemy import func, select

from labbot.agents.babysitter.pager import Pager, PagingPolicy
from labbot.agents.fleet.approvals import ApprovalGate, ApprovalRequest, Preapproved
from labbot.agents.fleet.audit import AuditedExecutor
from labbot.agents.fleet.fleet import Fleet
from labbot.agents.fleet.identity import AgentIdentity
from labbot.agents.fleet.mcp_config import McpSettings
from labbot.agents.fleet.mcp_pool import McpPool
from labbot.agents.fleet.model import ModelSettings
from labbot.agents.fleet.runtime import AgentLimiter, AgentRuntime
from labbot.agents.fleet.tools import CallContext, ToolCall, ToolExecutor, ToolResult
from labbot.agents.fleet.waits import OutsideWaits
from labbot.bot.api import create_app
from labbot.bot.integrations import Integrations
from labbot.bot.slack.research_threads import ResearchThreads
from labbot.mcp_servers import lab as lab_server
from labbot.mcp_servers.lab import LabApi
from labbot.mcp_servers.linear import LinearApi
from labbot.mcp_servers.linear import build_server as linear_server
from labbot.mcp_servers.notion import NotionApi
from labbot.mcp_servers.notion import build_server as notion_server
from labbot.storage.models import Approval, Incident, Run, utcnow
from labbot.training.claims import StoreSources
from labbot.training.monitoring import PAGE, Finding
from labbot.training.research.plan import PlanRequest
from labbot.training.research.service import ResearchService

OWNER, OTHER, ADMIN = "U0ALICE001", "U0BOB00001", "U0ADMIN001"
CHANNEL = "C0LAB00001"
TOKEN = "admin-token-for-the-researcher"
REPORTS = "1f2e3d4c5b6a79880796a5b4c3d2e1f0"
GRID = {"name": "lr", "job": "toy", "space": {"lr": [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2], "width": [32, 64]},
        "metric": "loss", "search": "grid", "concurrency": 4}  # fmt: skip  # 12 trials
QUESTION = "which lr minimises the toy's loss?"
PLAN = {"hypothesis": "a middle lr is best", "arms": [GRID], "decision_rule": "lowest mean final loss",
        "budget": "1cpu-h"}  # fmt: skip


@dataclass
class World:
    lab: Lab
    research: ResearchService
    pager: Pager
    gate: ApprovalGate
    fleet: Fleet
    threads: ResearchThreads
    slack: SlackFake
    notion: NotionFake
    linear: LinearFake
    prompter: Prompter = field(default_factory=Prompter)
    tools_for: Callable[[str], Awaitable[ToolExecutor]] | None = None

    def trial_of(self, run_id: str) -> int:
        """The number of the trial ``run_id`` is a run of."""
        with self.lab.db.session() as s:
            exp_id = str(s.get_one(Run, run_id).experiment_id)
        doc = self.lab.experiments.get(exp_id)
        return int(next(t["number"] for t in doc["trials"] if run_id in [r["id"] for r in t["runs"]]))


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lab:
    monkeypatch.setattr(lab_server, "RUN_POLL_S", 0.05)  # wait_for_research looks often: the test's clock is fast
    return Lab(tmp_path, monkeypatch)


@asynccontextmanager
async def world(lab: Lab, fake: FakeAnthropic) -> AsyncIterator[World]:
    research = ResearchService(lab.db, lab.experiments, StoreSources(lab.telemetry.series, lab.experiments.get),
                               findings=lab.findings)  # fmt: skip
    pager = Pager(lab.db, PagingPolicy(), slack=False, pagerduty=False)
    app = create_app(lab.service, lab.telemetry, admin_token=TOKEN, pager=pager, experiments=lab.experiments,
                     findings=lab.findings, research=research)  # fmt: skip
    api = LabApi("http://labbot.test", TOKEN, transport=httpx.ASGITransport(app))
    with started(users={OWNER: "alice", OTHER: "bob"}) as slack, NotionFake() as notion, LinearFake() as linear:
        notion.add_page(REPORTS, "Experiment reports")
        linear.add_team("ENG", "Engineering", labels=("research",))
        builtins: dict[str, Callable[[], Any]] = {
            "lab": lambda: lab_server.build_server(api),
            "notion": lambda: notion_server(NotionApi(notion.token, base_url=notion.url)),
            "linear": lambda: linear_server(LinearApi(LINEAR_KEY, linear.url)),
        }
        settings = McpSettings.from_config({"mcp": {"servers": {}, "roles": {}}}, tuple(builtins))
        prompter = Prompter()
        async with McpPool(settings, builtins) as pool:
            gate = ApprovalGate(
                pool.executor("assistant"), lab.db, prompter, admins=frozenset({ADMIN}), timeout_s=30,
                experiment_owner=lab.experiments.owner_of, research_owner=research.owner_of,
            )  # fmt: skip

            async def tools_for(role: str) -> ToolExecutor:
                await pool.tools(role)
                return AuditedExecutor(gate.around(OutsideWaits(AgentIdentity(pool.executor(role)))), lab.db)

            async def call_tool(tool: str, args: Any, ctx: CallContext, approved_by: str | None) -> ToolResult:
                await pool.tools(ctx.role)
                inner = pool.executor(ctx.role)
                executor = Preapproved(inner, approved_by) if approved_by else gate.around(inner)
                audited = AuditedExecutor(executor, lab.db)
                return await audited.call(ToolCall.resolve(audited, tool, args, ctx))

            env = {"ANTHROPIC_API_KEY": fake.api_key, "ANTHROPIC_BASE_URL": fake.base_url}
            runtime = AgentRuntime.from_settings(ModelSettings.from_env(env), limiter=AgentLimiter())
            integrations = Integrations(notion=True, linear=True, notion_reports_parent=REPORTS, linear_team="ENG",
                                        linear_labels=("research",))  # fmt: skip
            threads = ResearchThreads(slack.async_client(), research, lab.experiments, integrations, call_tool)
            try:
                yield World(lab, research, pager, gate, Fleet(lab.db, runtime, tools_for), threads, slack, notion,
                            linear, prompter, tools_for)  # fmt: skip
            finally:
                await runtime.aclose()


# ----------------------------------------------------------------- the scripted researcher


def last_tools(req: SeenRequest) -> list[str]:
    """The tools the model called in its previous answer (the ones the last message answers)."""
    if len(req.messages) < 2 or not isinstance(req.messages[-2].get("content"), list):
        return []
    return [b["name"] for b in req.messages[-2]["content"] if b.get("type") == "tool_use"]


def result_text(req: SeenRequest) -> tuple[str, bool]:
    results = req.tool_results()
    said = " ".join(
        b.get("text", "") if isinstance(b, dict) else str(b)
        for r in results
        for b in (r["content"] if isinstance(r["content"], list) else [{"text": r["content"]}])
    )
    return said, any(r.get("is_error") for r in results)


class Researcher:
    """What a careful researcher model does, step by step, with the ids it reads off the tools' answers; ``misquote``
    makes its first report misquote the best loss (a model's typo, or worse)."""

    def __init__(self, world_: World, *, misquote: bool = True) -> None:
        self.w = world_
        self.misquote = misquote
        self.rid = ""
        self.said: list[tuple[str, str, bool]] = []  # (tool, result, error) as the model saw them

    def __call__(self, req: SeenRequest) -> Step:
        tools = last_tools(req)
        said, error = result_text(req)
        if not tools:  # the question: the research id is in it
            self.rid = re.search(r"research_id='(q\w+)'", json.dumps(req.messages)).group(1)  # type: ignore[union-attr]
            return self.first()
        self.said.append((tools[0], said, error))
        return self.next(tools[0], said, error)

    def first(self) -> Step:
        return tool_use("lab__search_findings", {"query": QUESTION})

    def next(self, tool: str, said: str, error: bool) -> Step:
        step = {
            "lab__search_findings": self.plan,
            "lab__propose_plan": self.start,
            "lab__start_research": self.wait,
            "lab__wait_for_research": self.after_wait,
            "lab__research_act": self.wait,
            "lab__submit_report": self.after_report,
        }[tool]
        return step(said, error)

    def plan(self, said: str, error: bool) -> Step:
        return tool_use("lab__propose_plan", {
            "research_id": self.rid, "hypothesis": "the loss is lowest near lr 3e-3, and wider is better",
            "arms": [GRID], "decision_rule": "the config with the lowest mean final loss wins", "budget": "1cpu-h",
            "on_failure": ["restart", "drop_trial"], "publish": ["notion", "linear"],
        })  # fmt: skip

    def start(self, said: str, error: bool) -> Step:
        plan_hash = re.search(r"plan_hash='(\w+)'", said).group(1)  # type: ignore[union-attr]
        return tool_use("lab__start_research", {"research_id": self.rid, "plan_hash": plan_hash})

    def wait(self, said: str, error: bool) -> Step:
        return tool_use("lab__wait_for_research", {"research_id": self.rid, "timeout_s": 120})

    def after_wait(self, said: str, error: bool) -> Step:
        page = re.search(r"page \w+ · hung · run (\w+)", said)
        if page:  # a run of the plan hangs: drop its trial, which the plan allows
            trial = self.w.trial_of(page.group(1))
            return tool_use("lab__research_act", {"research_id": self.rid, "action": "drop_trial", "arm": "lr",
                                                   "trial": trial})  # fmt: skip
        if "every arm has ended" not in said:
            return self.wait(said, error)
        return self.report(wrong=self.misquote)

    def report(self, *, wrong: bool) -> Step:
        exp_id = self.w.research.get(self.rid)["arms"]["lr"]
        best = self.w.lab.experiments.get(exp_id)["results"]["ranking"][0]
        mean = best["mean"] + (0.25 if wrong else 0.0)
        verdict = (f"lr={best['params']['lr']} width={best['params']['width']} minimises the loss: "
                   f"[[{mean:.3f} | experiment:{exp_id} best stat:mean]]")  # fmt: skip
        body = f"Of [[12 | experiment:{exp_id} count:trials]] trials, [[11 | experiment:{exp_id} count:done]] scored."
        follow = [{"title": "Try lr=5e-3 at width=128", "description": "the grid's best edge, one step further"}]
        return tool_use("lab__submit_report",
                        {"research_id": self.rid, "verdict": verdict, "text": body, "follow_ups": follow})  # fmt: skip

    def after_report(self, said: str, error: bool) -> Step:
        if error:
            assert "do not check" in said
            return self.report(wrong=False)
        return text(f"Answered: see the report in this thread. {said[:80]}")


async def drive(w: World, *, hang: bool, stop: asyncio.Event, spend_s: float = 0.0) -> None:
    """The cluster: ticks and training, as the watchdog's tick and the jobs would; with ``hang``, the fourth run
    launched stops reporting and a ``hung`` page opens on it (what the watchdog would do); ``spend_s``: how many
    seconds on Ray each tick costs every running run (the budget's clock)."""
    paged = False
    while not stop.is_set():
        if w.lab.active_runs():  # only the runs' time on Ray is spent
            w.lab.offset += timedelta(seconds=spend_s)
        await asyncio.to_thread(w.lab.tick)
        runs = w.lab.active_runs()
        if hang and not paged and len(w.lab.ray.submitted) >= 4:
            hung = str(w.lab.ray.submitted[3]["runtime_env"]["env_vars"]["LABBOT_RUN_ID"])
            w.lab.hold.add(hung)
            await asyncio.to_thread(open_page, w, hung)
            paged = True
        if runs:
            await asyncio.to_thread(w.lab.train, 3)
        await asyncio.sleep(0.01)


def open_page(w: World, run_id: str) -> None:
    finding = Finding("hung", PAGE, "step 30 has not advanced for 45s (threshold 30s)", {"step": 30})
    with w.lab.db.session() as s:
        run = s.get_one(Run, run_id)
        w.pager.judge(s, run, {}, [finding], utcnow())


async def approve_when_asked(w: World, *, by: str) -> ApprovalRequest:
    await asyncio.wait_for(w.prompter.event.wait(), 30)
    w.prompter.event.clear()
    request = w.prompter.asked[-1]
    refused = await asyncio.to_thread(w.gate.decide, request.id, approve=True, by=OTHER)
    assert not refused.ok and OWNER in refused.message  # who does not own the question cannot release its plan
    assert (await asyncio.to_thread(w.gate.decide, request.id, approve=True, by=by)).ok
    return request


def count(lab: Lab, model: type) -> int:
    with lab.db.session() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


def test_a_question_goes_to_a_checked_answer_under_one_approval(lab: Lab, fake: FakeAnthropic) -> None:
    async def story() -> tuple[World, Researcher, ApprovalRequest, Any]:
        async with world(lab, fake) as w:
            model = Researcher(w)
            fake.answer_with(model)
            q, ts = await w.threads.open_thread(QUESTION, OWNER, CHANNEL)  # what /lab research does
            stop = asyncio.Event()
            cluster = asyncio.create_task(drive(w, hang=True, stop=stop))
            asking = asyncio.create_task(w.fleet.ask(
                owner=OWNER, text=f"Research question {q['id']} (research_id={q['id']!r}): {QUESTION}",
                channel=CHANNEL, thread_ts=ts, role="researcher",
            ))  # fmt: skip
            request = await approve_when_asked(w, by=OWNER)
            answer = await asyncio.wait_for(asking, 120)
            stop.set()
            await cluster
            assert await w.threads.tick() == 1
            return w, model, request, answer

    w, model, request, answer = asyncio.run(story())
    assert "Answered" in answer.text
    rid = model.rid
    doc = w.research.get(rid)
    # one approval, and it showed the plan, its price and what it cannot undo
    assert count(lab, Approval) == 1 and request.tool == "lab__start_research"
    for shown in ("12 trials × 1 seed(s)", "cost: projected", "capped at the budget, 1 CPU-h", "cannot be undone",
                  "a Notion page", "a Linear issue per follow-up"):  # fmt: skip
        assert shown in request.arguments, shown
    # the experiment ran its 12 trials; the hung one was dropped within the plan, with no approval
    exp = lab.experiments.get(doc["arms"]["lr"])
    assert len(exp["trials"]) == 12 and exp["counts"]["done"] == 11 and exp["counts"]["stopped"] == 1
    assert count(lab, Run) == 12
    acted = [s for s in model.said if s[0] == "lab__research_act"]
    assert acted and not acted[0][2]
    # the misquoted report was refused with what the store says; the accepted one's numbers all check
    refused = [s for s in model.said if s[0] == "lab__submit_report" and s[2]]
    assert len(refused) == 1 and "do not check" in refused[0][1]
    assert doc["status"] == "answered" and doc["report"]["counts"] == {"ok": 3, "wrong": 0, "unsourced": 0}
    best = exp["results"]["ranking"][0]
    assert f"{best['mean']:.3f}" in doc["report"]["verdict"] and f"{best['mean'] + 0.25:.3f}" not in json.dumps(doc)
    # published: the thread, the Notion page, one Linear issue per follow-up; and a finding
    posted = "\n".join(w.slack.texts(CHANNEL, thread_ts=doc["thread_ts"]))
    assert f"Research `{rid}` answered" in posted and "3 number(s) checked" in posted
    assert f"{best['mean'] + 0.25:.3f}" not in posted  # nothing wrong was posted
    [page] = w.notion.created_pages()
    markdown = w.notion.page_markdown(page.id)
    assert page.parent_id == REPORTS and f"{best['mean']:.3f}" in markdown and "[[" not in markdown
    [issue] = w.linear.issues
    assert issue.title == "Try lr=5e-3 at width=128" and rid in issue.description
    assert page.url in posted and issue.url in posted
    assert w.research.get(rid)["published"] and doc["finding_id"] is not None
    with lab.db.session() as s:
        assert s.scalar(select(func.count()).select_from(Incident)) == 1


class Overreacher(Researcher):
    """A model that, its plan approved, asks for twice the trials and budget; denied, tries to launch a run of its
    own and to stop the arm (which the plan does not allow), then says it could not."""

    def first(self) -> Step:
        return self.propose(trials=3, budget="1cpu-h")

    def next(self, name: str, said: str, error: bool) -> Step:
        if name == "lab__propose_plan" and len([s for s in self.said if s[0] == name]) == 1:
            return self.start(said, error)
        if name == "lab__start_research" and len([s for s in self.said if s[0] == name]) == 1:
            return self.propose(trials=6, budget="5cpu-h")
        if name == "lab__propose_plan":
            return self.start(said, error)
        if name == "lab__start_research":
            return tool_use("lab__launch_run", {"job": "toy", "params": {"lr": 0.003}})
        if name == "lab__launch_run":
            return tool_use("lab__research_act", {"research_id": self.rid, "action": "stop_arm", "arm": "lr"})
        return text("The larger plan was denied; the approved plan runs on.")

    def propose(self, *, trials: int, budget: str) -> Step:
        arm = {**GRID, "search": "random", "space": {"lr": "loguniform(1e-4,1e-2)", "width": 64}, "trials": trials}
        return tool_use("lab__propose_plan", {
            "research_id": self.rid, "hypothesis": "some lr in the range is best", "arms": [arm],
            "decision_rule": "lowest mean final loss", "budget": budget, "on_failure": ["drop_trial"],
        })  # fmt: skip


def test_what_grows_the_plan_or_leaves_it_is_refused_by_labbot(lab: Lab, fake: FakeAnthropic) -> None:
    async def story() -> tuple[World, Overreacher, Any]:
        async with world(lab, fake) as w:
            model = Overreacher(w)
            fake.answer_with(model)
            q = await asyncio.to_thread(w.research.open, QUESTION, OWNER)
            asking = asyncio.create_task(w.fleet.ask(
                owner=OWNER, text=f"Research question {q['id']} (research_id={q['id']!r}): {QUESTION}",
                channel=CHANNEL, thread_ts="1700000000.000200", role="researcher",
            ))  # fmt: skip
            await approve_when_asked(w, by=OWNER)
            await asyncio.to_thread(w.lab.tick)  # the approved arm's first trials start
            await asyncio.wait_for(w.prompter.event.wait(), 30)  # the grown plan asks again
            request = w.prompter.asked[-1]
            assert "the budget rises from 1 to 5 CPU-h" in request.arguments
            assert "arm lr: trials 3 → 6" in request.arguments
            assert (await asyncio.to_thread(w.gate.decide, request.id, approve=False, by=OWNER)).ok
            answer = await asyncio.wait_for(asking, 60)
            return w, model, answer

    w, model, answer = asyncio.run(story())
    doc = w.research.get(model.rid)
    exp = lab.experiments.get(doc["arms"]["lr"])
    # the denial left the approved part running, with its approved limits
    assert doc["status"] == "running" and exp["status"] == "running" and exp["trials_limit"] == 3
    assert doc["pending"]["grows"] and doc["approved"]["scope"]["budget"]["amount"] == 1.0
    lab.run_to_end()
    assert len(lab.experiments.get(doc["arms"]["lr"])["trials"]) == 3 and count(lab, Run) == 3
    said = {name: (text_, error) for name, text_, error in model.said}
    # not the researcher's tool: the fleet refuses it before any server sees it
    assert said["lab__launch_run"][1] and "no tool named 'lab__launch_run'" in said["lab__launch_run"][0]
    assert said["lab__research_act"][1] and "does not allow 'stop_arm'" in said["lab__research_act"][0]
    assert "denied" in answer.text


class OutOfBudget(Researcher):
    """A researcher whose plan the budget cannot finish: it reports what it has when the arms end."""

    def plan(self, said: str, error: bool) -> Step:
        return tool_use("lab__propose_plan", {
            "research_id": self.rid, "hypothesis": "the loss is lowest near lr 3e-3", "arms": [GRID],
            "decision_rule": "the lowest mean final loss wins", "budget": "0.1cpu-h",
        })  # fmt: skip

    def report(self, *, wrong: bool) -> Step:
        exp_id = self.w.research.get(self.rid)["arms"]["lr"]
        ranking = self.w.lab.experiments.get(exp_id)["results"]["ranking"]
        if not ranking:
            return tool_use("lab__submit_report", {"research_id": self.rid, "verdict": "Nothing scored", "text": ""})
        best = ranking[0]
        verdict = f"Best so far: [[{best['mean']:.3f} | experiment:{exp_id} best stat:mean]], before the budget ran out"
        return tool_use("lab__submit_report", {"research_id": self.rid, "verdict": verdict, "text": ""})


def test_the_budget_reached_the_researcher_reports_what_it_has_marked_incomplete(lab: Lab, fake: FakeAnthropic) -> None:
    async def story() -> tuple[World, OutOfBudget]:
        async with world(lab, fake) as w:
            model = OutOfBudget(w)
            fake.answer_with(model)
            q = await asyncio.to_thread(w.research.open, QUESTION, OWNER)
            stop = asyncio.Event()
            cluster = asyncio.create_task(drive(w, hang=False, stop=stop, spend_s=20.0))
            asking = asyncio.create_task(w.fleet.ask(
                owner=OWNER, text=f"Research question {q['id']} (research_id={q['id']!r}): {QUESTION}",
                channel=CHANNEL, thread_ts="1700000000.000300", role="researcher",
            ))  # fmt: skip
            await asyncio.wait_for(w.prompter.event.wait(), 30)
            assert (await asyncio.to_thread(w.gate.decide, w.prompter.asked[-1].id, approve=True, by=OWNER)).ok
            await asyncio.wait_for(asking, 120)
            stop.set()
            await cluster
            return w, model

    w, model = asyncio.run(story())
    doc = w.research.get(model.rid)
    exp = lab.experiments.get(doc["arms"]["lr"])
    assert exp["status"] == "budget_spent" and len(exp["trials"]) < 12
    # labbot marked it, not the model: its report said nothing of completeness
    assert doc["status"] == "incomplete" and "budget spent" in doc["reason"]
    assert doc["report"]["status"] == "incomplete" and doc["report"]["short"]


def test_another_researchers_agent_cannot_plan_act_or_report_on_the_question(lab: Lab, fake: FakeAnthropic) -> None:
    """What needs no approval within a plan (a smaller plan, a dropped trial, the report that ends it) is the
    question's owner's agents' alone: a colleague's assistant, talked into "stop their sweep", is refused by labbot."""

    async def story() -> dict[str, ToolResult]:
        async with world(lab, fake) as w:
            q = await asyncio.to_thread(w.research.open, QUESTION, OWNER)
            made = await asyncio.to_thread(w.research.propose, q["id"], PlanRequest.model_validate(PLAN))
            await asyncio.to_thread(w.research.start, q["id"], made["research"]["plan_hash"])
            assert w.tools_for is not None
            tools = await w.tools_for("assistant")
            ctx = CallContext(agent="ag-bob", role="assistant", owner=OTHER, channel=CHANNEL, thread_ts="9.9")
            calls = {
                "lab__propose_plan": {"research_id": q["id"], **{**PLAN, "arms": [{**GRID, "trials": 1}]}},
                "lab__research_act": {"research_id": q["id"], "action": "stop", "arm": "lr"},
                "lab__submit_report": {"research_id": q["id"], "verdict": "nothing", "text": ""},
            }
            return {name: await tools.call(ToolCall.resolve(tools, name, args, ctx)) for name, args in calls.items()}

    results = asyncio.run(story())
    for name, result in results.items():
        assert result.is_error and f"{OWNER}'s question: only their agents" in str(result.content), name
    [doc] = ResearchService(
        lab.db, lab.experiments, StoreSources(lab.telemetry.series, lab.experiments.get)
    ).questions()
    assert doc["status"] == "running" and doc["report"] is None
    assert lab.experiments.get(doc["arms"]["lr"])["trials_limit"] == 12  # the plan as its owner approved it
    assert count(lab, Approval) == 0
