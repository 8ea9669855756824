"""The signed plot links (bot/api/plots.py and their routes in bot/api/app.py), over a real RunService, SQLite and
telemetry store (Ray is never called): links made before jobs named their plots keep working, and a run's
``metrics.png`` draws what its job plots, each image behind a signature of its own; ``/api/v1/jobs`` says what
each job plots."""

from __future__ import annotations

import hashlib
import hmac
import math
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from labbot.bot.api import create_app
from labbot.bot.api.plots import plot_signature, plot_url
from labbot.bot.render.plots import loss_plot_png, metrics_plot_png
from labbot.storage.db import Database
from labbot.storage.models import Run, utcnow
from labbot.training.launcher import RayLauncher
from labbot.training.ray_cluster import RayConnection
from labbot.training.registry import JobRegistry
from labbot.training.service import RunService
from labbot.training.specs import LaunchRequest, resolve_launch
from labbot.training.telemetry_ingest import TelemetryBatch, TelemetryPoint
from labbot.training.telemetry_store import TelemetryStore

ADMIN = "admin-secret"
PUBLIC = "https://labbot.acme.internal"
JOBS = {"rl-demo": {"entrypoint": "python rl.py", "plot": ["reward", "pass_rate"], "headline": "pass_rate"}}


@pytest.fixture
def api(tmp_path: Path) -> TestClient:
    db = Database(f"sqlite:///{tmp_path / 'labbot.db'}")
    db.upgrade()
    service = RunService(
        db,
        JobRegistry.from_config(JOBS),
        RayLauncher(RayConnection("http://127.0.0.1:9", None), timeout=1),  # nothing answers there
        control_url="http://127.0.0.1:9",
        checkpoint_root=tmp_path / "runs",
    )
    telemetry = TelemetryStore(db)
    for run_id, job in (("lm0001", "tiny-lm"), ("rl0001", "rl-demo")):
        cfg = resolve_launch(service.registry.get(job), LaunchRequest(job=job)).model_dump()
        with db.session() as s:
            s.add(
                Run(id=run_id, job=job, name=f"{job}-{run_id}", owner="U1", config=cfg, telemetry_token_hash="0" * 64)
            )
    when = utcnow()
    lm = [TelemetryPoint(step=s, when=when, metrics={"loss": 4.0 / s}) for s in range(1, 40)]
    rl = [TelemetryPoint(step=s, when=when, metrics={"reward": math.log(s)}) for s in range(1, 40)]
    telemetry.ingest("lm0001", TelemetryBatch(attempt=1, points=lm, events=[]))
    telemetry.ingest("rl0001", TelemetryBatch(attempt=1, points=rl, events=[]))
    app = create_app(service, telemetry, admin_token=ADMIN)
    return TestClient(app)  # no admin token: the signature is the permission


def _path(url: str | None) -> str:
    assert url is not None and url.startswith(PUBLIC)
    return url.removeprefix(PUBLIC)


def test_a_loss_link_signed_as_before_still_opens_the_loss_plot(api: TestClient) -> None:
    key = hmac.new(ADMIN.encode(), b"labbot plot links v1", hashlib.sha256).digest()
    old_sig = hmac.new(key, b"loss:lm0001", hashlib.sha256).hexdigest()[:32]  # how links in reports were signed
    assert plot_signature(ADMIN, "lm0001") == old_sig
    assert plot_url(PUBLIC, ADMIN, "lm0001") == f"{PUBLIC}/plots/lm0001/loss.png?sig={old_sig}"
    r = api.get(f"/plots/lm0001/loss.png?sig={old_sig}")
    assert r.status_code == 200 and r.headers["content-type"] == "image/png"
    assert r.content == loss_plot_png(
        [(s, 4.0 / s) for s in range(1, 40)], title="tiny-lm-lm0001 — loss", attempts=[(1, 1)]
    )


def test_the_metrics_link_draws_what_the_runs_job_plots(api: TestClient) -> None:
    url = plot_url(PUBLIC, ADMIN, "rl0001", "metrics")
    assert url == f"{PUBLIC}/plots/rl0001/metrics.png?sig={plot_signature(ADMIN, 'rl0001', 'metrics')}"
    r = api.get(_path(url))
    assert r.status_code == 200 and r.headers["content-type"] == "image/png"
    series = {"reward": [(s, math.log(s)) for s in range(1, 40)], "pass_rate": []}  # pass_rate: no data yet
    assert r.content == metrics_plot_png(series, title="rl-demo-rl0001 — reward, pass_rate", attempts=[(1, 1)])
    loss_only = api.get(_path(plot_url(PUBLIC, ADMIN, "lm0001", "metrics")))
    assert (
        loss_only.status_code == 200 and loss_only.content == api.get(_path(plot_url(PUBLIC, ADMIN, "lm0001"))).content
    )


def test_each_link_opens_its_own_image_of_its_own_run_only(api: TestClient) -> None:
    loss_sig, metrics_sig = plot_signature(ADMIN, "rl0001"), plot_signature(ADMIN, "rl0001", "metrics")
    assert loss_sig != metrics_sig
    refused = [
        api.get(f"/plots/rl0001/metrics.png?sig={loss_sig}"),  # a loss link's signature opens no other image
        api.get(f"/plots/rl0001/loss.png?sig={metrics_sig}"),
        api.get(f"/plots/lm0001/metrics.png?sig={metrics_sig}"),  # nor another run's
        api.get("/plots/rl0001/metrics.png"),
    ]
    assert [r.status_code for r in refused] == [403, 403, 403, 403]
    assert "not valid" in refused[0].json()["error"]["message"]
    with pytest.raises(ValueError, match="no plot image 'reward'; there are loss, metrics"):
        plot_url(PUBLIC, ADMIN, "rl0001", "reward")
    assert plot_url("http://127.0.0.1:3000", ADMIN, "rl0001", "metrics") is None  # nobody else could open it


def test_the_jobs_list_says_what_each_job_plots(api: TestClient) -> None:
    jobs = {j["name"]: j for j in api.get("/api/v1/jobs", headers={"Authorization": f"Bearer {ADMIN}"}).json()["jobs"]}
    assert (jobs["rl-demo"]["plot"], jobs["rl-demo"]["headline"]) == (["reward", "pass_rate"], "pass_rate")
    assert (jobs["tiny-lm"]["plot"], jobs["tiny-lm"]["headline"]) == (["loss"], "loss")
