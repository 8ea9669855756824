"""``/lab eval generate|run|list|show|compare`` and what an eval run's thread gets when it ends.

An eval run (and a suite's generation) is a labbot run: it gets a thread with its card and progress like any run.
When an eval run ends, :meth:`EvalActions.finished` adds to its thread the results table (the pass rate with its
95 % interval, each task with its time and tokens), the isolation score, the ``.eval`` log as a file (it opens in
``inspect view``) and, when every solver run on the suite now passes ≥ 90 % of it, that the suite is saturated,
with the command that generates a harder one (that thread is the run owner's); it runs in the run threads' upkeep, a
singleton, so each of its writes checks the leader lease first (``aguard``). ``show``, ``list`` and ``compare`` show
a run only to whoever may run its suite (``EvalService.visible``); another's is refused like an unknown run. Errors
are ephemeral and name what exists; nothing is launched then.
``from-incident`` on a page with no recorded cause reads it from the page's Linear issue when Linear is wired in.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from anyio import to_thread
from slack_sdk.web.async_client import AsyncWebClient

from labbot.agents.feedback.store import FeedbackStore
from labbot.bot.commands import Parsed
from labbot.bot.render.evals import comparison_text, eval_runs_table, incident_case_text, results_text, suites_table
from labbot.bot.render.feedback import feedback_case_text
from labbot.bot.slack.blocks import text_blocks
from labbot.bot.slack.threads import RunThreads
from labbot.common.errors import BadRequest
from labbot.common.humanize import format_bytes
from labbot.evals.incidents.cases import INCIDENT_SUITE_ID
from labbot.evals.service import EVAL_GENERATE_JOB, EVAL_JOBS, EvalService, eval_dir
from labbot.storage.lease import aguard
from labbot.training.service import RunService
from labbot.training.specs import LaunchRequest

log = logging.getLogger(__name__)
MAX_LOG_UPLOAD = 50 << 20  # a bigger .eval log stays in the artifact store (`/lab artifacts` does not list it)


class EvalActions:
    def __init__(
        self,
        client: AsyncWebClient,
        evals: EvalService,
        service: RunService,
        threads: RunThreads,
        command: str,
        admins: frozenset[str] = frozenset(),
    ) -> None:
        self.client = client
        self.evals = evals
        self.service = service
        self.threads = threads
        self.command = command
        self.admins = admins  # they see and run every suite, and see every eval run
        # with Linear wired in: the cause written in a page's Linear issue, recorded when the page has none
        self.linear_cause: Callable[[str, str], Awaitable[str | None]] | None = None
        self.record_cause: Callable[[str, str, str], Any] | None = None

    # -- subcommands: each returns what to tell the asker (ephemerally), or None when the thread says it --------

    async def generate(self, parsed: Parsed, user: str, channel: str, trigger_id: str | None) -> str | None:
        opts = parsed.options
        params: dict[str, Any] = {"count": opts["count"], "seed": opts["seed"]}
        for key in ("deletion", "deletions", "prefer"):
            if opts.get(key):
                params[key] = opts[key]
        req = LaunchRequest(
            job=EVAL_GENERATE_JOB,
            owner=user,
            params=params,
            idempotency_key=f"slack-{trigger_id}" if trigger_id else None,
        )
        result = await to_thread.run_sync(self.service.launch, req)
        if not result.created:
            return f"suite generation `{result.run['id']}` was already launched by this command"
        await self.threads.open_thread(result.run, channel)
        return None

    async def run(self, parsed: Parsed, user: str, channel: str, trigger_id: str | None) -> str | None:
        suite, solver = str(parsed.args["suite"]), str(parsed.options["solver"])
        run = await to_thread.run_sync(
            lambda: self.evals.launch(
                suite,
                solver=solver,
                owner=user,
                max_samples=parsed.options.get("max_samples"),
                judge=parsed.options.get("judge"),
                idempotency_key=f"slack-{trigger_id}" if trigger_id else None,
                solver_dir=parsed.options.get("solver_dir"),
                allow_hosts=[h for h in str(parsed.options.get("allow_host") or "").split(",") if h.strip()],
                viewer=user,
                admin=user in self.admins,
            )
        )
        if await to_thread.run_sync(self.threads.thread_of, run["id"]):
            return f"eval run `{run['id']}` was already launched by this command"
        await self.threads.open_thread(run, channel)
        return None

    async def share(self, suite: str, user: str) -> str:
        shared = await to_thread.run_sync(lambda: self.evals.share(suite, by=user, admin=user in self.admins))
        return f"suite `{shared['suite']}` is shared with the whole lab: anyone can `{self.command} eval run` it"

    async def listing(self, user: str) -> str:
        suites = await to_thread.run_sync(lambda: self.evals.suites(user, admin=user in self.admins))
        runs = await to_thread.run_sync(lambda: self.evals.eval_runs(limit=20, viewer=user, admin=user in self.admins))
        text = f"```\n{suites_table(suites)}\n\n{eval_runs_table(runs)}\n```"
        return text.replace("labbot eval", f"{self.command} eval")

    async def show(self, run_id: str, user: str) -> str:
        doc = await to_thread.run_sync(lambda: self.evals.results(run_id, viewer=user, admin=user in self.admins))
        return f"```\n{results_text(doc)}\n```"

    async def from_incident(self, page_id: str, user: str) -> str:
        try:
            made = await to_thread.run_sync(lambda: self.evals.from_incident(page_id, by=user))
        except BadRequest as e:
            # no cause recorded: the page's Linear issue may say it ("Cause: ..."), the third place one is written
            if "no recorded cause" not in e.message or self.linear_cause is None or self.record_cause is None:
                raise
            cause = await self.linear_cause(page_id, user)
            if not cause:
                raise
            record = self.record_cause
            await to_thread.run_sync(lambda: record(page_id, cause, user))
            made = await to_thread.run_sync(lambda: self.evals.from_incident(page_id, by=user))
        return f"```\n{incident_case_text(made)}\n```".replace("`eval run", f"`{self.command} eval run")

    async def from_feedback(self, feedback_id: str, user: str) -> str:
        made = await to_thread.run_sync(lambda: self.evals.from_feedback(feedback_id, by=user))
        store = FeedbackStore(self.service.db)
        await to_thread.run_sync(store.mark_case, feedback_id, str(made["case"]["id"]))
        return f"```\n{feedback_case_text(made)}\n```".replace("`labbot eval run", f"`{self.command} eval run")

    async def compare(self, run_a: str, run_b: str, user: str) -> str:
        doc = await to_thread.run_sync(lambda: self.evals.compare(run_a, run_b, viewer=user, admin=user in self.admins))
        return f"```\n{comparison_text(doc)}\n```"

    # -- the thread, when an eval run ends ----------------------------------------------------------------------

    async def finished(self, run: dict[str, Any], channel: str, thread_ts: str) -> int:
        """The results table, the .eval log and (when so) saturation, in the ended eval run's thread; Web API calls
        made. Runs of other jobs get nothing here."""
        if run.get("job") not in EVAL_JOBS:
            return 0
        doc = await to_thread.run_sync(self.evals.results, run["id"])
        calls = 0
        if doc.get("eval_status") is None:
            text = f"eval run `{run['id']}` ended ({run['status']}) without results: `{self.command} logs {run['id']}`"
            await aguard(f"the end of eval run {run['id']} in its thread")
            await self.client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text)
            return 1
        store = FeedbackStore(self.service.db)
        for blocks in text_blocks(f"```\n{results_text(doc)}\n```"):
            await aguard(f"the results of eval run {run['id']} in its thread")
            posted = await self.client.chat_postMessage(
                channel=channel, thread_ts=thread_ts, text="eval results", blocks=blocks
            )
            calls += 1
            # a 👍/👎 on the results is feedback on the eval run
            await to_thread.run_sync(store.remember, channel, str(posted["ts"]), "eval", str(run["id"]))
        calls += await self._upload_log(run["id"], doc, channel, thread_ts)
        calls += await self._saturation(doc, channel, thread_ts)
        return calls

    async def _upload_log(self, run_id: str, doc: dict[str, Any], channel: str, thread_ts: str) -> int:
        log_name = str(doc.get("log") or "")
        path = eval_dir(self.service.checkpoint_root, run_id) / log_name
        if not log_name or not path.is_file() or path.suffix != ".eval":
            return 0
        if path.stat().st_size > MAX_LOG_UPLOAD:
            text = (
                f"the .eval log is {format_bytes(path.stat().st_size)}: too big for Slack; it is in the artifact store"
            )
            await aguard(f"the .eval log of eval run {run_id} in its thread")
            await self.client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text)
            return 1
        data = await to_thread.run_sync(path.read_bytes)
        await aguard(f"the .eval log of eval run {run_id} in its thread")
        await self.client.files_upload_v2(
            channel=channel,
            thread_ts=thread_ts,
            content=data,
            filename=f"{run_id}.eval",
            title=f"{run_id}.eval — open with `inspect view`",
        )
        return 3

    async def _saturation(self, doc: dict[str, Any], channel: str, thread_ts: str) -> int:
        suite = str(doc.get("suite") or "")
        if not suite or doc.get("untrusted") or doc.get("eval_status") != "succeeded":
            return 0
        sat = await to_thread.run_sync(self.evals.saturation, suite)
        if not sat["saturated"]:
            return 0
        rates = ", ".join(f"{solver} {v['pass_rate']:.0%}" for solver, v in sorted(sat["solvers"].items()))
        tasks = len((await to_thread.run_sync(self.evals.suite, suite))["tasks"])
        said = (
            f":chart_with_upwards_trend: {suite} is saturated: every solver run on it passes at least 90% ({rates}). "
        )
        if INCIDENT_SUITE_ID.fullmatch(suite):  # made from pages, not code: harder means harder incidents
            text = said + (
                "It no longer tells models apart. Add the incidents that took the longest to diagnose: "
                f"`{self.command} eval from-incident PAGE` for each resolved page whose cause was not obvious."
            )
        else:
            harder = f"--deletion function --deletions 2 --prefer deep --count {max(tasks, 10)}"
            text = said + (
                "It no longer tells models apart. A harder suite deletes more per task, whole functions rather than "
                f"their bodies, the largest first: `{self.command} eval generate {harder}`"
            )
        await aguard(f"the saturation of suite {suite} in an eval run's thread")
        await self.client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text)
        return 1
