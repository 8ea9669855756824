"""``/lab help``: normally answered in the command's ack itself (``labbot.bot.slack.app``); this handler answers it
when it is dispatched like any other subcommand."""

from __future__ import annotations

from labbot.bot.commands import LAB, Parsed, help_text
from labbot.bot.slack.handlers.common import Asker, SlackDeps, tell


def help_for(deps: SlackDeps, user: str, topic: str | None) -> str:
    """What ``/lab help [COMMAND]`` says to ``user``: admins see the admins' subcommands too."""
    return help_text(
        LAB,
        is_admin=deps.is_admin(user),
        command_name=deps.command,
        topic=topic,
        footer=() if topic else deps.help_footer,
    )


async def show_help(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    await tell(deps, who, help_for(deps, who.user, parsed.args.get("command")))
