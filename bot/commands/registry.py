"""Declarations of ``/lab`` subcommands (``Command``, ``Arg``, ``Option``, ``Permission``) and the ``Registry`` that
holds them. Pure data: the parser, ``/lab help`` and usage errors are all generated from these declarations, and a new
subcommand plugs in with ``registry.register(cmd)`` (docs/recipes/add-a-lab-subcommand.md). Nothing here knows about
Slack."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, get_args

Kind = Literal["run_id", "job", "int", "float", "duration", "str", "status", "flag", "text"]
"""How a value is checked and typed (see ``labbot.bot.commands.values``). ``flag``: an option that takes no value.
``text``: the rest of the message, verbatim and untokenised (for free text such as a question); it must be the
command's only argument, with no options and no parameters."""
KINDS: frozenset[str] = frozenset(get_args(Kind))

_NAME = re.compile(r"^(?:[a-z][a-z0-9_-]*|\?)$")
_FLAG = re.compile(r"^--[a-z][a-z0-9-]*$")
_ARG_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_RESERVED_FLAGS = frozenset({"--help"})  # the parser reads `/lab CMD --help` as `/lab help CMD`
_METAVARS = {"int": "N", "float": "N", "duration": "DUR", "status": "STATUS", "run_id": "RUN_ID", "job": "JOB"}


class Permission(StrEnum):
    """Who may run a subcommand. The parser only records it; handlers enforce it."""

    ANYONE = "anyone"
    OWNER = "owner"  # the run's owner or an admin; the handler checks ownership of the run named in the args
    ADMIN = "admin"


@dataclass(frozen=True)
class Arg:
    """A positional argument; ``name`` is its key in ``Parsed.args`` and, upper-cased, its name in usage lines."""

    name: str
    kind: Kind
    help: str
    required: bool = True
    minimum: float | None = None

    def __post_init__(self) -> None:
        if not _ARG_NAME.match(self.name):
            raise ValueError(f"argument name {self.name!r} must match {_ARG_NAME.pattern}")
        if self.kind not in KINDS or self.kind == "flag":
            raise ValueError(f"argument {self.name!r}: kind {self.kind!r} is not one of {sorted(KINDS - {'flag'})}")

    @property
    def metavar(self) -> str:
        return self.name.upper()


@dataclass(frozen=True)
class Option:
    """A ``--flag VALUE`` option (or a bare ``--flag`` switch when ``kind == "flag"``, whose default is False).
    Its key in ``Parsed.options`` is the flag without dashes, ``-`` spelled ``_`` (``--stall-after`` → ``stall_after``).
    """

    flag: str
    kind: Kind
    help: str
    default: Any = None
    metavar: str = ""  # the value's placeholder in usage lines; by kind when empty (N, DUR, STATUS, ...)
    minimum: float | None = None

    def __post_init__(self) -> None:
        if not _FLAG.match(self.flag) or self.flag in _RESERVED_FLAGS:
            raise ValueError(
                f"option flag {self.flag!r} must match {_FLAG.pattern} and not be {sorted(_RESERVED_FLAGS)}"
            )
        if self.kind not in KINDS or self.kind == "text":
            raise ValueError(f"option {self.flag}: kind {self.kind!r} is not one of {sorted(KINDS - {'text'})}")
        if self.kind == "flag" and self.default not in (None, False):
            raise ValueError(f"option {self.flag}: a flag is off unless given; its default must be False")
        if self.kind == "flag":
            object.__setattr__(self, "default", False)
        if not self.metavar:
            object.__setattr__(self, "metavar", _METAVARS.get(self.kind, "TEXT"))

    @property
    def key(self) -> str:
        return self.flag[2:].replace("-", "_")

    @property
    def takes_value(self) -> bool:
        return self.kind != "flag"


@dataclass(frozen=True)
class Command:
    """One ``/lab`` subcommand. ``examples`` are written without the slash command (``"stop ab12cd"``), so they stay
    right when ``/lab`` is renamed; ``accepts_params`` lets it take ``KEY=VALUE`` items (collected in order)."""

    name: str
    summary: str
    args: tuple[Arg, ...] = ()
    options: tuple[Option, ...] = ()
    aliases: tuple[str, ...] = ()
    permission: Permission = Permission.ANYONE
    accepts_params: bool = False
    examples: tuple[str, ...] = ()
    extra_hint: str = ""  # said after "unexpected extra argument": why it takes none, and where to go instead

    @property
    def spoken(self) -> str:
        """How it is typed: a two-word subcommand (``eval-run``) reads as two words (``eval run``)."""
        return self.name.replace("-", " ", 1)

    def __post_init__(self) -> None:
        for word in (self.name, *self.aliases):
            if not _NAME.match(word):
                raise ValueError(f"subcommand name {word!r} must be lower-case letters, digits, '-' or '_' (or '?')")
        if len({self.name, *self.aliases}) != 1 + len(self.aliases):
            raise ValueError(f"subcommand {self.name!r} repeats a name among its aliases {self.aliases}")
        _unique(self.name, "argument", [a.name for a in self.args])
        _unique(self.name, "option", [o.key for o in self.options])
        if any(a.kind == "text" for a in self.args) and (len(self.args) > 1 or self.options or self.accepts_params):
            raise ValueError(f"subcommand {self.name!r}: a 'text' argument must be its only argument and input")
        optional_seen = False
        for arg in self.args:
            if arg.required and optional_seen:
                raise ValueError(f"subcommand {self.name!r}: required {arg.name!r} follows an optional argument")
            optional_seen = optional_seen or not arg.required

    def option(self, flag: str) -> Option | None:
        """The option spelled ``flag`` (``--Stall_After`` finds ``--stall-after``), or None."""
        wanted = flag.lower().replace("_", "-")
        return next((o for o in self.options if o.flag == wanted), None)


def _unique(command: str, what: str, names: list[str]) -> None:
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"subcommand {command!r} declares the {what} {', '.join(dupes)} twice")


class Registry:
    """The subcommands of one slash command, in registration order; names and aliases resolve case-insensitively."""

    def __init__(self, commands: Iterable[Command] = ()) -> None:
        self._commands: list[Command] = []
        self._by_word: dict[str, Command] = {}
        for cmd in commands:
            self.register(cmd)

    def register(self, cmd: Command) -> Command:
        """Add ``cmd``; ValueError if its name or an alias is already taken (as a name or an alias)."""
        for word in (cmd.name, *cmd.aliases):
            taken = self._by_word.get(word)
            if taken is not None:
                raise ValueError(f"cannot register {cmd.name!r}: {word!r} is already taken by {taken.name!r}")
        self._commands.append(cmd)
        for word in (cmd.name, *cmd.aliases):
            self._by_word[word] = cmd
        return cmd

    def resolve(self, word: str) -> Command | None:
        """The command named or aliased ``word`` (any case), or None."""
        return self._by_word.get(word.strip().lower())

    def group(self, word: str) -> list[Command]:
        """The two-word subcommands under ``word`` (``eval`` → ``eval-run``, ``eval-list``, ...), in order."""
        prefix = word.strip().lower() + "-"
        return [c for c in self._commands if c.name.startswith(prefix)] if word.strip() else []

    def words(self) -> list[str]:
        """Every name and alias, names first (in registration order), for suggestions."""
        return [c.name for c in self._commands] + [a for c in self._commands for a in c.aliases]

    def closest(self, word: str, *, include_admin: bool = True) -> str | None:
        """The name or alias nearest to ``word`` (difflib), for "did you mean ...?"; None when nothing is close."""
        words = [w for w in self.words() if include_admin or self._by_word[w].permission is not Permission.ADMIN]
        found = difflib.get_close_matches(word.strip().lower(), words, n=1, cutoff=0.6)
        return found[0] if found else None

    def __iter__(self) -> Iterator[Command]:
        return iter(tuple(self._commands))

    def __len__(self) -> int:
        return len(self._commands)

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and self.resolve(word) is not None
