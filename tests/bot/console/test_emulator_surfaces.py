"""The emulator's AI-app surfaces (streams, assistant threads, the home tab), driven by the real slack_sdk client, and
the check of those calls against slack_sdk's method signatures (Slack's 2021 spec predates them)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest
from fakes.slack import SURFACE_METHODS, SlackFake, sdk_signature_problems
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from labbot.bot.console.emulator import EmulatorEvent

ALICE = "U0ALICE001"


@pytest.fixture
def slack() -> Iterator[SlackFake]:
    fake = SlackFake()
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def client(slack: SlackFake) -> WebClient:
    return slack.client()


def _error(excinfo: pytest.ExceptionInfo[SlackApiError]) -> str:
    return str(excinfo.value.response["error"])


def test_a_stream_grows_one_message_and_stops_with_blocks(slack: SlackFake, client: WebClient) -> None:
    events: list[EmulatorEvent] = []
    slack.subscribe(events.append)
    root = slack.user_message(slack.default_channel, ALICE, "why?")
    started = client.chat_startStream(
        channel=slack.default_channel,
        thread_ts=root.ts,
        markdown_text="Reading ",
        recipient_user_id=ALICE,
        recipient_team_id=slack.team_id,
    )
    client.chat_appendStream(channel=slack.default_channel, ts=started["ts"], markdown_text="the logs.")
    client.chat_appendStream(
        channel=slack.default_channel, ts=started["ts"], chunks=[{"type": "markdown_text", "text": " Done."}]
    )
    blocks = [{"type": "context", "elements": [{"type": "mrkdwn", "text": "used 1 tool call"}]}]
    client.chat_stopStream(channel=slack.default_channel, ts=started["ts"], markdown_text="!", blocks=blocks)
    m = slack.message(slack.default_channel, started["ts"])
    assert m is not None and m.thread_ts == root.ts and m.streamed and not m.streaming
    assert m.text == "Reading the logs. Done.!" and m.blocks == blocks
    assert [e.detail for e in events if e.kind == "appended"] == ["the logs.", " Done.", "!"]
    with pytest.raises(SlackApiError) as e:  # stopped: no more appends
        client.chat_appendStream(channel=slack.default_channel, ts=started["ts"], markdown_text="more")
    assert _error(e) == "message_not_in_streaming_state"
    slack.check_against_sdk()


def test_streams_are_refused_the_way_slack_refuses_them(slack: SlackFake, client: WebClient) -> None:
    root = slack.user_message(slack.default_channel, ALICE, "why?")
    ch = slack.default_channel
    with pytest.raises(SlackApiError) as e:  # in a channel the stream names its recipient
        client.chat_startStream(channel=ch, thread_ts=root.ts, markdown_text="x")
    assert _error(e) == "invalid_arguments"
    with pytest.raises(SlackApiError) as e:
        client.chat_startStream(channel=ch, thread_ts="1.000001", recipient_user_id=ALICE, recipient_team_id="T1")
    assert _error(e) == "thread_not_found"
    ok = client.chat_startStream(channel=ch, thread_ts=root.ts, recipient_user_id=ALICE, recipient_team_id="T1")
    with pytest.raises(SlackApiError) as e:
        client.chat_appendStream(channel=ch, ts=ok["ts"], markdown_text="x" * 12_001)
    assert _error(e) == "msg_too_long"
    with pytest.raises(SlackApiError) as e:
        client.chat_appendStream(channel=ch, ts=ok["ts"], chunks=[{"type": "poem", "text": "x"}])
    assert _error(e) == "invalid_chunks"
    with pytest.raises(SlackApiError) as e:
        client.chat_appendStream(channel=ch, ts=root.ts, markdown_text="x")  # a human's message
    assert _error(e) == "cant_update_message"
    with pytest.raises(SlackApiError) as e:
        client.chat_stopStream(channel=ch, ts=ok["ts"], blocks=[{"type": "section"}] * 51)
    assert _error(e) == "invalid_blocks"
    dm = slack.dm_channel(ALICE)  # in a DM no recipient is needed
    question = slack.user_message(dm, ALICE, "hi")
    assert client.chat_startStream(channel=dm, thread_ts=question.ts, markdown_text="hello")["ok"]


def test_assistant_status_and_suggested_prompts(slack: SlackFake, client: WebClient) -> None:
    dm = slack.dm_channel(ALICE)
    root = slack.user_message(dm, ALICE, "hi")
    client.assistant_threads_setStatus(channel_id=dm, thread_ts=root.ts, status="is reading the run's logs…")
    assert slack.assistant_status(dm, root.ts) == "is reading the run's logs…"
    client.chat_postMessage(channel=dm, thread_ts=root.ts, text="the answer")
    assert slack.assistant_status(dm, root.ts) == ""  # Slack clears it when the app replies
    prompts = [{"title": "Why slow?", "message": "why is my latest run slow?"}]
    client.assistant_threads_setSuggestedPrompts(channel_id=dm, thread_ts=root.ts, title="Try:", prompts=prompts)
    assert slack.suggested_prompts(dm, root.ts) == prompts
    with pytest.raises(SlackApiError) as e:
        client.assistant_threads_setSuggestedPrompts(channel_id=dm, thread_ts=root.ts, prompts=prompts * 5)
    assert _error(e) == "invalid_arguments"
    with pytest.raises(SlackApiError) as e:
        client.assistant_threads_setStatus(channel_id=dm, thread_ts=root.ts, status="x" * 51)
    assert _error(e) == "invalid_arguments"
    slack.check_against_sdk()


def test_views_publish_keeps_each_users_home_and_checks_its_hash(slack: SlackFake, client: WebClient) -> None:
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": "*My runs*"}}]
    first = client.views_publish(user_id=ALICE, view={"type": "home", "blocks": blocks})["view"]
    home = slack.home_view(ALICE)
    assert home is not None and home["blocks"] == blocks and home["hash"] == first["hash"]
    with pytest.raises(SlackApiError) as e:
        client.views_publish(user_id=ALICE, view={"type": "home", "blocks": blocks}, hash="stale")
    assert _error(e) == "hash_conflict"
    client.views_publish(user_id=ALICE, view={"type": "home", "blocks": blocks * 100}, hash=first["hash"])
    assert slack.home_publishes(ALICE) == 2
    with pytest.raises(SlackApiError) as e:  # a home tab holds 100 blocks
        client.views_publish(user_id=ALICE, view={"type": "home", "blocks": blocks * 101})
    assert _error(e) == "invalid_arguments"
    with pytest.raises(SlackApiError) as e:
        client.views_publish(user_id=ALICE, view={"type": "modal", "blocks": blocks})
    assert _error(e) == "invalid_arguments"
    with pytest.raises(SlackApiError) as e:
        client.views_publish(user_id="U0NOBODY01", view={"type": "home", "blocks": blocks})
    assert _error(e) == "user_not_found"


def test_the_signature_check_catches_a_parameter_slack_sdk_does_not_name(slack: SlackFake, client: WebClient) -> None:
    root = slack.user_message(slack.dm_channel(ALICE), ALICE, "hi")
    client.api_call(
        "chat.startStream", json={"channel": root.channel, "thread_ts": root.ts, "markdown_txt": "typo"}
    )  # a misspelt argument reaches Slack through **kwargs; the check names it
    with pytest.raises(SlackApiError):  # the emulator refuses it too
        client.api_call("assistant.threads.setStatus", json={"channel_id": root.channel, "status": "x"})
    problems = sdk_signature_problems(slack.calls)
    assert any("markdown_txt" in p and "WebClient" in p for p in problems)
    assert any("required by" in p and "thread_ts" in p for p in problems)
    with pytest.raises(AssertionError):
        slack.check_against_sdk()


def test_every_surface_method_is_in_slack_sdk_and_the_emulator(slack: SlackFake) -> None:
    for method in SURFACE_METHODS:
        fn = getattr(WebClient, method.replace(".", "_"))
        assert "kwargs" in inspect.signature(fn).parameters and method in slack.methods
