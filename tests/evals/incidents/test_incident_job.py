"""The ``eval-incidents`` job end to end in process: a frozen incident suite, the solver and the judge reached through
inspect's real Anthropic provider over HTTP (the Messages API faked at its edge), ``results.json`` written where the
run's results are read from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eval_services import CAUSE, make_eval_service, paged_run
from fakes.anthropic import FakeAnthropic, SeenRequest, Step, text

from labbot.evals.incidents import job as incident_job
from labbot.evals.service import EvalService

RIGHT = "The DataLoader workers blocked writing to a full /dev/shm queue, so the loader deadlocked."


def model(request: SeenRequest) -> Step:
    """The solver says the right cause; the judge grades it, and says nonsense for anything else."""
    system = json.dumps(request.system)
    if "You grade diagnoses" in system:
        prompt = json.dumps(request.messages)
        if "RECORDED ROOT CAUSE" in prompt and "blocked writing to a full /dev/shm" in prompt:
            return text('{"verdict": "correct", "reason": "the same deadlock in the data loader"}')
        return text("Hmm, hard to say.")
    return text(RIGHT)


@pytest.fixture
def evals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EvalService:
    return make_eval_service(tmp_path, monkeypatch)


def test_the_job_asks_the_model_then_the_judge_and_writes_the_results(
    evals: EvalService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paged_run(evals)
    suite = evals.from_incident("pq3x7k", by="U0ALICE001")["suite"]["suite"]
    out = tmp_path / "out"
    with FakeAnthropic(model=model) as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", fake.api_key)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        monkeypatch.setenv("LABBOT_EVAL_SUITES", str(evals.suites_root))
        for name in ("LABBOT_CONTROL_URL", "LABBOT_RUN_ID", "LABBOT_EVAL_JUDGE", "LABBOT_EVAL_MODEL"):
            monkeypatch.delenv(name, raising=False)
        args = ["--suite", suite, "--solver", "agent:anthropic/claude-x", "--judge", "anthropic/claude-judge"]
        assert incident_job.main([*args, "--out", str(out)]) == 0
        seen = fake.requests
    results = json.loads((out / "results.json").read_text())
    assert results["suite"] == suite and results["solver"] == "agent:anthropic/claude-x"
    assert results["judge"] == "anthropic/claude-judge" and results["unjudged"] == 0
    [sample] = results["samples"]
    assert sample["task"] == "incident-pq3x7k" and sample["verdict"] == "correct" and sample["passed"]
    assert sample["output"] == RIGHT and sample["tokens"] > 0
    assert [r.body["model"] for r in seen] == ["claude-x", "claude-judge"]
    asked = json.dumps(seen[0].messages)
    assert "worker 3 waiting on queue.put" in asked and CAUSE not in asked  # the case, without its answer
    assert CAUSE in json.dumps(seen[1].messages)  # the judge compares with the recorded cause
    assert (out / results["log"]).is_file()


def test_bad_arguments_exit_2_and_say_what_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert incident_job.main(["--suite", str(tmp_path), "--solver", "gold"]) == 2
    assert "an incident suite is solved by a model" in capsys.readouterr().err
