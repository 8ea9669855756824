"""The fleet: threads as conversations with agents of different roles, and delegation between them.

bot/ hands every @labbot mention, ``/lab ask ...`` and reply in a run thread to ``Fleet.ask``. The thread's session
(``labbot.agents.fleet.sessions``) is found or started; its persisted history, the researcher's new message ("<@U…>:
…"), the role's system prompt and tools (``labbot.agents.fleet.roles``) and — in a run's thread — the run's current
state go to the agent runtime (``labbot.agents.fleet.runtime``); the whole new history is saved in one transaction and
the answer returned. Asks in one thread are served one at a time (a lock per thread, that is per session): the second
waits for the first and sees its exchange. The database work of an ask — finding or opening the session and loading
its history (with the run's state, which ``run_context`` reads), then saving the answer — goes to a worker thread in
two trips (``anyio.to_thread``), never on the event loop that serves every other agent.

A/B tests (``ab``, ``[agents.ab]``): a new thread's session gets an arm and its model (``labbot.agents.feedback.ab``),
kept with the session, so every answer in that thread — its sub-agents' too — comes from that model. Each answer is
kept as a turn (model, role, model calls, tokens, time), in the transaction that saves the history; feedback on the
answer's Slack message is counted against it.

The lab's notes (``notes``: where reports and tickets go, from labbot.toml) and, in a run's thread, the run's state
are system blocks after the role's prompt, so the prompt (which the runtime marks for prompt caching) stays the same
from ask to ask while the state changes.

Delegation: a role whose tool globs match ``delegate`` gets a ``delegate(role, task)`` tool while its depth is
below ``max_depth`` (a thread's agent is at depth 0). A call starts a sub-agent of that role with a fresh history
(just the task), the role's own prompt, tools and budgets (or ``SUB_BUDGETS``), its wall time kept inside the
parent's tool timeout (time spent waiting for a human's approval counts against neither:
``labbot.agents.fleet.waits``), at depth + 1; its final text is the tool's result, ``is_error`` when it did not
answer (a budget, a model failure) with the reason. Unknown roles, the depth limit and more than ``max_fanout``
delegations in one run are refused with an ``is_error`` result the parent can act on. Sub-agents work for the same
researcher in the same thread (approvals are asked there; the audit trail records their role) and share the parent's
``AgentLimiter`` slot; their progress events reach the parent's ``on_event`` prefixed with their role (not what they
write: that is their answer to the parent). Their own
messages are not stored: what they found is in the parent's history as the tool result, and each tool call they made is
in the audit trail.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from anyio import to_thread

from labbot.agents.feedback.ab import AbTest
from labbot.agents.fleet.model import NO_MODEL_MESSAGE
from labbot.agents.fleet.roles import DELEGATE, RENAMED, Role, load_roles
from labbot.agents.fleet.runtime import AgentEvent, AgentLimiter, AgentRuntime, Budgets
from labbot.agents.fleet.sessions import SessionInfo, SessionStore, TurnRecord, new_session_id, new_turn_id
from labbot.agents.fleet.tools import CallContext, ToolCall, ToolExecutor, ToolResult, ToolSpec
from labbot.common.errors import BadRequest
from labbot.storage.db import Database

__all__ = ["SUB_BUDGETS", "Answer", "Fleet", "delegation_refusal"]

log = logging.getLogger(__name__)

EventCallback = Callable[[AgentEvent], Awaitable[None]]

SUB_BUDGETS = Budgets(max_turns=10, max_tokens_total=100_000, wall_time_s=180.0)
"""A sub-agent's budgets when its role has none of its own: smaller than a thread's agent's."""
_SUB_WALL_SHARE = 0.9  # of the parent's tool timeout: a sub-agent stops on its own before its call is cut off

T = TypeVar("T")


async def _off_loop(work: Callable[[], T]) -> T:
    """``work()`` on a worker thread: an ask's SQL never runs on the event loop. Cancelled meanwhile, it waits for
    ``work`` to end before it goes on — a transaction under the thread's lock is not left running behind the next
    ask of the thread — as it did when the store was called on the loop."""
    done = asyncio.ensure_future(to_thread.run_sync(work))
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        await asyncio.wait({done})
        raise


@dataclass(frozen=True)
class _Start:
    """What an ask starts from (``Fleet._start``)."""

    session: SessionInfo
    agent: Role
    previous: list[dict[str, Any]]  # the history as loaded
    run_block: tuple[str, ...]  # the run's state as a system block, in a run's thread when a model answers


@dataclass(frozen=True)
class Answer:
    text: str  # what to post in the thread
    stop: str  # RunOutcome.stop, or "no_model"
    session_id: str
    turns: int
    turn_id: str | None = None  # the agent_turns row kept for it (None: no model answered)
    model: str | None = None
    ab_arm: str | None = None
    tokens: int = 0
    elapsed_s: float = 0.0


def delegation_refusal(
    role: object, roles: Collection[str], *, depth: int, max_depth: int, used: int, max_fanout: int
) -> str | None:
    """Why a ``delegate`` call from an agent at ``depth`` that has already delegated ``used`` times is refused, or
    None when it may go ahead."""
    if depth >= max_depth:
        return f"cannot delegate further: depth limit {max_depth}. Do the work yourself or answer with what you have."
    if not isinstance(role, str) or role not in roles:
        return f"there is no role called {role!r}; the roles are: {', '.join(sorted(roles))}"
    if used >= max_fanout:
        return (
            f"fan-out limit {max_fanout} reached: this agent has already delegated {used} task(s). "
            "Work with the answers you have."
        )
    return None


class Fleet:
    """Agents in threads; see the module docstring. One per event loop."""

    def __init__(
        self,
        db: Database,
        runtime: AgentRuntime | None,
        tools_for: Callable[[str], Awaitable[ToolExecutor]],
        *,
        roles: Mapping[str, Role] | None = None,
        run_context: Callable[[str], str] | None = None,
        notes: str = "",
        max_depth: int = 2,
        max_fanout: int = 3,
        ab: AbTest | None = None,
    ) -> None:
        if max_depth < 0 or max_fanout < 0:
            raise ValueError(f"max_depth and max_fanout must be 0 or more, got {max_depth} and {max_fanout}")
        self.db = db
        self.runtime = runtime
        self.tools_for = tools_for
        self.roles: dict[str, Role] = dict(roles) if roles is not None else load_roles()
        self.run_context = run_context  # run id -> its state; it may block (SQL): called on a worker thread
        self.notes = notes.strip()  # where this lab keeps things (Notion reports, Linear team): a system block
        self.max_depth = max_depth
        self.max_fanout = max_fanout
        self.sessions = SessionStore(db)
        self.ab = ab  # [agents.ab]: new threads split between two models (labbot.agents.feedback.ab)
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self._said_renamed: set[str] = set()  # old role names found in stored sessions, warned about once

    async def ask(
        self,
        *,
        owner: str,
        text: str,
        channel: str | None,
        thread_ts: str | None,
        run_id: str | None = None,
        role: str = "assistant",
        on_event: EventCallback | None = None,
    ) -> Answer:
        """Continue the thread's session (its role and run kept; a session without a run is bound to ``run_id``)
        or start one, and answer ``owner``'s ``text``. An unknown ``role`` for a new session is a ``BadRequest``."""
        async with self._thread_lock(channel, thread_ts):
            start = await _off_loop(lambda: self._start(owner, channel, thread_ts, run_id, role))
            session, agent, previous = start.session, start.agent, start.previous
            messages = _with_question(previous, f"<@{owner}>: {text}")
            if self.runtime is None or self.runtime.client is None:
                await _off_loop(lambda: self.sessions.save(session.id, messages, previous))
                return Answer(NO_MODEL_MESSAGE, "no_model", session.id, 0)
            system = [agent.system, *([self.notes] if self.notes else []), *start.run_block]
            ctx = CallContext(
                agent=session.id,
                role=agent.name,
                owner=owner,
                channel=session.channel,
                thread_ts=session.thread_ts,
                run_id=session.run_id,
            )
            budgets = agent.budgets or self.runtime.budgets
            model = session.model or self.runtime.model
            executor = await self._executor(agent, 0, budgets, on_event, model)
            outcome = await self.runtime.run(
                system, messages, executor, ctx, on_event=on_event, budgets=budgets, model=model
            )
            turn = TurnRecord(
                id=new_turn_id(),
                owner=owner,
                role=agent.name,
                model=model,
                ab_arm=session.ab_arm,
                stop=outcome.stop,
                model_calls=outcome.turns,
                tokens=outcome.usage.total,
                elapsed_s=round(outcome.elapsed_s, 3),
                first_seq=len(messages) - 1,
                last_seq=len(outcome.messages) - 1,
                channel=session.channel,
            )
            await _off_loop(lambda: self.sessions.save(session.id, outcome.messages, previous, turn))
            return Answer(
                outcome.text,
                outcome.stop,
                session.id,
                outcome.turns,
                turn_id=turn.id,
                model=model,
                ab_arm=session.ab_arm,
                tokens=turn.tokens,
                elapsed_s=turn.elapsed_s,
            )

    def _start(self, owner: str, channel: str | None, thread_ts: str | None, run_id: str | None, role: str) -> _Start:
        """An ask's database work before the model is asked, in one trip to a worker thread: the thread's session
        (found; else opened — an unknown ``role`` opens nothing —; a session without a run bound to ``run_id``),
        its history and, when a model will answer in a run's thread, the run's state (``run_context`` reads the
        database too). Each store call is its own transaction, as before."""
        session = self.sessions.find(channel, thread_ts)
        if session is None:
            self._role(role)  # an unknown role starts nothing
            session_id, model, arm = new_session_id(), None, None
            if self.ab is not None and self.ab.applies_to(role) and channel and thread_ts:
                arm, model = self.ab.arm(session_id)
            session, _ = self.sessions.open(
                channel=channel,
                thread_ts=thread_ts,
                role=role,
                owner=owner,
                run_id=run_id,
                session_id=session_id,
                model=model,
                ab_arm=arm,
            )
        elif session.run_id is None and run_id is not None:
            self.sessions.bind_run(session.id, run_id)
            session = dataclasses.replace(session, run_id=run_id)
        agent = self._role(self._stored_role(session.role))
        previous = self.sessions.history(session.id)
        answering = self.runtime is not None and self.runtime.client is not None
        run_block = (self._run_block(session.run_id),) if answering and session.run_id is not None else ()
        return _Start(session, agent, previous, run_block)

    def history(self, session_id: str) -> list[dict[str, Any]]:
        """A session's persisted messages, in order."""
        return self.sessions.history(session_id)

    def session(self, channel: str, thread_ts: str) -> SessionInfo | None:
        """The session bound to a thread, if any."""
        return self.sessions.find(channel, thread_ts)

    # ----------------------------------------------------------------- internals

    def _stored_role(self, name: str) -> str:
        """The role a stored session names, as it is called now: migration 0015 renamed the rows of a renamed role,
        but a replica still running an older labbot may write one after it."""
        new = RENAMED.get(name)
        if new is None or name in self.roles:
            return name
        if name not in self._said_renamed:
            self._said_renamed.add(name)
            log.warning("agent sessions of role %r (its old name) are answered by the %s role", name, new)
        return new

    def _role(self, name: str) -> Role:
        role = self.roles.get(name)
        if role is None:
            raise BadRequest(f"there is no agent role called {name!r}; the roles are: {', '.join(sorted(self.roles))}")
        return role

    @asynccontextmanager
    async def _thread_lock(self, channel: str | None, thread_ts: str | None) -> AsyncIterator[None]:
        """Hold the thread's lock for the block; a threadless ask starts its own session and needs none."""
        if not channel or not thread_ts:
            yield
            return
        key = f"{channel}/{thread_ts}"
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users > 1:
                self._locks[key] = (lock, users - 1)
            else:
                del self._locks[key]

    def _run_block(self, run_id: str) -> str:
        """The run's state as the second system block."""
        head = f"This thread is the thread of run {run_id}."
        if self.run_context is None:
            return head
        try:
            state = self.run_context(run_id).strip()
        except Exception as exc:
            log.warning("could not read the state of run %s for its thread's agent", run_id, exc_info=True)
            return f"{head} Its current state could not be read ({type(exc).__name__}); use the tools."
        return f"{head} Its current state:\n{state}" if state else head

    async def _executor(
        self, role: Role, depth: int, budgets: Budgets, on_event: EventCallback | None, model: str
    ) -> ToolExecutor:
        inner = await self.tools_for(role.name)
        delegation = None
        if role.allows(DELEGATE) and depth < self.max_depth:
            delegation = _Delegation(self, depth, budgets, on_event, model)
        return _RoleTools(inner, role, delegation)

    async def _delegate(self, role: Role, task: str, ctx: CallContext, run: _Delegation) -> ToolResult:
        """One sub-agent run for ``_Delegation.call``."""
        assert self.runtime is not None  # a delegate tool is only offered to a running agent
        budgets = role.budgets or SUB_BUDGETS
        wall = min(budgets.wall_time_s, run.parent_budgets.tool_timeout_s * _SUB_WALL_SHARE)
        budgets = dataclasses.replace(budgets, wall_time_s=wall)
        runtime = copy.copy(self.runtime)  # the same client and settings, but not the researcher's limit again:
        runtime.limiter = AgentLimiter(sys.maxsize)  # a sub-agent shares its parent's slot
        sub_ctx = dataclasses.replace(ctx, role=role.name)
        executor = await self._executor(role, run.depth + 1, budgets, run.on_event, run.model)
        outcome = await runtime.run(
            [role.system, *([self.notes] if self.notes else [])],
            [{"role": "user", "content": task}],
            executor,
            sub_ctx,
            on_event=_prefixed(run.on_event, role.name),
            budgets=budgets,
            model=run.model,  # the whole answer is the session's model's (an A/B arm's, sub-agents included)
        )
        meta = {"role": role.name, "stop": outcome.stop, "turns": outcome.turns}
        if outcome.answered:
            return ToolResult(outcome.text or "(the agent answered nothing)", meta=meta)
        why = f"the {role.name} agent stopped without an answer ({outcome.stop}): {outcome.text}"
        return ToolResult(why, is_error=True, meta=meta)


class _Delegation:
    """The ``delegate`` tool of one agent run: its depth, and how many times it has delegated."""

    def __init__(
        self, fleet: Fleet, depth: int, parent_budgets: Budgets, on_event: EventCallback | None, model: str
    ) -> None:
        self.fleet = fleet
        self.model = model
        self.depth = depth
        self.parent_budgets = parent_budgets
        self.on_event = on_event
        self.used = 0

    def spec(self) -> ToolSpec:
        roles = self.fleet.roles
        listed = "\n".join(f"- {name}: {_first_sentence(role.system)}" for name, role in sorted(roles.items()))
        return ToolSpec(
            DELEGATE,
            "Hand a self-contained task to an agent of another role and get its answer back. It starts with only "
            "the task (not this conversation), so include every detail it needs. At most "
            f"{self.fleet.max_fanout} delegations per answer. Roles:\n{listed}",
            {
                "type": "object",
                "properties": {
                    "role": {"type": "string", "enum": sorted(roles), "description": "the role to hand the task to"},
                    "task": {"type": "string", "description": "what to do, with every detail needed"},
                },
                "required": ["role", "task"],
            },
        )

    async def call(self, call: ToolCall) -> ToolResult:
        fleet, arguments = self.fleet, call.arguments
        name = arguments.get("role")
        refusal = delegation_refusal(
            name,
            fleet.roles,
            depth=self.depth,
            max_depth=fleet.max_depth,
            used=self.used,
            max_fanout=fleet.max_fanout,
        )
        if refusal is not None:
            return ToolResult(refusal, is_error=True)
        task = arguments.get("task")
        if not isinstance(task, str) or not task.strip():
            return ToolResult("delegate needs a task: a non-empty string saying what to do", is_error=True)
        self.used += 1  # counted before the run starts: calls of one answer run concurrently
        return await fleet._delegate(fleet.roles[str(name)], task, call.ctx, self)


class _RoleTools:
    """What an agent of ``role`` is offered: the executor's tools that the role's globs allow, plus ``delegate``
    when it may delegate. Anything else is refused, whatever the inner executor would do."""

    def __init__(self, inner: ToolExecutor, role: Role, delegation: _Delegation | None) -> None:
        self.inner = inner
        self.role = role
        self.delegation = delegation

    def tools(self) -> Sequence[ToolSpec]:
        specs = [spec for spec in self.inner.tools() if spec.name != DELEGATE and self.role.allows(spec.name)]
        if self.delegation is not None:
            specs.append(self.delegation.spec())
        return specs

    async def call(self, call: ToolCall) -> ToolResult:
        name = call.name
        if name == DELEGATE and self.delegation is not None:
            return await self.delegation.call(call)
        if name == DELEGATE or not self.role.allows(name):
            return ToolResult(f"role {self.role.name!r} may not call {name}", is_error=True)
        return await self.inner.call(call)


def _with_question(history: Sequence[Mapping[str, Any]], question: str) -> list[dict[str, Any]]:
    """The history with the researcher's message appended. A history that already ends with a user message (a
    question asked while no model was configured) gets the new one in that message, so roles keep alternating."""
    messages = [dict(m) for m in history]
    if messages and messages[-1].get("role") == "user":
        content = messages[-1].get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else [dict(b) for b in content or []]
        messages[-1] = {"role": "user", "content": [*blocks, {"type": "text", "text": question}]}
    else:
        messages.append({"role": "user", "content": question})
    return messages


def _prefixed(on_event: EventCallback | None, role: str) -> EventCallback | None:
    """A sub-agent's progress, shown as its role's ("eval-writer: calling tool codebase__search")."""
    if on_event is None:
        return None
    forward = on_event

    async def prefixed(event: AgentEvent) -> None:
        if event.kind in ("text", "text_delta"):
            return  # what a sub-agent writes is its answer to the parent, not part of the parent's answer
        await forward(dataclasses.replace(event, text=f"{role}: {event.text}"))

    return prefixed


def _first_sentence(text: str) -> str:
    """What a role does, from its prompt's opening ("You are labbot's investigator: you investigate ...")."""
    first = text.strip().split("\n", 1)[0]
    _, colon, rest = first.partition(": ")
    sentence = (rest if colon else first).split(". ", 1)[0].rstrip(".")
    return sentence + "."
