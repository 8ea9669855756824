"""Cross-links from Slack to the org's systems: ``/lab report RUN`` writes the run's Notion report, and a page's
File incident button opens a Linear issue for it — each linked both ways.

Both go through the same MCP tools the agents use (``notion__create_page``, ``linear__create_issue``), through
``call_tool`` (``AgentsStack.call_tool``), so they are audited like an agent's calls and respect labbot.toml (a server
made read-only has no write tools to call):

* a report is asked for by anyone, and written only after the run's owner or an admin presses Approve on the
  prompt in the run's thread (the approval gate); the link is then posted in the thread, and the report links back
  to the thread;
* File incident *is* the press of a button: only the run's owner or an admin may (for a cluster page, an admin). The
  issue's description links to the Slack thread and names the page; the page shows the issue on every posted copy
  (``Pager.link``) and its thread says who filed it.

Failures are told plainly: to the person who asked, and in the thread for a report, since its prompt was there.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from anyio import to_thread
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from labbot.agents.babysitter.pager import Pager
from labbot.agents.fleet.tools import CallContext, ToolResult
from labbot.bot.integrations import Integrations
from labbot.bot.slack.blocks.run_card import escape, mention
from labbot.bot.slack.threads import RunThreads
from labbot.common.errors import BadRequest, LabbotError
from labbot.training.permissions import approvers, may
from labbot.training.report import plot_image, report_metrics, run_report
from labbot.training.service import RunService
from labbot.training.telemetry_store import TelemetryStore

log = logging.getLogger(__name__)

CallTool = Callable[[str, Mapping[str, Any], CallContext, str | None], Awaitable[ToolResult]]
ROLE = "labbot"  # the role of labbot's own tool calls in the audit trail (no [mcp.roles] table: every tool)
_URL = re.compile(r"https?://[^\s<>|)\"']+")
_IDENTIFIER = re.compile(r"\b[A-Z][A-Z0-9]{0,9}-\d+\b")
_CAUSE_LINE = re.compile(
    r"^[ \t>*_-]*(?:root[ \t]+)?cause[ \t]*[:*_]+[ \t*_]*(?P<cause>\S[^\n]*)$", re.IGNORECASE | re.MULTILINE
)
PRIORITY = {"infra": 1, "failed": 2, "hung": 2, "silent": 2, "diverged": 2, "pending": 3, "slow": 3}


def result_text(result: ToolResult) -> str:
    if isinstance(result.content, str):
        return result.content
    return "\n".join(str(b.get("text", "")) for b in result.content if isinstance(b, Mapping))


def first_url(text: str, host: str) -> str | None:
    """The first URL in ``text`` on ``host`` (a tool's answer: "created <title>: https://www.notion.so/…")."""
    return next((u.rstrip(".,;") for u in _URL.findall(text) if host in u), None)


class CrossLinks:
    def __init__(
        self,
        client: AsyncWebClient,
        service: RunService,
        telemetry: TelemetryStore,
        threads: RunThreads,
        integrations: Integrations,
        call_tool: CallTool,
        *,
        pager: Pager | None = None,
        admins: frozenset[str] = frozenset(),
        after_page_change: Callable[[], Awaitable[None]] | None = None,
        plot_url: Callable[[str, str], str | None] = lambda run_id, image: None,
    ) -> None:
        self.client = client
        self.service = service
        self.telemetry = telemetry
        self.threads = threads
        self.integrations = integrations
        self.call_tool = call_tool
        self.pager = pager
        self.admins = admins
        self.after_page_change = after_page_change
        # (run id, image) -> a link to that plot of the run (labbot.bot.api.plots) the report's readers can open, if any
        self.plot_url = plot_url

    # -- /lab report RUN -------------------------------------------------------------------------------------------

    async def report(self, run_id: str, user: str) -> str:
        """Write the run's Notion report once approved; returns what to tell ``user``."""
        setup = self.integrations
        if not setup.notion:
            raise BadRequest("Notion is not set up: set NOTION_TOKEN (an internal integration's token) and restart")
        if setup.notion_reports_parent is None:
            raise BadRequest(
                "labbot.toml does not say where reports go: set [notion] reports_parent to a page (or data source) "
                "shared with the integration"
            )
        run = await to_thread.run_sync(self.service.get, run_id)
        thread = await to_thread.run_sync(self.threads.thread_of, run_id)
        if thread is None:
            raise BadRequest(f"run {run_id} has no Slack thread to ask for the approval in")
        channel, thread_ts = thread
        series: dict[str, list[tuple[int, float]]] = {}
        for metric in report_metrics(run):
            points = await to_thread.run_sync(self.telemetry.metrics, run_id, metric)
            if points:
                series[metric] = points
        thread_url = await self.permalink(channel, thread_ts)
        plot_url = self.plot_url(run_id, plot_image(run))
        title, markdown = run_report(run, series, thread_url=thread_url, plot_url=plot_url)
        arguments = {
            "parent_id": setup.notion_reports_parent,
            "parent_type": setup.notion_reports_parent_type,
            "title": title,
            "markdown": markdown,
        }
        # on the run owner's behalf: they (or an admin) approve what is written about their run, whoever asked
        ctx = CallContext(
            agent=f"report-{run_id}-for-{user}",
            role=ROLE,
            owner=str(run["owner"]),
            channel=channel,
            thread_ts=thread_ts,
            run_id=run_id,
        )
        await self.say(channel, thread_ts, f"{mention(user)} asked for a Notion report of this run: approve it below.")
        result = await self.call_tool("notion__create_page", arguments, ctx, None)
        text = result_text(result)
        if result.is_error:
            await self.say(channel, thread_ts, f":warning: the Notion report was not written: {escape(text)}")
            return f"the Notion report of `{run_id}` was not written: {text}"
        url = first_url(text, "notion")
        link = f"<{url}|{escape(title)}>" if url else escape(title)
        await self.say(channel, thread_ts, f":memo: Notion report: {link}")
        await self.threads.record_action(run_id, f"{mention(user)} wrote the Notion report")
        return f"the Notion report of `{run_id}` is written: {url or text}"

    # -- File incident ----------------------------------------------------------------------------------------------

    async def file_incident(self, page_id: str, user: str) -> str:
        """Open a Linear issue for a page (the button's press is the human's decision); returns what to tell."""
        setup = self.integrations
        if not setup.incidents:
            raise BadRequest("Linear is not set up: set LINEAR_API_KEY and [linear] team in labbot.toml")
        if self.pager is None:
            raise LabbotError("paging is not running in this labbot")
        page = await to_thread.run_sync(self.pager.get, page_id)
        linked = (page.get("links") or {}).get("linear")
        if linked:
            return f"page `{page_id}` is already filed in Linear as {linked.get('identifier')}: {linked.get('url')}"
        run = await to_thread.run_sync(self.service.get, page["run_id"]) if page.get("run_id") else None
        owner = str(run["owner"]) if run is not None else None
        acts_on = {"run_id": str(run["id"])} if run is not None else {}
        if not may(user, approvers("file_incident", acts_on, asker=user, run_owner=lambda _run_id: owner), self.admins):
            who = f"the run's owner ({mention(owner)}) or an admin" if owner else "an admin"
            raise BadRequest(f"only {who} can file page `{page_id}` as an incident")
        thread = await to_thread.run_sync(self.threads.thread_of, run["id"]) if run is not None else None
        thread_url = await self.permalink(*thread) if thread else None
        where = f"run {run['id']} ({run.get('name')})" if run is not None else "the Ray cluster"
        lines = [
            f"labbot page `{page['id']}` — *{page['kind']}* on {where}, triggered {page['triggered_at']}.",
            "",
            str(page.get("summary", "")),
        ]
        if thread_url:
            lines += ["", f"Slack thread: {thread_url}"]
        if run is not None:
            lines += [
                "",
                f"Run `{run['id']}`: job {run['job']}, owner {owner}, status {run['status']}, step {run['step']}",
            ]
        tail = (page.get("detail") or {}).get("log_tail")
        if tail:
            lines += ["", "Log tail:", "```", str(tail)[-3000:], "```"]
        lines += ["", f"Filed from Slack by {user} (`/lab ack {page['id']}` acknowledges the page)."]
        arguments = {
            "team": setup.linear_team,
            "title": f"[labbot] {page['kind']} on {where}: {page.get('summary', '')}"[:250],
            "description": "\n".join(lines),
            "labels": list(setup.linear_labels),
            "priority": PRIORITY.get(str(page["kind"]), 3) if page.get("severity") != "warning" else 4,
        }
        ctx = CallContext(
            agent=f"incident-{page_id}",
            role=ROLE,
            owner=user,
            channel=thread[0] if thread else None,
            thread_ts=thread[1] if thread else None,
            run_id=run["id"] if run is not None else None,
        )
        result = await self.call_tool("linear__create_issue", arguments, ctx, user)
        text = result_text(result)
        if result.is_error:
            raise BadRequest(f"the Linear issue was not created: {text}")
        found = _IDENTIFIER.search(text)
        link = {"identifier": found.group(0) if found else None, "url": first_url(text, "linear"), "by": user}
        shown = f"<{link['url']}|{link['identifier'] or 'the issue'}>" if link["url"] else str(link["identifier"])
        note = f":ticket: {mention(user)} filed page `{page_id}` in Linear: {shown}"
        await to_thread.run_sync(lambda: self.pager.link(page_id, "linear", link, note=note))  # type: ignore[union-attr]
        if self.after_page_change is not None:
            await self.after_page_change()
        return f"filed page `{page_id}` in Linear as {link['identifier']}: {link['url']}"

    # -- an incident's cause, from its Linear issue -----------------------------------------------------------------

    async def linear_cause(self, page_id: str, user: str) -> str | None:
        """The cause written in the Linear issue a page was filed as: the last line of its description or comments
        that starts ``Cause:`` (read with ``linear__get_issue``, for ``user``). None when the page was never filed,
        Linear is not set up, or nobody wrote one."""
        if self.pager is None or not self.integrations.incidents:
            return None
        page = await to_thread.run_sync(self.pager.get, page_id)
        linked = (page.get("links") or {}).get("linear") or {}
        identifier = linked.get("identifier")
        if not identifier:
            return None
        ctx = CallContext(agent=f"incident-{page_id}", role=ROLE, owner=user, run_id=page.get("run_id"))
        result = await self.call_tool("linear__get_issue", {"issue": identifier}, ctx, user)
        if result.is_error:
            raise BadRequest(f"the Linear issue {identifier} could not be read: {result_text(result)[:300]}")
        found = [m.group("cause").strip() for m in _CAUSE_LINE.finditer(result_text(result))]
        return next((c for c in reversed(found) if len(c) >= 10), None)

    # -- helpers -----------------------------------------------------------------------------------------------------

    async def say(self, channel: str, thread_ts: str, text: str) -> None:
        try:
            await self.client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text)
        except SlackApiError as e:
            log.warning("could not post in %s/%s: %s", channel, thread_ts, e.response.get("error"))

    async def permalink(self, channel: str, ts: str) -> str | None:
        try:
            resp = await self.client.chat_getPermalink(channel=channel, message_ts=ts)
            return str(resp["permalink"])
        except SlackApiError:
            return None
