"""``/api/v1/experiments`` and ``labbot sweep`` / ``experiments`` / ``experiment`` over the real experiment service,
run service, Optuna study and SQLite (Ray the recording double): an experiment planned, created, listed, shown,
paused, resumed, stopped and a trial stopped; bad input a 4xx naming what would be right, nothing created."""

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
from labbot.training.telemetry_store import TelemetryStore

ADMIN = "admin-token-for-experiment-tests"
SWEEP = {"job": "toy", "space": ["lr=loguniform(1e-4,1e-2)", "width=16,64"], "metric": "loss", "trials": 4}


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lab:
    return Lab(tmp_path, monkeypatch)


@pytest.fixture
def kicks() -> list[int]:
    return []


@pytest.fixture
def http(lab: Lab, kicks: list[int]) -> TestClient:
    app = create_app(
        lab.service, TelemetryStore(lab.db), admin_token=ADMIN, experiments=lab.experiments,
        kick=lambda: kicks.append(1),
    )  # fmt: skip
    return TestClient(app, headers={"Authorization": f"Bearer {ADMIN}"})


def test_create_show_list_and_act_over_http(http: TestClient, lab: Lab, kicks: list[int]) -> None:
    r = http.post("/api/v1/experiments", json={**SWEEP, "owner": "U1", "concurrency": 2, "budget": "1cpu-h"})
    assert r.status_code == 201, r.text
    exp = r.json()["experiment"]
    assert exp["status"] == "running" and exp["owner"] == "U1" and kicks == [1]
    assert exp["projection"]["trial_hours"] == pytest.approx(90 / 3600) and exp["projection"]["trials_allowed"] == 4
    lab.tick()
    doc = http.get(f"/api/v1/experiments/{exp['id']}").json()["experiment"]
    assert doc["counts"]["running"] == 2 and len(doc["trials"]) == 2
    assert [e["id"] for e in http.get("/api/v1/experiments").json()["experiments"]] == [exp["id"]]
    assert (
        http.post(f"/api/v1/experiments/{exp['id']}/pause", params={"by": "U1"}).json()["experiment"]["status"]
        == "paused"
    )
    assert http.post(f"/api/v1/experiments/{exp['id']}/pause").status_code == 409
    assert http.post(f"/api/v1/experiments/{exp['id']}/resume").json()["experiment"]["status"] == "running"
    r = http.post(f"/api/v1/experiments/{exp['id']}/trials/0/stop", params={"by": "U1"})
    assert r.status_code == 200, r.text
    lab.tick()
    doc = http.get(f"/api/v1/experiments/{exp['id']}").json()["experiment"]
    assert doc["trials"][0]["status"] == "stopped"
    assert http.post(f"/api/v1/experiments/{exp['id']}/trials/7/stop").status_code == 400
    stopped = http.post(f"/api/v1/experiments/{exp['id']}/stop", params={"by": "U1"}).json()["experiment"]
    assert stopped["status"] == "stopped" and stopped["reason"] == "stopped by U1"


def test_a_plan_is_checked_and_projected_and_creates_nothing(http: TestClient, lab: Lab) -> None:
    r = http.post("/api/v1/experiments/plan", json={**SWEEP, "seeds": 3, "budget": "0.2cpu-h"})
    assert r.status_code == 200, r.text
    plan = r.json()["plan"]
    assert plan["trials"] == 4 and plan["seeds"] == [0, 1, 2]
    assert plan["projection"]["trial_hours"] == pytest.approx(3 * 90 / 3600)
    assert plan["projection"]["trials_allowed"] == 2
    assert http.get("/api/v1/experiments").json()["experiments"] == []


@pytest.mark.parametrize(
    ("body", "status", "said"),
    [
        ({**SWEEP, "space": ["depth=1,2"]}, 400, "unknown parameter depth for job toy; accepted:"),
        ({**SWEEP, "seeds": 0}, 400, "seeds=0 must be a whole number from 1 to 20"),
        ({**SWEEP, "surprise": 1}, 400, "surprise: Extra inputs are not permitted"),
        ([1, 2], 400, "the body is a JSON object"),
        ({**SWEEP, "job": "nope"}, 404, "unknown job 'nope'"),
    ],
)
def test_bad_requests_are_4xx_and_create_nothing(http: TestClient, body: object, status: int, said: str) -> None:
    r = http.post("/api/v1/experiments", json=body)
    assert r.status_code == status and said in r.json()["error"]["message"], r.text
    assert http.get("/api/v1/experiments").json()["experiments"] == []
    assert http.get("/api/v1/experiments/xnothere").status_code == 404


def _cli_against(monkeypatch: pytest.MonkeyPatch, http: TestClient) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        r = http.request(
            request.method, request.url.path, params=request.url.params, headers=request.headers,
            content=request.content,
        )  # fmt: skip
        return httpx.Response(r.status_code, content=r.content, headers={"content-type": r.headers["content-type"]})

    monkeypatch.setattr(
        cli_main, "ApiClient", lambda: ApiClient("http://labbot.test", ADMIN, transport=httpx.MockTransport(answer))
    )


def test_the_cli_plans_sweeps_shows_and_stops(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], http: TestClient, lab: Lab
) -> None:
    _cli_against(monkeypatch, http)
    space = ["lr=1e-4,3e-3", "width=64"]
    assert cli_main.main(["sweep", "toy", *space, "--metric", "loss", "--search", "grid", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "experiment: toy sweep — job toy, 2 trials × 1 seed(s), 2 at a time" in out
    assert "projected cost: 0.025 CPU-h a trial, 0.05 CPU-h for all" in out
    assert lab.experiments.experiments() == []
    assert cli_main.main(["sweep", "toy", *space, "--metric", "loss", "--search", "grid", "--json"]) == 0
    exp = json.loads(capsys.readouterr().out)
    lab.run_to_end()
    assert cli_main.main(["experiment", exp["id"]]) == 0
    out = capsys.readouterr().out
    assert f"experiment {exp['id']} toy sweep — done (all 2 trials ended (2 scored))" in out
    assert "trials: 2 done, 0 running, 0 pruned, 0 queued, 0 failed, 0 to go" in out
    assert "best vs runner-up: no difference shown: with one seed" in out
    assert cli_main.main(["experiments"]) == 0
    assert exp["id"] in capsys.readouterr().out
    assert cli_main.main(["experiment", exp["id"], "stop"]) == 1  # a conflict with its state: it is done
    assert "already done" in capsys.readouterr().err
    assert cli_main.main(["sweep", "toy", "lr=1", "--metric", "loss"]) == 2
    assert "the space searches nothing" in capsys.readouterr().err


def test_claims_are_checked_over_http_and_by_the_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], http: TestClient, lab: Lab, tmp_path: Path
) -> None:
    exp = lab.sweep(space=["lr=1e-4,3e-3"], search="grid")
    lab.run_to_end()
    best = lab.experiments.get(exp["id"])["results"]["best"]
    good = f"best [[{best['mean']:.2f} | experiment:{exp['id']} best]] of [[2 | experiment:{exp['id']} count:done]]"
    r = http.post("/api/v1/claims/check", json={"text": good})
    assert r.status_code == 200 and r.json()["report"]["ok"], r.text
    bad = f"best [[{best['mean'] + 1:.2f} | experiment:{exp['id']} best]] after 300 steps"
    report = http.post("/api/v1/claims/check", json={"text": bad}).json()["report"]
    assert not report["ok"] and report["counts"]["wrong"] == 1 and report["unbound"] == ["300"]
    assert report["corrected"] == f"best {best['mean']:.2f} after 300 steps"
    assert http.post("/api/v1/claims/check", json={"txt": "x"}).status_code == 400
    _cli_against(monkeypatch, http)
    path = tmp_path / "report.md"
    path.write_text(bad)
    assert cli_main.main(["check-claims", str(path)]) == 1
    out = capsys.readouterr().out
    assert "wrong" in out and "0 right, 1 wrong, 0 unsourced" in out and "bound to no source: 300" in out
    path.write_text(good)
    assert cli_main.main(["check-claims", str(path), "--corrected"]) == 0
    assert capsys.readouterr().out.strip() == f"best {best['mean']:.2f} of 2"
