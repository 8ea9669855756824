"""Findings (``labbot.training.findings``): every ended experiment leaves one (answered, incomplete or failed), its
numbers claims on the experiment that the ledger checked; an agent's finding with a number the store does not bear
out is refused, nothing kept; searching ranks by the query's rarest shared words; over HTTP and through the ``lab``
MCP server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from experiment_lab import Lab
from mcp import Client
from sqlalchemy import func, select
from starlette.testclient import TestClient

from labbot.bot.api import create_app
from labbot.common.errors import BadRequest
from labbot.mcp_servers.lab import LabApi, build_server
from labbot.storage.models import Finding
from labbot.training.findings import FINDINGS_OWNER

TOKEN = "admin-token-for-the-findings-tests"


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lab:
    return Lab(tmp_path, monkeypatch)


def count(lab: Lab) -> int:
    with lab.db.session() as s:
        return int(s.scalar(select(func.count()).select_from(Finding)) or 0)


def test_an_ended_experiment_leaves_one_checked_finding(lab: Lab) -> None:
    exp = lab.sweep(space=["lr=1e-4,3e-3", "width=64"], search="grid", seeds=2, concurrency=2)
    lab.run_to_end()
    [finding] = lab.findings.search("")
    assert finding["kind"] == "experiment" and finding["source"] == f"experiment:{exp['id']}"
    assert finding["status"] == "answered" and finding["question"] == "toy: which lr minimise loss?"
    assert "best: lr=0.003 → loss [[" in finding["verdict"] and "95 % interval" in finding["verdict"]
    assert finding["claims"] and all(c["verdict"] == "ok" for c in finding["claims"])
    assert "Best against the runner-up: better" in finding["summary"]
    doc = lab.artifacts.get(FINDINGS_OWNER, finding["artifact_id"]).decode()
    assert doc.startswith("# toy: which lr minimise loss?") and f"experiment: {exp['id']}" in doc
    lab.experiments.record_finding(exp["id"])  # once per experiment, whatever asks again
    assert count(lab) == 1


def test_a_stopped_experiment_is_incomplete_and_one_with_nothing_scored_failed(lab: Lab) -> None:
    stopped = lab.sweep(space=["lr=loguniform(1e-4,1e-2)"], trials=6, concurrency=1, search="random")
    lab.tick()
    lab.train(20)
    lab.tick()
    lab.train(2)
    lab.experiments.stop(stopped["id"], by="U1")
    diverged = lab.sweep(space=["lr=1e-4,3e-3", "mode=nan"], search="grid", concurrency=2)
    lab.run_to_end()
    by_source = {f["source"]: f for f in lab.findings.search("")}
    assert by_source[f"experiment:{stopped['id']}"]["status"] == "incomplete"
    assert "Incomplete: stopped by U1" in by_source[f"experiment:{stopped['id']}"]["summary"]
    failed = by_source[f"experiment:{diverged['id']}"]
    assert failed["status"] == "failed" and failed["verdict"].startswith("no config scored")


def test_an_agents_finding_with_a_number_the_store_does_not_bear_out_is_refused(lab: Lab) -> None:
    exp = lab.sweep(space=["lr=1e-4,3e-3"], search="grid")
    lab.run_to_end()
    best = lab.experiments.get(exp["id"])["results"]["best"]
    with pytest.raises(BadRequest, match="do not check") as e:
        lab.findings.record(question="which lr?", verdict=f"lr=3e-3 reaches [[{best['mean'] - 1:.2f} | "
                            f"experiment:{exp['id']} best]]", summary="", status="answered", owner="U1")  # fmt: skip
    assert f"experiment {exp['id']}'s trial" in e.value.message
    assert count(lab) == 1  # only the experiment's own
    made = lab.findings.record(question="which lr?", verdict=f"lr=3e-3: [[{best['mean']:.2f} | experiment:{exp['id']} "
                               "best]]", summary="", status="answered", owner="U1")  # fmt: skip
    assert made["claims"][0]["verdict"] == "ok"


def test_search_ranks_by_the_rarest_shared_words(lab: Lab) -> None:
    for q, v in (("tiny-lm learning rate at 300 steps", "3e-3"), ("tiny-rl kl penalty", "0.1"),
                 ("tiny-lm width", "256"), ("why did run k3 diverge", "nan at step 40")):  # fmt: skip
        lab.findings.record(question=q, verdict=v, summary="", status="answered", owner="U1")
    assert [f["question"] for f in lab.findings.search("learning rate tiny-lm")][:1] == [
        "tiny-lm learning rate at 300 steps"
    ]
    assert [f["question"] for f in lab.findings.search("diverge")] == ["why did run k3 diverge"]
    assert lab.findings.search("zebra") == []


def test_findings_over_http_and_the_lab_server(lab: Lab) -> None:
    exp = lab.sweep(space=["lr=1e-4,3e-3"], search="grid")
    lab.run_to_end()
    app = create_app(lab.service, lab.telemetry, admin_token=TOKEN, experiments=lab.experiments,
                     findings=lab.findings)  # fmt: skip
    http = TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"})
    [f] = http.get("/api/v1/findings", params={"q": "toy lr"}).json()["findings"]
    assert http.get(f"/api/v1/findings/{f['id']}").json()["finding"]["source"] == f"experiment:{exp['id']}"
    assert http.get("/api/v1/findings/fnothere").status_code == 404
    bad = {"question": "q", "verdict": f"[[99 | experiment:{exp['id']} count:done]] done", "owner": "U1"}
    r = http.post("/api/v1/findings", json=bad)
    assert r.status_code == 400 and "do not check" in r.json()["error"]["message"]
    assert http.post("/api/v1/findings", json={"verdict": "v"}).status_code == 400

    api = LabApi("http://labbot.test", TOKEN, transport=httpx.ASGITransport(app), agent="U0ALICE001/researcher")

    async def scenario() -> tuple[str, Any]:
        async with Client(build_server(api)) as client:
            found = await client.call_tool("search_findings", {"query": "toy lr loss"})
            refused = await client.call_tool("record_finding", {
                "question": "q", "verdict": f"[[99 | experiment:{exp['id']} count:done]] done", "summary": "",
                "status": "answered",
            })  # fmt: skip
            return "".join(getattr(c, "text", "") for c in found.content), refused

    text, refused = asyncio.run(scenario())
    assert "toy: which lr minimise loss?" in text and f["id"] in text
    assert refused.is_error and "do not check" in "".join(getattr(c, "text", "") for c in refused.content)
    assert count(lab) == 1
