"""``/lab launch``, ``runs``, ``status``, ``stop``, ``restart``, ``logs``, ``capacity``, ``priority`` and ``report``,
and the run card's Stop / Restart buttons (:func:`stop_or_restart`).

Permissions: ``stop`` and ``restart`` need the run's owner or an admin (``[roles] admins`` in labbot.toml): the rule
of :mod:`labbot.training.permissions`, which the agents' approval gate follows too. ``priority`` needs an admin; its
refusal names them (or, with none, how to name one).
"""

from __future__ import annotations

from anyio import to_thread

from labbot.bot.commands import Parsed
from labbot.bot.render import tables as render
from labbot.bot.slack.blocks import run_card, text_blocks
from labbot.bot.slack.blocks.run_card import escape
from labbot.bot.slack.handlers.common import Asker, SlackDeps, admins_only, permalink, tell
from labbot.training.params import parse_assignments
from labbot.training.permissions import approvers, may, who_may
from labbot.training.specs import LaunchRequest

LOGS_INLINE_SECTIONS = 4  # longer logs are a file: a wall of ephemeral text helps nobody


async def launch(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
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
        remedies=[part.strip() for part in (opts.get("remedy") or "").split("|") if part.strip()],
        cpus=opts.get("cpus"),
        resources=dict(parse_assignments((opts.get("resources") or "").replace(",", " ").split())),
        purpose=opts.get("purpose"),
        no_queue=bool(opts.get("no_queue")),
        # the same slash command delivered twice (a retry) carries the same trigger id: one run
        idempotency_key=f"slack-{who.trigger_id}" if who.trigger_id else None,
    )
    result = await to_thread.run_sync(deps.service.launch, req)
    run = result.run
    if not result.created:
        await tell(deps, who, f"run `{run['id']}` was already launched by this command")
        return
    await deps.threads.open_thread(run, who.channel)
    if result.queued:
        await tell(deps, who, f":hourglass: run `{run['id']}` is queued: {escape(result.queued)}")


async def capacity(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    doc = await to_thread.run_sync(deps.service.capacity)
    text = "```\n" + render.capacity_text(doc) + "\n```"
    for blocks in text_blocks(text)[:1]:
        await tell(deps, who, "capacity by purpose", blocks)


async def priority(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    run_id, value = parsed.args["run_id"], int(parsed.args["priority"])
    if not deps.is_admin(who.user):
        await tell(deps, who, admins_only(deps, f"set the priority of run `{run_id}`"))
        return
    run = await to_thread.run_sync(lambda: deps.service.set_priority(run_id, value, by=f"slack:{who.user}"))
    await deps.threads.record_action(run_id, f"<@{who.user}> set the priority to {value}")
    await tell(deps, who, f"run `{run_id}`: {render.priority_words(run)}")


async def runs(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    status = parsed.options.get("status")
    limit = parsed.options.get("limit") or 20
    found = await to_thread.run_sync(lambda: deps.service.runs(status=status, limit=limit))
    if parsed.options.get("mine"):
        found = [r for r in found if r["owner"] == who.user]
    if not found:
        await tell(deps, who, f"no runs yet — launch one with `{deps.command} launch tiny-lm`")
        return
    text = "```\n" + render.runs_table(found) + "\n```"
    for blocks in text_blocks(text)[:1]:
        await tell(deps, who, f"{len(found)} runs", blocks)


async def status(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    run = await to_thread.run_sync(deps.service.get, parsed.args["run_id"])
    text, blocks = run_card(run)
    thread = await to_thread.run_sync(deps.threads.thread_of, run["id"])
    if thread:
        link = await permalink(deps, *thread)
        if link:
            blocks = [*blocks, {"type": "context", "elements": [{"type": "mrkdwn", "text": f"<{link}|thread>"}]}]
    await tell(deps, who, text, blocks)


async def stop(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    await stop_or_restart(deps, parsed.args["run_id"], "stop", who)


async def restart(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    await stop_or_restart(deps, parsed.args["run_id"], "restart", who)


async def logs(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    run_id = parsed.args["run_id"]
    tail = parsed.options.get("tail") or 50
    text = await to_thread.run_sync(lambda: deps.service.logs(run_id, tail=tail))
    body = f"```\n{text or '(no output yet)'}\n```"
    messages = text_blocks(body)
    if len(messages) == 1 and len(messages[0]) <= LOGS_INLINE_SECTIONS:
        await tell(deps, who, f"logs of {run_id}", messages[0])
        return
    # too long for a message: a file, in the run's thread when it has one
    channel, thread_ts = await to_thread.run_sync(deps.threads.thread_of, run_id) or (who.channel, None)
    await deps.client.files_upload_v2(
        channel=channel, thread_ts=thread_ts, content=text, filename=f"{run_id}-logs.txt", title=f"logs of {run_id}"
    )
    await tell(deps, who, f"the last {tail} lines of `{run_id}`'s logs are in a file in its thread")


async def report(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    run_id = parsed.args["run_id"]
    await tell(deps, who, f"writing the Notion report of `{run_id}`: its owner or an admin approves in its thread")
    await tell(deps, who, await deps.need_crosslinks().report(run_id, who.user))


async def stop_or_restart(deps: SlackDeps, run_id: str, verb: str, who: Asker) -> None:
    """Stop or restart a run, from a command or a button: its owner or an admin."""
    run = await to_thread.run_sync(deps.service.get, run_id)
    owner = str(run["owner"])
    allowed = approvers(verb, {"run_id": run_id}, asker=who.user, run_owner=lambda _run_id: owner)
    if not may(who.user, allowed, deps.settings.admins):
        refusal = f":no_entry: only the run's owner or an admin ({who_may(allowed)}) can {verb} run `{run_id}`"
        await tell(deps, who, refusal)
        return
    fn = deps.service.stop if verb == "stop" else deps.service.restart
    by = f"slack:{who.user}"
    run = await to_thread.run_sync(lambda: fn(run_id, by=by))
    past = "stopped the run" if verb == "stop" else f"restarted the run (attempt {run['attempt']})"
    await deps.threads.record_action(run_id, f"<@{who.user}> {past}")
    await tell(deps, who, f"run `{run_id}`: {past}")
