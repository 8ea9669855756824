"""Research threads: ``/lab research QUESTION`` opens one (the question, then the researcher agent answering in it:
its plan, the approval prompt, its progress), and once the question is reported its answer is published — posted in
the thread with the claim check's result and the arms' ranking and curves, written to Notion as a page and to Linear
as one issue per follow-up when the approved plan said so and the integration is set up.

Publishing happens only after the research service accepted the report (every number recomputed from the store), and
the Notion and Linear writes go through the same audited tools as everything else (``call_tool``), on the question's
owner's behalf: the plan they approved named them, so they are not asked again. Each part's link is recorded as soon
as it is written (``ResearchService.record_link``), so a publisher stopped half-way goes on from the next part and
nothing is written twice. ``tick`` is the leader's, beside the run and experiment threads' upkeep.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from anyio import to_thread
from slack_sdk.web.async_client import AsyncWebClient

from labbot.agents.fleet.tools import CallContext, ToolResult
from labbot.bot.integrations import Integrations
from labbot.bot.render.plots import experiment_curves_png
from labbot.bot.slack.blocks.run_card import escape, mention
from labbot.bot.slack.crosslinks import first_url, result_text
from labbot.common.experiment_text import ranking_text
from labbot.common.research_text import plan_text
from labbot.storage.lease import Fenced, aguard
from labbot.training.claims import CLAIM
from labbot.training.experiments.service import ExperimentService
from labbot.training.research.service import ResearchService

log = logging.getLogger(__name__)

CallTool = Callable[[str, Mapping[str, Any], CallContext, str | None], Awaitable[ToolResult]]
ROLE = "labbot"  # labbot's own tool calls in the audit trail


def report_markdown(doc: Mapping[str, Any], rankings: Mapping[str, str]) -> tuple[str, str]:
    """The Notion page of a reported question: the verdict, completeness, the write-up (its claims shown as their
    checked values), each arm's ranking, the plan, the claims' check."""
    report = doc["report"]
    title = f"Research {doc['id']}: {doc['question']}"[:200]
    lines = [
        f"**Verdict:** {plain(report['verdict'])}",
        "",
        f"**Status:** {report['status']}" + (f" — {'; '.join(report['short'])}" if report.get("short") else ""),
        "",
        plain(report.get("text") or ""),
        "",
        "## Arms",
    ]
    for name, text in rankings.items():
        lines += [f"### {name}", "```", text, "```"]
    lines += ["## Plan", "```", plan_text(doc, pending=False), "```"]
    c = report["counts"]
    lines += ["## Numbers checked", f"{c['ok']} claim(s) recomputed from labbot's store, all matching."]
    return title, "\n".join(lines)


def plain(text: str) -> str:
    """Claims shown as their values (the ledger checked them): ``[[2.41 | experiment:x best stat:mean]]`` → 2.41."""
    return CLAIM.sub(lambda m: m.group("value").strip(), text)


class ResearchThreads:
    def __init__(
        self,
        client: AsyncWebClient,
        research: ResearchService,
        experiments: ExperimentService,
        integrations: Integrations,
        call_tool: CallTool | None,
    ) -> None:
        self.client = client
        self.research = research
        self.experiments = experiments
        self.integrations = integrations
        self.call_tool = call_tool

    async def open_thread(self, question: str, user: str, channel: str) -> tuple[dict[str, Any], str]:
        """Open the question (owned by ``user``) in a new thread of ``channel``; its id and the thread."""
        doc = await to_thread.run_sync(lambda: self.research.open(question, user))
        posted = await self.client.chat_postMessage(
            channel=channel,
            text=f":microscope: {mention(user)} asked research question `{doc['id']}`: {escape(question)}\n"
            "The researcher reads what the lab knows and plans; the plan comes here for your approval, once.",
        )
        ts = str(posted["ts"])
        channel = str(posted.get("channel") or channel)
        await to_thread.run_sync(self.research.set_thread, doc["id"], channel, ts)
        return doc, ts

    async def tick(self) -> int:
        """Every reported question's answer published where it goes; how many were finished."""
        done = 0
        for rid in await to_thread.run_sync(self.research.unpublished):
            try:
                await self.publish(rid)
                done += 1
            except Fenced:
                raise
            except Exception:
                log.exception("could not publish the answer of research %s", rid)
        return done

    async def publish(self, rid: str) -> None:
        doc = await to_thread.run_sync(self.research.get, rid)
        report, links = doc["report"], dict((doc["report"] or {}).get("links") or {})
        publish = set(doc["approved"]["scope"]["publish"]) if doc.get("approved") else set()
        arms = {}  # each arm's experiment, read once for its ranking and its plot
        for arm, exp_id in doc["arms"].items():
            arms[arm] = await to_thread.run_sync(self.experiments.get, exp_id)
        rankings = {arm: ranking_text(exp) for arm, exp in arms.items()}
        thread = (doc["channel"], doc["thread_ts"]) if doc.get("channel") and doc.get("thread_ts") else None
        if "notion" in publish and "notion" not in links and self.integrations.reports and self.call_tool:
            title, markdown = report_markdown(doc, rankings)
            await aguard(f"writing the Notion page of research {rid}")
            args = {
                "parent_id": self.integrations.notion_reports_parent,
                "parent_type": self.integrations.notion_reports_parent_type,
                "title": title,
                "markdown": markdown,
            }
            result = await self.call_tool("notion__create_page", args, self._ctx(doc, "notion"), doc["owner"])
            text = result_text(result)
            link = {"url": first_url(text, "notion"), "title": title} if not result.is_error else {"error": text}
            await to_thread.run_sync(self.research.record_link, rid, "notion", link)
            links["notion"] = link
        if "linear" in publish and self.integrations.incidents and self.call_tool:
            for i, follow in enumerate(report.get("follow_ups") or []):
                key = f"linear:{i}"
                if key in links:
                    continue
                await aguard(f"filing the follow-ups of research {rid}")
                description = (
                    f"{plain(follow.get('description', ''))}\n\nFrom labbot research `{rid}`: {doc['question']}"
                )
                issue: dict[str, Any] = {"team": self.integrations.linear_team, "title": plain(follow["title"])[:250],
                        "description": description, "labels": list(self.integrations.linear_labels)}  # fmt: skip
                result = await self.call_tool("linear__create_issue", issue, self._ctx(doc, key), doc["owner"])
                text = result_text(result)
                link = {"url": first_url(text, "linear"), "title": follow["title"]}
                if result.is_error:
                    link = {"error": text}
                await to_thread.run_sync(self.research.record_link, rid, key, link)
                links[key] = link
        if thread is not None and "thread" not in links:
            await self._post(doc, links, arms, thread)
            await to_thread.run_sync(self.research.record_link, rid, "thread", {"ts": thread[1]})
        await to_thread.run_sync(self.research.mark_published, rid)

    def _ctx(self, doc: Mapping[str, Any], part: str) -> CallContext:
        return CallContext(agent=f"research-{doc['id']}-{part}", role=ROLE, owner=str(doc["owner"]),
                           channel=doc.get("channel"), thread_ts=doc.get("thread_ts"))  # fmt: skip

    async def _post(
        self,
        doc: Mapping[str, Any],
        links: Mapping[str, Any],
        arms: Mapping[str, Mapping[str, Any]],
        thread: tuple[str, str],
    ) -> None:
        report = doc["report"]
        c = report["counts"]
        mark = ":white_check_mark:" if report["status"] == "answered" else ":warning:"
        lines = [
            f"{mark} *Research `{doc['id']}` {report['status']}*: {escape(plain(report['verdict']))}",
            f":ledger: {c['ok']} number(s) checked against labbot's store: all match.",
        ]
        if report.get("short"):
            lines.append("Incomplete: " + escape("; ".join(report["short"])))
        if report.get("text"):
            lines += ["", escape(plain(report["text"]))[:3000]]
        for arm, exp in arms.items():
            lines += [f"*arm {arm}*", f"```\n{ranking_text(exp)}\n```"]
        for key, link in links.items():
            if key == "thread":
                continue
            where = "Notion page" if key == "notion" else f"Linear issue ({link.get('title', '')})"
            lines.append(
                f":link: {where}: {link['url']}"
                if link.get("url")
                else f":warning: {where} not written: {link.get('error')}"
            )
        channel, ts = thread
        await aguard(f"posting the answer of research {doc['id']}")
        await self.client.chat_postMessage(channel=channel, thread_ts=ts, text="\n".join(lines)[:39_000])
        for arm, exp in arms.items():
            png = await to_thread.run_sync(self._curves, exp)
            if png is not None:
                await self.client.files_upload_v2(
                    channel=channel, thread_ts=ts, filename=f"{doc['id']}-{arm}-curves.png", content=png,
                    title=f"arm {arm}: every trial's curve",
                )  # fmt: skip

    def _curves(self, doc: Mapping[str, Any]) -> bytes | None:
        curves = self.experiments.curves(doc["id"])
        if not any(curves.values()):
            return None
        metric = doc["objective"]["metric"]
        ranks = {r["trial"]: i for i, r in enumerate(doc["results"]["ranking"], 1)}
        statuses = {t["number"]: t["status"] for t in doc["trials"]}
        return experiment_curves_png(curves, statuses, ranks, metric=metric, title=f"{doc['name']}: {metric} by trial")
