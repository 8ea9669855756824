"""What a 12-config question costs a researcher in approvals and messages, and what checking a report costs
(issue 28, measured).

Through the real stack — the `lab` MCP server in the real MCP pool, the approval gate, `/api/v1`, the research and
experiment services, the controller and Optuna (Ray the recording double, the toy job's known curve) — the same
question asked two ways:

* before: the assistant launches the 12 configs one by one (`launch_run`): the gate asks for each;
* after: the researcher proposes one plan of 12 trials and starts it (`start_research`): the gate asks once.

Human messages are the question plus one press per approval. Then the 12-trial experiment runs to its end and a
report quoting every trial's mean, the best and the counts is checked by the claim ledger: claims per report, and the
check's cost against one read of the experiment (median over rounds, with the spread). Claims: 1 approval instead of
12; a check costs at most 3 experiment reads.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness  # noqa: F401  (puts tests/ on the path)
import httpx
import pytest
from _harness import report
from experiment_lab import Lab

from labbot.agents.fleet.approvals import ApprovalGate, ApprovalRequest
from labbot.agents.fleet.identity import AgentIdentity
from labbot.agents.fleet.mcp_config import McpSettings
from labbot.agents.fleet.mcp_pool import McpPool
from labbot.agents.fleet.tools import CallContext, ToolCall
from labbot.bot.api import create_app
from labbot.mcp_servers import lab as lab_server
from labbot.training.claims import StoreSources, check
from labbot.training.research.service import ResearchService

OWNER = "U0ALICE001"
TOKEN = "bench-token"
LRS = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2]
WIDTHS = [32, 64]
ROUNDS = 15


class Prompter:
    def __init__(self, gate: list[ApprovalGate]) -> None:
        self.gate = gate
        self.asked: list[ApprovalRequest] = []

    async def ask(self, request: ApprovalRequest) -> None:  # the owner presses Approve on every prompt
        self.asked.append(request)
        asyncio.get_running_loop().call_soon(lambda: self.gate[0].decide(request.id, approve=True, by=OWNER))

    async def settled(self, request: ApprovalRequest) -> None:
        return None


async def ask_both_ways(lab: Lab, research: ResearchService) -> tuple[int, int, str]:
    app = create_app(lab.service, lab.telemetry, admin_token=TOKEN, experiments=lab.experiments, research=research)
    api = lab_server.LabApi("http://labbot.test", TOKEN, transport=httpx.ASGITransport(app))
    settings = McpSettings.from_config({"mcp": {"servers": {}, "roles": {}}}, ("lab",))
    async with McpPool(settings, {"lab": lambda: lab_server.build_server(api)}) as pool:
        await pool.tools("assistant")
        holder: list[ApprovalGate] = []
        prompter = Prompter(holder)
        gate = ApprovalGate(pool.executor("assistant"), lab.db, prompter, timeout_s=30,
                            research_owner=research.owner_of)  # fmt: skip
        holder.append(gate)
        tools = gate.around(AgentIdentity(pool.executor("assistant")))
        ctx = CallContext(agent="bench", role="assistant", owner=OWNER, channel="C0BENCH001", thread_ts="1.1")

        async def call(name: str, args: dict[str, Any]) -> str:
            result = await tools.call(ToolCall.resolve(tools, name, args, ctx))
            assert not result.is_error, result.content
            return str(result.content)

        for lr in LRS:  # before: one run at a time
            for width in WIDTHS:
                await call("lab__launch_run", {"job": "toy", "params": {"lr": lr, "width": width}})
        before = len(prompter.asked)
        q = await asyncio.to_thread(research.open, "which lr and width minimise the toy's loss?", OWNER)
        arm = {"name": "grid", "job": "toy", "space": {"lr": LRS, "width": WIDTHS}, "metric": "loss",
               "search": "grid", "concurrency": 4}  # fmt: skip
        said = await call("lab__propose_plan", {"research_id": q["id"], "hypothesis": "a middle lr, wider is better",
                                                "arms": [arm], "decision_rule": "lowest mean final loss",
                                                "budget": "2cpu-h"})  # fmt: skip
        plan_hash = said.split("plan_hash='")[1].split("'")[0]
        await call("lab__start_research", {"research_id": q["id"], "plan_hash": plan_hash})
        return before, len(prompter.asked) - before, q["id"]


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="lb-approvals-") as tmp, pytest.MonkeyPatch.context() as mp:
        lab = Lab(Path(tmp), mp)
        sources = StoreSources(lab.telemetry.series, lab.experiments.get)
        research = ResearchService(lab.db, lab.experiments, sources, findings=lab.findings)
        before, after, rid = asyncio.run(ask_both_ways(lab, research))
        lab.run_to_end(points=3)
        exp_id = research.get(rid)["arms"]["grid"]
        doc = lab.experiments.get(exp_id)
        lines = [
            f"trial `{t['number']}` ({' '.join(f'{k}={v}' for k, v in t['params'].items())}): "
            f"[[{t['value']:.4f} | experiment:{exp_id} trial:{t['number']} stat:mean]]"
            for t in doc["trials"]
            if t["value"] is not None
        ]
        lines.append(f"best: [[{doc['results']['ranking'][0]['mean']:.4f} | experiment:{exp_id} best stat:mean]]")
        lines += [f"{k}: [[{doc['counts'][k]} | experiment:{exp_id} count:{k}]]" for k in ("done", "pruned", "failed")]
        text = "\n".join(lines)
        ratios, checks = [], []
        for _ in range(ROUNDS):
            t0 = time.perf_counter()
            ledger = check(text, sources)
            t1 = time.perf_counter()
            lab.experiments.get(exp_id)
            t2 = time.perf_counter()
            assert ledger.ok and not ledger.unbound, ledger.to_json()
            checks.append(t1 - t0)
            ratios.append((t1 - t0) / (t2 - t1))
        claims = len(ledger.checked)
    human_before, human_after = 1 + before, 1 + after
    print(f"a 12-config question: before {before} approvals, {human_before} human messages (the question and a press "
          f"each); after {after} approval, {human_after} human messages")  # fmt: skip
    print(
        f"a report of {claims} claims checked in {statistics.median(checks) * 1000:.1f} ms median "
        f"(spread {min(checks) * 1000:.1f}–{max(checks) * 1000:.1f} ms), "
        f"{statistics.median(ratios):.2f}× one read of the experiment (spread {min(ratios):.2f}–{max(ratios):.2f})"
    )
    report("research_approvals", {"ratio": before / max(after, 1), "claim": "1 approval instead of 12",
                                  "ok": before == 12 and after == 1, "human_before": human_before,
                                  "human_after": human_after})  # fmt: skip
    report("claim_check_cost", {"ratio": statistics.median(ratios), "claim": "≤ 3 experiment reads a report",
                                "ok": statistics.median(ratios) <= 3.0, "claims": claims,
                                "median_ms": statistics.median(checks) * 1000})  # fmt: skip


if __name__ == "__main__":
    main()
