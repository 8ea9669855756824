"""EvalService's read side for comparisons: intervals on results, paired comparisons (refused with what differs),
saturation, and launches refused before anything is created (unknown suite or solver)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from eval_services import finished, make_eval_service, make_suite
from eval_services import task_ids as tasks
from starlette.testclient import TestClient

from labbot.bot.api import create_app
from labbot.bot.render.evals import comparison_text, results_text
from labbot.common.errors import BadRequest, LabbotError
from labbot.evals.service import EvalService, pack
from labbot.training.telemetry_store import TelemetryStore

ADMIN_TOKEN = "admin-token-for-eval-tests"


@pytest.fixture
def evals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EvalService:
    return make_eval_service(tmp_path, monkeypatch)


@pytest.fixture
def suite(evals: EvalService, tmp_path: Path) -> str:
    made = make_suite(tmp_path / "made", tasks=20)
    evals.add_suite(io.BytesIO(pack(tmp_path / "made")))
    return made.id


def test_results_carry_the_pass_rates_95_percent_interval(evals: EvalService, suite: str) -> None:
    run = finished(evals, suite, "agent:a/b", {t: i < 15 for i, t in enumerate(tasks())})
    shown = evals.results(run)
    assert shown["pass_rate"] == 0.75 and shown["interval"] == [0.5313, 0.8881]


def test_two_solvers_on_the_same_tasks_are_compared_paired(evals: EvalService, suite: str) -> None:
    a = finished(evals, suite, "agent:x/strong", {t: i < 14 for i, t in enumerate(tasks())})
    b = finished(evals, suite, "agent:x/weak", {t: i < 8 for i, t in enumerate(tasks())})
    c = evals.compare(a, b)
    assert c["suite"] == suite and c["tasks"] == 20
    assert (c["both"], c["only_a"], c["only_b"], c["neither"]) == (8, 6, 0, 6)
    assert c["paired"][0] > 0 and c["unpaired"][0] < 0  # pairing tells them apart; ignoring it would not
    assert c["verdict"] == "A is better"
    assert c["a"]["solver"] == "agent:x/strong" and c["a"]["interval"] == [0.4810, 0.8545]
    same = finished(evals, suite, "agent:x/again", {t: i < 14 for i, t in enumerate(tasks())})
    assert evals.compare(a, same)["verdict"] == "no difference the suite can show"


def test_tasks_a_judge_left_unjudged_are_not_counted_against_a_solver(evals: EvalService, suite: str) -> None:
    """A judge outage in one run: its unjudged cases are not passes there, and they are left out of the pairing, so
    the outage never reads as "A is better"; the results table says unjudged, not fail."""
    a = finished(evals, suite, "agent:x/one", dict.fromkeys(tasks(), True))

    def sample(task: str, i: int) -> dict[str, object]:
        judged = i < 5
        return {"task": task, "passed": judged, "verdict": "correct" if judged else "unjudged", "output": ""}

    outage = [sample(t, i) for i, t in enumerate(tasks())]
    b = finished(evals, suite, "agent:x/two", dict.fromkeys(tasks(), False), samples=outage, unjudged=15)
    c = evals.compare(a, b)
    assert c["tasks"] == 5 and c["unjudged_left_out"] == sorted(tasks()[5:])
    assert c["verdict"] == "no difference the suite can show"
    assert "left out: 15 tasks the judge gave no verdict on" in comparison_text(c)
    shown = results_text(evals.results(b))
    assert "unjudged" in shown and "15 of 20 cases unjudged" in shown
    none_judged = [{**sample(t, 99), "passed": False} for t in tasks()]
    c2 = finished(evals, suite, "agent:x/three", dict.fromkeys(tasks(), False), samples=none_judged)
    with pytest.raises(BadRequest, match=r"every task .* was unjudged"):
        evals.compare(a, c2)


def test_comparisons_that_mean_nothing_are_refused_with_what_differs(
    evals: EvalService,
    suite: str,
    tmp_path: Path,
) -> None:
    other_made = make_suite(tmp_path / "other", tasks=3)
    evals.add_suite(io.BytesIO(pack(tmp_path / "other")))
    a = finished(evals, suite, "gold", dict.fromkeys(tasks(), True))
    on_other = finished(evals, other_made.id, "gold", dict.fromkeys(tasks(3), True))
    with pytest.raises(BadRequest, match=f"{a} ran {suite} and {on_other} ran {other_made.id}"):
        evals.compare(a, on_other)
    fewer = finished(evals, suite, "none", dict.fromkeys(tasks(18), False))
    with pytest.raises(BadRequest, match=r"ran different tasks .*only the first ran t18-add, t19-add"):
        evals.compare(a, fewer)
    pending = evals.launch(suite, solver="none", owner="bob")["id"]
    with pytest.raises(BadRequest, match=rf"eval run {pending} has no results yet \(pending\)"):
        evals.compare(a, pending)
    with pytest.raises(BadRequest, match="compare two different eval runs"):
        evals.compare(a, a)


def test_a_suite_every_solver_passes_at_90_percent_is_saturated(evals: EvalService, suite: str) -> None:
    finished(evals, suite, "gold", dict.fromkeys(tasks(), True))
    assert evals.saturation(suite)["saturated"] is False  # gold checks the suite; it says nothing of difficulty
    finished(evals, suite, "agent:x/one", {t: i < 17 for i, t in enumerate(tasks())})  # 85 %
    assert evals.saturation(suite)["saturated"] is False
    finished(evals, suite, "agent:x/one", {t: i < 19 for i, t in enumerate(tasks())})  # its latest: 95 %
    assert evals.saturation(suite)["saturated"] is True
    finished(evals, suite, "agent:x/two", {t: i < 18 for i, t in enumerate(tasks())}, untrusted=True)
    sat = evals.saturation(suite)
    assert sat["saturated"] is True and set(sat["solvers"]) == {"agent:x/one"}  # an untrusted run does not count


def test_unknown_suites_and_solvers_are_refused_naming_what_exists_and_nothing_launches(
    evals: EvalService,
    suite: str,
) -> None:
    with pytest.raises(LabbotError, match=f"no suite suite-0123456789ab: labbot has {suite}"):
        evals.launch("suite-0123456789ab", solver="gold", owner="a")
    with pytest.raises(BadRequest, match=f"is not a suite id.*labbot has {suite}"):
        evals.launch("my-suite", solver="gold", owner="a")
    with pytest.raises(BadRequest, match="accepted: gold, none, agent"):
        evals.launch(suite, solver="golden", owner="a")
    assert evals.runs.runs() == [] and evals.submitted == []  # type: ignore[attr-defined]


def test_compare_and_saturation_over_http(evals: EvalService, suite: str) -> None:
    a = finished(evals, suite, "agent:x/one", dict.fromkeys(tasks(), True))
    b = finished(evals, suite, "agent:x/two", {t: i < 19 for i, t in enumerate(tasks())})
    app = create_app(evals.runs, TelemetryStore(evals.runs.db), admin_token=ADMIN_TOKEN, evals=evals)
    auth = {"authorization": f"Bearer {ADMIN_TOKEN}"}
    with TestClient(app) as http:
        r = http.get("/api/v1/evals/compare", params={"a": a, "b": b}, headers=auth)
        assert r.status_code == 200 and r.json()["comparison"]["difference"] == 0.05
        r = http.get("/api/v1/evals/compare", params={"a": a}, headers=auth)
        assert r.status_code == 400 and "a=RUN_ID&b=RUN_ID" in r.json()["error"]["message"]
        doc = http.get(f"/api/v1/evals/suites/{suite}", headers=auth).json()["suite"]
        assert doc["saturation"]["saturated"] is True


def test_the_eval_writer_compares_two_runs_through_the_lab_server(evals: EvalService, suite: str) -> None:
    import asyncio

    import httpx
    from mcp import Client

    from labbot.mcp_servers.lab import LabApi, build_server

    a = finished(evals, suite, "agent:x/strong", {t: i < 14 for i, t in enumerate(tasks())})
    b = finished(evals, suite, "agent:x/weak", {t: i < 8 for i, t in enumerate(tasks())})
    app = create_app(evals.runs, TelemetryStore(evals.runs.db), admin_token=ADMIN_TOKEN, evals=evals)
    lab = LabApi("http://labbot.test", ADMIN_TOKEN, agent="eval-writer", transport=httpx.ASGITransport(app))

    async def go() -> list[tuple[bool, str]]:
        async with Client(build_server(lab)) as client:
            out = []
            for name, args in (
                ("compare_eval_runs", {"run_a": a, "run_b": b}),
                ("get_eval_results", {"run_id": a}),
                ("generate_eval_suite", {"count": 3, "deletion": "function", "deletions": 2, "prefer": "deep"}),
                ("generate_eval_suite", {"count": 3, "deletion": "everything"}),
            ):
                r = await client.call_tool(name, args)
                out.append((r.is_error, "".join(getattr(c, "text", "") for c in r.content)))
            return out

    compared, shown, harder, bad = asyncio.run(go())
    assert not compared[0] and "A − B = +30%, paired 95% CI +" in compared[1] and "verdict: A is better" in compared[1]
    assert not shown[0] and "pass rate 70% (95% CI 48%–85%)" in shown[1]
    assert "t00-add: pass · 3.5s · 1,200 tokens" in shown[1] and "t19-add: fail · 3.5s" in shown[1]
    assert not harder[0] and "eval-generate" in harder[1]
    [generation] = [r for r in evals.runs.runs() if r["job"] == "eval-generate"]
    assert (generation["params"]["deletion"], generation["params"]["deletions"]) == ("function", 2)
    assert generation["params"]["prefer"] == "deep"
    assert bad[0]  # refused before any run: the tool's own schema
    assert len([r for r in evals.runs.runs() if r["job"] == "eval-generate"]) == 1


def test_a_comparison_says_how_the_runs_parameters_differ_and_when_the_metric_means_another_thing() -> None:
    from labbot.evals.comparisons import differs_note, param_differences

    a = {"id": "ra", "job": "tiny-rl", "params": {"algo": "sdpo", "lr": 2e-4, "steps": 60}}
    b = {"id": "rb", "job": "tiny-rl", "params": {"algo": "grpo", "lr": 2e-4, "steps": 60}}
    differs = param_differences(a, b)
    assert differs == {"algo": ("sdpo", "grpo")}
    note = differs_note(a, b, differs, "loss")
    assert note is not None and "differ in algo, which changes what loss measures (algo sdpo vs grpo)" in note
    c = {**a, "params": {**a["params"], "lr": 1e-3, "steps": 90}}
    assert differs_note(a, c, param_differences(a, c), "reward") == (
        "the runs differ in 2 parameters (lr 0.0002 vs 0.001, steps 60 vs 90): a difference is theirs together"
    )
    assert differs_note(a, a, {}, "loss") is None
    lm = {"id": "rc", "job": "tiny-lm", "params": {}}
    assert "run ra is tiny-rl and run rc is tiny-lm" in str(differs_note(a, lm, param_differences(a, lm), "loss"))
