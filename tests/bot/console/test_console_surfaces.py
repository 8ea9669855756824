"""What the console prints of Slack's AI-app surfaces: a streamed answer as it grows, the assistant status line, a
home tab published; and emoji shortcodes as the emoji."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.slack import SlackFake

from labbot.bot.console.emoji import emojize
from labbot.bot.console.repl import CONSOLE_USER, ConsoleView


@pytest.fixture
def slack() -> Iterator[SlackFake]:
    fake = SlackFake(users={CONSOLE_USER: "me"})
    fake.start()
    yield fake
    fake.stop()


def test_a_streamed_answer_is_printed_as_it_grows_with_the_status_line(slack: SlackFake, tmp_path: Path) -> None:
    out = io.StringIO()
    slack.subscribe(ConsoleView(slack, out, tmp_path))
    client = slack.client()
    ch = slack.default_channel
    root = slack.user_message(ch, CONSOLE_USER, "why is r1 slow?")
    client.assistant_threads_setStatus(channel_id=ch, thread_ts=root.ts, status="is reading the run's logs…")
    started = client.chat_startStream(
        channel=ch, thread_ts=root.ts, markdown_text="Reading the logs.", recipient_user_id=CONSOLE_USER,
        recipient_team_id=slack.team_id,
    )  # fmt: skip
    client.chat_appendStream(channel=ch, ts=started["ts"], markdown_text="\n\nThe loader waits :warning:")
    client.chat_stopStream(channel=ch, ts=started["ts"], markdown_text="\n\nRaise num_workers.")
    client.views_publish(user_id=CONSOLE_USER, view={"type": "home", "blocks": [{"type": "divider"}]})
    lines = out.getvalue().splitlines()
    assert "    │ · labbot is reading the run's logs…" in lines
    assert "    │ ▸ Reading the logs." in lines  # the first piece, posted
    assert "    │ ▸ The loader waits ⚠️" in lines  # appended, the shortcode as the emoji
    assert "    │ ▸ Raise num_workers." in lines and "    │ (answer complete)" in lines
    assert "(your home tab changed: type `home` to see it)" in lines
    assert lines.count("    │ ▸ Reading the logs.") == 1  # each piece once, not the whole message again


def test_emoji_shortcodes_are_shown_as_the_emoji() -> None:
    assert emojize(":white_check_mark: succeeded · :x: failed") == "✅ succeeded · ❌ failed"
    assert emojize("vote :+1::skin-tone-3: or :-1:") == "vote 👍 or 👎"
    assert emojize("at 12:00:30 :not_an_emoji_we_know:") == "at 12:00:30 :not_an_emoji_we_know:"


def test_an_answer_streamed_in_pieces_grows_on_its_line_and_a_split_shortcode_is_one_emoji(
    slack: SlackFake, tmp_path: Path
) -> None:
    out = io.StringIO()
    slack.subscribe(ConsoleView(slack, out, tmp_path))
    client = slack.client()
    ch = slack.default_channel
    root = slack.user_message(ch, CONSOLE_USER, "why is r1 slow?")
    started = client.chat_startStream(
        channel=ch, thread_ts=root.ts, markdown_text="r1 is sl", recipient_user_id=CONSOLE_USER,
        recipient_team_id=slack.team_id,
    )  # fmt: skip
    for piece in ("ow: the loader", " waits :arr", "ow_forward: raise", " num_workers.\n\nThen watch", " the rate."):
        client.chat_appendStream(channel=ch, ts=started["ts"], markdown_text=piece)
    client.chat_stopStream(channel=ch, ts=started["ts"])
    lines = out.getvalue().splitlines()
    assert "    │ ▸ r1 is slow: the loader waits ▶️ raise num_workers." in lines  # the pieces, one line
    assert "    │ ▸ Then watch the rate." in lines  # a paragraph break: the next line
    assert "    │ (answer complete)" in lines


def test_a_plan_displays_tasks_are_printed_as_they_start_and_end(slack: SlackFake, tmp_path: Path) -> None:
    out = io.StringIO()
    slack.subscribe(ConsoleView(slack, out, tmp_path))
    client = slack.client()
    ch = slack.default_channel
    root = slack.user_message(ch, CONSOLE_USER, "/lab research which lr?")
    task = {"type": "task_update", "id": "t1", "title": "Propose the plan", "status": "in_progress"}
    started = client.chat_startStream(
        channel=ch, thread_ts=root.ts, recipient_user_id=CONSOLE_USER, recipient_team_id=slack.team_id,
        task_display_mode="plan", chunks=[{"type": "plan_update", "title": "Research: which lr?"}, task],
    )  # fmt: skip
    client.chat_appendStream(channel=ch, ts=started["ts"], chunks=[{**task, "status": "complete"}])
    client.chat_appendStream(channel=ch, ts=started["ts"], chunks=[{**task, "id": "t2", "status": "error"}])
    with pytest.raises(Exception, match="invalid_chunks"):  # a status Slack does not know
        client.chat_appendStream(channel=ch, ts=started["ts"], chunks=[{**task, "status": "done"}])
    client.chat_stopStream(channel=ch, ts=started["ts"], markdown_text="Waiting for your approval.")
    lines = out.getvalue().splitlines()
    assert "    │ ◌ Propose the plan (Research: which lr?)" in lines
    assert "    │ ✓ Propose the plan" in lines and "    │ ✗ Propose the plan" in lines


def test_mentions_channels_links_and_escapes_read_as_a_person_reads_them(slack: SlackFake, tmp_path: Path) -> None:
    out = io.StringIO()
    slack.subscribe(ConsoleView(slack, out, tmp_path))
    client = slack.client()
    text = (
        f"<@{CONSOLE_USER}> stopped the run in <#{slack.default_channel}|lab>; see <https://example.com/r1|the plot>"
        "\n```loss &lt; 2 &amp;&amp; step &gt; 10```"
    )
    client.chat_postMessage(channel=slack.default_channel, text=text)
    shown = out.getvalue()
    assert "@me stopped the run in #lab; see the plot (https://example.com/r1)" in shown
    assert "loss < 2 && step > 10" in shown
    assert "<@" not in shown and "&lt;" not in shown


def test_a_pages_stop_button_answers_to_the_page_and_a_confirm_dialog_is_asked_first(
    slack: SlackFake, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio
    from typing import Any

    from labbot.bot.console.repl import Console

    view = ConsoleView(slack, io.StringIO(), tmp_path)
    slack.subscribe(view)
    confirm = {
        "title": {"type": "plain_text", "text": "Stop run?"},
        "text": {"type": "mrkdwn", "text": "Stop run *r1*? Its checkpoints are kept."},
        "confirm": {"type": "plain_text", "text": "Stop"},
        "deny": {"type": "plain_text", "text": "Cancel"},
    }
    elements = [
        {"type": "button", "text": {"type": "plain_text", "text": "Ack"}, "action_id": "page_ack", "value": "pq3x7k"},
        {"type": "button", "text": {"type": "plain_text", "text": "Stop run"}, "action_id": "run_stop", "value": "r1",
         "confirm": confirm},
    ]  # fmt: skip
    slack.client().chat_postMessage(
        channel=slack.default_channel, text="page", blocks=[{"type": "actions", "elements": elements}]
    )
    assert view.buttons[("stop", "pq3x7k")] == view.buttons[("stop", "r1")], "`click stop PAGE` presses its Stop"
    console = Console(slack, url="http://127.0.0.1:9", secret="s", user_name="me", db_session=None, busy=lambda: 0)
    console.view = view
    posted: list[Any] = []

    async def post(body: str, content_type: str | None = None) -> int:
        posted.append(body)
        return 200

    console.post = post  # type: ignore[method-assign]

    async def go() -> None:
        await console.handle("click stop pq3x7k")
        assert (
            posted == [] and "Stop run? — Stop run r1? Its checkpoints are kept. (yes / no)" in capsys.readouterr().out
        )
        await console.handle("no")
        assert posted == [] and "(cancelled: nothing was pressed)" in capsys.readouterr().out
        await console.handle("click stop r1")
        await console.handle("yes")
        assert len(posted) == 1 and "run_stop" in posted[0]

    asyncio.run(go())
