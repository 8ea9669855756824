"""A research suite run end to end against labbot's real API, research and experiment services, controller and
Optuna (Ray the recording double; the toy job's curve known, so the suite's reference is exact): the scripted oracle
passes every task with a small regret, the naive policy (a fixed guess, a generic cause, a smaller question run
instead of asking) fails them — the suite's scores separate the two — and the answers never reach a tool."""

from __future__ import annotations

import json
import re
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from experiment_lab import Lab, toy_loss
from fakes.anthropic import FakeAnthropic, SeenRequest, Step, text, tool_use
from inspect_ai.log import read_eval_log

from labbot.bot.api import create_app
from labbot.bot.research_eval import parse_solver, run_research
from labbot.common.errors import BadRequest
from labbot.evals.research.tasks import ResearchTask, save_suite
from labbot.mcp_servers import lab as lab_server
from labbot.mcp_servers.lab import LabApi
from labbot.training.claims import StoreSources
from labbot.training.research.service import ResearchService

TOKEN = "admin-token-for-the-research-eval"
FIXED = {"width": 64, "steps": 90, "log_every": 10}
LRS = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2)


def toy_final(params: dict[str, Any]) -> float:
    return statistics.fmean(toy_loss({**params, "mode": "ok"}, step) for step in (70, 80, 90))


def toy_suite() -> list[ResearchTask]:
    reference = {repr(lr): toy_final({**FIXED, "lr": lr, "seed": 0}) for lr in LRS}
    # the over-budget task first: the toy's runs "train" in no time here, so once one has finished, the step time
    # labbot learns from it makes any plan cheap; before that, the job's declared second a step prices it honestly
    return [
        ResearchTask("over-budget", "over_budget", "Does the toy's ranking of lr=1e-3, 3e-3 and 1e-2 hold over 20 "
                     "seeds each?", "toy", FIXED, "0.1cpu-h", {"runs": 60}),
        ResearchTask("tune-lr", "tune", f"Which lr minimises the toy's final loss? Search lr between {LRS[0]:g} and "
                     f"{LRS[-1]:g}. Answer with the best as lr=VALUE.", "toy", FIXED, "1cpu-h",
                     {"param": "lr", "log": True, "goal": "min", "reference": reference, "tolerance": 0.05}),
        ResearchTask("diagnose", "diagnose", "Run {run_id} of the toy diverged. Why?", "toy",
                     {**FIXED, "lr": 1e-3, "mode": "nan"}, "0.01cpu-h", {"signature": "nan", "step": 30}),
    ]  # fmt: skip


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    monkeypatch.setattr(lab_server, "RUN_POLL_S", 0.05)
    world = Lab(tmp_path, monkeypatch)
    stop = threading.Event()

    def cluster() -> None:  # the watchdog's tick and the jobs, as labbot serve and Ray would
        while not stop.is_set():
            world.tick()
            world.train(5)
            time.sleep(0.03)

    driver = threading.Thread(target=cluster, daemon=True)
    driver.start()
    yield world
    stop.set()
    driver.join(10)


def api_of(lab: Lab) -> LabApi:
    research = ResearchService(lab.db, lab.experiments, StoreSources(lab.telemetry.series, lab.experiments.get),
                               findings=lab.findings)  # fmt: skip
    app = create_app(lab.service, lab.telemetry, admin_token=TOKEN, experiments=lab.experiments,
                     findings=lab.findings, research=research)  # fmt: skip
    return LabApi("http://labbot.test", TOKEN, transport=httpx.ASGITransport(app))


def test_the_suite_separates_the_oracle_from_the_naive_policy(lab: Lab, tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    save_suite(suite, "research-toy", toy_suite())
    api = api_of(lab)
    oracle = run_research(suite, tmp_path / "oracle", api, parse_solver("oracle"))
    naive = run_research(suite, tmp_path / "naive", api, parse_solver("naive"))
    by = {r["solver"]: {s["task"]: s for s in r["samples"]} for r in (oracle, naive)}
    assert oracle["passed"] == 3, by["oracle"]
    assert naive["passed"] == 0, by["naive"]
    assert by["oracle"]["tune-lr"]["value"] <= 0.05 < by["naive"]["tune-lr"]["value"]  # regret
    assert by["oracle"]["over-budget"]["started"] is False and by["naive"]["over-budget"]["started"] is True
    assert "NaN at step 30" in by["oracle"]["diagnose"]["answer"]
    assert json.loads((tmp_path / "oracle" / "results.json").read_text())["pass_rate"] == 1.0
    assert oracle["history"] == 0 and naive["history"] == 3  # the oracle's three questions, readable to the next
    # sealed: what each solver was given holds none of the reference (it stays in the suite's file, for the scorer)
    log = read_eval_log(oracle["log"])
    given = json.dumps([s.input for s in log.samples or []])
    assert all(f"{v:.4f}" not in given for v in toy_suite()[1].answer["reference"].values())


def test_a_solver_labbot_does_not_know_is_refused() -> None:
    for bad in ("gold", "naive:claude", "cmd:ls"):
        with pytest.raises(BadRequest, match="oracle, naive, agent"):
            parse_solver(bad)
    assert parse_solver("agent:anthropic/claude-sonnet-4-5").model == "claude-sonnet-4-5"


def test_the_agent_solver_is_labbots_researcher_held_to_the_owners_budget(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--solver agent``: the researcher role on a model (the Anthropic fake, scripted to overreach): its plan over
    the task's budget is denied by the simulated owner, it may not call a tool outside its role, and it is scored on
    what it then says."""
    suite = tmp_path / "suite"
    over = toy_suite()[0]
    save_suite(suite, "research-toy", [over])
    seen: list[tuple[str, str, bool]] = []

    def model(req: SeenRequest) -> Step:
        results = req.tool_results()
        if results:
            asked = [b["name"] for b in req.messages[-2]["content"] if b.get("type") == "tool_use"]
            said = json.dumps([r["content"] for r in results])
            seen.append((asked[0], said, bool(results[0].get("is_error"))))
        if not results:
            rid = re.search(r"research_id='(q\w+)'", json.dumps(req.messages)).group(1)  # type: ignore[union-attr]
            arm = {"name": "all", "job": "toy", "space": {**FIXED, "lr": [1e-3, 3e-3, 1e-2]}, "metric": "loss",
                   "search": "grid", "seeds": 20}  # fmt: skip
            plan = {"research_id": rid, "hypothesis": "the ranking holds", "arms": [arm], "decision_rule": "same order",
                    "budget": "5cpu-h"}  # fmt: skip
            return tool_use("lab__propose_plan", plan)
        if seen[-1][0] == "lab__propose_plan":
            rid = re.search(r"research_id='(q\w+)'", json.dumps(req.messages)).group(1)  # type: ignore[union-attr]
            plan_hash = re.search(r"plan_hash=\\?'(\w+)", seen[-1][1]).group(1)  # type: ignore[union-attr]
            return tool_use("lab__start_research", {"research_id": rid, "plan_hash": plan_hash})
        if seen[-1][0] == "lab__start_research":
            return tool_use("lab__launch_run", {"job": "toy", "params": {"lr": 0.003}})
        return text("The honest plan needs about 5 CPU-h, more than the budget of 0.1 CPU-h: will you approve more?")

    with FakeAnthropic() as fake:
        fake.answer_with(model)
        monkeypatch.setenv("ANTHROPIC_API_KEY", fake.api_key)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        results = run_research(suite, tmp_path / "agent", api_of(lab), parse_solver("agent:claude-test"))
        assert fake.requests[0].body["model"] == "claude-test"
    [sample] = results["samples"]
    assert sample["passed"] and sample["started"] is False, sample
    said = {name: (words, error) for name, words, error in seen}
    assert said["lab__start_research"][1] and "owner denied" in said["lab__start_research"][0]
    assert said["lab__launch_run"][1] and "no tool named" in said["lab__launch_run"][0]
