"""The demo model: a scripted stand-in for the Messages API, so that a newcomer sees what labbot's agents do before
they have a model key (``labbot console --demo``, ``make demo``).

``DemoClient`` is a client as the runtime (``labbot.agents.fleet.runtime``) uses ``AsyncAnthropic``, in-process:
``messages.create`` answers an SDK ``Message`` and ``messages.stream`` streams its text piece by piece, as the SDK's
stream does. What it says is decided by ``next_turn``, a pure function of the request: the researcher's last
message, the tool calls made since and their results. Only the model is scripted: the tools are labbot's own MCP
servers, a stop waits at the approval gate for a human's Approve, an eval suite is generated and run on Ray, and every
answer is built from the real tool results it quotes. Each answer ends with ``DEMO_LABEL``, so nobody takes a script's
words for a model's judgement.

What the script understands (a word in the message, and a run id in it or the run whose thread it is):

- ``stop RUN`` / ``restart RUN`` → ``lab__stop_run`` / ``lab__restart_run`` (each waits for Approve), then what
  happened, or that it was denied;
- ``eval`` → the suites there are, a small suite generated from the codebase (Approve), its generation run waited
  for, the new suite run with the ``gold`` solver (Approve), that run waited for, and its results;
- ``pages`` → ``lab__list_pages``; ``runs`` (or a question with no run in view) → ``lab__list_runs``;
- in a run's thread, anything else → the run's loss and its log's last lines, quoted;
- a page that just fired (the investigator) → the run, its log tail, and the last line that reads as an error;
- ``help`` → what to try.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DEMO_LABEL", "DEMO_MODEL", "Call", "DemoClient", "Done", "Turn", "next_turn"]

DEMO_MODEL = "labbot-demo"
"""The demo model's name, where a model's name is shown (the banner, /lab help, App Home, an answer's turn)."""

DEMO_LABEL = (
    "_(demo model: these words are a script's, not a model's — the tool calls and their results are real. "
    "Set ANTHROPIC_API_KEY and restart labbot for a real model.)_"
)

TRY = (
    "Things to try with the demo model:\n"
    "• `ask what runs are there?` — a question answered with a tool call (`lab__list_runs`)\n"
    "• `/lab launch tiny-lm`, then `reply RUN how is it doing?` — the run's loss and log, read by tools\n"
    "• `reply RUN please stop it` — a stop that waits for your Approve (`click approve REQUEST`)\n"
    "• `ask make an eval from this repo and run it` — a sealed eval suite generated and run, each launch approved\n"
    "• `ask any pages?` — the pages open right now"
)

_RUN_ID = r"[a-hj-km-np-z2-9]{6}"  # labbot's run ids (training.service.new_run_id)
_ACTION = re.compile(rf"\b(stop|restart)\s+(?:the\s+)?(?:run\s+)?({_RUN_ID})\b", re.IGNORECASE)
_NAMED_RUN = re.compile(rf"\brun\s+({_RUN_ID})\b", re.IGNORECASE)
_THREAD_RUN = re.compile(rf'This thread is about this run[\s\S]*?"id": "({_RUN_ID})"')
_PAGE = re.compile(rf"Page (\S+) just fired: \*([^*]+)\* on run ({_RUN_ID})")
_MENTION = re.compile(r"^<@[A-Z0-9]+>:\s*")
_SUITE = re.compile(r"suite-[0-9a-f]{12}")
EVAL_TASKS = 3  # a demo suite is small: generated and run in a few minutes on a laptop


@dataclass(frozen=True)
class Call:
    """A tool call the script makes."""

    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class Done:
    """A tool call made since the researcher's message, with its result as the model saw it."""

    name: str
    input: dict[str, Any]
    result: str
    is_error: bool = False


@dataclass(frozen=True)
class Turn:
    """One answer of the script: its text and the tool calls it makes (none: the answer is final)."""

    text: str
    calls: tuple[Call, ...] = ()

    @property
    def final(self) -> bool:
        return not self.calls


def next_turn(system: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[str]) -> Turn:
    """The script's next answer to a request: ``system`` its system prompt as one text, ``messages`` the history
    (ending with the researcher's message or with tool results), ``tools`` the names of the tools it may call."""
    asked, done = _conversation(messages)
    available = set(tools)
    page = _PAGE.search(asked)
    if page is not None:
        return _investigate(page.group(3), page.group(2), done, available)
    text = _MENTION.sub("", asked).strip()
    lowered = text.lower()
    thread_run = _THREAD_RUN.search(system)
    action = _ACTION.search(text)
    named = _NAMED_RUN.search(text)
    run_id = action.group(2) if action else named.group(1) if named else thread_run.group(1) if thread_run else None
    said = re.search(r"\b(stop|restart)\b", lowered)
    verb = action.group(1).lower() if action else said.group(1) if said else None
    if verb is not None:
        if run_id is None:
            return Turn(_final(f"Which run should I {verb}? Say `{verb} RUN` with its id, or ask in the run's thread."))
        return _act(verb, run_id, done, available)
    if re.search(r"\b(help|what can you do|how do i)\b", lowered) and not done:
        return Turn(_final(TRY))
    if "eval" in lowered:
        return _eval(done, available)
    if "page" in lowered:
        return _lookup("lab__list_pages", {}, "the pages open right now", done, available)
    if run_id is not None and not re.search(r"\bruns\b", lowered):
        return _run_status(run_id, done, available)
    return _lookup("lab__list_runs", {"limit": 10}, "the runs labbot knows, newest first", done, available)


def _conversation(messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[Done]]:
    """The researcher's last message, and the tool calls made since (with their results), in order."""
    start = 0
    asked = ""
    for i, m in enumerate(messages):
        if m.get("role") == "user":
            said = _texts(m.get("content"))
            if said:
                start, asked = i, said
    uses: dict[str, tuple[str, dict[str, Any]]] = {}
    done: list[Done] = []
    for m in messages[start + 1 :]:
        for b in _content(m.get("content")):
            if b.get("type") == "tool_use":
                uses[str(b.get("id"))] = (str(b.get("name")), dict(b.get("input") or {}))
            elif b.get("type") == "tool_result" and str(b.get("tool_use_id")) in uses:
                name, given = uses[str(b.get("tool_use_id"))]
                done.append(Done(name, given, _result_text(b.get("content")), bool(b.get("is_error"))))
    return asked, done


def _content(content: Any) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, Mapping)]


def _texts(content: Any) -> str:
    return "\n".join(str(b.get("text") or "") for b in _content(content) if b.get("type") == "text").strip()


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text") or "") for b in _content(content) if b.get("type") == "text")


def _final(text: str) -> str:
    return f"{text.rstrip()}\n\n{DEMO_LABEL}"


def _quoted(text: str, lines: int = 12) -> str:
    kept = text.strip().splitlines()[-lines:] or ["(nothing)"]
    return "```\n" + "\n".join(kept).replace("```", "'''") + "\n```"


def _missing(tool: str, available: set[str]) -> Turn | None:
    if tool in available:
        return None
    return Turn(_final(f"This agent has no `{tool}` tool, so the demo cannot show that here."))


def _failed(step: Done) -> Turn:
    return Turn(_final(f"`{step.name}` did not go through:\n{_quoted(step.result)}"))


def _lookup(tool: str, given: dict[str, Any], what: str, done: list[Done], available: set[str]) -> Turn:
    """One read, then its result quoted."""
    if not done:
        return _missing(tool, available) or Turn(f"Let me look up {what} (`{tool}`).", (Call(tool, given),))
    step = done[-1]
    if step.is_error:
        return _failed(step)
    return Turn(_final(f"Here are {what}, as `{step.name}` returned them:\n{_quoted(step.result, 20)}"))


def _act(verb: str, run_id: str, done: list[Done], available: set[str]) -> Turn:
    """A stop or restart: the tool call (labbot's approval gate asks a human first), then what came of it."""
    tool = f"lab__{verb}_run"
    if not done:
        ask = (
            f"I'll {verb} run `{run_id}` with `{tool}`. That changes things, so labbot asks you to approve it first: "
            "nothing happens until someone presses Approve."
        )
        return _missing(tool, available) or Turn(ask, (Call(tool, {"run_id": run_id}),))
    step = done[-1]
    if step.is_error:
        return Turn(_final(f"The {verb} of run `{run_id}` did not happen:\n{_quoted(step.result)}"))
    return Turn(_final(f"Done after your approval: {step.result.strip()}"))


def _run_status(run_id: str, done: list[Done], available: set[str]) -> Turn:
    """A run's loss and its log's last lines, read together, then quoted."""
    if not done:
        calls = (
            Call("lab__run_metrics", {"run_id": run_id, "name": "loss"}),
            Call("lab__run_logs", {"run_id": run_id, "tail": 5}),
        )
        absent = next((m for c in calls if (m := _missing(c.name, available)) is not None), None)
        return absent or Turn(f"Reading run `{run_id}`'s loss and the end of its log.", calls)
    parts = []
    for step in done:
        if step.name == "lab__run_metrics":
            parts.append(f"*Loss* ({'failed' if step.is_error else step.name}): {step.result.strip()[:600]}")
        elif step.name == "lab__run_logs":
            parts.append(f"*The log's last lines*:\n{_quoted(step.result, 5)}")
    return Turn(_final(f"Run `{run_id}`, from its metrics and logs:\n" + "\n".join(parts)))


def _investigate(run_id: str, kind: str, done: list[Done], available: set[str]) -> Turn:
    """A new page: the run and its log tail read, then the last line of the log that reads as an error quoted."""
    if not done:
        calls = (Call("lab__get_run", {"run_id": run_id}), Call("lab__run_logs", {"run_id": run_id, "tail": 30}))
        absent = next((m for c in calls if (m := _missing(c.name, available)) is not None), None)
        return absent or Turn(f"Looking into the *{kind}* page: run `{run_id}` and its log.", calls)
    state = next((s for s in done if s.name == "lab__get_run" and not s.is_error), None)
    logs = next((s for s in done if s.name == "lab__run_logs"), None)
    facts = _run_facts(state.result) if state else "its state could not be read"
    lines = [line for line in (logs.result if logs else "").splitlines() if line.strip()]
    telling = [line for line in lines if re.search(r"error|exception|traceback|nan|killed|stalled", line, re.I)]
    evidence = telling[-1] if telling else lines[-1] if lines else "(the log is empty)"
    return Turn(
        _final(
            f"*What happened*: a *{kind}* page on run `{run_id}` ({facts}).\n"
            f"*Evidence*: the log's last telling line: `{evidence.strip()[:300]}`\n"
            "*Next step*: a real model would weigh this against the metrics and the recent commits; "
            "read the page's summary and the run's log (`labbot logs RUN`)."
        )
    )


def _run_facts(result: str) -> str:
    try:
        run = json.loads(result)
    except json.JSONDecodeError:
        return result.strip()[:200]
    bits = [f"{k} {run[k]}" for k in ("status", "attempt", "step") if run.get(k) is not None]
    return ", ".join(bits) or "no state"


def _eval(done: list[Done], available: set[str]) -> Turn:
    """The suites listed, a small suite generated (Approve), waited for, the new suite run with gold (Approve),
    waited for, and its results: one step per answer, each decided by the last result."""
    needed = ("lab__list_eval_suites", "lab__generate_eval_suite", "lab__wait_for_run", "lab__run_eval")
    absent = next((m for t in needed if (m := _missing(t, available)) is not None), None)
    if absent is not None:
        return absent
    if not done:
        return Turn("First, the eval suites there are now.", (Call("lab__list_eval_suites", {}),))
    step = done[-1]
    if step.is_error:
        return _failed(step)
    if step.name == "lab__list_eval_suites" and len(done) == 1:
        ask = (
            f"Now I'll generate a small suite ({EVAL_TASKS} tasks) from the codebase labbot serves: each task deletes "
            "a function its tests cover, and the tests are the reward. It is a run on Ray, so it waits for your "
            "Approve."
        )
        return Turn(ask, (Call("lab__generate_eval_suite", {"count": EVAL_TASKS, "seed": 0}),))
    if step.name == "lab__generate_eval_suite":
        return _wait_for(step, rf"generating: ({_RUN_ID})", "Generation run `{}` started; waiting for it.")
    if step.name == "lab__wait_for_run":
        if step.result.startswith("still"):
            return Turn("Still going; waiting a little longer.", (_wait(str(step.input.get("run_id"))),))
        if " · succeeded · " not in step.result:
            return _failed(step)
        if " · eval-generate · " in step.result:
            return Turn("Generated. Which suite is new?", (Call("lab__list_eval_suites", {}),))
        return Turn("Scored. Reading the results.", (Call("lab__get_eval_results", {"run_id": step.input["run_id"]}),))
    if step.name == "lab__list_eval_suites":
        before = set(_SUITE.findall(done[0].result))
        new = [s for s in _SUITE.findall(step.result) if s not in before]
        if not new:
            return Turn(_final(f"The generation ended but no new suite is listed:\n{_quoted(step.result)}"))
        ask = (
            f"Suite `{new[0]}` is new. I'll run it with the `gold` solver (the original code put back: every task "
            "should pass, which checks the suite itself). Another run on Ray, so another Approve."
        )
        return Turn(ask, (Call("lab__run_eval", {"suite_id": new[0], "solver": "gold"}),))
    if step.name == "lab__run_eval":
        return _wait_for(step, rf"eval run ({_RUN_ID}) launched", "Eval run `{}` launched; waiting for it.")
    if step.name == "lab__get_eval_results":
        return Turn(
            _final(
                "The suite, generated and scored with the gold solver (a real model's solver would be "
                f"`agent:anthropic/MODEL`):\n{_quoted(step.result, 20)}"
            )
        )
    return Turn(_final(f"The demo's eval walk-through did not expect `{step.name}` here."))


def _wait(run_id: str) -> Call:
    return Call("lab__wait_for_run", {"run_id": run_id, "timeout_s": 300})


def _wait_for(step: Done, pattern: str, saying: str) -> Turn:
    """A wait for the run ``step`` started (its id, ``pattern``'s group, said in ``saying``); its failure if none."""
    run = re.search(pattern, step.result)
    return _failed(step) if run is None else Turn(saying.format(run.group(1)), (_wait(run.group(1)),))


# --- the client --------------------------------------------------------------------------------------------------


@dataclass
class _Counter:
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def next(self, prefix: str) -> str:
        return f"{prefix}_demo{next(self.ids):08d}"


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    return "\n\n".join(str(b.get("text") or "") for b in system or [] if isinstance(b, Mapping))


def _tokens(text: str) -> int:
    """A rough count (four characters a token), so budgets and /metrics see the demo's turns."""
    return max(1, len(text) // 4)


class _Messages:
    def __init__(self, counter: _Counter, piece_delay_s: float) -> None:
        self._counter = counter
        self._delay = piece_delay_s

    def _message(self, request: Mapping[str, Any]) -> Any:
        from anthropic.types import Message  # only a process that runs the demo imports the SDK

        messages = list(request.get("messages") or [])
        tools = [str(t.get("name")) for t in request.get("tools") or [] if isinstance(t, Mapping)]
        turn = next_turn(_system_text(request.get("system")), messages, tools)
        content: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
        content += [
            {"type": "tool_use", "id": self._counter.next("toolu"), "name": c.name, "input": c.input}
            for c in turn.calls
        ]
        seen = json.dumps(messages, default=str) + _system_text(request.get("system"))
        return Message.model_validate(
            {
                "id": self._counter.next("msg"),
                "type": "message",
                "role": "assistant",
                "model": str(request.get("model") or DEMO_MODEL),
                "content": content,
                "stop_reason": "end_turn" if turn.final else "tool_use",
                "stop_sequence": None,
                "usage": {"input_tokens": _tokens(seen), "output_tokens": _tokens(json.dumps(content))},
            }
        )

    async def create(self, **request: Any) -> Any:
        return self._message(request)

    def stream(self, **request: Any) -> _Stream:
        return _Stream(self._message(request), self._delay)


class _Stream:
    """What the runtime uses of the SDK's ``MessageStream``: the text as it is written, then the whole message."""

    def __init__(self, message: Any, delay_s: float) -> None:
        self._message = message
        self._delay = delay_s

    async def __aenter__(self) -> _Stream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    @property
    def text_stream(self) -> AsyncIterator[str]:
        return self._pieces()

    async def _pieces(self) -> AsyncIterator[str]:
        for block in self._message.content:
            if block.type != "text":
                continue
            for piece in re.findall(r"\S+\s*|\s+", block.text):
                await asyncio.sleep(self._delay)
                yield piece

    async def get_final_message(self) -> Any:
        return self._message


class DemoClient:
    """The demo model, in-process, as the runtime's ``ModelClient``. ``piece_delay_s``: the pause between streamed
    words (a person reads a stream as it comes; 0 in tests)."""

    def __init__(self, piece_delay_s: float = 0.03) -> None:
        self.messages = _Messages(_Counter(), piece_delay_s)

    async def close(self) -> None:
        return None
