"""The agents, wired: model, MCP pool (the built-in ``codebase`` and ``lab`` servers in process — ``lab`` calling the
control plane's app in process too, ``labbot.bot.api.in_process`` —, ``notion``, ``linear`` and ``datadog`` when their
credentials are set, plus ``[mcp.servers]``),
the approval gate and the audit around each role's tools, the fleet, and Slack's side of them (conversations in
threads, Approve / Deny prompts), plus the ``investigator`` role, asked about every new page.

Part of the composition root (``labbot.bot.serve``). Without ``ANTHROPIC_API_KEY`` nothing here calls a model: mentions
get a plain answer saying how to configure one, and pages go out as before.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from anyio import to_thread

from labbot.agents.babysitter.pager import Pager
from labbot.agents.feedback.ab import AbTest
from labbot.agents.fleet.approvals import ApprovalGate, Preapproved
from labbot.agents.fleet.audit import AuditedExecutor
from labbot.agents.fleet.fleet import Fleet
from labbot.agents.fleet.identity import AgentIdentity
from labbot.agents.fleet.mcp_config import McpSettings
from labbot.agents.fleet.mcp_pool import McpPool
from labbot.agents.fleet.model import ModelSettings
from labbot.agents.fleet.runtime import AgentRuntime
from labbot.agents.fleet.tools import CallContext, ToolCall, ToolExecutor, ToolResult
from labbot.agents.fleet.waits import OutsideWaits
from labbot.bot.integrations import Integrations
from labbot.bot.slack.agent_threads import AgentThreads, SlackApprovalPrompter
from labbot.bot.slack.runtime import SlackCore
from labbot.common.errors import LabbotError, UnknownPage
from labbot.common.observe import NO_OBSERVER, Observer
from labbot.storage.db import Database
from labbot.training.experiments.service import ExperimentService
from labbot.training.research.service import ResearchService
from labbot.training.service import RunService

if TYPE_CHECKING:
    from labbot.mcp_servers.lab import LabApi

log = logging.getLogger(__name__)


def builtin_servers(
    lab_api: Callable[[], LabApi], integrations: Integrations | None = None, *, observer: Observer = NO_OBSERVER
) -> dict[str, Callable[[], Any]]:
    """The built-in MCP servers, in process: ``codebase`` over the current directory (``LABBOT_CODEBASE_ROOT``),
    ``lab`` talking to this control plane's ``/api/v1`` through ``lab_api()`` (``labbot serve``: its app, in
    process), and ``notion``, ``linear`` and ``datadog`` for the integrations whose credentials are set (datadog
    keeps full payloads in the agents' stores, through ``lab_api()`` too). Their configuration comes from the
    environment; labbot.toml's ``[mcp.servers.NAME]`` tunes them. The vendors' errors go to ``observer``
    (``/metrics``)."""
    from labbot.mcp_servers import BUILTINS

    # each factory imports its server (and the MCP SDK) when the pool first starts it, not at labbot's start
    def lab() -> Any:
        from labbot.mcp_servers.lab import build_server

        return build_server(lab_api())

    def datadog() -> Any:
        from labbot.mcp_servers.datadog import DatadogApi, build_server

        return build_server(DatadogApi(observer=observer), artifacts=lab_api())

    def notion() -> Any:
        from labbot.mcp_servers.notion import NotionApi, build_server

        return build_server(NotionApi(observer=observer))

    def linear() -> Any:
        from labbot.mcp_servers.linear import LinearApi, build_server

        return build_server(LinearApi(observer=observer))

    servers: dict[str, Callable[[], Any]] = {"codebase": BUILTINS["codebase"], "lab": lab}
    for name in (integrations or Integrations()).servers:
        servers[name] = {"datadog": datadog, "notion": notion, "linear": linear}.get(name) or BUILTINS[name]
    return servers


def run_context(service: RunService) -> Callable[[str], str]:
    def describe(run_id: str) -> str:
        try:
            run = service.get(run_id)
        except LabbotError as e:
            return f"run {run_id}: {e.message}"
        keep = ("id", "job", "name", "owner", "status", "attempt", "step", "metrics", "checkpoint_step", "error")
        facts = {k: run.get(k) for k in keep} | {"params": run.get("params"), "stall_after_s": run.get("stall_after_s")}
        return "This thread is about this run (its state right now):\n" + json.dumps(facts, indent=1, default=str)

    return describe


@dataclass
class AgentsStack:
    fleet: Fleet | None
    pool: McpPool
    gate: ApprovalGate
    conversations: AgentThreads
    model: ModelSettings
    db: Database

    async def call_tool(
        self, tool: str, arguments: Mapping[str, Any], ctx: CallContext, approved_by: str | None = None
    ) -> ToolResult:
        """One of labbot's own tool calls (``/lab report``, File incident), audited like an agent's: through the
        approval gate, or — ``approved_by`` — for a person who already decided by pressing the button that does it."""
        await self.pool.tools(ctx.role)  # lazily connect and list
        inner: ToolExecutor = self.pool.executor(ctx.role)
        executor = Preapproved(inner, approved_by) if approved_by else self.gate.around(inner)
        audited = AuditedExecutor(executor, self.db)
        return await audited.call(ToolCall.resolve(audited, tool, arguments, ctx))

    async def investigate(self, pager: Pager, page_ids: list[str]) -> None:
        """The ``investigator`` role looks into each new page in its run's thread: a short diagnosis, no actions."""
        if self.fleet is None:
            return
        for page_id in page_ids:
            found = await to_thread.run_sync(self._page_thread, pager, page_id)
            if found is None:
                continue
            run_id, kind, summary, thread = found
            question = (
                f"Page {page_id} just fired: *{kind}* on run {run_id} — {summary}. Investigate: read the log tail, "
                "the metrics around the event and recent commits, then post a short diagnosis (what happened, the "
                "likely cause, what to do). Do not take any action."
            )
            try:
                await self.conversations.answer(
                    user="labbot",
                    text=question,
                    channel=thread[0],
                    thread_ts=thread[1],
                    role="investigator",
                    run_id=run_id,
                )
            except Exception:
                log.exception("the investigator failed on page %s", page_id)

    def _page_thread(self, pager: Pager, page_id: str) -> tuple[str, str, str, tuple[str, str]] | None:
        """A page's run, kind, summary and the run's thread (None: no run, or no thread); blocking (SQL)."""
        try:
            page = pager.get(page_id)
        except UnknownPage:
            return None
        run_id = page["run_id"]
        if run_id is None:
            return None
        thread = self.conversations.thread_of_run(run_id)
        return (run_id, page["kind"], page["summary"], thread) if thread is not None else None

    async def close(self) -> None:
        await self.pool.close()
        if self.fleet is not None and self.fleet.runtime is not None:
            await self.fleet.runtime.aclose()


def build_agents(
    *,
    config: dict[str, Any],
    db: Database,
    service: RunService,
    slack: SlackCore,
    lab_api: Callable[[], LabApi],
    model: ModelSettings,
    integrations: Integrations | None = None,
    ab: AbTest | None = None,
    observer: Observer = NO_OBSERVER,
    experiments: ExperimentService | None = None,
    research: ResearchService | None = None,
) -> AgentsStack:
    """The agents of a control plane whose ``/api/v1`` ``lab_api()`` reaches (``InProcessApi.lab_api``), talking in
    ``slack``'s threads; its conversations and approval gate are what Slack's handlers are then given."""
    builtins = builtin_servers(lab_api, integrations, observer=observer)
    pool = McpPool(McpSettings.from_config(config, builtins=tuple(builtins)).with_builtins(builtins), builtins)
    prompter = SlackApprovalPrompter(slack.client, db)

    def owner_of(run_id: str) -> str | None:
        try:
            return str(service.get(run_id)["owner"])
        except LabbotError:
            return None

    def experiment_owner(exp_id: str) -> str | None:
        try:
            return experiments.owner_of(exp_id) if experiments is not None else None
        except LabbotError:
            return None

    def research_owner(rid: str) -> str | None:
        try:
            return research.owner_of(rid) if research is not None else None
        except LabbotError:
            return None

    gate = ApprovalGate(
        pool.executor("assistant"),
        db,
        prompter,
        admins=slack.settings.admins,
        run_owner=owner_of,
        experiment_owner=experiment_owner,
        research_owner=research_owner,
    )
    gate.expire_leftovers()  # asks left pending by a previous process: fail closed

    async def tools_for(role: str) -> ToolExecutor:
        await pool.tools(role)  # lazily connect and list the role's servers
        return AuditedExecutor(gate.around(OutsideWaits(AgentIdentity(pool.executor(role)))), db)

    runtime = AgentRuntime.from_settings(model, observer=observer) if model.configured else None
    notes = (integrations or Integrations()).agent_notes()
    fleet = Fleet(db, runtime, tools_for, run_context=run_context(service), notes=notes, ab=ab) if runtime else None
    conversations = AgentThreads(slack.client, db, fleet)
    return AgentsStack(fleet=fleet, pool=pool, gate=gate, conversations=conversations, model=model, db=db)
