"""labbot.bot.api over a real RunService, SQLite and Ray head: admin auth, launch idempotency, telemetry ingest."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from starlette.testclient import TestClient
from support import SLEEPER, make_service, telemetry_token, wait_for

from labbot.bot.api import create_app
from labbot.bot.api.plots import plot_url
from labbot.storage.models import MetricPoint
from labbot.training.ray_cluster import RayConnection
from labbot.training.service import RunService
from labbot.training.telemetry_ingest import MAX_BODY_BYTES
from labbot.training.telemetry_store import TelemetryStore

pytestmark = pytest.mark.databases  # the run service and telemetry store on SQLite and PostgreSQL

ADMIN = "admin-secret"


@pytest.fixture
def service(tmp_path: Path, ray_head: RayConnection, database_url: str) -> Iterator[RunService]:
    svc = make_service(tmp_path, ray_head, SLEEPER, database_url=database_url)
    yield svc
    for run in svc.runs():
        if run["status"] in ("pending", "running", "restarting"):
            svc.stop(run["id"])


@pytest.fixture
def client(service: RunService) -> TestClient:
    app = create_app(service, TelemetryStore(service.db), admin_token=ADMIN)
    return TestClient(app, headers={"Authorization": f"Bearer {ADMIN}"})


def _points(service: RunService, run_id: str) -> int:
    with service.db.session() as s:
        return int(s.scalar(select(func.count()).select_from(MetricPoint).where(MetricPoint.run_id == run_id)) or 0)


def _launch(client: TestClient, **body: Any) -> dict[str, Any]:
    r = client.post("/api/v1/runs", json={"job": "sleeper", **body})
    assert r.status_code in (200, 201), r.text
    return r.json()["run"]


def test_health_is_open_and_the_api_needs_the_admin_token(client: TestClient) -> None:
    assert client.get("/healthz", headers={"Authorization": ""}).json() == {"ok": True}  # alive, nothing else
    for headers in ({"Authorization": ""}, {"Authorization": "Bearer nope"}):
        r = client.get("/api/v1/runs", headers=headers)
        assert r.status_code == 401 and "admin token" in r.json()["error"]["message"]


def test_bad_launches_write_nothing(client: TestClient, service: RunService) -> None:
    cases = [
        ({"job": "nope"}, 404, "unknown job 'nope'"),
        ({"job": "tiny-lm", "params": {"steps": "many"}}, 400, "expects an integer"),
        ({"job": "tiny-lm", "params": {"colour": "red"}}, 400, "accepted: batch_size"),
        ({"job": "tiny-lm", "stall_after": "later"}, 400, "bad duration"),
        ({"job": "tiny-lm", "gpus": -1}, 400, "gpus"),
        ({"jobb": "tiny-lm"}, 400, "bad launch request"),
        # a remedy on a parameter the job does not take, or one that leaves its range: refused at launch
        ({"job": "tiny-lm", "remedies": ["diverged: beta *= 2"]}, 400, "job tiny-lm has no parameter 'beta'"),
        ({"job": "tiny-lm", "remedies": ["diverged: lr *= 100; max 2"]}, 400, "after attempt 2"),
        ({"job": "tiny-lm", "remedies": ["hung: lr *= 0.5"]}, 400, "restart_on"),
    ]
    for body, status, message in cases:
        r = client.post("/api/v1/runs", json=body)
        assert r.status_code == status and message in r.json()["error"]["message"], r.text
    assert client.post("/api/v1/runs", content=b"{").status_code == 400
    assert service.runs() == []


def test_the_same_launch_twice_at_once_is_one_run_and_one_ray_job(client: TestClient, service: RunService) -> None:
    def post(_: int) -> Any:
        return client.post("/api/v1/runs", json={"job": "sleeper"}, headers={"Idempotency-Key": "double-click-1"})

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(post, range(4)))
    assert sorted(r.status_code for r in answers) == [200, 200, 200, 201]
    assert len({r.json()["run"]["id"] for r in answers}) == 1
    run_id = answers[0].json()["run"]["id"]
    assert [r["id"] for r in service.runs()] == [run_id]
    assert [sid for sid in service.launcher.jobs() if run_id in sid] == [f"labbot-{run_id}-1"]


def test_telemetry_needs_the_runs_own_token(client: TestClient, service: RunService, ray_head: RayConnection) -> None:
    run = _launch(client)
    other = _launch(client)
    token = telemetry_token(ray_head, run["ray_submission_id"])
    body = {"attempt": 1, "points": [{"step": 1, "metrics": {"loss": 1.0}}]}
    url = f"/api/v1/runs/{run['id']}/telemetry"
    for headers in ({"Authorization": ""}, {"Authorization": "Bearer wrong"}, {"Authorization": ADMIN}):
        r = client.post(url, json=body, headers=headers)
        assert r.status_code == 401, r.text
    other_token = telemetry_token(ray_head, other["ray_submission_id"])
    assert client.post(url, json=body, headers={"Authorization": f"Bearer {other_token}"}).status_code == 401
    assert (
        client.post(
            "/api/v1/runs/nosuch/telemetry", json=body, headers={"Authorization": f"Bearer {token}"}
        ).status_code
        == 401
    )
    assert _points(service, run["id"]) == 0
    r = client.post(url, json=body, headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200 and r.json() == {"accepted": 1}
    assert _points(service, run["id"]) == 1
    # the phase a heartbeat names is the run's (the card shows it before a first step: tiny-rl's warm-up)
    beat = {"attempt": 1, "points": [], "phase": "warmup"}
    assert client.post(url, json=beat, headers={"Authorization": f"Bearer {token}"}).status_code == 200
    shown = wait_for(lambda: client.get(f"/api/v1/runs/{run['id']}").json()["run"], what="the run")
    assert shown["phase"] == "warmup" and shown["phase_since"], shown
    assert client.get(f"/api/v1/runs/{other['id']}").json()["run"]["phase"] is None, "a run that named none"


def test_malformed_and_oversized_telemetry(client: TestClient, service: RunService, ray_head: RayConnection) -> None:
    run = _launch(client)
    auth = {"Authorization": f"Bearer {telemetry_token(ray_head, run['ray_submission_id'])}"}
    url = f"/api/v1/runs/{run['id']}/telemetry"
    assert client.post(url, content=b"{nope", headers=auth).status_code == 400
    r = client.post(url, json={"points": [{"step": "one", "metrics": {}}]}, headers=auth)
    assert r.status_code == 400 and "points[0].step" in r.json()["error"]["message"]
    for step in (10**23, 1e23):  # past SQL's BIGINT: said here, not a 500 from the database
        r = client.post(url, json={"points": [{"step": step, "metrics": {"loss": 1.0}}]}, headers=auth)
        assert r.status_code == 400 and "points[0].step" in r.json()["error"]["message"], r.text
    deep = b'{"points": ' + b"[" * 30_000 + b"]" * 30_000 + b"}"
    r = client.post(url, content=deep, headers=auth)
    assert r.status_code == 400 and "nested" in r.json()["error"]["message"], r.text
    big = json.dumps({"points": [{"step": 1, "metrics": {"loss": 1.0}}], "pad": "x" * MAX_BODY_BYTES})
    r = client.post(url, content=big.encode(), headers=auth)
    assert r.status_code == 413 and "limit" in r.json()["error"]["message"]
    assert _points(service, run["id"]) == 0


def test_nan_and_inf_are_stored_as_such(client: TestClient, service: RunService, ray_head: RayConnection) -> None:
    run = _launch(client)
    auth = {"Authorization": f"Bearer {telemetry_token(ray_head, run['ray_submission_id'])}"}
    body = (
        b'{"attempt": 1, "points": [{"step": 1, "metrics": {"loss": 3.0}}, {"step": 2, "metrics": {"loss": NaN}},'
        b' {"step": 3, "metrics": {"loss": "Infinity"}}], "events": [{"kind": "checkpoint", "step": 2}]}'
    )
    r = client.post(f"/api/v1/runs/{run['id']}/telemetry", content=body, headers=auth)
    assert r.status_code == 200, r.text
    values = [v for _, v in TelemetryStore(service.db).metrics(run["id"], "loss")]
    assert values[0] == 3.0 and math.isnan(values[1]) and values[2] == math.inf
    api = client.get(f"/api/v1/runs/{run['id']}/metrics/loss").json()
    assert api["points"] == [[1, 3.0], [2, "NaN"], [3, "Infinity"]]
    shown = client.get(f"/api/v1/runs/{run['id']}").json()["run"]
    assert shown["step"] == 3 and shown["metrics"]["loss"] == "Infinity" and shown["checkpoint_step"] == 2
    assert shown["status"] == "running"  # telemetry proves the attempt runs


def test_run_json_has_the_contract_fields(client: TestClient) -> None:
    run = _launch(client, name="contract")
    shown = client.get(f"/api/v1/runs/{run['id']}").json()["run"]
    for field in ("id", "job", "status", "attempt", "step", "metrics", "ray_submission_id", "thread_ts"):
        assert field in shown
    assert shown["status"] in ("pending", "running") and shown["name"] == "contract"
    assert client.get("/api/v1/runs/zzzzzz").status_code == 404


def test_stop_and_restart(client: TestClient, service: RunService) -> None:
    run = _launch(client)
    r = client.post(f"/api/v1/runs/{run['id']}/stop")
    assert r.status_code == 200 and r.json()["run"]["status"] == "stopped"
    r = client.post(f"/api/v1/runs/{run['id']}/stop")
    assert r.status_code == 409 and "already stopped" in r.json()["error"]["message"]
    r = client.post(f"/api/v1/runs/{run['id']}/restart")
    assert r.status_code == 200
    again = r.json()["run"]
    assert again["attempt"] == 2 and again["ray_submission_id"] == f"labbot-{run['id']}-2"
    assert again["status"] in ("restarting", "running")
    for attempt in (1, 2):  # either attempt's logs (an automatic restart left the crash in attempt 1)
        assert client.get(f"/api/v1/runs/{run['id']}/logs", params={"attempt": attempt}).status_code == 200
    r = client.get(f"/api/v1/runs/{run['id']}/logs", params={"attempt": 3})
    assert (
        r.status_code == 400
        and r.json()["error"]["message"] == f"run {run['id']} has no attempt 3: it has attempts 1 to 2"
    )


def test_a_retried_batch_is_stored_once(client: TestClient, service: RunService, ray_head: RayConnection) -> None:
    run = _launch(client)
    auth = {"Authorization": f"Bearer {telemetry_token(ray_head, run['ray_submission_id'])}"}
    body = {"attempt": 1, "points": [{"step": s, "metrics": {"loss": 1.0 / s}} for s in (1, 2, 3)]}
    for _ in range(2):  # the reply to the first was "lost": the client sends the same batch again
        assert client.post(f"/api/v1/runs/{run['id']}/telemetry", json=body, headers=auth).status_code == 200
    assert _points(service, run["id"]) == 3


def test_restart_of_a_running_run_ends_the_old_attempt_first(client: TestClient, service: RunService) -> None:
    run = _launch(client)

    seen: list[str] = []

    def running() -> bool:  # long-polls of 10 s each: under CI's load Ray has taken over 90 s to start a job
        seen.append(client.get(f"/api/v1/runs/{run['id']}", params={"wait": 10}).json()["run"]["status"])
        return seen[-1] == "running"

    try:
        wait_for(running, timeout=240, what="Ray to start the run's first attempt")
    except AssertionError as e:  # say what the run went through and what Ray made of its job
        job = service.launcher.job(f"labbot-{run['id']}-1")
        raise AssertionError(f"{e}; statuses seen: {sorted(set(seen))}; Ray's job: {job!r}") from None
    again = client.post(f"/api/v1/runs/{run['id']}/restart").json()["run"]
    assert again["attempt"] == 2
    old = service.launcher.job(f"labbot-{run['id']}-1")
    assert old is not None and old.status == "STOPPED"


def test_the_loss_plot_is_served_behind_its_signed_link_only(client: TestClient, ray_head: RayConnection) -> None:
    run = _launch(client)
    auth = {"Authorization": f"Bearer {telemetry_token(ray_head, run['ray_submission_id'])}"}
    points = [{"step": s, "metrics": {"loss": 4.0 / s}} for s in range(1, 40)]
    assert client.post(f"/api/v1/runs/{run['id']}/telemetry", json={"attempt": 1, "points": points}, headers=auth)
    url = plot_url("https://labbot.acme.internal", ADMIN, run["id"])
    assert url is not None and url.startswith(f"https://labbot.acme.internal/plots/{run['id']}/loss.png?sig=")
    path = url.removeprefix("https://labbot.acme.internal")
    r = client.get(path, headers={"Authorization": ""})  # no admin token: the signature is the permission
    assert r.status_code == 200 and r.headers["content-type"] == "image/png" and r.content.startswith(b"\x89PNG")
    other = client.get(path.replace(run["id"], "zzzzzz", 1), headers={"Authorization": ""})
    forged = client.get(path[:-4] + "0000", headers={"Authorization": ""})
    unsigned = client.get(f"/plots/{run['id']}/loss.png", headers={"Authorization": ""})
    assert other.status_code == forged.status_code == unsigned.status_code == 403
    assert ADMIN not in url and "not valid" in forged.json()["error"]["message"]
    assert plot_url("http://127.0.0.1:3000", ADMIN, run["id"]) is None  # nobody else could open it
    assert plot_url("http://localhost:3000", ADMIN, run["id"]) is None
    assert plot_url("http://[::1]:3000", ADMIN, run["id"]) is None
    assert plot_url("http://10.1.2.3:3000", ADMIN, run["id"]) is not None
