"""The ``/lab`` slash command's subcommands as pure data: declarations (``registry``), labbot's own (``lab``),
Slack-tolerant tokenising (``tokens``), typed values (``values``), the parser and ``/lab help`` (``help``).
No Slack and no I/O here: the Slack handlers in ``labbot.bot.slack`` call ``parse`` and ``help_text``."""

from labbot.bot.commands.help import help_text, subcommands_usage, usage
from labbot.bot.commands.lab import COMMANDS, LAB, lab_registry
from labbot.bot.commands.parser import Parsed, UsageError, parse, render
from labbot.bot.commands.registry import Arg, Command, Kind, Option, Permission, Registry
from labbot.bot.commands.values import RUN_STATUSES

__all__ = [
    "COMMANDS",
    "LAB",
    "RUN_STATUSES",
    "Arg",
    "Command",
    "Kind",
    "Option",
    "Parsed",
    "Permission",
    "Registry",
    "UsageError",
    "help_text",
    "lab_registry",
    "parse",
    "render",
    "subcommands_usage",
    "usage",
]
