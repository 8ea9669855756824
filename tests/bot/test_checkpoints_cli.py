"""``labbot checkpoints RUN`` over ``GET /api/v1/runs/{id}/checkpoints``: each checkpoint with the metrics at its step,
a non-finite one marked; an unknown run a 404 said plainly."""

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
from labbot.training.telemetry_ingest import parse_batch

ADMIN = "admin-token-for-checkpoint-tests"


def test_the_cli_lists_a_runs_checkpoints_with_their_health(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lab = Lab(tmp_path, monkeypatch)
    lab.sweep(space=["lr=1e-3,1e-2"], search="grid", concurrency=1)
    lab.tick()
    env = lab.ray.submitted[0]["runtime_env"]["env_vars"]
    run_id = env["LABBOT_RUN_ID"]
    points = [{"step": 10, "metrics": {"loss": 2.5}}, {"step": 20, "metrics": {"loss": "NaN"}}]
    events = [{"kind": "checkpoint", "step": 10, "path": "/c/10"}, {"kind": "checkpoint", "step": 20}]
    body = {"attempt": 1, "points": points, "events": events}
    lab.telemetry.authenticate(run_id, env["LABBOT_TELEMETRY_TOKEN"])
    lab.telemetry.ingest(run_id, parse_batch(json.dumps(body).encode()))
    http = TestClient(
        create_app(lab.service, lab.telemetry, admin_token=ADMIN), headers={"Authorization": f"Bearer {ADMIN}"}
    )

    def answer(request: httpx.Request) -> httpx.Response:
        r = http.request(request.method, request.url.path, params=request.url.params)
        return httpx.Response(r.status_code, content=r.content, headers={"content-type": r.headers["content-type"]})

    monkeypatch.setattr(
        cli_main, "ApiClient", lambda: ApiClient("http://labbot.test", ADMIN, transport=httpx.MockTransport(answer))
    )
    assert cli_main.main(["checkpoints", run_id]) == 0
    out = capsys.readouterr().out
    lines = [line.split() for line in out.splitlines() if line.split() and line.split()[0].isdigit()]
    assert [(cols[0], cols[2]) for cols in lines] == [("10", "ok"), ("20", "NON-FINITE")]
    assert "loss=2.5" in out and "loss=NaN" in out and "/c/10" in out
    assert cli_main.main(["checkpoints", run_id, "--json"]) == 0
    assert [c["step"] for c in json.loads(capsys.readouterr().out)] == [10, 20]
    assert cli_main.main(["checkpoints", "nosuchrun"]) == 2  # a 4xx: the caller's to fix
    assert "unknown run 'nosuchrun'" in capsys.readouterr().err
