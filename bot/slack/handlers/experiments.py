"""``/lab sweep``, ``/lab experiments`` and ``/lab experiment ID [pause|resume|stop|stop-trial N]``.

A sweep is checked (space, metric, seeds, budget) before anything is made, its refusal ephemeral; then the
experiment's card is posted in the channel as the root of its thread, with the plan and projected cost inside, and
the leader's next tick (brought forward to now) launches its first trials. Pausing, resuming and stopping it, or one
of its trials, is its owner's or an admin's: the rule of :mod:`labbot.training.permissions`, which the agents'
approval gate follows for ``stop_experiment`` too.
"""

from __future__ import annotations

from anyio import to_thread

from labbot.bot.commands import Parsed
from labbot.bot.slack.blocks import text_blocks
from labbot.bot.slack.handlers.common import Asker, SlackDeps, tell
from labbot.common.errors import BadRequest, LabbotError
from labbot.common.experiment_text import experiment_text, experiments_table, plan_text
from labbot.training.experiments.plan import ExperimentRequest
from labbot.training.experiments.service import ExperimentService
from labbot.training.permissions import approvers, may, who_may

ACTIONS = ("pause", "resume", "stop", "stop-trial")


def _need(deps: SlackDeps) -> ExperimentService:
    if deps.experiments is None:
        raise LabbotError("experiments are not running in this labbot")
    return deps.experiments


async def sweep(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    service = _need(deps)
    opts = parsed.options
    if not opts.get("metric"):
        raise BadRequest(f"say which metric to optimise: `{deps.command} sweep JOB SPACE… --metric loss`")
    fields = {k: opts[k] for k in ("goal", "trials", "concurrency", "seeds", "search", "prune", "budget", "at",
                                   "name", "purpose", "search_seed") if opts.get(k) is not None}  # fmt: skip
    req = ExperimentRequest(
        job=parsed.args["job"],
        space=[f"{k}={v}" for k, v in parsed.params.items()],
        metric=opts["metric"],
        owner=who.user,
        **fields,
    )
    plan = await to_thread.run_sync(lambda: _plan_json(service, req))
    if opts.get("plan"):
        await tell(deps, who, "the experiment's plan (nothing started)", text_blocks(f"```\n{plan_text(plan)}\n```")[0])
        return
    doc = await to_thread.run_sync(service.create, req)
    if deps.experiment_threads is not None and who.channel:
        await deps.experiment_threads.open_thread(doc, who.channel, plan)
    else:
        await tell(deps, who, f"experiment `{doc['id']}` started: `{deps.command} experiment {doc['id']}`")
    if deps.tick_soon is not None:
        deps.tick_soon()


def _plan_json(service: ExperimentService, req: ExperimentRequest) -> dict[str, object]:
    plan = service.plan(req)
    return {**plan.to_json(), "job": plan.job, "name": plan.name, "space_words": plan.space.words()}


async def experiments(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    docs = await to_thread.run_sync(_need(deps).experiments)
    await tell(deps, who, "experiments", text_blocks(f"```\n{experiments_table(docs)}\n```")[0])


async def experiment(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    service = _need(deps)
    exp_id, action, trial = parsed.args["experiment"], parsed.args.get("action"), parsed.args.get("trial")
    if action is None:
        doc = await to_thread.run_sync(service.get, exp_id)
        await tell(deps, who, f"experiment {exp_id}", text_blocks(f"```\n{experiment_text(doc)}\n```")[0])
        return
    if action not in ACTIONS:
        raise BadRequest(f"{action!r} is not something to do to an experiment: {', '.join(ACTIONS)}")
    if action == "stop-trial" and trial is None:
        raise BadRequest(f"stop-trial needs the trial's number: `{deps.command} experiment {exp_id} stop-trial N`")
    owner = await to_thread.run_sync(service.owner_of, exp_id)
    allowed = approvers("stop_experiment", {"experiment_id": exp_id}, asker=who.user, run_owner=None,
                        experiment_owner=lambda _exp_id: owner)  # fmt: skip
    if not may(who.user, allowed, deps.settings.admins):
        await tell(deps, who, f":no_entry: only {who_may(allowed)} can {action} experiment `{exp_id}`")
        return
    by = f"slack:{who.user}"
    if action == "stop-trial":
        assert trial is not None
        await to_thread.run_sync(lambda: service.stop_trial(exp_id, int(trial), by=by))
    elif action == "pause":
        await to_thread.run_sync(lambda: service.pause(exp_id, by=by))
    elif action == "resume":
        await to_thread.run_sync(lambda: service.resume(exp_id, by=by))
        if deps.tick_soon is not None:
            deps.tick_soon()
    else:
        await to_thread.run_sync(lambda: service.stop(exp_id, by=by))
    what = f"trial #{trial} of experiment" if action == "stop-trial" else "experiment"
    done = {"stop-trial": "stopped", "pause": "paused", "resume": "resumed", "stop": "stopped"}[action]
    await tell(deps, who, f"{what} `{exp_id}` {done}; its thread shows it at the next update")
