"""An answer streamed piece by piece as the model writes it (``StreamedAnswer.piece``): the first piece at once, the
rest batched (a call a second, not a call a token), each turn completed by its whole; a try that failed mid-turn
(a retry) leaves no trace in the finished message. Against the Slack fake's chat.*Stream."""

from __future__ import annotations

import asyncio
from typing import Any

from fakes.slack import SlackFake

from labbot.bot.slack.runtime import web_client
from labbot.bot.slack.streams import PIECES_EVERY_S, StreamedAnswer, SurfaceSupport

ALICE = "U0ALICE001"
NARRATION = "Let me read the run's logs."
ANSWER = "r1 is slow: the data loader waits on a full queue. Raise num_workers to 4."


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def pieces(text: str, size: int = 6) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def answer(slack: SlackFake, clock: Clock) -> tuple[StreamedAnswer, str]:
    root = slack.user_message(slack.default_channel, ALICE, "why is r1 slow?")
    client = web_client(slack.bot_token, slack.start())
    stream = StreamedAnswer(
        client, SurfaceSupport(), channel=slack.default_channel, thread_ts=root.ts, recipient_user_id=ALICE,
        recipient_team_id=slack.team_id, clock=clock,
    )  # fmt: skip
    return stream, root.ts


def replies(slack: SlackFake, thread_ts: str) -> list[Any]:
    return [m for m in slack.messages(slack.default_channel, thread_ts=thread_ts)[1:] if m.bot_id]


def test_pieces_go_at_once_then_a_call_a_second_and_the_answer_ends_whole_once(slack: SlackFake) -> None:
    clock = Clock()
    stream, thread = answer(slack, clock)

    async def go() -> None:
        first, *rest = pieces(NARRATION)
        await stream.piece(first)
        [shown] = replies(slack, thread)
        assert shown.streaming and shown.text == first  # the first token is visible at once
        for p in rest:
            await stream.piece(p)  # within the second: kept, not sent
        assert replies(slack, thread)[0].text == first and len(slack.calls_to("chat.appendStream")) == 0
        await stream.write(NARRATION)  # the turn's whole: what is waiting goes now
        assert replies(slack, thread)[0].text == NARRATION
        for p in pieces(ANSWER):
            clock.now += PIECES_EVERY_S / 4
            await stream.piece(p)
        await stream.write(ANSWER)
        assert await stream.finish(ANSWER, []) == shown.ts

    asyncio.run(go())
    [done] = replies(slack, thread)
    assert done.text == f"{NARRATION}\n\n{ANSWER}" and done.streamed and not done.streaming
    appends = len(slack.calls_to("chat.appendStream"))
    assert 1 <= appends <= 2 + len(ANSWER) // 24  # about one call a second of writing, far fewer than the pieces
    assert len(slack.calls_to("chat.startStream")) == 1 and not slack.calls_to("chat.update")


def test_a_try_that_failed_mid_turn_leaves_no_trace_in_the_answer(slack: SlackFake) -> None:
    clock = Clock()
    stream, thread = answer(slack, clock)

    async def go() -> None:
        await stream.piece("The loader is fi")  # sent at once: Slack shows it
        stream.void_turn()  # the model's call failed mid-answer; the runtime retries
        for p in pieces(ANSWER):
            clock.now += PIECES_EVERY_S
            await stream.piece(p)
        await stream.write(ANSWER)
        await stream.finish(ANSWER, [])

    asyncio.run(go())
    [done] = replies(slack, thread)
    assert done.text == ANSWER  # the void piece replaced by the whole answer: complete, once
    assert "The loader is fi" not in done.text


def test_pieces_of_a_turn_that_never_finished_are_not_the_answer(slack: SlackFake) -> None:
    clock = Clock()
    stream, thread = answer(slack, clock)
    stopped = "I couldn't finish: the model API is overloaded."

    async def go() -> None:
        await stream.write(NARRATION)
        await stream.piece("Half an ans")  # the run stops mid-turn (its budget, the API giving up)
        await stream.finish(stopped, [])

    asyncio.run(go())
    [done] = replies(slack, thread)
    assert done.text == f"{NARRATION}\n\n{stopped}"
