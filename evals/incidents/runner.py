"""An incident suite run through inspect: each case's frozen context to the model being evaluated, its diagnosis to a
judge model, and ``results.json`` in the shape every eval run has (so ``eval show``, ``list`` and ``compare`` read it).

A case's verdict is the judge's (:func:`labbot.evals.incidents.cases.parse_verdict`): ``correct`` passes; ``incorrect``
fails; ``unjudged`` — the judge unreachable, or answering anything but the verdict asked for — fails and is counted
apart (``results.json``: ``unjudged``), so a broken judge shows as one and never as a pass. A model that gave no
diagnosis (its call failed) fails the case with the error kept.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.log import EvalSample, read_eval_log
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig, Model, get_model
from inspect_ai.scorer import CORRECT, INCORRECT, NOANSWER, Score, Scorer, Target, accuracy, scorer
from inspect_ai.solver import TaskState, generate

from labbot.common.errors import BadRequest
from labbot.evals.incidents.cases import (
    Judged,
    case_judge_prompt,
    case_prompt,
    judge_system,
    parse_verdict,
    system_prompt,
)
from labbot.evals.running.task import SampleDone

SCORER = "labbot_judge"
CASES_FILE = "cases.json"
JUDGE_TIMEOUT_S = 120


def load_cases(suite_dir: Path) -> list[dict[str, Any]]:
    path = suite_dir / CASES_FILE
    if not path.is_file():
        raise BadRequest(f"{suite_dir} has no {CASES_FILE}: an incident suite is made by `eval from-incident`")
    cases = json.loads(path.read_text())
    if not isinstance(cases, list) or not cases:
        raise BadRequest(f"{path} holds no cases")
    return cases


@scorer(metrics=[accuracy()], name=SCORER)
def judged_by(judge: str | Model, on_sample: Callable[[str, Judged], None] | None = None) -> Scorer:
    """The judge model's verdict on the diagnosis against the recorded cause (the sample's target), or on a feedback
    case's new answer against the researcher's comment (the case rides in the sample's metadata)."""

    async def score(state: TaskState, target: Target) -> Score:
        diagnosis = state.output.completion if state.output is not None else ""
        case = dict(state.metadata.get("case") or {"cause": target.text})
        try:
            model = get_model(judge) if isinstance(judge, str) else judge
            question = case_judge_prompt(case, diagnosis)
            answer = await model.generate(
                [ChatMessageSystem(content=judge_system(case)), ChatMessageUser(content=question)],
                config=GenerateConfig(temperature=0.0, max_tokens=300, timeout=JUDGE_TIMEOUT_S),
            )
            if answer.error:
                judged = Judged("unjudged", f"the judge could not answer: {answer.error}"[:500])
            else:
                judged = parse_verdict(answer.completion)
        except Exception as e:  # the judge unreachable: the case is unjudged, never passed
            judged = Judged("unjudged", f"the judge could not be reached: {type(e).__name__}: {e}"[:500])
        if on_sample is not None:
            on_sample(str(state.sample_id), judged)
        value = {"correct": CORRECT, "incorrect": INCORRECT}.get(judged.verdict, NOANSWER)
        return Score(
            value=value,
            answer=diagnosis[:2000],
            explanation=judged.reason,
            metadata={"verdict": judged.verdict, "reason": judged.reason},
        )

    return score


def incident_task(
    cases: Sequence[dict[str, Any]], judge: str | Model, on_sample: Callable[[str, Judged], None] | None = None
) -> Task:
    dataset = MemoryDataset(
        [
            Sample(
                id=str(c["id"]),
                input=[ChatMessageSystem(content=system_prompt(c)), ChatMessageUser(content=case_prompt(c))],
                target=str(c["cause"]),
                metadata={"case": {k: c.get(k) for k in ("kind", "cause", "question", "answer")}},
            )
            for c in cases
        ],
        name="incidents",
    )
    return Task(
        dataset=dataset,
        solver=[generate()],
        scorer=judged_by(judge, on_sample),
        config=GenerateConfig(temperature=0.0, max_tokens=600),
    )


def _sample_result(sample: EvalSample) -> dict[str, Any]:
    score = (sample.scores or {}).get(SCORER)
    meta = (score.metadata or {}) if score is not None else {}
    verdict = str(meta.get("verdict") or "error")
    output = str(score.answer or "") if score is not None else ""
    if sample.error is not None:
        output, verdict = f"[error] {sample.error.message}"[:2000], "error"
    seconds = sample.total_time if sample.total_time is not None else sample.working_time
    return {
        "task": str(sample.id),
        "passed": verdict == "correct",
        "verdict": verdict,
        "reason": str(meta.get("reason") or ""),
        "output": output,
        "time_s": round(seconds, 1) if seconds is not None else None,
        "tokens": sum(u.total_tokens for u in (sample.model_usage or {}).values()),
    }


def run_incidents(
    suite_dir: Path,
    out_dir: Path,
    *,
    model: str | Model,
    judge: str | Model,
    suite_id: str,
    solver_label: str,
    on_sample: Callable[[SampleDone], None] | None = None,
    max_samples: int = 4,
) -> dict[str, Any]:
    """Every case of the incident suite in ``suite_dir``: ``model`` diagnoses, ``judge`` grades. Writes and returns
    ``results.json`` (in ``out_dir``, beside the ``.eval`` log)."""
    cases = load_cases(suite_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    done = {"n": 0, "passed": 0}

    def heard(case: str, judged: Judged) -> None:
        done["n"] += 1
        done["passed"] += judged.passed
        if on_sample is not None:
            on_sample(SampleDone(case, judged.passed, done["n"], len(cases), done["passed"]))

    [log] = inspect_eval(
        incident_task(cases, judge, heard),
        model=model,
        log_dir=str(out_dir),
        log_format="eval",
        max_samples=max_samples,
        fail_on_error=False,
        display="none",
        log_samples=True,
    )
    log = read_eval_log(log.location)
    samples = [_sample_result(s) for s in log.samples or []]
    passed = sum(s["passed"] for s in samples)
    results = {
        "suite": suite_id,
        "solver": solver_label,
        "judge": judge if isinstance(judge, str) else judge.name,
        "status": "succeeded" if log.status == "success" else "failed",
        "pass_rate": round(passed / len(samples), 4) if samples else 0.0,
        "unjudged": sum(s["verdict"] == "unjudged" for s in samples),
        "samples": samples,
        "isolation": {"score": None, "sealed": True, "probes": []},  # no sandbox: the model only reads
        "untrusted": False,
        "log": Path(log.location).name,
    }
    (out_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return results
