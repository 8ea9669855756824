"""What every Slack handler shares: the frozen dependencies it is handed (:class:`SlackDeps`), who asked
(:class:`Asker`), and how an answer reaches them (:func:`tell`, :func:`fail`, :func:`run_safely`).

A handler is a plain async function ``(deps, parsed, who)``; the control plane builds one ``SlackDeps`` (everything a
handler may call, each optional part None where this labbot runs without it) and hands it to every handler.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from labbot.agents.babysitter.pager import Pager
from labbot.agents.feedback.ab import AbTest
from labbot.agents.fleet.approvals import ApprovalGate
from labbot.bot.commands import Parsed, usage
from labbot.bot.config import SlackSettings
from labbot.bot.slack.agent_threads import AgentThreads
from labbot.bot.slack.blocks import ephemeral_error
from labbot.bot.slack.crosslinks import CrossLinks
from labbot.bot.slack.experiment_threads import ExperimentThreads
from labbot.bot.slack.research_threads import ResearchThreads
from labbot.bot.slack.threads import RunThreads
from labbot.common.errors import LabbotError
from labbot.evals.service import EvalService
from labbot.storage.artifacts import ArtifactStore
from labbot.training.experiments.service import ExperimentService
from labbot.training.service import RunService

log = logging.getLogger(__name__)


@dataclass
class Asker:
    """Who asked, and where to answer them."""

    user: str
    channel: str
    trigger_id: str | None = None


@dataclass(frozen=True)
class SlackDeps:
    """What the ``/lab`` handlers and the buttons call. The optional parts are None where this labbot runs
    without them (no pager, no agents, no integrations, no evals); a handler needing one says so to the asker."""

    client: AsyncWebClient
    service: RunService
    threads: RunThreads
    settings: SlackSettings
    pager: Pager | None = None
    # send a page's updates (who acknowledged) now rather than on the outbox's next tick
    after_page_change: Callable[[], Awaitable[None]] | None = None
    # the agents: threads as conversations, and the approval gate the Approve / Deny buttons decide
    conversations: AgentThreads | None = None
    gate: ApprovalGate | None = None
    # the integrations: /lab report and File incident, and what /lab help says of them
    crosslinks: CrossLinks | None = None
    help_footer: tuple[str, ...] = ()
    agents_line: str = ""  # whether the agents answer (and the model), for App Home
    # the artifact store, for /lab artifacts (the researcher's agents' stores: RESEARCHER/ROLE)
    artifacts: ArtifactStore | None = None
    # evals, for /lab eval ...; with Linear wired in, the cause written in a page's Linear issue, and how to record it
    evals: EvalService | None = None
    linear_cause: Callable[[str, str], Awaitable[str | None]] | None = None
    record_cause: Callable[[str, str, str], Any] | None = None
    # the A/B test of the agents' models ([agents.ab]), for /lab ab
    ab: AbTest | None = None
    # experiments, for /lab sweep and /lab experiment; their threads; the leader's next tick brought forward
    experiments: ExperimentService | None = None
    experiment_threads: ExperimentThreads | None = None
    # research questions' threads, for /lab research (the researcher answers in them; their reports published)
    research_threads: ResearchThreads | None = None
    tick_soon: Callable[[], None] | None = None

    @property
    def command(self) -> str:
        """The slash command's name (``[slack] command``), as answers spell it."""
        return self.settings.command

    def is_admin(self, user: str) -> bool:
        return user in self.settings.admins

    def need_pager(self) -> Pager:
        if self.pager is None:
            raise LabbotError("paging is not running in this labbot")
        return self.pager

    def need_crosslinks(self) -> CrossLinks:
        if self.crosslinks is None:
            raise LabbotError("Notion and Linear are not wired into this labbot (it runs without Slack agents)")
        return self.crosslinks

    def need_evals(self) -> EvalService:
        if self.evals is None:
            raise LabbotError("evals are not enabled in this labbot")
        return self.evals


Handler = Callable[[SlackDeps, Parsed, Asker], Awaitable[None]]
"""A ``/lab`` subcommand's handler: called once Slack has been acked, so it may take its time."""


async def tell(deps: SlackDeps, who: Asker, text: str, blocks: list[dict[str, Any]] | None = None) -> None:
    """An ephemeral answer: only the asker sees it (after a click on the home tab, which is in no channel: a DM)."""
    try:
        if not who.channel:
            await deps.client.chat_postMessage(channel=who.user, text=text, blocks=blocks)
            return
        await deps.client.chat_postEphemeral(channel=who.channel, user=who.user, text=text, blocks=blocks)
    except SlackApiError as e:
        log.warning("could not answer %s in %s: %s", who.user, who.channel, e.response.get("error"))


async def fail(deps: SlackDeps, who: Asker, message: str, parsed: Parsed | None = None) -> None:
    """An ephemeral error, with the command's usage when the asker got it wrong."""
    text, blocks = ephemeral_error(message, usage(parsed.command, deps.command) if parsed is not None else None)
    await tell(deps, who, text, blocks)


async def run_safely(deps: SlackDeps, work: Awaitable[None], who: Asker) -> None:
    """A button's work: what goes wrong is told to the clicker, ephemerally."""
    try:
        await work
    except LabbotError as e:
        await fail(deps, who, e.message)
    except Exception:
        log.exception("a button's action failed")
        await fail(deps, who, "that failed inside labbot; the error is in its log")


def admins_only(deps: SlackDeps, what: str) -> str:
    """A refusal of what only admins may do, naming who may (or how to make someone an admin)."""
    admins = sorted(deps.settings.admins)
    if not admins:
        return (
            f":no_entry: only an admin can {what}, and this labbot has none: "
            "add Slack user ids to `[roles] admins` in labbot.toml"
        )
    names = " or ".join(f"<@{u}>" for u in admins)
    return f":no_entry: only an admin can {what}: ask {names} (`[roles] admins` in labbot.toml)"


async def permalink(deps: SlackDeps, channel: str, ts: str) -> str | None:
    """A message's link, or None when Slack will not give one."""
    try:
        resp = await deps.client.chat_getPermalink(channel=channel, message_ts=ts)
        return str(resp["permalink"])
    except SlackApiError:
        return None
