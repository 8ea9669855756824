"""``/api/v1/research`` over HTTP and ``labbot research`` against it, over the real research and experiment services
(Ray the recording double): open, plan, show the plan waiting for approval, start exactly that plan, list, show and
close — bad input a 4xx naming what would be right, nothing made; a colleague's agent (``?for=``) refused."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from experiment_lab import Lab
from starlette.testclient import TestClient

from labbot.bot.api import create_app
from labbot.bot.cli import main as cli_main
from labbot.common.api_client import ApiClient
from labbot.training.claims import StoreSources
from labbot.training.research.service import ResearchService

ADMIN = "admin-token-for-research-tests"
OWNER = "U0ALICE001"
ARM = {"name": "lr", "job": "toy", "space": {"lr": [1e-3, 1e-2], "width": 64}, "metric": "loss", "search": "grid"}
PLAN = {"hypothesis": "a larger lr is better", "arms": [ARM], "decision_rule": "lowest loss", "budget": "1cpu-h"}


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lab:
    return Lab(tmp_path, monkeypatch)


@pytest.fixture
def http(lab: Lab) -> TestClient:
    research = ResearchService(lab.db, lab.experiments, StoreSources(lab.telemetry.series, lab.experiments.get))
    app = create_app(lab.service, lab.telemetry, admin_token=ADMIN, experiments=lab.experiments, research=research)
    return TestClient(app, headers={"Authorization": f"Bearer {ADMIN}"})


def test_open_plan_preview_start_over_http(http: TestClient, lab: Lab) -> None:
    q = http.post("/api/v1/research", json={"question": "which lr?", "owner": OWNER})
    assert q.status_code == 201, q.text
    rid = q.json()["research"]["id"]
    planned = http.post(f"/api/v1/research/{rid}/plan", json=PLAN, params={"for": OWNER}).json()
    assert planned["change"] == "needs_approval" and planned["needs"] == ["the whole plan (nothing is approved yet)"]
    plan_hash = planned["research"]["plan_hash"]
    assert http.get(f"/api/v1/research/{rid}/plans/{plan_hash}").status_code == 200
    assert http.post(f"/api/v1/research/{rid}/plans/0000000000000000/start").status_code == 409
    refused = http.post(f"/api/v1/research/{rid}/plan", json=PLAN, params={"for": "U0BOB00001"})
    assert refused.status_code == 403 and f"{OWNER}'s question" in refused.json()["error"]["message"]
    started = http.post(f"/api/v1/research/{rid}/plans/{plan_hash}/start").json()["research"]
    assert started["status"] == "running" and started["approved_hash"] == plan_hash
    assert len(lab.experiments.experiments()) == 1


@pytest.mark.parametrize(
    ("path", "body", "status", "said"),
    [
        ("/api/v1/research", {"question": "", "owner": OWNER}, 400, "a research question needs words"),
        ("/api/v1/research", {"question": "q", "owner": OWNER, "extra": 1}, 400, "extra: Extra inputs"),
        ("/api/v1/research/qnothere/plan", PLAN, 404, "unknown research question 'qnothere'"),
    ],
)
def test_bad_requests_are_4xx_and_make_nothing(
    http: TestClient, lab: Lab, path: str, body: object, status: int, said: str
) -> None:
    r = http.post(path, json=body)
    assert r.status_code == status and said in r.json()["error"]["message"], r.text
    assert lab.experiments.experiments() == []


def test_a_bad_plan_is_refused_naming_the_arm_and_records_nothing(http: TestClient) -> None:
    rid = http.post("/api/v1/research", json={"question": "which lr?", "owner": OWNER}).json()["research"]["id"]
    bad = {**PLAN, "arms": [{**ARM, "metric": "accuracy_of_nothing"}]}
    r = http.post(f"/api/v1/research/{rid}/plan", json=bad)
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("arm lr: job toy never reports")
    assert http.get(f"/api/v1/research/{rid}").json()["research"]["plan"] is None


def test_the_cli_lists_shows_and_closes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], http: TestClient, lab: Lab
) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        r = http.request(request.method, request.url.path, params=request.url.params, content=request.content)
        return httpx.Response(r.status_code, content=r.content, headers={"content-type": r.headers["content-type"]})

    monkeypatch.setattr(
        cli_main, "ApiClient", lambda: ApiClient("http://labbot.test", ADMIN, transport=httpx.MockTransport(answer))
    )
    assert cli_main.main(["research"]) == 0
    assert "no research questions yet" in capsys.readouterr().out
    rid = http.post("/api/v1/research", json={"question": "which lr?", "owner": OWNER}).json()["research"]["id"]
    plan_hash = http.post(f"/api/v1/research/{rid}/plan", json=PLAN).json()["research"]["plan_hash"]
    http.post(f"/api/v1/research/{rid}/plans/{plan_hash}/start")
    assert cli_main.main(["research"]) == 0
    assert rid in capsys.readouterr().out
    assert cli_main.main(["research", rid]) == 0
    out = capsys.readouterr().out
    assert f"research {rid} · running · asked by {OWNER}: which lr?" in out and f"plan {plan_hash}" in out
    assert "capped at the budget, 1 CPU-h" in out
    assert cli_main.main(["research", rid, "close", "--json"]) == 0
    closed = json.loads(capsys.readouterr().out)
    assert closed["status"] == "closed" and lab.experiments.get(closed["arms"]["lr"])["status"] == "stopped"
    assert cli_main.main(["research", rid, "close"]) == 1  # already closed: a conflict, said
    assert "closed already" in capsys.readouterr().err
