"""``/lab ask`` (a question to the agents, answered in a thread it opens) and the Approve / Deny buttons of the
agents' approval prompts."""

from __future__ import annotations

from anyio import to_thread

from labbot.agents.fleet.model import NO_MODEL_MESSAGE
from labbot.bot.commands import Parsed
from labbot.bot.slack.handlers.common import Asker, SlackDeps, tell
from labbot.common.errors import LabbotError


async def ask(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    question = str(parsed.args["question"])
    talks = deps.conversations
    if talks is None:
        await tell(deps, who, NO_MODEL_MESSAGE)
        return
    # the question opens a thread in the channel; the agent answers in it, and replies there continue the session
    posted = await deps.client.chat_postMessage(channel=who.channel, text=f"<@{who.user}> asked: {question}")
    await talks.answer(user=who.user, text=question, channel=who.channel, thread_ts=str(posted["ts"]))


async def research(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    """``/lab research QUESTION``: the question opened (the asker owns it and approves its plan) in a thread of its
    own, and the researcher agent starts on it there; replies in the thread go on talking to the researcher."""
    question = str(parsed.args["question"])
    talks, threads = deps.conversations, deps.research_threads
    if talks is None:
        await tell(deps, who, NO_MODEL_MESSAGE)
        return
    if threads is None:
        raise LabbotError("research is not running in this labbot")
    doc, ts = await threads.open_thread(question, who.user, who.channel)
    brief = (
        f"Research question {doc['id']} (research_id={doc['id']!r}), asked by <@{who.user}>, who owns it and "
        f"approves its plan: {question}"
    )
    await talks.answer(user=who.user, text=brief, channel=who.channel, thread_ts=ts, role="researcher")


async def decide_approval(deps: SlackDeps, approval_id: str, approve: bool, who: Asker) -> None:
    """Approve or Deny pressed: the gate checks who may decide; the prompt then shows the verdict."""
    gate = deps.gate
    if gate is None:
        raise LabbotError("no agent is waiting for approvals in this labbot")
    decision = await to_thread.run_sync(lambda: gate.decide(approval_id, approve=approve, by=who.user))
    if not decision.ok:
        await tell(deps, who, f":no_entry: {decision.message}")
        return
    await gate.settled(approval_id)
