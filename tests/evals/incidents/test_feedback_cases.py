"""Evals from feedback: a 👎 with a comment on an agent's answer frozen into a case of the incident suite (the
question and the tool results, redacted; neither the bad answer nor the comment shown to the model), refused for
what it cannot be made from, and graded by the judge against the comment."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from eval_services import LABBOTS_OWN_SECRET, make_eval_service
from inspect_ai.model import ChatMessage, ModelOutput, ModelUsage, get_model

from labbot.agents.feedback.store import FeedbackStore
from labbot.agents.fleet.sessions import SessionStore, TurnRecord, new_turn_id
from labbot.common.errors import BadRequest, UnknownFeedback
from labbot.common.redact import Redactor
from labbot.evals.incidents.cases import FEEDBACK_JUDGE_SYSTEM, FEEDBACK_SYSTEM, case_prompt
from labbot.evals.incidents.runner import run_incidents
from labbot.evals.service import EvalService

CHANNEL, ALICE = "C0LAB00001", "U0ALICE001"
COMMENT = "it blamed the data loader, but the learning rate was 10x too high after the warm-up"
BAD_ANSWER = "The data loader is the bottleneck: add workers."


@pytest.fixture
def evals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EvalService]:
    svc = make_eval_service(tmp_path, monkeypatch)
    svc.redactor = Redactor(extra=[LABBOTS_OWN_SECRET], environ={})
    yield svc


def answered(evals: EvalService, ts: str) -> None:
    """An agent's answer in a thread: an earlier exchange, then a question, a tool call and its result, the answer."""
    sessions = SessionStore(evals.runs.db)
    session, _ = sessions.open(channel=CHANNEL, thread_ts="1.1", role="assistant", owner=ALICE, run_id=None)
    history: list[dict[str, Any]] = [
        {"role": "user", "content": f"<@{ALICE}>: hello"},
        {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
        {"role": "user", "content": f"<@{ALICE}>: why did loss spike at step 400 in run r1?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "tu1", "name": "lab__get_metrics", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1",
                                      "content": f"lr 3e-3 at step 400; token={LABBOTS_OWN_SECRET}"}]},
        {"role": "assistant", "content": [{"type": "text", "text": BAD_ANSWER}]},
    ]  # fmt: skip
    turn = TurnRecord(new_turn_id(), ALICE, "assistant", "model-a", None, "end_turn", 2, 800, 2.0, 2, 5, CHANNEL)
    sessions.save(session.id, history, [], turn)
    sessions.posted(turn.id, CHANNEL, ts)


def test_a_thumbs_down_with_a_comment_becomes_a_redacted_case_of_the_incident_suite(evals: EvalService) -> None:
    answered(evals, "9.1")
    store = FeedbackStore(evals.runs.db)
    fb = store.vote(channel=CHANNEL, ts="9.1", user=ALICE, vote=-1, source="button")
    assert fb is not None
    store.comment(fb["id"], user=ALICE, text=COMMENT)
    made = evals.from_feedback(fb["id"], by=ALICE)
    case, suite = made["case"], made["suite"]
    assert case["id"] == f"feedback-{fb['id']}" and case["kind"] == "feedback" and case["cause"] == COMMENT
    assert case["question"].endswith("why did loss spike at step 400 in run r1?")  # this answer's question only
    assert [c["tool"] for c in case["context"]] == ["lab__get_metrics"]
    assert case["answer"] == BAD_ANSWER and case["answered_by"] == {"model": "model-a", "role": "assistant"}
    assert LABBOTS_OWN_SECRET not in json.dumps(case)
    prompt = case_prompt(case)
    assert "lr 3e-3 at step 400" in prompt
    assert COMMENT not in prompt and BAD_ANSWER not in prompt  # the model is not shown the answer, nor the bad one
    assert suite["suite"].startswith("incidents-") and suite["tasks"] == 1
    tasks = evals.suite(suite["suite"])["tasks"]
    assert [(t["id"], t["kind"]) for t in tasks] == [(case["id"], "feedback")]
    again = evals.from_feedback(fb["id"], by=ALICE)
    assert again["suite"] == suite


def test_what_a_case_cannot_be_made_from_is_refused_saying_what_would_do(evals: EvalService) -> None:
    answered(evals, "9.2")
    store = FeedbackStore(evals.runs.db)
    up = store.vote(channel=CHANNEL, ts="9.2", user=ALICE, vote=1, source="button")
    assert up is not None
    with pytest.raises(BadRequest, match="is a 👍: an eval case is made from a 👎"):
        evals.from_feedback(up["id"], by=ALICE)
    down = store.vote(channel=CHANNEL, ts="9.2", user=ALICE, vote=-1, source="button")
    assert down is not None
    with pytest.raises(BadRequest, match="has no comment: its voter says what went wrong"):
        evals.from_feedback(down["id"], by=ALICE)
    with pytest.raises(UnknownFeedback, match="labbot feedback"):
        evals.from_feedback("fbnone22", by=ALICE)
    store.remember(CHANNEL, "9.3", "eval", "r1")
    on_results = store.vote(channel=CHANNEL, ts="9.3", user=ALICE, vote=-1, source="reaction")
    assert on_results is not None
    with pytest.raises(BadRequest, match="not on an agent's answer"):
        evals.from_feedback(on_results["id"], by=ALICE)
    assert not (evals.suites_root / "incident-cases").exists()  # nothing half-made


def _out(text: str) -> ModelOutput:
    out = ModelOutput.from_content("mockllm/model", text)
    out.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)  # else inspect counts with tiktoken
    return out


def test_a_feedback_case_is_answered_and_judged_against_the_comment(tmp_path: Path) -> None:
    suite = tmp_path / "incidents-000000000000"
    suite.mkdir()
    case = {"id": "feedback-fbabc234", "kind": "feedback", "question": "why did loss spike?", "context": [],
            "answer": BAD_ANSWER, "cause": COMMENT, "run": None}  # fmt: skip
    (suite / "cases.json").write_text(json.dumps([case]))
    seen: dict[str, list[ChatMessage]] = {}

    def answering(messages: list[ChatMessage], *_: Any) -> ModelOutput:
        seen["model"] = messages
        return _out("the learning rate was too high after warm-up")

    def judging(messages: list[ChatMessage], *_: Any) -> ModelOutput:
        seen["judge"] = messages
        return _out('{"verdict": "correct", "reason": "names the LR"}')

    r = run_incidents(
        suite, tmp_path / "out", model=get_model("mockllm/model", custom_outputs=answering),
        judge=get_model("mockllm/model", custom_outputs=judging), suite_id="incidents-x",
        solver_label="m", max_samples=1,
    )  # fmt: skip
    assert [(s["task"], s["verdict"], s["passed"]) for s in r["samples"]] == [("feedback-fbabc234", "correct", True)]
    assert seen["model"][0].text == FEEDBACK_SYSTEM and COMMENT not in seen["model"][1].text
    assert seen["judge"][0].text == FEEDBACK_JUDGE_SYSTEM
    judge_read = seen["judge"][1].text
    assert COMMENT in judge_read and BAD_ANSWER in judge_read and "too high after warm-up" in judge_read
