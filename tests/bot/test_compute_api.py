"""/api/v1 and the run's Slack face with [compute]: a launch over the cap is 201 queued with why, --no-queue a 409
with the numbers and nothing written, an unknown purpose a 400 naming the five, priorities and capacity; the card of
a queued run shows its place in line, and its thread says when it leaves the queue; a bad [compute] stops start-up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from compute_support import compute_service
from starlette.testclient import TestClient

from labbot.bot.api import create_app
from labbot.bot.config import Settings
from labbot.bot.slack.blocks import run_card
from labbot.bot.slack.thread_plan import Cadence, ThreadState, plan
from labbot.common.errors import BadRequest
from labbot.training.telemetry_store import TelemetryStore

pytestmark = pytest.mark.databases

ADMIN = "admin-token-for-tests"


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database_url: str) -> TestClient:
    service, _ = compute_service(tmp_path, monkeypatch, {"training": {"runs": 1, "cpus": 3}}, database_url=database_url)
    app = create_app(service, TelemetryStore(service.db), admin_token=ADMIN)
    return TestClient(app, headers={"Authorization": f"Bearer {ADMIN}"})


def test_over_the_cap_a_launch_is_queued_and_says_why(api: TestClient) -> None:
    assert api.post("/api/v1/runs", json={"job": "slow"}).status_code == 201
    r = api.post("/api/v1/runs", json={"job": "slow", "owner": "U2"})
    assert r.status_code == 201
    doc = r.json()
    assert doc["run"]["status"] == "queued" and doc["run"]["queue_position"] == 1
    assert doc["queued"].startswith("training is at 1 of 1 run and 2 of 3 CPUs; this launch needs 2 CPUs")


def test_no_queue_is_a_409_with_the_numbers_and_writes_nothing(api: TestClient) -> None:
    api.post("/api/v1/runs", json={"job": "slow"})
    r = api.post("/api/v1/runs", json={"job": "slow", "no_queue": True})
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "conflict"
    assert "without --no-queue it would wait 1st in line" in r.json()["error"]["message"]
    assert len(api.get("/api/v1/runs").json()["runs"]) == 1


def test_an_unknown_purpose_is_a_400_naming_the_five(api: TestClient) -> None:
    r = api.post("/api/v1/runs", json={"job": "slow", "purpose": "fun"})
    assert r.status_code == 400
    assert "purposes: training, eval, data, research, serving" in r.json()["error"]["message"]


def test_priority_and_capacity_routes(api: TestClient) -> None:
    api.post("/api/v1/runs", json={"job": "slow", "owner": "U1"})
    ids = [api.post("/api/v1/runs", json={"job": "slow", "owner": f"U{i}"}).json()["run"]["id"] for i in (2, 3)]
    r = api.post(f"/api/v1/runs/{ids[1]}/priority", json={"priority": 3})
    assert r.status_code == 200 and r.json()["run"]["queue_position"] == 1 and r.json()["run"]["priority"] == 3
    for bad in ({"priority": "high"}, {"priority": True}, {}, {"priority": 1, "extra": 2}, [1]):
        assert api.post(f"/api/v1/runs/{ids[0]}/priority", json=bad).status_code == 400, bad
    assert api.post(f"/api/v1/runs/{ids[0]}/priority", json={"priority": 10**6}).status_code == 400
    doc = api.get("/api/v1/capacity").json()
    [training] = doc["purposes"]
    assert [q["run_id"] for q in training["queued"]] == [ids[1], ids[0]]
    assert doc["caps_set"] and training["use"]["runs"] == 1 and training["owners"] == ["U1"]


def test_the_card_of_a_queued_run_shows_its_place_and_the_thread_says_when_it_starts() -> None:
    now = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)
    run = {"id": "k3xq7p", "job": "slow", "name": "slow-k3xq7p", "owner": "U1", "status": "queued", "attempt": 1,
           "step": None, "metrics": {}, "params": {}, "purpose": "training", "queue_position": 2,
           "queued_at": (now - timedelta(minutes=3)).isoformat(), "ray_submission_id": "labbot-k3xq7p-1"}  # fmt: skip
    _, blocks = run_card(run)
    assert "queued · 2nd in line for training" in str(blocks)
    seen = ThreadState(status_seen="queued", card_digest="x")
    moved = plan({**run, "queue_position": 1}, seen, history=[], now=now, cadence=Cadence())
    assert moved.update_card and not moved.left_queue
    started = plan({**run, "status": "pending", "queue_position": None}, seen, history=[], now=now, cadence=Cadence())
    assert started.left_queue and started.update_card and not started.restarted


def test_a_bad_compute_table_stops_start_up_with_a_clear_message(tmp_path: Path) -> None:
    toml = tmp_path / "labbot.toml"
    toml.write_text("[compute.trainnig]\nshare = 0.5\n")
    with pytest.raises(BadRequest, match=r"labbot.toml: \[compute.trainnig\]: 'trainnig' is not a purpose"):
        Settings.from_env({"LABBOT_CONFIG": str(toml), "LABBOT_HOME": str(tmp_path / "home")})
    toml.write_text("[compute.eval]\ngpus = 2\n[compute.training]\nshare = 0.6\nruns = 4\n")
    settings = Settings.from_env({"LABBOT_CONFIG": str(toml), "LABBOT_HOME": str(tmp_path / "home")})
    assert settings.compute.caps["training"].share == 0.6 and settings.compute.caps["eval"].gpus == 2
