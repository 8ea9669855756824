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
