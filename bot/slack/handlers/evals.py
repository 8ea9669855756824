"""``/lab eval generate|run|list|show|compare|share|from-incident|from-feedback`` and what an eval run's thread gets
when it ends (:func:`finished`).

An eval run (and a suite's generation) is a labbot run: it gets a thread with its card and progress like any run.
When an eval run ends, :func:`finished` adds to its thread the results table (the pass rate with its 95 % interval,
each task with its time and tokens), the isolation score, the ``.eval`` log as a file (it opens in ``inspect view``)
and, when every solver run on the suite now passes ≥ 90 % of it, that the suite is saturated, with the command that
generates a harder one (that thread is the run owner's); it runs in the run threads' upkeep, a singleton, so each of
its writes checks the leader lease first (``aguard``). ``show``, ``list`` and ``compare`` show a run only to whoever
may run its suite (``EvalService.visible``); another's is refused like an unknown run; admins see and run every
suite. Errors are ephemeral and name what exists; nothing is launched then. ``from-incident`` on a page with no
recorded cause reads it from the page's Linear issue when Linear is wired in.
"""

from __future__ import annotations

import logging
from typing import Any

from anyio import to_thread

from labbot.agents.feedback.store import FeedbackStore
from labbot.bot.commands import Parsed
from labbot.bot.render.evals import comparison_text, eval_runs_table, incident_case_text, results_text, suites_table
from labbot.bot.render.feedback import feedback_case_text
from labbot.bot.slack.blocks import text_blocks
from labbot.bot.slack.handlers.common import Asker, SlackDeps, tell
from labbot.common.errors import BadRequest
from labbot.common.humanize import format_bytes
from labbot.evals.incidents.cases import INCIDENT_SUITE_ID
from labbot.evals.service import EVAL_GENERATE_JOB, EVAL_JOBS, EvalService, eval_dir
from labbot.storage.lease import aguard
from labbot.training.specs import LaunchRequest

log = logging.getLogger(__name__)
MAX_LOG_UPLOAD = 50 << 20  # a bigger .eval log stays in the artifact store (`/lab artifacts` does not list it)


async def _tell_first(deps: SlackDeps, who: Asker, text: str, title: str) -> None:
    """A table's first message, ephemerally (the rest would be a wall of text)."""
    for blocks in text_blocks(text)[:1]:
        await tell(deps, who, title, blocks)


async def eval_generate(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    deps.need_evals()
    opts = parsed.options
    params: dict[str, Any] = {"count": opts["count"], "seed": opts["seed"]}
    for key in ("deletion", "deletions", "prefer"):
        if opts.get(key):
            params[key] = opts[key]
    req = LaunchRequest(
        job=EVAL_GENERATE_JOB,
        owner=who.user,
        params=params,
        idempotency_key=f"slack-{who.trigger_id}" if who.trigger_id else None,
    )
    result = await to_thread.run_sync(deps.service.launch, req)
    if not result.created:
        await tell(deps, who, f"suite generation `{result.run['id']}` was already launched by this command")
        return
    await deps.threads.open_thread(result.run, who.channel)


async def eval_run(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    evals = deps.need_evals()
    suite, solver = str(parsed.args["suite"]), str(parsed.options["solver"])
    run = await to_thread.run_sync(
        lambda: evals.launch(
            suite,
            solver=solver,
            owner=who.user,
            max_samples=parsed.options.get("max_samples"),
            judge=parsed.options.get("judge"),
            idempotency_key=f"slack-{who.trigger_id}" if who.trigger_id else None,
            solver_dir=parsed.options.get("solver_dir"),
            allow_hosts=[h for h in str(parsed.options.get("allow_host") or "").split(",") if h.strip()],
            viewer=who.user,
            admin=deps.is_admin(who.user),
        )
    )
    if await to_thread.run_sync(deps.threads.thread_of, run["id"]):
        await tell(deps, who, f"eval run `{run['id']}` was already launched by this command")
        return
    await deps.threads.open_thread(run, who.channel)


async def eval_share(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    evals, suite = deps.need_evals(), parsed.args["suite"]
    shared = await to_thread.run_sync(lambda: evals.share(suite, by=who.user, admin=deps.is_admin(who.user)))
    await tell(
        deps, who, f"suite `{shared['suite']}` is shared with the whole lab: anyone can `{deps.command} eval run` it"
    )


async def eval_list(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    evals, user, admin = deps.need_evals(), who.user, deps.is_admin(who.user)
    suites = await to_thread.run_sync(lambda: evals.suites(user, admin=admin))
    runs = await to_thread.run_sync(lambda: evals.eval_runs(limit=20, viewer=user, admin=admin))
    text = f"```\n{suites_table(suites)}\n\n{eval_runs_table(runs)}\n```"
    await _tell_first(deps, who, text.replace("labbot eval", f"{deps.command} eval"), "eval suites and runs")


async def eval_show(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    evals, run_id = deps.need_evals(), parsed.args["run_id"]
    doc = await to_thread.run_sync(lambda: evals.results(run_id, viewer=who.user, admin=deps.is_admin(who.user)))
    await _tell_first(deps, who, f"```\n{results_text(doc)}\n```", f"eval run {run_id}")


async def eval_compare(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    evals, run_a, run_b = deps.need_evals(), parsed.args["run_a"], parsed.args["run_b"]
    doc = await to_thread.run_sync(lambda: evals.compare(run_a, run_b, viewer=who.user, admin=deps.is_admin(who.user)))
    await _tell_first(deps, who, f"```\n{comparison_text(doc)}\n```", "eval comparison")


async def eval_from_incident(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    evals, page_id, user = deps.need_evals(), parsed.args["page"], who.user
    try:
        made = await to_thread.run_sync(lambda: evals.from_incident(page_id, by=user))
    except BadRequest as e:
        # no cause recorded: the page's Linear issue may say it ("Cause: ..."), the third place one is written
        if "no recorded cause" not in e.message or deps.linear_cause is None or deps.record_cause is None:
            raise
        cause = await deps.linear_cause(page_id, user)
        if not cause:
            raise
        record = deps.record_cause
        await to_thread.run_sync(lambda: record(page_id, cause, user))
        made = await to_thread.run_sync(lambda: evals.from_incident(page_id, by=user))
    text = f"```\n{incident_case_text(made)}\n```".replace("`eval run", f"`{deps.command} eval run")
    await _tell_first(deps, who, text, "incident eval case")


async def eval_from_feedback(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    evals, feedback_id = deps.need_evals(), parsed.args["feedback"]
    made = await to_thread.run_sync(lambda: evals.from_feedback(feedback_id, by=who.user))
    store = FeedbackStore(deps.service.db)
    await to_thread.run_sync(store.mark_case, feedback_id, str(made["case"]["id"]))
    text = f"```\n{feedback_case_text(made)}\n```".replace("`labbot eval run", f"`{deps.command} eval run")
    await _tell_first(deps, who, text, "feedback eval case")


# -- the thread, when an eval run ends ----------------------------------------------------------------------------


async def finished(deps: SlackDeps, run: dict[str, Any], channel: str, thread_ts: str) -> int:
    """The results table, the .eval log and (when so) saturation, in the ended eval run's thread; Web API calls
    made. Runs of other jobs get nothing here (nor anything at all in a labbot without evals)."""
    evals = deps.evals
    if evals is None or run.get("job") not in EVAL_JOBS:
        return 0
    doc = await to_thread.run_sync(evals.results, run["id"])
    calls = 0
    if doc.get("eval_status") is None:
        text = f"eval run `{run['id']}` ended ({run['status']}) without results: `{deps.command} logs {run['id']}`"
        await aguard(f"the end of eval run {run['id']} in its thread")
        await deps.client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text)
        return 1
    store = FeedbackStore(deps.service.db)
    for blocks in text_blocks(f"```\n{results_text(doc)}\n```"):
        await aguard(f"the results of eval run {run['id']} in its thread")
        posted = await deps.client.chat_postMessage(
            channel=channel, thread_ts=thread_ts, text="eval results", blocks=blocks
        )
        calls += 1
        # a 👍/👎 on the results is feedback on the eval run
        await to_thread.run_sync(store.remember, channel, str(posted["ts"]), "eval", str(run["id"]))
    calls += await _upload_log(deps, run["id"], doc, channel, thread_ts)
    calls += await _saturation(deps, evals, doc, channel, thread_ts)
    return calls


async def _upload_log(deps: SlackDeps, run_id: str, doc: dict[str, Any], channel: str, thread_ts: str) -> int:
    log_name = str(doc.get("log") or "")
    path = eval_dir(deps.service.checkpoint_root, run_id) / log_name
    if not log_name or not path.is_file() or path.suffix != ".eval":
        return 0
    if path.stat().st_size > MAX_LOG_UPLOAD:
        text = f"the .eval log is {format_bytes(path.stat().st_size)}: too big for Slack; it is in the artifact store"
        await aguard(f"the .eval log of eval run {run_id} in its thread")
        await deps.client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text)
        return 1
    data = await to_thread.run_sync(path.read_bytes)
    await aguard(f"the .eval log of eval run {run_id} in its thread")
    await deps.client.files_upload_v2(
        channel=channel,
        thread_ts=thread_ts,
        content=data,
        filename=f"{run_id}.eval",
        title=f"{run_id}.eval — open with `inspect view`",
    )
    return 3


async def _saturation(deps: SlackDeps, evals: EvalService, doc: dict[str, Any], channel: str, thread_ts: str) -> int:
    suite = str(doc.get("suite") or "")
    if not suite or doc.get("untrusted") or doc.get("eval_status") != "succeeded":
        return 0
    sat = await to_thread.run_sync(evals.saturation, suite)
    if not sat["saturated"]:
        return 0
    rates = ", ".join(f"{solver} {v['pass_rate']:.0%}" for solver, v in sorted(sat["solvers"].items()))
    tasks = len((await to_thread.run_sync(evals.suite, suite))["tasks"])
    said = f":chart_with_upwards_trend: {suite} is saturated: every solver run on it passes at least 90% ({rates}). "
    command = deps.command
    if INCIDENT_SUITE_ID.fullmatch(suite):  # made from pages, not code: harder means harder incidents
        text = said + (
            "It no longer tells models apart. Add the incidents that took the longest to diagnose: "
            f"`{command} eval from-incident PAGE` for each resolved page whose cause was not obvious."
        )
    else:
        harder = f"--deletion function --deletions 2 --prefer deep --count {max(tasks, 10)}"
        text = said + (
            "It no longer tells models apart. A harder suite deletes more per task, whole functions rather than "
            f"their bodies, the largest first: `{command} eval generate {harder}`"
        )
    await aguard(f"the saturation of suite {suite} in an eval run's thread")
    await deps.client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text)
    return 1
