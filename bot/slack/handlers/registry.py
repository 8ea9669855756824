"""Which function handles each ``/lab`` subcommand: one explicit mapping, checked at import against the declarations
in ``labbot.bot.commands.LAB`` (every command exactly one handler, no handler without a command), and
:func:`dispatch`, which calls it once Slack has been acked and tells the asker what went wrong."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from labbot.bot.commands import LAB, Parsed
from labbot.bot.commands.registry import Command
from labbot.bot.slack.handlers import agents, artifacts, compare, evals, experiments, feedback, pages, runs
from labbot.bot.slack.handlers.common import Asker, Handler, SlackDeps, fail
from labbot.bot.slack.handlers.help import show_help
from labbot.common.errors import LabbotError

log = logging.getLogger(__name__)

HANDLERS: Mapping[str, Handler] = MappingProxyType(
    {
        "launch": runs.launch,
        "runs": runs.runs,
        "status": runs.status,
        "stop": runs.stop,
        "restart": runs.restart,
        "logs": runs.logs,
        "capacity": runs.capacity,
        "priority": runs.priority,
        "report": runs.report,
        "pages": pages.pages,
        "ack": pages.ack,
        "resolve": pages.resolve,
        "ask": agents.ask,
        "artifacts": artifacts.artifacts,
        "eval-generate": evals.eval_generate,
        "eval-run": evals.eval_run,
        "eval-list": evals.eval_list,
        "eval-show": evals.eval_show,
        "eval-compare": evals.eval_compare,
        "eval-share": evals.eval_share,
        "eval-from-incident": evals.eval_from_incident,
        "eval-from-feedback": evals.eval_from_feedback,
        "feedback": feedback.feedback,
        "ab": feedback.ab,
        "compare": compare.compare,
        "sweep": experiments.sweep,
        "experiments": experiments.experiments,
        "experiment": experiments.experiment,
        "research": agents.research,
        "help": show_help,
    }
)
"""``/lab NAME`` → its handler, by the command's name (aliases resolve to it in the parser)."""


def unmatched(commands: Iterable[Command], handlers: Mapping[str, Handler]) -> tuple[list[str], list[str]]:
    """The commands with no handler, and the handlers of no command (both empty when every command has one)."""
    names = [c.name for c in commands]
    return [n for n in names if n not in handlers], sorted(set(handlers) - set(names))


def check(commands: Iterable[Command], handlers: Mapping[str, Handler]) -> None:
    """ValueError naming what does not match: a subcommand declared without a handler, or a handler left over."""
    missing, extra = unmatched(commands, handlers)
    if missing or extra:
        raise ValueError(
            f"/lab handlers: no handler for {missing or 'none'}; handlers of no command: {extra or 'none'} "
            "(labbot.bot.slack.handlers.registry.HANDLERS)"
        )


check(LAB, HANDLERS)  # at import: a subcommand added without its handler fails labbot's start, and every test


async def dispatch(deps: SlackDeps, parsed: Parsed, who: Asker, handlers: Mapping[str, Handler] = HANDLERS) -> None:
    """Run ``/lab NAME``'s handler; a ``LabbotError`` is told to the asker (with the usage when it is theirs to fix),
    anything else is logged and told as a failure inside labbot."""
    name = parsed.command.name
    try:
        await handlers[name](deps, parsed, who)
    except LabbotError as e:
        await fail(deps, who, e.message, parsed if e.status < 500 else None)
    except Exception:
        log.exception("/lab %s failed", name)
        await fail(deps, who, f"`{deps.command} {name}` failed inside labbot; the error is in its log")
