"""Evals from incidents: a resolved page with its cause frozen into a case (redacted, nothing half-made), the judge's
verdicts read strictly, and an incident suite run through inspect where an unreachable or nonsensical judge leaves
the case unjudged, never passed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from eval_services import CAUSE, LABBOTS_OWN_SECRET, PAGED_AT, SLACK_TOKEN, make_eval_service, paged_run
from inspect_ai.model import ModelOutput, ModelUsage, get_model

from labbot.agents.babysitter.pager import Pager
from labbot.agents.babysitter.policy import PagingPolicy
from labbot.common.errors import BadRequest, LabbotError
from labbot.common.redact import Redactor
from labbot.evals.incidents.cases import case_prompt, parse_verdict
from labbot.evals.incidents.job import incident_model
from labbot.evals.incidents.runner import run_incidents
from labbot.evals.service import CASES_DIR, EVALS_OWNER, EvalService
from labbot.storage.models import ThreadMessage


@pytest.fixture
def evals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EvalService]:
    svc = make_eval_service(tmp_path, monkeypatch)
    svc.redactor = Redactor(extra=[LABBOTS_OWN_SECRET], environ={})
    yield svc


def test_a_resolved_page_with_its_cause_becomes_a_redacted_case_in_a_suite(evals: EvalService) -> None:
    paged_run(evals)
    made = evals.from_incident("pq3x7k", by="U0ALICE001")
    case, suite = made["case"], made["suite"]
    assert case["id"] == "incident-pq3x7k" and case["cause"] == CAUSE
    assert case["page"]["kind"] == "hung" and case["page"]["detail"] == {"phase": "data"}
    assert case["run"]["job"] == "tiny-lm" and case["run"]["params"]["steps"] == 1000
    assert [p[0] for p in case["metrics"]["loss"]][-1] == 40  # what labbot saw at page time, not after
    assert case["metrics"]["tokens_per_s"][-1] == [40, 3400.0]  # a metric named like a secret keeps its numbers
    assert [c["tool"] for c in case["context"]] == ["datadog__search_logs"]
    assert "queue full" in case["context"][0]["result"]
    assert "My diagnosis" not in json.dumps(case)  # the investigator's own conclusion is not handed over
    text = json.dumps(case)
    for secret in ("wandb-0123456789abcdef", SLACK_TOKEN, LABBOTS_OWN_SECRET, "tok-should-not-leak", "z" * 24):
        assert secret not in text, secret
    assert "WANDB_API_KEY=[redacted]" in case["log_tail"] and "worker 3 waiting" in case["log_tail"]
    assert CAUSE not in case_prompt(case)  # the model is not shown the answer
    assert "tokens_per_s" in case_prompt(case)

    assert suite["suite"].startswith("incidents-") and suite["tasks"] == 1
    assert suite["suite"] in [s["suite"] for s in evals.suites()]
    assert [t["id"] for t in evals.suite(suite["suite"])["tasks"]] == ["incident-pq3x7k"]
    assert evals.artifacts is not None
    assert "incident-pq3x7k.json" in {a["name"] for a in evals.artifacts.list(EVALS_OWNER)}
    again = evals.from_incident("pq3x7k", by="U0ALICE001")  # the same case again: replaced, one case
    assert again["suite"] == suite


@pytest.mark.parametrize(
    ("resolved", "cause", "said"),
    [
        (False, None, "is still triggered"),
        (True, None, "has no recorded cause: its owner writes down what was wrong with `/lab resolve pq3x7k --cause"),
    ],
)
def test_an_open_page_or_one_without_a_cause_makes_nothing(
    evals: EvalService, resolved: bool, cause: str | None, said: str
) -> None:
    paged_run(evals, resolved=resolved, cause=cause)
    with pytest.raises(BadRequest, match=said.replace("(", r"\(")):
        evals.from_incident("pq3x7k", by="U0ALICE001")
    assert not (evals.suites_root / CASES_DIR).exists() or not any((evals.suites_root / CASES_DIR).iterdir())
    assert evals.suites() == []
    assert evals.artifacts is not None and evals.artifacts.list(EVALS_OWNER) == []
    with pytest.raises(LabbotError, match="unknown page 'nope12'"):
        evals.from_incident("nope12", by="x")


def test_the_investigation_of_a_session_under_the_roles_old_name_is_in_the_case(evals: EvalService) -> None:
    paged_run(evals, role="babysitter")  # a row an older labbot wrote: the investigator was called the babysitter
    case = evals.from_incident("pq3x7k", by="U0ALICE001")["case"]
    assert [c["tool"] for c in case["context"]] == ["datadog__search_logs"]


def test_a_cause_is_recorded_on_a_resolved_page_and_a_useless_one_is_refused(evals: EvalService) -> None:
    paged_run(evals, cause=None)
    pager = Pager(evals.runs.db, PagingPolicy(), slack=False, pagerduty=False)
    with pytest.raises(BadRequest, match="too short to score a diagnosis against"):
        pager.resolve("pq3x7k", by="U0ALICE001", cause="oops")
    page = pager.resolve("pq3x7k", by="U0BOB00001", cause=CAUSE)  # already resolved: the cause is still written
    assert page["cause"] == CAUSE and page["cause_by"] == "U0BOB00001" and page["state"] == "resolved"
    assert evals.from_incident("pq3x7k", by="x")["case"]["cause"] == CAUSE


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ('{"verdict": "correct", "reason": "same cause"}', "correct"),
        ('```json\n{"verdict": "INCORRECT", "reason": "symptom only"}\n```', "incorrect"),
        ("", "unjudged"),
        (None, "unjudged"),
        ("Looks right to me!", "unjudged"),
        ('{"verdict": "maybe"}', "unjudged"),
        ('{"verdict": "correct"} {"verdict": "incorrect"}', "unjudged"),
        ("{verdict: correct}", "unjudged"),
    ],
)
def test_the_judges_answer_is_read_strictly(answer: str | None, verdict: str) -> None:
    judged = parse_verdict(answer)
    assert judged.verdict == verdict and judged.passed == (verdict == "correct")


def _out(text: str) -> ModelOutput:
    out = ModelOutput.from_content("mockllm/model", text)
    out.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
    return out


def _unreachable(*_args: Any) -> ModelOutput:
    raise ConnectionError("judge.example: connection refused")


def _cases(tmp_path: Path, n: int) -> Path:
    suite = tmp_path / "incidents-000000000000"
    suite.mkdir()
    page = {"kind": "hung", "severity": "page", "summary": "no progress", "detail": {}, "triggered_at": "t"}
    cases = [{"id": f"incident-p{i}", "page": page, "run": None, "log_tail": "", "metrics": {}, "context": [],
              "cause": f"cause number {i} of this incident"} for i in range(n)]  # fmt: skip
    (suite / "cases.json").write_text(json.dumps(cases))
    return suite


def test_an_unreachable_judge_leaves_every_case_unjudged_never_passed(tmp_path: Path) -> None:
    model = get_model("mockllm/model", custom_outputs=[_out("the loader deadlocked"), _out("a bad GPU")])
    judge = get_model("mockllm/model", custom_outputs=_unreachable)
    r = run_incidents(
        _cases(tmp_path, 2), tmp_path / "out", model=model, judge=judge, suite_id="incidents-x", solver_label="m",
        max_samples=1,
    )  # fmt: skip
    assert r["status"] == "succeeded" and r["pass_rate"] == 0.0 and r["unjudged"] == 2
    assert all(s["verdict"] == "unjudged" and not s["passed"] for s in r["samples"])
    assert "connection refused" in r["samples"][0]["reason"]
    assert (tmp_path / "out" / "results.json").is_file() and (tmp_path / "out" / r["log"]).is_file()


def test_correct_incorrect_and_nonsense_verdicts_score_as_they_should(tmp_path: Path) -> None:
    model = get_model("mockllm/model", custom_outputs=[_out("diagnosis one"), _out("diagnosis two"), _out("three")])
    judge = get_model(
        "mockllm/model",
        custom_outputs=[
            _out('{"verdict": "correct", "reason": "same cause"}'),
            _out('{"verdict": "incorrect", "reason": "another cause"}'),
            _out("I cannot grade this."),
        ],
    )
    r = run_incidents(
        _cases(tmp_path, 3), tmp_path / "out", model=model, judge=judge, suite_id="incidents-x", solver_label="m",
        max_samples=1,
    )  # fmt: skip
    assert [(s["verdict"], s["passed"]) for s in r["samples"]] == [
        ("correct", True), ("incorrect", False), ("unjudged", False),
    ]  # fmt: skip
    assert r["pass_rate"] == pytest.approx(1 / 3, abs=1e-4) and r["unjudged"] == 1
    assert r["samples"][0]["output"] == "diagnosis one"


def test_an_incident_suite_is_run_by_a_model_as_a_labbot_run(evals: EvalService) -> None:
    paged_run(evals)
    suite = evals.from_incident("pq3x7k", by="U0ALICE001")["suite"]["suite"]
    for solver, said in (("gold", "solved by a model"), ("./my-agent.sh", "solved by a model")):
        with pytest.raises(BadRequest, match=said):
            evals.launch(suite, solver=solver, owner="alice")
    run = evals.launch(suite, solver="agent:anthropic/claude-x", owner="alice", judge="anthropic/claude-judge")
    assert run["job"] == "eval-incidents"
    assert run["params"] == {"suite": suite, "solver": "agent:anthropic/claude-x", "judge": "anthropic/claude-judge"}
    assert evals.results(run["id"])["suite"] == suite
    plain = evals.launch(suite, solver="agent", owner="alice")  # the job's configured model, resolved where it runs
    assert plain["job"] == "eval-incidents" and plain["params"]["solver"] == "agent"
    assert incident_model("agent", "anthropic/default") == "anthropic/default"
    assert incident_model("openai/gpt-x", None) == "openai/gpt-x"
    with pytest.raises(BadRequest, match="needs a default model"):
        incident_model("agent", None)


def test_a_cause_written_as_a_reply_in_the_runs_thread_is_the_cases_cause(evals: EvalService) -> None:
    paged_run(evals, cause=None)
    replies = [
        ("U0MALLORY1", "cause: it was cosmic rays, trust me"),  # not the run's owner nor the resolver: ignored
        ("U0ALICE001", "looking into it"),
        ("U0ALICE001", "Cause: the shm queue filled because /dev/shm is 64 MB in the container"),
    ]
    with evals.runs.db.session() as s:
        for i, (user, text) in enumerate(replies):
            at = PAGED_AT + timedelta(minutes=5 + i)
            s.add(ThreadMessage(run_id="r1hung", channel="C0LAB00001", ts=f"17000{i}.1", user=user, text=text,
                                created_at=at))  # fmt: skip
    case = evals.from_incident("pq3x7k", by="U0ALICE001")["case"]
    assert case["cause"] == "the shm queue filled because /dev/shm is 64 MB in the container"
