"""What `/lab` subcommands and the buttons do, once acked: each one a call into the control plane's services (runs,
pages, artifacts, agents, cross-links), answered ephemerally to the person who asked (or in the run's thread, for
what everyone should see). ``/lab NAME`` is handled by ``_do_NAME`` (a ``-`` in NAME is ``_`` there).

Permissions: ``stop`` and ``restart`` need the run's owner or an admin (``[roles] admins`` in labbot.toml): the rule
of :mod:`labbot.training.permissions`, which the agents' approval gate follows too. ``priority`` needs an admin; its
refusal names them (or, with none, how to name one).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from anyio import to_thread
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from labbot.agents.babysitter.pager import Pager
from labbot.agents.feedback.ab import AbTest
from labbot.agents.feedback.report import ab_document
from labbot.agents.feedback.store import FeedbackStore
from labbot.agents.fleet.approvals import ApprovalGate
from labbot.agents.fleet.identity import store_of
from labbot.agents.fleet.roles import load_roles
from labbot.agents.fleet.tools import CallContext
from labbot.bot.commands import LAB, Parsed, help_text, usage
from labbot.bot.config import SlackSettings
from labbot.bot.render import tables as render
from labbot.bot.render.compare import comparison_text
from labbot.bot.render.feedback import ab_text, feedback_table
from labbot.bot.render.plots import overlay_plot_png
from labbot.bot.slack.agent_threads import AgentConversations
from labbot.bot.slack.blocks import ephemeral_error, run_card, text_blocks
from labbot.bot.slack.blocks.pages import pages_list
from labbot.bot.slack.blocks.run_card import escape
from labbot.bot.slack.crosslinks import CrossLinks
from labbot.bot.slack.eval_actions import EvalActions
from labbot.bot.slack.threads import RunThreads
from labbot.common.errors import BadRequest, LabbotError
from labbot.common.humanize import format_bytes
from labbot.evals.comparisons import RunComparer, thinned
from labbot.storage.artifacts import ArtifactNotFound, ArtifactStore
from labbot.training.params import parse_assignments
from labbot.training.permissions import approvers, may, who_may
from labbot.training.service import RunService
from labbot.training.specs import LaunchRequest

log = logging.getLogger(__name__)
LOGS_INLINE_SECTIONS = 4  # longer logs are a file: a wall of ephemeral text helps nobody


@dataclass
class Asker:
    """Who asked, and where to answer them."""

    user: str
    channel: str
    trigger_id: str | None = None


class LabActions:
    def __init__(
        self,
        client: AsyncWebClient,
        service: RunService,
        threads: RunThreads,
        settings: SlackSettings,
        pager: Pager | None = None,
    ) -> None:
        self.client = client
        self.service = service
        self.threads = threads
        self.settings = settings
        self.pager = pager
        # the control plane sets this: send the page's updates (who acknowledged) now rather than on the next tick
        self.after_page_change: Callable[[], Awaitable[None]] | None = None
        # and these, with the agents: threads as conversations, and the approval gate the buttons decide
        self.conversations: AgentConversations | None = None
        self.gate: ApprovalGate | None = None
        # and these, with the integrations: /lab report and File incident, and what /lab help says of them
        self.crosslinks: CrossLinks | None = None
        self.help_footer: list[str] = []
        # and the artifact store, for /lab artifacts (the researcher's agents' stores: RESEARCHER/ROLE)
        self.artifacts: ArtifactStore | None = None
        # and evals, for /lab eval ...
        self.evals: EvalActions | None = None
        # and the A/B test of the agents' models ([agents.ab]), for /lab ab
        self.ab: AbTest | None = None

    def is_admin(self, user: str) -> bool:
        return user in self.settings.admins

    async def tell(self, who: Asker, text: str, blocks: list[dict[str, Any]] | None = None) -> None:
        """An ephemeral answer: only the asker sees it (after a click on the home tab, which is in no channel: a DM)."""
        try:
            if not who.channel:
                await self.client.chat_postMessage(channel=who.user, text=text, blocks=blocks)
                return
            await self.client.chat_postEphemeral(channel=who.channel, user=who.user, text=text, blocks=blocks)
        except SlackApiError as e:
            log.warning("could not answer %s in %s: %s", who.user, who.channel, e.response.get("error"))

    async def fail(self, who: Asker, message: str, parsed: Parsed | None = None) -> None:
        text, blocks = ephemeral_error(
            message, usage(parsed.command, self.settings.command) if parsed is not None else None
        )
        await self.tell(who, text, blocks)

    async def run(self, parsed: Parsed, who: Asker) -> None:
        name = parsed.command.name
        try:
            handler = getattr(self, f"_do_{name.replace('-', '_')}")  # /lab eval-run -> _do_eval_run
            await handler(parsed, who)
        except LabbotError as e:
            await self.fail(who, e.message, parsed if e.status < 500 else None)
        except Exception:
            log.exception("/lab %s failed", name)
            await self.fail(who, f"`{self.settings.command} {name}` failed inside labbot; the error is in its log")

    async def run_safely(self, work: Awaitable[None], who: Asker) -> None:
        """A button's work: what goes wrong is told to the clicker, ephemerally."""
        try:
            await work
        except LabbotError as e:
            await self.fail(who, e.message)
        except Exception:
            log.exception("a button's action failed")
            await self.fail(who, "that failed inside labbot; the error is in its log")

    # -- subcommands -----------------------------------------------------------------------------------------

    async def _do_launch(self, parsed: Parsed, who: Asker) -> None:
        opts = parsed.options
        req = LaunchRequest(
            job=parsed.args["job"],
            name=opts.get("name"),
            owner=who.user,
            params=dict(parsed.params),
            gpus=opts.get("gpus"),
            stall_after=opts.get("stall_after"),
            pending_after=opts.get("pending_after"),
            max_restarts=opts.get("max_restarts"),
            alerts=[part.strip() for part in (opts.get("alert") or "").split(";") if part.strip()],
            watch=dict(parse_assignments((opts.get("watch") or "").replace(",", " ").split())),
            cpus=opts.get("cpus"),
            purpose=opts.get("purpose"),
            no_queue=bool(opts.get("no_queue")),
            # the same slash command delivered twice (a retry) carries the same trigger id: one run
            idempotency_key=f"slack-{who.trigger_id}" if who.trigger_id else None,
        )
        result = await to_thread.run_sync(self.service.launch, req)
        run = result.run
        if not result.created:
            await self.tell(who, f"run `{run['id']}` was already launched by this command")
            return
        await self.threads.open_thread(run, who.channel)
        if result.queued:
            await self.tell(who, f":hourglass: run `{run['id']}` is queued: {escape(result.queued)}")

    # -- compute by purpose ------------------------------------------------------------------------------------

    async def _do_capacity(self, parsed: Parsed, who: Asker) -> None:
        doc = await to_thread.run_sync(self.service.capacity)
        text = "```\n" + render.capacity_text(doc) + "\n```"
        for blocks in text_blocks(text)[:1]:
            await self.tell(who, "capacity by purpose", blocks)

    async def _do_priority(self, parsed: Parsed, who: Asker) -> None:
        run_id, priority = parsed.args["run_id"], int(parsed.args["priority"])
        if not self.is_admin(who.user):
            await self.tell(who, self._admins_only(f"set the priority of run `{run_id}`"))
            return
        run = await to_thread.run_sync(lambda: self.service.set_priority(run_id, priority, by=f"slack:{who.user}"))
        await self.threads.record_action(run_id, f"<@{who.user}> set the priority to {priority}")
        await self.tell(who, f"run `{run_id}`: {render.priority_words(run)}")

    def _admins_only(self, what: str) -> str:
        """A refusal of what only admins may do, naming who may (or how to make someone an admin)."""
        admins = sorted(self.settings.admins)
        if not admins:
            return (
                f":no_entry: only an admin can {what}, and this labbot has none: "
                "add Slack user ids to `[roles] admins` in labbot.toml"
            )
        names = " or ".join(f"<@{u}>" for u in admins)
        return f":no_entry: only an admin can {what}: ask {names} (`[roles] admins` in labbot.toml)"

    async def _do_runs(self, parsed: Parsed, who: Asker) -> None:
        status = parsed.options.get("status")
        limit = parsed.options.get("limit") or 20
        runs = await to_thread.run_sync(lambda: self.service.runs(status=status, limit=limit))
        if parsed.options.get("mine"):
            runs = [r for r in runs if r["owner"] == who.user]
        if not runs:
            await self.tell(who, f"no runs yet — launch one with `{self.settings.command} launch tiny-lm`")
            return
        text = "```\n" + render.runs_table(runs) + "\n```"
        for blocks in text_blocks(text)[:1]:
            await self.tell(who, f"{len(runs)} runs", blocks)

    async def _do_status(self, parsed: Parsed, who: Asker) -> None:
        run = await to_thread.run_sync(self.service.get, parsed.args["run_id"])
        text, blocks = run_card(run)
        thread = await to_thread.run_sync(self.threads.thread_of, run["id"])
        if thread:
            link = await self._permalink(*thread)
            if link:
                blocks = [*blocks, {"type": "context", "elements": [{"type": "mrkdwn", "text": f"<{link}|thread>"}]}]
        await self.tell(who, text, blocks)

    async def _do_stop(self, parsed: Parsed, who: Asker) -> None:
        await self.act(parsed.args["run_id"], "stop", who)

    async def _do_restart(self, parsed: Parsed, who: Asker) -> None:
        await self.act(parsed.args["run_id"], "restart", who)

    async def _do_logs(self, parsed: Parsed, who: Asker) -> None:
        run_id = parsed.args["run_id"]
        tail = parsed.options.get("tail") or 50
        text = await to_thread.run_sync(lambda: self.service.logs(run_id, tail=tail))
        body = f"```\n{text or '(no output yet)'}\n```"
        messages = text_blocks(body)
        if len(messages) == 1 and len(messages[0]) <= LOGS_INLINE_SECTIONS:
            await self.tell(who, f"logs of {run_id}", messages[0])
            return
        # too long for a message: a file, in the run's thread when it has one
        channel, thread_ts = await to_thread.run_sync(self.threads.thread_of, run_id) or (who.channel, None)
        await self.client.files_upload_v2(
            channel=channel, thread_ts=thread_ts, content=text, filename=f"{run_id}-logs.txt", title=f"logs of {run_id}"
        )
        await self.tell(who, f"the last {tail} lines of `{run_id}`'s logs are in a file in its thread")

    async def _do_pages(self, parsed: Parsed, who: Asker) -> None:
        pager = self._pager()
        opts = parsed.options
        pages = await to_thread.run_sync(
            lambda: pager.pages(include_resolved=bool(opts.get("all")), run_id=opts.get("run"), limit=20)
        )
        text = pages_list(pages, command=self.settings.command)
        for blocks in text_blocks(text)[:1]:
            await self.tell(who, f"{len(pages)} pages", blocks)

    async def _do_ack(self, parsed: Parsed, who: Asker) -> None:
        await self.page_action(parsed.args["page"], "ack", who)

    async def _do_resolve(self, parsed: Parsed, who: Asker) -> None:
        await self.page_action(parsed.args["page"], "resolve", who, cause=parsed.options.get("cause"))

    def _pager(self) -> Pager:
        if self.pager is None:
            raise LabbotError("paging is not running in this labbot")
        return self.pager

    async def page_action(self, page_id: str, verb: str, who: Asker, *, cause: str | None = None) -> None:
        """Acknowledge or resolve a page (a command or a button): anyone may — whoever is on call. Resolving with a
        ``cause`` records it (also on a page already resolved)."""
        pager = self._pager()
        if verb == "ack":
            page = await to_thread.run_sync(lambda: pager.acknowledge(page_id, by=who.user))
        else:
            page = await to_thread.run_sync(lambda: pager.resolve(page_id, by=who.user, cause=cause))
        if self.after_page_change is not None:
            await self.after_page_change()
        past = "acknowledged" if verb == "ack" else "resolved"
        if page.get("run_id"):
            await self.threads.record_action(page["run_id"], f"<@{who.user}> {past} page {page['id']} ({page['kind']})")
        recorded = " — cause recorded" if cause else ""
        await self.tell(who, f"page `{page['id']}` ({page['kind']}) is {page['state']}{recorded}")

    async def _do_ask(self, parsed: Parsed, who: Asker) -> None:
        question = str(parsed.args["question"])
        talks = self.conversations
        if talks is None:
            from labbot.agents.fleet.model import NO_MODEL_MESSAGE

            await self.tell(who, NO_MODEL_MESSAGE)
            return
        # the question opens a thread in the channel; the agent answers in it, and replies there continue the session
        posted = await self.client.chat_postMessage(channel=who.channel, text=f"<@{who.user}> asked: {question}")
        await talks.answer(user=who.user, text=question, channel=who.channel, thread_ts=str(posted["ts"]))

    async def _do_artifacts(self, parsed: Parsed, who: Asker) -> None:
        store = self.artifacts
        if store is None:
            raise LabbotError("there is no artifact store in this labbot")
        stores = [store_of(CallContext(agent="", role=role, owner=who.user)) for role in sorted(load_roles())]
        artifact_id = parsed.args.get("artifact")
        if artifact_id:
            for agent in stores:
                try:
                    view, stream = await to_thread.run_sync(store.open_visible, agent, artifact_id)
                except ArtifactNotFound:
                    continue
                with stream:
                    data = await to_thread.run_sync(stream.read)
                await self.threads.post_file(who.channel, None, str(view["name"]), data)
                return
            raise BadRequest(
                f"none of your agents has an artifact {artifact_id!r}: `{self.settings.command} artifacts` lists them"
            )
        lines = []
        for agent in stores:
            for a in await to_thread.run_sync(store.list, agent):
                shared = f" · shared by {a['owner_agent']}" if a["owner_agent"] != agent else ""
                lines.append(
                    f"`{a['id']}` {escape(a['name'])} · {format_bytes(a['size'])} · {agent.split('/', 1)[1]}{shared}"
                )
        if not lines:
            await self.tell(who, "your agents have no artifacts yet: they keep reports, plots and payloads there")
            return
        text = "\n".join([*lines, f"_post one here with `{self.settings.command} artifacts ID`_"])
        for blocks in text_blocks(text)[:1]:
            await self.tell(who, f"{len(lines)} artifacts", blocks)

    def _crosslinks(self) -> CrossLinks:
        if self.crosslinks is None:
            raise LabbotError("Notion and Linear are not wired into this labbot (it runs without Slack agents)")
        return self.crosslinks

    async def _do_report(self, parsed: Parsed, who: Asker) -> None:
        run_id = parsed.args["run_id"]
        await self.tell(who, f"writing the Notion report of `{run_id}`: its owner or an admin approves in its thread")
        await self.tell(who, await self._crosslinks().report(run_id, who.user))

    async def file_incident(self, page_id: str, who: Asker) -> None:
        """File incident pressed on a page: a Linear issue, linked both ways."""
        await self.tell(who, await self._crosslinks().file_incident(page_id, who.user))

    async def decide_approval(self, approval_id: str, approve: bool, who: Asker) -> None:
        """Approve or Deny pressed: the gate checks who may decide; the prompt then shows the verdict."""
        if self.gate is None:
            raise LabbotError("no agent is waiting for approvals in this labbot")
        decision = await to_thread.run_sync(lambda: self.gate.decide(approval_id, approve=approve, by=who.user))  # type: ignore[union-attr]
        if not decision.ok:
            await self.tell(who, f":no_entry: {decision.message}")
            return
        await self.gate.settled(approval_id)

    def _evals(self) -> EvalActions:
        if self.evals is None:
            raise LabbotError("evals are not enabled in this labbot")
        return self.evals

    async def _do_eval_generate(self, parsed: Parsed, who: Asker) -> None:
        said = await self._evals().generate(parsed, who.user, who.channel, who.trigger_id)
        if said:
            await self.tell(who, said)

    async def _do_eval_run(self, parsed: Parsed, who: Asker) -> None:
        said = await self._evals().run(parsed, who.user, who.channel, who.trigger_id)
        if said:
            await self.tell(who, said)

    async def _do_eval_list(self, parsed: Parsed, who: Asker) -> None:
        text = await self._evals().listing(who.user)
        for blocks in text_blocks(text)[:1]:
            await self.tell(who, "eval suites and runs", blocks)

    async def _do_eval_show(self, parsed: Parsed, who: Asker) -> None:
        text = await self._evals().show(parsed.args["run_id"], who.user)
        for blocks in text_blocks(text)[:1]:
            await self.tell(who, f"eval run {parsed.args['run_id']}", blocks)

    async def _do_eval_share(self, parsed: Parsed, who: Asker) -> None:
        await self.tell(who, await self._evals().share(parsed.args["suite"], who.user))

    async def _do_eval_from_incident(self, parsed: Parsed, who: Asker) -> None:
        text = await self._evals().from_incident(parsed.args["page"], who.user)
        for blocks in text_blocks(text)[:1]:
            await self.tell(who, "incident eval case", blocks)

    async def _do_eval_from_feedback(self, parsed: Parsed, who: Asker) -> None:
        text = await self._evals().from_feedback(parsed.args["feedback"], who.user)
        for blocks in text_blocks(text)[:1]:
            await self.tell(who, "feedback eval case", blocks)

    async def _do_feedback(self, parsed: Parsed, who: Asker) -> None:
        store, opts = FeedbackStore(self.service.db), parsed.options
        rows = await to_thread.run_sync(
            lambda: store.recent(limit=int(opts.get("limit") or 20), vote="down" if opts.get("down") else None)
        )
        if opts.get("mine"):
            rows = [r for r in rows if r["user"] == who.user]
        text = f"```\n{feedback_table(rows)}\n```"
        for blocks in text_blocks(text)[:1]:
            await self.tell(who, f"{len(rows)} votes", blocks)

    async def _do_ab(self, parsed: Parsed, who: Asker) -> None:
        store = FeedbackStore(self.service.db)
        doc = await to_thread.run_sync(ab_document, store, self.ab)
        text = ab_text(doc) if not doc.get("configured") else f"```\n{ab_text(doc)}\n```"
        for blocks in text_blocks(text)[:1]:
            await self.tell(who, "A/B test", blocks)

    async def _do_eval_compare(self, parsed: Parsed, who: Asker) -> None:
        text = await self._evals().compare(parsed.args["run_a"], parsed.args["run_b"], who.user)
        for blocks in text_blocks(text)[:1]:
            await self.tell(who, "eval comparison", blocks)

    async def _do_compare(self, parsed: Parsed, who: Asker) -> None:
        """The comparison in the channel where the command ran (a message everyone sees: what the verdict rests
        on), and for training runs the overlay plot in that message's thread; refusals are ephemeral."""
        run_a, run_b, opts = parsed.args["run_a"], parsed.args["run_b"], parsed.options
        comparer = RunComparer(self.service, self.threads.telemetry, self.evals.evals if self.evals else None)
        doc, points = await to_thread.run_sync(
            lambda: comparer.compare_with_points(
                run_a,
                run_b,
                metric=opts.get("metric"),
                better=opts.get("better"),
                window=opts.get("window"),
                viewer=who.user,
                admin=self.is_admin(who.user),
            )
        )
        what = f"on {doc['metric']}" if doc["kind"] == "training" else f"on {doc['suite']}"
        summary = f"<@{who.user}> compared `{run_a}` and `{run_b}` {what}: {doc['verdict']}"
        blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": summary}}]
        blocks += text_blocks(f"```\n{comparison_text(doc)}\n```")[0][:3]
        try:
            posted = await self.client.chat_postMessage(channel=who.channel, text=summary, blocks=blocks)
        except SlackApiError as e:  # a channel labbot is not in: the asker still gets the answer
            log.info("could not post a comparison in %s: %s", who.channel, e.response.get("error"))
            note = "invite @labbot to this channel and comparisons (and their plots) are posted here for everyone"
            context = {"type": "context", "elements": [{"type": "mrkdwn", "text": note}]}
            await self.tell(who, summary, [*blocks, context])
            return
        if points is None:
            return
        series = [
            (f"{label} {side['id']} ({side['name']})", thinned(pts, side["steps"][0]), tuple(side["steps"]))
            for label, side, pts in (("A", doc["a"], points[0]), ("B", doc["b"], points[1]))
        ]
        title = f"{doc['metric']}: {run_a} vs {run_b} — {doc['verdict']}"
        png = await to_thread.run_sync(lambda: overlay_plot_png(series, metric=doc["metric"], title=title))
        await self.client.files_upload_v2(
            channel=who.channel,
            thread_ts=posted["ts"],
            content=png,
            filename=f"compare-{run_a}-{run_b}.png",
            title=f"{doc['metric']}: {run_a} vs {run_b}",
        )

    async def _do_help(self, parsed: Parsed, who: Asker) -> None:  # normally answered in the ack itself
        topic = parsed.args.get("command")
        text = help_text(
            LAB,
            is_admin=self.is_admin(who.user),
            command_name=self.settings.command,
            topic=topic,
            footer=() if topic else self.help_footer,
        )
        await self.tell(who, text)

    # -- stop / restart, from a command or a button ----------------------------------------------------------

    async def act(self, run_id: str, verb: str, who: Asker) -> None:
        run = await to_thread.run_sync(self.service.get, run_id)
        owner = str(run["owner"])
        allowed = approvers(verb, {"run_id": run_id}, asker=who.user, run_owner=lambda _run_id: owner)
        if not may(who.user, allowed, self.settings.admins):
            refusal = f":no_entry: only the run's owner or an admin ({who_may(allowed)}) can {verb} run `{run_id}`"
            await self.tell(who, refusal)
            return
        fn = self.service.stop if verb == "stop" else self.service.restart
        by = f"slack:{who.user}"
        run = await to_thread.run_sync(lambda: fn(run_id, by=by))
        past = "stopped the run" if verb == "stop" else f"restarted the run (attempt {run['attempt']})"
        await self.threads.record_action(run_id, f"<@{who.user}> {past}")
        await self.tell(who, f"run `{run_id}`: {past}")

    async def _permalink(self, channel: str, ts: str) -> str | None:
        try:
            resp = await self.client.chat_getPermalink(channel=channel, message_ts=ts)
            return str(resp["permalink"])
        except SlackApiError:
            return None
