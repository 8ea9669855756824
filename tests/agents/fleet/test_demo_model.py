"""The demo model's script (a pure function of the request) and its client through the real agent runtime: each
feature it walks through asks for the tool a real agent would, answers from the tool's real result, and says it is a
script on every answer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import pytest

from labbot.agents.fleet.demo_model import DEMO_LABEL, DEMO_MODEL, Call, DemoClient, Turn, next_turn
from labbot.agents.fleet.model import ModelSettings, make_client
from labbot.agents.fleet.runtime import AgentEvent, AgentRuntime
from labbot.agents.fleet.tools import CallContext, ToolCall, ToolResult, ToolSpec

ASSISTANT = "You are labbot's assistant: you help an ML research team."
LAB = [
    "lab__list_runs",
    "lab__get_run",
    "lab__run_metrics",
    "lab__run_logs",
    "lab__list_pages",
    "lab__stop_run",
    "lab__restart_run",
    "lab__list_eval_suites",
    "lab__generate_eval_suite",
    "lab__wait_for_run",
    "lab__run_eval",
    "lab__get_eval_results",
]
RUN_STATE = "This thread is about this run (its state right now):\n" + json.dumps({"id": "k7mq2x"}, indent=1)
THREAD = f"{ASSISTANT}\n\n{RUN_STATE}"


def asked(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"<@U0ALICE001>: {text}"}]


def answered(history: list[dict[str, Any]], turn: Turn, *results: str | tuple[str, bool]) -> list[dict[str, Any]]:
    """The history after ``turn``'s calls ran with ``results`` (a result, or one with its is_error)."""
    n = len(history)
    uses = [{"type": "tool_use", "id": f"t{n}-{i}", "name": c.name, "input": c.input} for i, c in enumerate(turn.calls)]
    outs = []
    for i, r in enumerate(results):
        content, error = r if isinstance(r, tuple) else (r, False)
        outs.append({"type": "tool_result", "tool_use_id": f"t{n}-{i}", "content": content, "is_error": error})
    return [*history, {"role": "assistant", "content": [{"type": "text", "text": turn.text}, *uses]},
            {"role": "user", "content": outs}]  # fmt: skip


def test_a_question_about_runs_is_answered_from_the_tools_result_and_labelled() -> None:
    history = asked("what runs are there?")
    turn = next_turn(ASSISTANT, history, LAB)
    assert turn.calls == (Call("lab__list_runs", {"limit": 10}),)
    listing = "k7mq2x · tiny-lm · running · attempt 1 · step 40 · loss 3.1 · owner U0ALICE001"
    final = next_turn(ASSISTANT, answered(history, turn, listing), LAB)
    assert final.final and listing in final.text and final.text.endswith(DEMO_LABEL)


def test_stop_in_a_runs_thread_calls_stop_run_and_reports_the_approval_or_the_denial() -> None:
    history = asked("ok, please stop it")
    turn = next_turn(THREAD, history, LAB)
    assert turn.calls == (Call("lab__stop_run", {"run_id": "k7mq2x"}),) and "Approve" in turn.text
    done = next_turn(THREAD, answered(history, turn, "stopped: k7mq2x · tiny-lm · stopped"), LAB)
    assert done.final and "stopped: k7mq2x" in done.text and DEMO_LABEL in done.text
    denied = next_turn(THREAD, answered(history, turn, ("denied by U0BOB00002: not now", True)), LAB)
    assert "did not happen" in denied.text and "denied by U0BOB00002" in denied.text


def test_a_run_named_in_the_message_wins_over_the_threads_and_a_stop_without_a_run_asks_which() -> None:
    restart = next_turn(THREAD, asked("restart run b3xw9p"), LAB)
    assert restart.calls == (Call("lab__restart_run", {"run_id": "b3xw9p"}),)
    which = next_turn(ASSISTANT, asked("stop the run please"), LAB)
    assert which.final and "Which run should I stop?" in which.text


def test_in_a_runs_thread_a_question_reads_its_loss_and_log() -> None:
    history = asked("how is it doing?")
    turn = next_turn(THREAD, history, LAB)
    assert [c.name for c in turn.calls] == ["lab__run_metrics", "lab__run_logs"]
    read = answered(history, turn, "loss of run k7mq2x: 40 points, last 3.1", "step 40 loss 3.1")
    final = next_turn(THREAD, read, LAB)
    assert "last 3.1" in final.text and "step 40 loss 3.1" in final.text and final.final


def test_the_eval_walk_through_generates_waits_runs_gold_and_reports_the_results() -> None:
    history = asked("make an eval from this repo and run it")
    steps: list[tuple[str, str]] = [
        ("lab__list_eval_suites", "suite-aaaaaaaaaaaa · repo @ 0123456789 · 4 tasks"),
        ("lab__generate_eval_suite", "generating: g2hjk3 · eval-generate · submitted · attempt 1 · step None"),
        ("lab__wait_for_run", "still running after 5m: g2hjk3 · eval-generate · running"),
        ("lab__wait_for_run", "ended: g2hjk3 · eval-generate · succeeded · attempt 1 · step 3 · owner U0ALICE001"),
        ("lab__list_eval_suites", "suite-aaaaaaaaaaaa · repo · 4 tasks\nsuite-bbbbbbbbbbbb · repo · 3 tasks"),
        ("lab__run_eval", "eval run e4rt5y launched: suite-bbbbbbbbbbbb with solver gold (submitted)"),
        ("lab__wait_for_run", "ended: e4rt5y · eval · succeeded · attempt 1 · step 3 · owner U0ALICE001"),
        ("lab__get_eval_results", "eval e4rt5y · suite-bbbbbbbbbbbb · solver gold · succeeded · pass rate 100%"),
    ]
    inputs = []
    for name, result in steps:
        turn = next_turn(ASSISTANT, history, LAB)
        assert [c.name for c in turn.calls] == [name], (name, turn)
        inputs.append(turn.calls[0].input)
        history = answered(history, turn, result)
    assert inputs[1] == {"count": 3, "seed": 0}
    assert inputs[2]["run_id"] == inputs[3]["run_id"] == "g2hjk3"  # waited again while it was still running
    assert inputs[5] == {"suite_id": "suite-bbbbbbbbbbbb", "solver": "gold"}  # the new suite, not the old one
    assert inputs[6]["run_id"] == "e4rt5y" and inputs[7] == {"run_id": "e4rt5y"}
    final = next_turn(ASSISTANT, history, LAB)
    assert final.final and "pass rate 100%" in final.text and DEMO_LABEL in final.text


def test_a_failed_generation_ends_the_walk_through_with_its_reason() -> None:
    history = asked("generate an eval")
    turn = next_turn(ASSISTANT, history, LAB)
    history = answered(history, turn, "no eval suites yet")
    turn = next_turn(ASSISTANT, history, LAB)
    history = answered(history, turn, "generating: g2hjk3 · eval-generate · submitted")
    turn = next_turn(ASSISTANT, history, LAB)
    failed = "ended: g2hjk3 · eval-generate · failed · attempt 1 · error: ValueError: no tests found"
    final = next_turn(ASSISTANT, answered(history, turn, failed), LAB)
    assert final.final and "no tests found" in final.text


def test_the_investigator_quotes_the_logs_telling_line_on_a_new_page() -> None:
    page = "Page p-12 just fired: *failed* on run k7mq2x — exit 3. Investigate: read the log tail."
    history = [{"role": "user", "content": page}]
    turn = next_turn("You are labbot's investigator", history, LAB)
    assert [c.name for c in turn.calls] == ["lab__get_run", "lab__run_logs"]
    log = "step 10 loss 2.0\nRuntimeError: CUDA error: an illegal memory access\nexiting"
    final = next_turn("", answered(history, turn, json.dumps({"status": "failed", "attempt": 1}), log), LAB)
    assert "illegal memory access" in final.text and "status failed" in final.text and DEMO_LABEL in final.text


def test_a_tool_the_agent_lacks_is_said_not_called() -> None:
    turn = next_turn(ASSISTANT, asked("any pages?"), ["lab__list_runs"])
    assert turn.final and "no `lab__list_pages` tool" in turn.text


def test_help_lists_what_to_try() -> None:
    turn = next_turn(ASSISTANT, asked("what can you do?"), LAB)
    assert turn.final and "click approve" in turn.text


class LabTools:
    """A ToolExecutor with the lab's tool names: records calls, answers from ``results``."""

    def __init__(self, results: Mapping[str, str]) -> None:
        self.results = results
        self.calls: list[tuple[str, Mapping[str, Any]]] = []

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec(name, name, {"type": "object"}) for name in LAB]

    async def call(self, call: ToolCall) -> ToolResult:
        self.calls.append((call.name, call.arguments))
        return ToolResult(self.results[call.name])


def test_the_demo_client_runs_in_the_real_runtime_streaming_its_answer() -> None:
    settings = ModelSettings.demo_model()
    assert settings.configured and settings.model == DEMO_MODEL and "demo" in repr(settings)
    assert isinstance(make_client(settings), DemoClient)
    runtime = AgentRuntime(DemoClient(piece_delay_s=0), DEMO_MODEL)
    tools = LabTools({"lab__list_runs": "k7mq2x · tiny-lm · succeeded · attempt 1 · step 300"})
    events: list[AgentEvent] = []

    async def seen(event: AgentEvent) -> None:
        events.append(event)

    ctx = CallContext(agent="agent-1", role="assistant", owner="U0ALICE001")
    outcome = asyncio.run(runtime.run(ASSISTANT, asked("what runs are there?"), tools, ctx, on_event=seen))
    assert outcome.answered and outcome.turns == 2 and outcome.usage.total > 0
    assert tools.calls == [("lab__list_runs", {"limit": 10})]
    assert "k7mq2x · tiny-lm · succeeded" in outcome.text and outcome.text.endswith(DEMO_LABEL)
    deltas = "".join(e.text for e in events if e.kind == "text_delta")
    assert DEMO_LABEL in deltas and len([e for e in events if e.kind == "text_delta"]) > 10  # word by word
    assert [e.tool for e in events if e.kind == "tool_call"] == ["lab__list_runs"]
    assert outcome.messages[-1]["role"] == "assistant"


@pytest.mark.parametrize("text", ["stop k7mq2x", "please stop run k7mq2x now"])
def test_a_stop_names_its_run(text: str) -> None:
    assert next_turn(ASSISTANT, asked(text), LAB).calls == (Call("lab__stop_run", {"run_id": "k7mq2x"}),)
