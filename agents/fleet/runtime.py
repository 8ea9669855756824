"""The agent runtime: one agent run is a loop of Messages API calls and tool calls, within budgets.

The fleet hands ``AgentRuntime.run`` a system prompt, the thread's conversation (ending with the researcher's new
message), a ``ToolExecutor`` (``labbot.agents.fleet.tools``) and a ``CallContext``. Each turn sends the *full* history
(no server-side threads: they do not work through proxies or fakes), with prompt caching on the system prompt and the
tool definitions; every ``tool_use`` of one answer runs concurrently, each within ``tool_timeout_s``, and their results
go back in one user message, in the order the model asked, failures as ``is_error`` results. The loop ends when the
model ends its turn or a budget runs out.

Nothing ends silently: a budget (turns, tokens, wall time), a failing model API (retried with backoff first: 429,
529 overloaded, 5xx, timeouts), a refusal, or a researcher's fourth concurrent agent (``AgentLimiter``) each end the
run with a plain message in ``RunOutcome.text``. ``RunOutcome.messages`` is the history to persist; it always ends
with an assistant message (a plain message is appended when the model's own answer is not the last word, and
tool calls left unrun are answered as such), so the researcher's next message can simply be appended to it.

Stops (``RunOutcome.stop``): ``end_turn``/``stop_sequence`` (answered), ``max_turns``/``max_tokens``/``wall_time``
(budgets), ``truncated`` (the answer hit the per-response token limit), ``model_error``, ``refusal``,
``model_context_window_exceeded`` and any other stop reason the API adds, ``agent_limit``, ``no_model``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from tenacity import RetryCallState, retry_if_exception

from labbot.agents.fleet.model import (
    MODEL_RETRY,
    NO_MODEL_MESSAGE,
    ModelFailure,
    ModelSettings,
    describe_failure,
    make_client,
)
from labbot.agents.fleet.tools import CallContext, ToolCall, ToolExecutor, ToolResult, ToolSpec
from labbot.agents.fleet.waits import HumanWaits, tracking
from labbot.common.durations import format_duration
from labbot.common.observe import NO_OBSERVER, Observer
from labbot.common.retry import RetryPolicy

__all__ = [
    "AgentEvent",
    "AgentLimitReached",
    "AgentLimiter",
    "AgentRuntime",
    "Budgets",
    "ModelClient",
    "RunOutcome",
    "TokenUsage",
]

log = logging.getLogger(__name__)

EPHEMERAL: dict[str, str] = {"type": "ephemeral"}
ANSWERED = ("end_turn", "stop_sequence")


@dataclass(frozen=True)
class Budgets:
    """Limits of one agent run. Tokens count everything the API bills: input (cache reads and writes included)
    and output, summed over the run's calls."""

    max_turns: int = 20  # model calls
    max_tokens_total: int = 200_000
    wall_time_s: float = 300.0
    max_tokens: int = 4096  # per response (the Messages API's max_tokens)
    # per tool call. A destructive tool first waits for a human's Approve (labbot.agents.fleet.approvals, 10 min by
    # default): that wait (labbot.agents.fleet.waits), here or in a sub-agent the call started, neither counts
    # against wall_time_s nor is cut by tool_timeout_s
    tool_timeout_s: float = 120.0

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_tokens_total", "wall_time_s", "max_tokens", "tool_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"Budgets.{name} must be positive, got {getattr(self, name)!r}")


@dataclass
class TokenUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    @property
    def total(self) -> int:
        """What the token budget counts: every input token (cached or not) and every output token."""
        return self.input_tokens + self.output_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens

    def add(self, usage: Any) -> None:
        """Add one response's ``usage`` (an SDK ``Usage``; the cache fields may be None)."""
        self.input_tokens += usage.input_tokens or 0
        self.output_tokens += usage.output_tokens or 0
        self.cache_read_input_tokens += getattr(usage, "cache_read_input_tokens", None) or 0
        self.cache_creation_input_tokens += getattr(usage, "cache_creation_input_tokens", None) or 0


@dataclass(frozen=True)
class AgentEvent:
    """Progress worth showing in the thread while an agent works."""

    kind: Literal["thinking", "tool_call", "tool_done", "retry", "text", "text_delta"]
    # "thinking", "calling tool lab__runs", "tool lab__runs done", "… retrying in 2.0 s (attempt 2 of 5)"; for
    # "text", what the model wrote in a turn (before its tool calls, or the answer): a thread streams it; for
    # "text_delta", a piece of that text as the model writes it (with a client that streams, ``messages.stream``);
    # the turn's "text" follows with the whole, and a "retry" means the pieces since the last "text" are void
    text: str
    tool: str | None = None
    is_error: bool = False


EventCallback = Callable[[AgentEvent], Awaitable[None]]


@dataclass
class RunOutcome:
    messages: list[dict[str, Any]]  # the full history, ready to persist; ends with an assistant message
    text: str  # the answer, or the plain message saying why the run stopped
    stop: str
    usage: TokenUsage = field(default_factory=TokenUsage)
    turns: int = 0
    elapsed_s: float = 0.0

    @property
    def answered(self) -> bool:
        return self.stop in ANSWERED


class AgentLimitReached(Exception):
    def __init__(self, owner: str, limit: int) -> None:
        super().__init__(
            f"You already have {limit} agents working; wait for one to finish (or stop one), then ask again."
        )
        self.owner = owner
        self.limit = limit


class AgentLimiter:
    """At most ``max_per_owner`` concurrent agent runs per researcher. Over the limit a run is refused at once with a
    plain message rather than queued (a queue would leave the researcher waiting on nothing visible).

    One per event loop: the counts are not guarded against other threads."""

    def __init__(self, max_per_owner: int = 3) -> None:
        if max_per_owner < 1:
            raise ValueError(f"max_per_owner must be at least 1, got {max_per_owner}")
        self.max_per_owner = max_per_owner
        self._active: dict[str, int] = {}

    def active(self, owner: str) -> int:
        return self._active.get(owner, 0)

    @asynccontextmanager
    async def acquire(self, owner: str) -> AsyncIterator[None]:
        """Hold one of ``owner``'s slots for the block; ``AgentLimitReached`` when they are all taken."""
        if self.active(owner) >= self.max_per_owner:
            raise AgentLimitReached(owner, self.max_per_owner)
        self._active[owner] = self.active(owner) + 1
        try:
            yield
        finally:
            left = self._active[owner] - 1
            if left:
                self._active[owner] = left
            else:
                del self._active[owner]


class MessagesAPI(Protocol):
    def create(self, *args: Any, **kwargs: Any) -> Awaitable[Any]: ...


class ModelClient(Protocol):
    """What the runtime uses of ``AsyncAnthropic``: ``messages.create`` (tests and benchmarks may hand in a fake)."""

    @property
    def messages(self) -> MessagesAPI: ...


@dataclass(frozen=True)
class _Stopped:
    stop: str
    text: str


def _retryable(exc: BaseException) -> bool:
    failure = describe_failure(exc)
    return failure is not None and failure.retryable


def _failure(state: RetryCallState) -> ModelFailure:
    """The model API failure of the attempt that just failed (only those are retried)."""
    exc = state.outcome.exception() if state.outcome is not None else None
    failure = describe_failure(exc) if exc is not None else None
    assert failure is not None, "only model API failures are retried"
    return failure


def _api_wait(state: RetryCallState) -> float | None:
    """The wait the API asked for (``retry-after-ms`` / ``retry-after``); None, so the backoff decides, when none."""
    wait = _failure(state).retry_after_s
    return wait if wait is not None and wait > 0 else None


class AgentRuntime:
    """Runs agents against one model client. ``client`` None means no model is configured: every run answers
    ``NO_MODEL_MESSAGE``. ``clock``, ``sleep`` and ``rng`` are seams for tests (the wall-time budget and the retry
    waits); ``observer`` hears of every run that ends (its role, model calls, tokens and tool calls: ``/metrics``)."""

    def __init__(
        self,
        client: ModelClient | None,
        model: str,
        *,
        budgets: Budgets | None = None,
        retry: RetryPolicy | None = None,
        limiter: AgentLimiter | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        rng: random.Random | None = None,
        observer: Observer = NO_OBSERVER,
    ) -> None:
        self.client = client
        self.model = model
        self.observer = observer
        self.budgets = budgets or Budgets()
        self.retry = retry or MODEL_RETRY
        self.limiter = limiter or AgentLimiter()
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._owned_client: Any = None

    @classmethod
    def from_settings(cls, settings: ModelSettings, **kwargs: Any) -> AgentRuntime:
        """The runtime for ``settings``: a real client when a key is configured, else one that says so."""
        client = make_client(settings) if settings.configured else None
        runtime = cls(client, settings.model, **kwargs)
        runtime._owned_client = client
        return runtime

    async def aclose(self) -> None:
        """Close the client if ``from_settings`` made it."""
        if self._owned_client is not None:
            await self._owned_client.close()
            self._owned_client = None

    async def run(
        self,
        system: str | Sequence[str],
        messages: Sequence[Mapping[str, Any]],
        executor: ToolExecutor,
        ctx: CallContext,
        *,
        on_event: EventCallback | None = None,
        budgets: Budgets | None = None,
        model: str | None = None,
    ) -> RunOutcome:
        """Run one agent until it answers or a budget runs out; see the module docstring. ``model`` overrides the
        runtime's (a session's A/B arm)."""
        history = [dict(m) for m in messages]
        if not history or history[-1].get("role") != "user":
            raise ValueError("an agent run needs a history that ends with the researcher's (user) message")
        if self.client is None:
            return self._observed(ctx, _finish(history, "no_model", NO_MODEL_MESSAGE, TokenUsage(), 0, 0.0))
        run: _Run | None = None
        try:
            async with self.limiter.acquire(ctx.owner):
                run = _Run(self, self.client, system, history, executor, ctx, on_event, budgets, model or self.model)
                outcome = await run.go()
        except AgentLimitReached as full:
            return self._observed(ctx, _finish(history, "agent_limit", str(full), TokenUsage(), 0, 0.0))
        used = f"{outcome.turns} turn(s), {outcome.usage.total} tokens, {format_duration(outcome.elapsed_s)}"
        log.info("agent %s for %s: %s after %s", ctx.agent, ctx.owner, outcome.stop, used)
        return self._observed(ctx, outcome, run)

    def _observed(self, ctx: CallContext, outcome: RunOutcome, run: _Run | None = None) -> RunOutcome:
        u = outcome.usage
        try:
            self.observer.agent_run(
                ctx.role,
                stop=outcome.stop,
                model_calls=outcome.turns,
                tokens={
                    "input": u.input_tokens,
                    "output": u.output_tokens,
                    "cache_read": u.cache_read_input_tokens,
                    "cache_creation": u.cache_creation_input_tokens,
                },
                tool_calls=run.tool_calls if run else 0,
                tool_errors=run.tool_errors if run else 0,
            )
        except Exception:  # counting must never cost an answer
            log.warning("the agent-run observer failed", exc_info=True)
        return outcome


class _Run:
    """The state of one run: its history, usage, turn count and clock."""

    def __init__(
        self,
        runtime: AgentRuntime,
        client: ModelClient,
        system: str | Sequence[str],
        history: list[dict[str, Any]],
        executor: ToolExecutor,
        ctx: CallContext,
        on_event: EventCallback | None,
        budgets: Budgets | None,
        model: str,
    ) -> None:
        self.rt = runtime
        self.model = model
        self.client = client
        self.tool_calls = 0
        self.tool_errors = 0
        self.history = history
        self.executor = executor
        self.ctx = ctx
        self.on_event = on_event
        self.budgets = budgets or runtime.budgets
        self.usage = TokenUsage()
        self.turns = 0
        self.start = runtime._clock()
        specs = list(executor.tools())
        self.specs: dict[str, ToolSpec] = {}  # by name: each call is resolved once, here (ToolCall)
        for spec in specs:
            self.specs.setdefault(spec.name, spec)
        self.waits = HumanWaits(runtime._clock)  # time spent waiting for a human: not the agent's
        self.tools = [spec.as_anthropic() for spec in specs]
        if self.tools:  # one cache breakpoint after the last tool caches every tool definition
            self.tools[-1] = {**self.tools[-1], "cache_control": EPHEMERAL}
        self.system = _system_blocks(system)

    def elapsed(self) -> float:
        return self.rt._clock() - self.start - self.waits.total()

    def finish(self, stop: str, text: str) -> RunOutcome:
        return _finish(self.history, stop, text, self.usage, self.turns, self.elapsed())

    async def go(self) -> RunOutcome:
        with tracking(self.waits):  # the approval gate charges its waits to this run (and to the runs above it)
            return await self._turns()

    async def _turns(self) -> RunOutcome:
        max_tokens = self.budgets.max_tokens
        while True:
            over = self.over_budget()
            if over is not None:
                return self.finish(over.stop, over.text)
            await self.emit(AgentEvent("thinking", "thinking"))
            response = await self.create(max_tokens)
            if isinstance(response, _Stopped):
                return self.finish(response.stop, response.text)
            self.turns += 1
            self.usage.add(response.usage)
            content = [_block(b) for b in response.content]
            reason = response.stop_reason or "end_turn"
            uses = [b for b in content if b.get("type") == "tool_use"]
            if reason == "max_tokens" and uses and max_tokens < 4 * self.budgets.max_tokens:
                max_tokens *= 2  # a tool call cut off mid-input is unusable: ask again with more room
                continue
            limit, max_tokens = max_tokens, self.budgets.max_tokens
            if content:  # an empty answer is not kept: the API refuses empty messages in the history
                _append(self.history, "assistant", content)
            text = "\n".join(b["text"] for b in content if b.get("type") == "text" and b.get("text"))
            if text and reason != "max_tokens":
                await self.emit(AgentEvent("text", text))
            if reason == "max_tokens":
                note = f"(My answer was cut off at the {limit}-token response limit; ask me to continue.)"
                return self.finish("truncated", f"{text}\n\n{note}" if text else note)
            if uses:
                if self.elapsed() >= self.budgets.wall_time_s:
                    return self.finish("wall_time", self.wall_time_message())
                _append(self.history, "user", await self.run_tools(uses))
                continue
            if reason == "pause_turn":  # the API paused a long turn: sending it back lets the model go on
                continue
            if reason in ANSWERED:
                return self.finish(reason, text or "(The model finished without writing an answer.)")
            if reason == "refusal":
                note = "(The model declined to go on with this request.)"
                return self.finish(reason, f"{text}\n\n{note}" if text else note)
            if reason == "model_context_window_exceeded":
                note = "This conversation no longer fits in the model's context window; start a new thread for more."
                return self.finish(reason, f"{text}\n\n{note}" if text else note)
            return self.finish(reason, text or f"The model stopped ({reason}) without an answer.")

    def over_budget(self) -> _Stopped | None:
        b = self.budgets
        if self.turns >= b.max_turns:
            return _Stopped(
                "max_turns",
                f"I stopped after {self.turns} turns (the turn budget) without finishing; "
                "ask me to continue or raise the budget.",
            )
        if self.usage.total >= b.max_tokens_total:
            return _Stopped(
                "max_tokens",
                f"I stopped after using {self.usage.total:,} tokens (the token budget is {b.max_tokens_total:,}) "
                "without finishing; ask me to continue or raise the budget.",
            )
        if self.elapsed() >= b.wall_time_s:
            return _Stopped("wall_time", self.wall_time_message())
        return None

    def wall_time_message(self) -> str:
        return (
            f"I stopped after {format_duration(self.elapsed())} (the time budget is "
            f"{format_duration(self.budgets.wall_time_s)}) without finishing; ask me to continue or raise the budget."
        )

    async def create(self, max_tokens: int) -> Any:
        """One Messages API call with retries: the response, or ``_Stopped`` with the plain reason it failed."""
        request: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "messages": list(self.history)}
        if self.system is not None:
            request["system"] = self.system
        if self.tools:
            request["tools"] = self.tools
        policy = self.rt.retry
        retrying = policy.retrying(
            retry=retry_if_exception(_retryable),
            retry_after=_api_wait,
            deadline=lambda: self.budgets.wall_time_s - self.elapsed(),
            give_up=self.gave_up,
            before_sleep=self.retrying_in,
            sleep=self.rt._sleep,
            rng=self.rt._rng,
        )
        try:
            return await retrying(self.create_once, request)
        except Exception as exc:
            failure = describe_failure(exc)
            if failure is None:
                raise
            return _Stopped("model_error", f"I couldn't finish: {failure.what}.")

    async def create_once(self, request: dict[str, Any]) -> Any:
        """One try: the response, or ``_Stopped`` when the time budget ran out; a model API failure raises. With
        someone listening and a client that streams (the SDK's ``messages.stream``), the text is passed on as the
        model writes it ("text_delta" events) and the response is the stream's final message."""
        remaining = self.budgets.wall_time_s - self.elapsed()
        if remaining <= 0:
            return _Stopped("wall_time", self.wall_time_message())
        stream = getattr(self.client.messages, "stream", None) if self.on_event is not None else None
        try:
            if stream is None:
                return await asyncio.wait_for(self.client.messages.create(**request), remaining)
            return await asyncio.wait_for(self.streamed(stream, request), remaining)
        except TimeoutError:
            return _Stopped("wall_time", self.wall_time_message())

    async def streamed(self, stream: Callable[..., Any], request: dict[str, Any]) -> Any:
        async with stream(**request) as events:
            async for piece in events.text_stream:
                if piece:
                    await self.emit(AgentEvent("text_delta", piece))
            return await events.get_final_message()

    async def retrying_in(self, state: RetryCallState) -> None:
        failure = _failure(state)
        attempts = self.rt.retry.attempts
        retry = (
            f"{failure.what}; retrying in {format_duration(state.upcoming_sleep)} "
            f"(attempt {state.attempt_number + 1} of {attempts})"
        )
        await self.emit(AgentEvent("retry", retry))

    def gave_up(self, state: RetryCallState) -> _Stopped:
        failure = _failure(state)
        attempts = self.rt.retry.attempts
        if state.attempt_number >= attempts:
            return _Stopped(
                "model_error",
                f"I couldn't finish: {failure.what}, and it still failed after {attempts} attempts. "
                "Try again in a few minutes.",
            )
        return _Stopped(
            "model_error",
            f"I couldn't finish: {failure.what}, and waiting {format_duration(state.upcoming_sleep)} to retry would "
            f"run past the time budget ({format_duration(self.budgets.wall_time_s)}). Try again in a few minutes.",
        )

    async def run_tools(self, uses: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Every tool call of one answer, concurrently; their ``tool_result`` blocks in the order they were asked."""
        remaining = self.budgets.wall_time_s - self.elapsed()
        timeout = min(self.budgets.tool_timeout_s, remaining)
        if timeout < self.budgets.tool_timeout_s:
            too_long = f"was stopped: the agent's time budget ({format_duration(self.budgets.wall_time_s)}) ran out"
        else:
            too_long = f"took longer than {format_duration(timeout)} and was stopped"
        return list(await asyncio.gather(*(self.call_tool(use, timeout, too_long) for use in uses)))

    async def call_tool(self, use: Mapping[str, Any], timeout: float, too_long: str) -> dict[str, Any]:
        name = str(use.get("name"))
        await self.emit(AgentEvent("tool_call", f"calling tool {name}", tool=name))
        spec = self.specs.get(name)
        if spec is None:
            known = ", ".join(sorted(self.specs)) or "none"
            result = ToolResult(f"there is no tool named {name!r}; the tools are: {known}", is_error=True)
        else:
            call = ToolCall(name, use.get("input") or {}, self.ctx, spec)
            try:
                result = await self.bounded(self.executor.call(call), timeout)
            except TimeoutError:
                result = ToolResult(f"tool {name} {too_long}", is_error=True)
            except Exception as exc:  # the executor should not raise; if it does, the model hears of it
                log.warning("tool %s raised for agent %s", name, self.ctx.agent, exc_info=True)
                result = ToolResult(f"tool {name} failed: {type(exc).__name__}: {_clip(str(exc))}", is_error=True)
        self.tool_calls += 1
        self.tool_errors += result.is_error
        done = f"tool {name} failed" if result.is_error else f"tool {name} done"
        await self.emit(AgentEvent("tool_done", done, tool=name, is_error=result.is_error))
        return _tool_result(str(use.get("id")), result)

    async def bounded(self, call: Awaitable[ToolResult], timeout: float) -> ToolResult:
        """``call``'s result, cancelled with ``TimeoutError`` after ``timeout`` seconds of its own: the deadline moves
        by the time humans were waited for meanwhile (an approval here, or in a sub-agent the call started)."""
        task = asyncio.ensure_future(call)
        waited_before = self.waits.real_total()
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline + (self.waits.real_total() - waited_before) - time.monotonic()
                if left <= 0 and not self.waits.waiting:
                    raise TimeoutError
                done, _ = await asyncio.wait({task}, timeout=max(left, 0.05))
                if done:
                    return task.result()
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def emit(self, event: AgentEvent) -> None:
        if self.on_event is None:
            return
        try:
            await self.on_event(event)
        except Exception:  # progress is best effort: a failed Slack update must not stop the agent
            log.warning("progress callback failed for agent %s", self.ctx.agent, exc_info=True)


def _system_blocks(system: str | Sequence[str]) -> list[dict[str, Any]] | None:
    """The system prompt as text blocks; the first (the role's prompt, the same from run to run) carries the cache
    breakpoint, so blocks after it (a run's current state) may change without spoiling the cache."""
    texts = [system] if isinstance(system, str) else list(system)
    blocks: list[dict[str, Any]] = [{"type": "text", "text": t} for t in texts if t.strip()]
    if not blocks:
        return None
    blocks[0]["cache_control"] = EPHEMERAL
    return blocks


def _finish(
    history: list[dict[str, Any]], stop: str, text: str, usage: TokenUsage, turns: int, elapsed: float
) -> RunOutcome:
    """The outcome, with the history closed: unrun tool calls answered as such and ``text`` said by the assistant
    unless the model's own answer is already the last message."""
    last = history[-1]
    pending = [b for b in _blocks(last) if b.get("type") == "tool_use"] if last["role"] == "assistant" else []
    if pending:
        not_run = ToolResult(f"not run: the agent stopped ({stop})", is_error=True)
        _append(history, "user", [_tool_result(str(b.get("id")), not_run) for b in pending])
    if history[-1]["role"] == "user":
        _append(history, "assistant", [{"type": "text", "text": text}])
    return RunOutcome(history, text, stop, usage, turns, elapsed)


def _append(history: list[dict[str, Any]], role: str, content: list[dict[str, Any]]) -> None:
    """Append a message; content for the role that spoke last joins that message (a paused turn going on)."""
    if history and history[-1]["role"] == role:
        history[-1] = {"role": role, "content": _blocks(history[-1]) + content}
    else:
        history.append({"role": role, "content": content})


def _blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [dict(b) for b in content or []]


def _block(block: Any) -> dict[str, Any]:
    """A response content block as a plain dict, exactly as received (thinking signatures included)."""
    if isinstance(block, Mapping):
        return dict(block)
    data: dict[str, Any] = block.to_dict(mode="json", exclude_none=True)
    return data


def _tool_result(tool_use_id: str, result: ToolResult) -> dict[str, Any]:
    content: Any = result.content if isinstance(result.content, str) else [dict(b) for b in result.content]
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content or "(no output)"}
    if result.is_error:
        block["is_error"] = True
    return block


def _clip(text: str, limit: int = 1000) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
