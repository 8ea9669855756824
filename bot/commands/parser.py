"""Parsing ``/lab`` text against a registry into a typed ``Parsed`` or a ``UsageError`` (pure; never raises on user
input), and ``render``, its inverse, for echoing "you ran: ..." and for round-trip tests.

Grammar, after Slack-tolerant tokenising (``labbot.bot.commands.tokens``): ``SUBCOMMAND`` (a name or alias, any case),
then in any order its arguments, ``--flag value`` / ``--flag=value`` options (``-`` or ``_``, any case) and, for
commands that accept them, ``KEY=VALUE`` parameters; ``--`` ends options. Empty text, ``--help`` or ``-h`` mean help.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from labbot.bot.commands.help import subcommands_usage, usage
from labbot.bot.commands.registry import Arg, Command, Registry
from labbot.bot.commands.tokens import TokenError, escape_slack, quote, tokenize, unwrap_slack
from labbot.bot.commands.values import BadValue, convert, to_text
from labbot.training.params import PARAM_KEY

HELP_FLAGS = ("--help", "-h")


@dataclass(frozen=True)
class Parsed:
    """A valid invocation. ``args`` has every declared argument (None when an optional one is absent), ``options``
    every option by key (its default when not given), ``params`` the ``KEY=VALUE`` items in the order given."""

    command: Command
    args: dict[str, Any]
    options: dict[str, Any]
    params: dict[str, str]


@dataclass(frozen=True)
class UsageError:
    """What was wrong (``message``), the usage line that would be right, and the subcommand if one was recognised."""

    message: str
    usage: str
    command: Command | None


def parse(text: str, registry: Registry, *, command_name: str = "/lab") -> Parsed | UsageError:
    """``text`` (what follows the slash command, as Slack sends it) parsed against ``registry``."""
    words = unwrap_slack(text).split(maxsplit=1)
    guess = registry.resolve(words[0]) if words else None
    if guess is not None and _text_arg(guess) is not None:
        return _parse_text(guess, words[1].strip() if len(words) > 1 else "", registry, command_name)
    try:
        tokens = tokenize(text)
    except TokenError as e:
        return UsageError(e.message, _usage(guess, registry, command_name), guess)
    if not tokens or tokens[0].lower() in HELP_FLAGS:
        return _help(registry, None, command_name)
    cmd = registry.resolve(tokens[0])
    group = registry.group(tokens[0]) if cmd is None else []
    if group:  # a two-word subcommand: `eval run` is `eval-run`
        joined = registry.resolve(f"{tokens[0]}-{tokens[1]}") if len(tokens) > 1 else None
        if joined is None:
            names = ", ".join(c.name.split("-", 1)[1] for c in group)
            got = f"unknown '{tokens[0]} {tokens[1]}'" if len(tokens) > 1 else f"'{tokens[0]}' needs a subcommand"
            usages = "\n".join(usage(c, command_name) for c in group)
            return UsageError(f"{got}: `{command_name} {tokens[0].lower()}` takes one of {names}", usages, None)
        cmd, tokens = joined, [joined.name, *tokens[2:]]
    if cmd is None:
        found = registry.closest(tokens[0])
        hint = f" — did you mean '{found}'?" if found else ""
        return UsageError(f"unknown subcommand '{tokens[0]}'{hint}", subcommands_usage(registry, command_name), None)
    if _text_arg(cmd) is not None:
        return _parse_text(cmd, " ".join(tokens[1:]).strip(), registry, command_name)
    return _parse_words(cmd, tokens[1:], registry, command_name)


def render(parsed: Parsed, command_name: str = "/lab") -> str:
    """``parsed`` written back as Slack text that ``parse`` reads as the same ``Parsed``, after ``command_name``
    (pass ``""`` for the text alone). Options at their defaults are left out."""
    cmd = parsed.command
    prefix = f"{command_name} {cmd.name}" if command_name else cmd.name
    text_arg = _text_arg(cmd)
    if text_arg is not None:
        value = parsed.args.get(text_arg.name)
        return f"{prefix} {escape_slack(value)}" if value else prefix
    options: list[str] = []
    for opt in cmd.options:
        value = parsed.options.get(opt.key, opt.default)
        if value == opt.default:
            continue
        if not opt.takes_value:
            options.append(opt.flag)
            continue
        shown = to_text(opt.kind, value)
        options += [quote(f"{opt.flag}={shown}")] if shown.startswith("--") else [opt.flag, quote(shown)]
    positional = [to_text(a.kind, parsed.args[a.name]) for a in cmd.args if parsed.args.get(a.name) is not None]
    params = [quote(f"{key}={value}") for key, value in parsed.params.items()]
    if any(p.startswith("-") for p in positional):
        words = [*options, "--", *map(quote, positional), *params]
    else:
        words = [*map(quote, positional), *options, *params]
    return " ".join([prefix, *words])


def _parse_words(cmd: Command, rest: list[str], registry: Registry, command_name: str) -> Parsed | UsageError:
    def fail(message: str) -> UsageError:
        return UsageError(message, usage(cmd, command_name), cmd)

    invocation = f"`{command_name} {cmd.spoken}`"
    args: dict[str, Any] = {a.name: None for a in cmd.args}
    options: dict[str, Any] = {o.key: o.default for o in cmd.options}
    params: dict[str, str] = {}
    given: set[str] = set()
    extras: list[str] = []
    filled, only_positional, i = 0, False, 0
    while i < len(rest):
        token = rest[i]
        i += 1
        if not only_positional and token == "--":
            only_positional = True
        elif not only_positional and token.lower() in HELP_FLAGS:
            return _help(registry, cmd.name, command_name)
        elif not only_positional and token.startswith("--"):
            flag, has_value, inline = token.partition("=")
            opt = cmd.option(flag)
            if opt is None:
                if not cmd.options:
                    return fail(f"{invocation} takes no options, got '{flag}'")
                accepted = ", ".join(o.flag for o in cmd.options)
                nearest = next(iter(_closest(flag, [o.flag for o in cmd.options])), None)
                hint = f" (did you mean {nearest}?)" if nearest else ""
                return fail(f"unknown option '{flag}' for {invocation}{hint} — it accepts {accepted}")
            if opt.key in given:
                return fail(f"`{opt.flag}` given twice")
            given.add(opt.key)
            if not opt.takes_value:
                if has_value:
                    return fail(f"`{opt.flag}` takes no value, got {token!r}")
                options[opt.key] = True
                continue
            if has_value:
                raw = inline
            elif i < len(rest) and not rest[i].startswith("--"):
                raw, i = rest[i], i + 1
            else:
                return fail(f"`{opt.flag}` needs a value ({opt.metavar})")
            try:
                options[opt.key] = convert(opt.kind, raw, minimum=opt.minimum)
            except BadValue as e:
                return fail(f"`{opt.flag}` expects {e.expected}, got {raw!r}")
        elif "=" in token:
            if not cmd.accepts_params:
                return fail(f"{invocation} takes no KEY=VALUE parameters, got {token!r}")
            key, _, value = token.partition("=")
            if not PARAM_KEY.match(key):
                return fail(
                    f"bad parameter {token!r}: write KEY=VALUE with a key of letters, digits, '_' and '-' that"
                    " starts with a letter or '_', e.g. steps=100"
                )
            if key in params:
                return fail(f"parameter '{key}' given twice")
            params[key] = value
        elif filled < len(cmd.args):
            arg = cmd.args[filled]
            filled += 1
            try:
                args[arg.name] = convert(arg.kind, token, minimum=arg.minimum)
            except BadValue as e:
                return fail(f"`{arg.metavar}` expects {e.expected}, got {token!r}")
        else:
            extras.append(token)
    if extras:
        s = "s" if len(extras) > 1 else ""
        takes = f"only {_and(cmd.args)}" if cmd.args else "no arguments"
        hint = " (parameters are written KEY=VALUE)" if cmd.accepts_params else ""
        shown = ", ".join(repr(x) for x in extras)
        extra = f" — {cmd.extra_hint}" if cmd.extra_hint else ""
        return fail(f"unexpected extra argument{s} {shown} — {invocation} takes {takes}{hint}{extra}")
    missing = [a for a in cmd.args[filled:] if a.required]
    if missing:
        return fail(f"{invocation} needs {_and(missing)}")
    return Parsed(cmd, args, options, params)


def _parse_text(cmd: Command, value: str, registry: Registry, command_name: str) -> Parsed | UsageError:
    """A command whose one argument is ``text``: the rest of the message, verbatim."""
    arg = _text_arg(cmd)
    assert arg is not None
    if value.lower() in HELP_FLAGS:
        return _help(registry, cmd.name, command_name)
    if not value and arg.required:
        return UsageError(f"`{command_name} {cmd.spoken}` needs {arg.metavar}", usage(cmd, command_name), cmd)
    return Parsed(cmd, {arg.name: value or None}, {}, {})


def _help(registry: Registry, topic: str | None, command_name: str) -> Parsed | UsageError:
    cmd = registry.resolve("help")
    if cmd is None:
        return UsageError("no subcommand given", subcommands_usage(registry, command_name), None)
    args: dict[str, Any] = {a.name: None for a in cmd.args}
    if topic is not None and cmd.args:
        args[cmd.args[0].name] = topic
    return Parsed(cmd, args, {o.key: o.default for o in cmd.options}, {})


def _usage(cmd: Command | None, registry: Registry, command_name: str) -> str:
    return usage(cmd, command_name) if cmd is not None else subcommands_usage(registry, command_name)


def _text_arg(cmd: Command) -> Arg | None:
    return next((a for a in cmd.args if a.kind == "text"), None)


def _and(args: tuple[Arg, ...] | list[Arg]) -> str:
    names = [a.metavar for a in args]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _closest(word: str, candidates: list[str]) -> list[str]:
    return difflib.get_close_matches(word.lower().replace("_", "-"), candidates, n=1, cutoff=0.6)
