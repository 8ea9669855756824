"""Usage lines and ``/lab help`` text, generated from the registry's declarations (pure functions, Slack mrkdwn).

Help lists one line per subcommand the user may run: ``ADMIN`` subcommands only for admins, ``OWNER`` ones for
everyone, marked "(run owner or admin)". ``topic`` gives one subcommand's detail. Declarations' help strings may
say ``{cmd}`` for the slash command (``/lab`` unless renamed). ``footer`` lines (integration status, say) are
appended as given, already mrkdwn.
"""

from __future__ import annotations

from collections.abc import Sequence

from labbot.bot.commands.registry import Command, Permission, Registry
from labbot.bot.commands.tokens import escape_slack
from labbot.bot.commands.values import to_text

_WHO = {
    Permission.ANYONE: "anyone",
    Permission.OWNER: "the run's owner or an admin",
    Permission.ADMIN: "admins only",
}
_MARK = {Permission.ANYONE: "", Permission.OWNER: " (run owner or admin)", Permission.ADMIN: " (admin)"}


def usage(cmd: Command, command_name: str = "/lab") -> str:
    """``/lab launch JOB [--name N] ... [KEY=VALUE ...]``: arguments, then options, then parameters."""
    parts = [command_name, cmd.spoken]
    for arg in cmd.args:
        shown = f"{arg.metavar} ..." if arg.kind == "text" else arg.metavar
        parts.append(shown if arg.required else f"[{shown}]")
    for opt in cmd.options:
        parts.append(f"[{opt.flag} {opt.metavar}]" if opt.takes_value else f"[{opt.flag}]")
    if cmd.accepts_params:
        parts.append("[KEY=VALUE ...]")
    return " ".join(parts)


def subcommands_usage(registry: Registry, command_name: str = "/lab", *, is_admin: bool = False) -> str:
    """``/lab SUBCOMMAND ... — SUBCOMMAND is one of launch, runs, ...`` (admin subcommands only for admins)."""
    names: list[str] = []
    groups: dict[str, list[str]] = {}
    for c in _visible(registry, is_admin):
        group, dash, word = c.name.partition("-")
        if dash and registry.resolve(group) is None:  # a two-word subcommand: `eval run|list|...` shown once
            if group not in groups:
                groups[group] = []
                names.append(group)
            groups[group].append(word)
        else:
            names.append(c.name)
    shown = ", ".join(f"{n} {'|'.join(groups[n])}" if n in groups else n for n in names)
    return f"{command_name} SUBCOMMAND ... — SUBCOMMAND is one of {shown}"


def help_text(
    registry: Registry,
    *,
    is_admin: bool,
    command_name: str = "/lab",
    topic: str | None = None,
    footer: Sequence[str] = (),
) -> str:
    """The overview of every subcommand this user may run, or (``topic``) one subcommand's detail, as mrkdwn."""
    if topic is not None and topic.strip():
        cmd = registry.resolve(topic)
        if cmd is not None and (is_admin or cmd.permission is not Permission.ADMIN):
            lines = _detail(cmd, command_name)
        else:
            guess = registry.closest(topic, include_admin=is_admin)
            hint = f" — did you mean '{guess}'?" if guess else ""
            lines = [
                escape_slack(f"unknown subcommand '{topic.strip()}'{hint}"),
                "",
                *_overview(registry, is_admin, command_name),
            ]
    else:
        lines = _overview(registry, is_admin, command_name)
    return "\n".join([*lines, *footer])


def _visible(registry: Registry, is_admin: bool) -> list[Command]:
    return [c for c in registry if is_admin or c.permission is not Permission.ADMIN]


def _text(s: str, command_name: str) -> str:
    return escape_slack(s.replace("{cmd}", command_name))


def _overview(registry: Registry, is_admin: bool, command_name: str) -> list[str]:
    lines = [f"*`{escape_slack(command_name)}` subcommands*"]
    for cmd in _visible(registry, is_admin):
        also = f" (also {', '.join(f'`{escape_slack(a)}`' for a in cmd.aliases)})" if cmd.aliases else ""
        lines.append(
            f"• `{escape_slack(usage(cmd, command_name))}` — {_text(cmd.summary, command_name)}"
            f"{_MARK[cmd.permission]}{also}"
        )
    lines.append(f"Details and examples: `{escape_slack(command_name)} help SUBCOMMAND`")
    return lines


def _detail(cmd: Command, command_name: str) -> list[str]:
    lines = [f"*`{escape_slack(usage(cmd, command_name))}`*", _text(cmd.summary, command_name)]
    lines.append(f"Who: {_WHO[cmd.permission]}")
    if cmd.aliases:
        lines.append("Also: " + ", ".join(f"`{escape_slack(f'{command_name} {a}')}`" for a in cmd.aliases))
    if cmd.args:
        lines.append("*Arguments*")
        for arg in cmd.args:
            optional = "" if arg.required else " (optional)"
            lines.append(f"• `{arg.metavar}` — {_text(arg.help, command_name)}{optional}")
    if cmd.options:
        lines.append("*Options*")
        for opt in cmd.options:
            shown = f"{opt.flag} {opt.metavar}" if opt.takes_value else opt.flag
            default = ""
            if opt.takes_value and opt.default is not None:
                default = f" (default: {escape_slack(to_text(opt.kind, opt.default))})"
            lines.append(f"• `{shown}` — {_text(opt.help, command_name)}{default}")
    if cmd.accepts_params:
        lines.append("*Parameters*")
        lines.append("• `KEY=VALUE ...` — parameters, any number, each key once, e.g. `steps=100 lr=3e-4`")
    if cmd.examples:
        lines.append("*Examples*")
        lines.extend(f"• `{escape_slack(f'{command_name} {example}')}`" for example in cmd.examples)
    return lines
