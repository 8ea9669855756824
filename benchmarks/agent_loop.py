"""Agent loop cost (`labbot.agents.fleet.runtime.AgentRuntime`), two claims in one run:

(a) the loop's own overhead per turn, with a model that answers instantly and a tool that does nothing: p50 per
    turn <= 5 ms, against a bare hand-written tool loop (20 lines, no budgets, retries, events or concurrency) over
    the same model. The model is an in-process object with ``messages.create`` returning prebuilt SDK ``Message``s
    (the claim), and also the real SDK over HTTP against the Anthropic test fake (reported, no claim: it adds the
    SDK, HTTP and the fake's request checks);
(b) three tools that each take 200 ms, asked for in one turn: the tool phase (first "calling tool" event to last
    "tool done") <= 300 ms, against the same three calls awaited one after another (≈ 600 ms).

A turn is measured between successive ``messages.create`` calls of one run (20 turns a run, the default budget).

    .venv/bin/python benchmarks/agent_loop.py [--runs 50] [--turns 20]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import time
from typing import Any

from _harness import median, report
from anthropic.types import Message
from fakes.anthropic import FakeAnthropic, SeenRequest, Step, text, tool_use

from labbot.agents.fleet.model import ModelSettings, make_client
from labbot.agents.fleet.runtime import AgentEvent, AgentRuntime, Budgets
from labbot.agents.fleet.tools import CallContext, ToolCall, ToolResult, ToolSpec

SYSTEM = "You are labbot's benchmark agent."
ASK = [{"role": "user", "content": "Call the tool until told to stop."}]
CTX = CallContext(agent="bench", role="helper", owner="U0BENCH001")
SCHEMA = {"type": "object", "properties": {}}


class Tools:
    """No-op tools, or tools that sleep ``delay_s``."""

    def __init__(self, names: tuple[str, ...] = ("noop",), delay_s: float = 0.0) -> None:
        self.names, self.delay_s = names, delay_s

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec(name, f"benchmark tool {name}", SCHEMA) for name in self.names]

    async def call(self, call: ToolCall) -> ToolResult:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return ToolResult("ok")


def _message(k: int, final: bool, tools: tuple[str, ...]) -> Message:
    if final:
        content: list[dict[str, Any]] = [{"type": "text", "text": "done"}]
    else:
        content = [
            {"type": "tool_use", "id": f"toolu_{k:04d}_{i}", "name": n, "input": {}} for i, n in enumerate(tools)
        ]
    return Message.model_validate(
        {
            "id": f"msg_{k:04d}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-5-5",
            "content": content,
            "stop_reason": "end_turn" if final else "tool_use",
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    )


class InstantModel:
    """An in-process client: ``messages.create`` returns the next prebuilt answer at once and notes the time."""

    def __init__(self, turns: int, tools: tuple[str, ...] = ("noop",)) -> None:
        self.answers = [_message(k, k == turns - 1, tools) for k in range(turns)]
        self.calls: list[float] = []
        self.messages = self

    async def create(self, **request: Any) -> Message:
        self.calls.append(time.perf_counter())
        turn = sum(1 for m in request["messages"] if m["role"] == "assistant")
        return self.answers[turn]


class ClockedSDK:
    """The real SDK client, noting when each ``messages.create`` starts (the turn boundaries)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: list[float] = []
        self.messages = self

    async def create(self, **request: Any) -> Any:
        self.calls.append(time.perf_counter())
        return await self.client.messages.create(**request)


async def bare_loop(client: Any, executor: Tools) -> None:
    """The baseline: a plain tool loop, tools one after another, nothing else."""
    messages: list[dict[str, Any]] = list(ASK)
    tools = [spec.as_anthropic() for spec in executor.tools()]
    while True:
        r = await client.messages.create(
            model="claude-sonnet-5-5", max_tokens=4096, system=SYSTEM, messages=messages, tools=tools
        )
        messages.append(
            {"role": "assistant", "content": [b.to_dict(mode="json", exclude_none=True) for b in r.content]}
        )
        if r.stop_reason != "tool_use":
            return
        results = []
        for b in r.content:
            if b.type == "tool_use":
                out = await executor.call(ToolCall(b.name, b.input, CTX))
                results.append({"type": "tool_result", "tool_use_id": b.id, "content": out.content})
        messages.append({"role": "user", "content": results})


def per_turn_ms(calls: list[float]) -> list[float]:
    return [(b - a) * 1000 for a, b in itertools.pairwise(calls)]


async def overhead_in_process(runs: int, turns: int) -> tuple[list[float], list[float]]:
    labbot: list[float] = []
    bare: list[float] = []
    budgets = Budgets(max_turns=turns + 1)
    for _ in range(runs):
        model = InstantModel(turns)
        outcome = await AgentRuntime(model, "claude-sonnet-5-5", budgets=budgets).run(SYSTEM, ASK, Tools(), CTX)
        assert outcome.stop == "end_turn" and outcome.turns == turns, outcome.stop
        labbot += per_turn_ms(model.calls)
        model = InstantModel(turns)
        await bare_loop(model, Tools())
        bare += per_turn_ms(model.calls)
    return labbot, bare


def http_model(turns: int) -> Any:
    def answer(request: SeenRequest) -> Step:
        done = sum(1 for m in request.messages if m["role"] == "assistant")
        return text("done") if done >= turns - 1 else tool_use(request.tool_names[0])

    return answer


async def overhead_http(fake: FakeAnthropic, runs: int, turns: int) -> tuple[list[float], list[float]]:
    labbot: list[float] = []
    bare: list[float] = []
    sdk = make_client(ModelSettings(api_key=fake.api_key, base_url=fake.base_url))
    budgets = Budgets(max_turns=turns + 1)
    try:
        for _ in range(runs):
            clocked = ClockedSDK(sdk)
            outcome = await AgentRuntime(clocked, "claude-sonnet-5-5", budgets=budgets).run(SYSTEM, ASK, Tools(), CTX)
            assert outcome.stop == "end_turn" and outcome.turns == turns, outcome.text
            labbot += per_turn_ms(clocked.calls)
            clocked = ClockedSDK(sdk)
            await bare_loop(clocked, Tools())
            bare += per_turn_ms(clocked.calls)
    finally:
        await sdk.close()
    return labbot, bare


async def tool_phase(rounds: int) -> tuple[list[float], list[float]]:
    names = ("tool_a", "tool_b", "tool_c")
    concurrent: list[float] = []
    sequential: list[float] = []
    for _ in range(rounds):
        stamps: list[tuple[str, float]] = []

        async def on_event(event: AgentEvent, stamps: list[tuple[str, float]] = stamps) -> None:
            stamps.append((event.kind, time.perf_counter()))

        runtime = AgentRuntime(InstantModel(2, names), "claude-sonnet-5-5")
        await runtime.run(SYSTEM, ASK, Tools(names, 0.2), CTX, on_event=on_event)
        first = min(t for kind, t in stamps if kind == "tool_call")
        last = max(t for kind, t in stamps if kind == "tool_done")
        concurrent.append((last - first) * 1000)
        start = time.perf_counter()
        executor = Tools(names, 0.2)
        for name in names:
            await executor.call(ToolCall(name, {}, CTX))
        sequential.append((time.perf_counter() - start) * 1000)
    return concurrent, sequential


def p(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100)[int(q) - 1] if len(xs) > 1 else xs[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--turns", type=int, default=20)
    a = ap.parse_args()
    labbot, bare = asyncio.run(overhead_in_process(a.runs, a.turns))
    with FakeAnthropic(model=http_model(a.turns)) as fake:
        http_labbot, http_bare = asyncio.run(overhead_http(fake, max(1, a.runs // 5), a.turns))
    concurrent, sequential = asyncio.run(tool_phase(5))

    lp50, bp50 = median(labbot), median(bare)
    hl50, hb50 = median(http_labbot), median(http_bare)
    phase, seq = median(concurrent), median(sequential)
    print(f"{'per turn (ms)':<44}{'p50':>9}{'p99':>9}   turns")
    print(f"{'labbot runtime, in-process instant model':<44}{lp50:>9.3f}{p(labbot, 99):>9.3f}   {len(labbot)}")
    print(f"{'bare tool loop, in-process instant model':<44}{bp50:>9.3f}{p(bare, 99):>9.3f}   {len(bare)}")
    print(
        f"{'labbot runtime, SDK over HTTP to the fake':<44}{hl50:>9.3f}{p(http_labbot, 99):>9.3f}   {len(http_labbot)}"
    )
    print(f"{'bare tool loop, SDK over HTTP to the fake':<44}{hb50:>9.3f}{p(http_bare, 99):>9.3f}   {len(http_bare)}")
    print(f"loop overhead p50: {lp50:.3f} ms a turn (claim <= 5 ms); labbot/bare = {lp50 / bp50:.2f}")
    print(f"tool phase, three 200 ms tools in one turn: {phase:.1f} ms (claim <= 300 ms)")
    print(f"the same three awaited one after another:    {seq:.1f} ms; concurrent/sequential = {phase / seq:.3f}")
    report(
        "agent_loop",
        {
            "labbot_p50_ms": lp50,
            "labbot_p99_ms": p(labbot, 99),
            "bare_p50_ms": bp50,
            "http_labbot_p50_ms": hl50,
            "http_bare_p50_ms": hb50,
            "ratio": lp50 / bp50,
            "claim": "<= 5 ms p50 per turn",
            "ok": lp50 <= 5.0,
        },
    )
    report(
        "agent_tool_phase",
        {
            "tool_phase_ms": phase,
            "sequential_ms": seq,
            "ratio": phase / seq,
            "claim": "<= 300 ms for 3 x 200 ms",
            "ok": phase <= 300.0,
        },
    )


if __name__ == "__main__":
    main()
