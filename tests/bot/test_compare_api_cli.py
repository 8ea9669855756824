"""``GET /api/v1/compare`` and ``labbot compare`` over a real RunService, EvalService, SQLite and telemetry store
(Ray never called): training runs compared on their headline or another metric, eval runs paired by task through
``EvalService.compare``, and each comparison that means nothing refused with what differs, nothing else done."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from compare_runs import RL_JOB, noisy, training_run
from eval_services import finished, make_eval_service, make_suite
from eval_services import task_ids as tasks
from starlette.testclient import TestClient

from labbot.bot.api import create_app
from labbot.bot.cli import main as cli_main
from labbot.common.api_client import ApiClient
from labbot.evals.service import EvalService, pack
from labbot.training.registry import JobRegistry
from labbot.training.telemetry_store import TelemetryStore

ADMIN = "admin-token-for-compare-tests"


@pytest.fixture
def evals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EvalService:
    svc = make_eval_service(tmp_path, monkeypatch)
    svc.runs.registry = JobRegistry.from_config(RL_JOB)
    return svc


@pytest.fixture
def http(evals: EvalService) -> TestClient:
    app = create_app(evals.runs, TelemetryStore(evals.runs.db), admin_token=ADMIN, evals=evals)
    return TestClient(app, headers={"Authorization": f"Bearer {ADMIN}"})


@pytest.fixture
def runs(evals: EvalService) -> dict[str, str]:
    """Two tiny-lm runs, one clearly better; one a twin of the first (same process); an RL run; one with no points;
    two eval runs of one suite and one of another."""
    svc = evals.runs
    good, bad, twin = noisy(1.0, 1), noisy(1.3, 2), noisy(1.0, 3)
    out = {
        "good": training_run(svc, "lmgood", "tiny-lm", 400, lambda s: {"loss": good(s), "lr": 3e-4}),
        "bad": training_run(svc, "lmbad1", "tiny-lm", 400, lambda s: {"loss": bad(s), "lr": 3e-4}),
        "twin": training_run(svc, "lmtwin", "tiny-lm", 400, lambda s: {"loss": twin(s), "lr": 3e-4}),
        "rl": training_run(svc, "rlrun1", "rl-demo", 400, lambda s: {"reward": good(s), "lr": 1e-5}),
        "empty": training_run(svc, "lmnone", "tiny-lm", 0, lambda s: {}),
    }
    suite = make_suite(Path(str(svc.checkpoint_root) + "-suite"), tasks=20)
    evals.add_suite(io.BytesIO(pack(Path(str(svc.checkpoint_root) + "-suite"))))
    other = make_suite(Path(str(svc.checkpoint_root) + "-other"), tasks=3)
    evals.add_suite(io.BytesIO(pack(Path(str(svc.checkpoint_root) + "-other"))))
    out["strong"] = finished(evals, suite.id, "agent:x/strong", {t: i < 14 for i, t in enumerate(tasks())})
    out["weak"] = finished(evals, suite.id, "agent:x/weak", {t: i < 8 for i, t in enumerate(tasks())})
    out["elsewhere"] = finished(evals, other.id, "agent:x/weak", {t: True for t in tasks(3)})
    out["suite"], out["other"] = suite.id, other.id
    return out


def _compare(http: TestClient, **params: Any) -> httpx.Response:
    return http.get("/api/v1/compare", params=params)


def test_two_training_runs_on_their_headline_metric(http: TestClient, runs: dict[str, str]) -> None:
    r = _compare(http, a=runs["good"], b=runs["bad"])
    assert r.status_code == 200, r.text
    c = r.json()["comparison"]
    assert c["kind"] == "training" and c["metric"] == "loss" and c["better"] == "lower"
    assert c["a"]["id"] == "lmgood" and c["a"]["name"] == "tiny-lm-lmgood" and c["a"]["steps"] == [360, 399]
    assert c["a"]["points"] == 40 and c["b"]["points"] == 40 and -0.4 < c["difference"] < -0.2
    assert c["interval"][1] < 0 and c["verdict"] == "A is better" and c["winner"] == "a"
    assert c["params_differ"] == {} and not any("differ" in n for n in c["notes"]), "launched alike: nothing to say"
    same = _compare(http, a=runs["good"], b=runs["twin"]).json()["comparison"]
    assert same["winner"] is None and same["verdict"] == "no difference shown at 95%"
    assert same["interval"][0] < 0 < same["interval"][1]
    flipped = _compare(http, a=runs["good"], b=runs["bad"], better="higher", window="100").json()["comparison"]
    assert flipped["verdict"] == "B is better" and flipped["a"]["points"] == 100 and "as asked" in flipped["rule"]


def test_two_eval_runs_are_paired_by_task_as_eval_compare_does(
    http: TestClient, runs: dict[str, str], evals: EvalService
) -> None:
    c = _compare(http, a=runs["strong"], b=runs["weak"]).json()["comparison"]
    assert c == {"kind": "eval", **evals.compare(runs["strong"], runs["weak"])}
    assert c["verdict"] == "A is better" and c["suite"] == runs["suite"]


@pytest.mark.parametrize(
    ("a", "b", "extra", "status", "message"),
    [
        ("good", "rl", {}, 400, "run lmgood's headline metric is loss and run rlrun1's is reward: say which to "
         "compare with --metric (both report: lr)"),
        ("good", "rl", {"metric": "reward"}, 400, "run lmgood reports no reward; both report: lr"),
        ("good", "bad", {"metric": "reward"}, 400, "neither run reports reward; both report: loss, lr"),
        ("good", "strong", {}, 400, "is an eval run (job eval) and run lmgood a training run (job tiny-lm)"),
        ("strong", "elsewhere", {}, 400, "a comparison needs two runs of one suite"),
        ("strong", "weak", {"metric": "loss"}, 400, "--metric applies to training runs"),
        ("good", "empty", {}, 400, "run lmnone has no points yet"),
        ("good", "good", {}, 400, "both runs are lmgood"),
        ("good", "nosuch", {}, 404, "unknown run 'nosuch'"),
        ("good", "bad", {"better": "smaller"}, 400, "must be lower or higher"),
        ("good", "bad", {"window": "5"}, 400, "not enough points: run lmgood has 5 finite loss values"),
        ("good", "bad", {"window": "ten"}, 400, "window='ten' must be a whole number"),
    ],
)  # fmt: skip
def test_comparisons_that_mean_nothing_are_refused_naming_what_differs(
    http: TestClient, runs: dict[str, str], a: str, b: str, extra: dict[str, str], status: int, message: str
) -> None:
    r = _compare(http, a=runs.get(a, a), b=runs.get(b, b), **extra)
    assert r.status_code == status and message in r.json()["error"]["message"], r.text


def test_compare_needs_both_runs_and_the_admin_token(http: TestClient, runs: dict[str, str]) -> None:
    r = _compare(http, a=runs["good"])
    assert r.status_code == 400 and "a=RUN_ID&b=RUN_ID" in r.json()["error"]["message"]
    r = http.get("/api/v1/compare", params={"a": runs["good"], "b": runs["bad"]}, headers={"Authorization": ""})
    assert r.status_code == 401


def _cli_against(monkeypatch: pytest.MonkeyPatch, http: TestClient) -> None:
    """The CLI's ApiClient, its requests answered by the app in this process."""

    def answer(request: httpx.Request) -> httpx.Response:
        r = http.request(request.method, request.url.path, params=request.url.params, headers=request.headers)
        return httpx.Response(r.status_code, content=r.content, headers={"content-type": r.headers["content-type"]})

    def client() -> ApiClient:
        return ApiClient("http://labbot.test", ADMIN, transport=httpx.MockTransport(answer))

    monkeypatch.setattr(cli_main, "ApiClient", client)


def test_labbot_compare_prints_the_table_or_one_json_document(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], http: TestClient, runs: dict[str, str]
) -> None:
    _cli_against(monkeypatch, http)
    assert cli_main.main(["compare", runs["good"], runs["bad"]]) == 0
    out = capsys.readouterr().out
    assert "A  lmgood  tiny-lm-lmgood  360–399" in out and "mean loss" in out
    assert "loss: lower is better (by its name" in out and "verdict: A is better (the interval excludes zero)" in out
    assert cli_main.main(["compare", runs["good"], runs["twin"], "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "training" and doc["verdict"] == "no difference shown at 95%"
    assert cli_main.main(["compare", runs["strong"], runs["weak"]]) == 0
    assert "A − B = +30%" in capsys.readouterr().out


def test_labbot_compare_exits_2_on_bad_input_naming_what_differs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], http: TestClient, runs: dict[str, str]
) -> None:
    _cli_against(monkeypatch, http)
    assert cli_main.main(["compare", runs["good"], runs["rl"], "--metric", "reward"]) == 2
    err = capsys.readouterr()
    assert err.out == "" and "run lmgood reports no reward; both report: lr" in err.err
    assert cli_main.main(["compare", runs["good"], "../audit"]) == 2
    assert "is not a run id" in capsys.readouterr().err
    assert cli_main.main(["compare", runs["good"], runs["bad"], "--better", "smaller"]) == 2
