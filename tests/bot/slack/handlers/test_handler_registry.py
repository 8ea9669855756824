"""Every ``/lab`` subcommand has exactly one handler (checked at import, so a command declared without one fails
labbot's start), and ``dispatch`` tells the asker what went wrong in the handler."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from labbot.bot.commands import LAB, Parsed, parse
from labbot.bot.commands.registry import Command, Registry
from labbot.bot.config import SlackSettings
from labbot.bot.slack.handlers import HANDLERS, Asker, SlackDeps, dispatch
from labbot.bot.slack.handlers.registry import check, unmatched
from labbot.common.errors import BadRequest


def test_every_lab_command_has_exactly_one_handler_and_every_handler_a_command() -> None:
    assert unmatched(LAB, HANDLERS) == ([], [])
    assert len(HANDLERS) == len(LAB)  # a mapping: one handler a name


def test_a_command_without_a_handler_or_a_handler_without_a_command_is_refused() -> None:
    more = Registry([*LAB, Command(name="jobs", summary="the registered jobs")])
    with pytest.raises(ValueError, match=r"no handler for \['jobs'\]"):
        check(more, HANDLERS)
    fewer = Registry([c for c in LAB if c.name != "logs"])
    with pytest.raises(ValueError, match=r"handlers of no command: \['logs'\]"):
        check(fewer, HANDLERS)


class Told:
    def __init__(self) -> None:
        self.said: list[str] = []

    async def chat_postEphemeral(self, *, channel: str, user: str, text: str, blocks: Any = None) -> None:
        self.said.append(text)


@pytest.mark.parametrize(
    ("error", "said"),
    [(BadRequest("no run 'zz'"), "no run 'zz'"), (RuntimeError("boom"), "`/lab logs` failed inside labbot")],
)
def test_dispatch_tells_the_asker_what_failed(error: Exception, said: str) -> None:
    told = Told()
    deps = SlackDeps(cast(Any, told), cast(Any, None), cast(Any, None), SlackSettings())

    async def fails(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
        raise error

    parsed = parse("logs abc234", LAB)
    assert isinstance(parsed, Parsed)
    asyncio.run(dispatch(deps, parsed, Asker("U0ALICE001", "C0LAB00001"), {**HANDLERS, "logs": fails}))
    assert len(told.said) == 1 and said in told.said[0]
