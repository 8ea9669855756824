"""The local Slack Web API emulator, driven by the real slack_sdk clients, and the test fake's spec checks."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from fakes import slack as fake_module
from fakes.slack import SlackFake, spec_problems, started, validate_event_payload
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler, ServerErrorRetryHandler
from slack_sdk.http_retry.builtin_interval_calculators import FixedValueRetryIntervalCalculator
from starlette.testclient import TestClient
from support import wait_for

from labbot.bot.console.emulator import EmulatorEvent, SlackEmulator

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)
TS = re.compile(r"^\d{10}\.\d{6}$")
ALICE, BOB = "U0ALICE001", "U0BOB00001"


@pytest.fixture
def slack() -> Iterator[SlackFake]:
    """A started fake; every test's calls must also match Slack's published spec."""
    with started() as fake:
        yield fake


@pytest.fixture
def client(slack: SlackFake) -> WebClient:
    return slack.client()


def _error(excinfo: pytest.ExceptionInfo[SlackApiError]) -> str:
    return str(excinfo.value.response["error"])


def test_post_update_thread_and_read_back(slack: SlackFake, client: WebClient) -> None:
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*tiny-lm* is running"}}]
    posted = client.chat_postMessage(channel=slack.default_channel, text="tiny-lm is running", blocks=blocks)
    assert posted["channel"] == slack.default_channel and TS.match(posted["ts"])
    assert posted["message"]["bot_id"] == slack.bot_id and posted["message"]["blocks"] == blocks

    parent = posted["ts"]
    updated = client.chat_update(channel=slack.default_channel, ts=parent, text="tiny-lm succeeded")
    assert updated["message"]["edited"]["user"] == slack.bot_user_id
    reply = client.chat_postMessage(channel="#lab", text="step 100: loss 2.1", thread_ts=parent)
    broadcast = client.chat_postMessage(channel="lab", text="done", thread_ts=reply["ts"], reply_broadcast=True)
    assert reply["channel"] == slack.default_channel
    assert parent < reply["ts"] < broadcast["ts"]

    history = client.conversations_history(channel=slack.default_channel)["messages"]
    assert [m["text"] for m in history] == ["done", "tiny-lm succeeded"]  # newest first; the broadcast shows too
    assert history[0]["subtype"] == "thread_broadcast"
    assert history[1]["reply_count"] == 2 and history[1]["thread_ts"] == parent
    thread = client.conversations_replies(channel=slack.default_channel, ts=parent)["messages"]
    assert [m["text"] for m in thread] == ["tiny-lm succeeded", "step 100: loss 2.1", "done"]
    assert all(m["thread_ts"] == parent for m in thread)

    stored = slack.messages(slack.default_channel, thread_ts=parent)
    assert stored[0].edited and stored[0].text == "tiny-lm succeeded" and stored[0].blocks == blocks  # kept
    assert [m.thread_ts for m in stored] == [parent, parent, parent]
    assert slack.texts() == ["tiny-lm succeeded", "done"]

    client.chat_delete(channel=slack.default_channel, ts=broadcast["ts"])
    assert slack.texts(thread_ts=parent) == ["tiny-lm succeeded", "step 100: loss 2.1"]


def test_history_pagination(client: WebClient, slack: SlackFake) -> None:
    for i in range(5):
        client.chat_postMessage(channel=slack.default_channel, text=f"m{i}")
    first = client.conversations_history(channel=slack.default_channel, limit=3)
    assert [m["text"] for m in first["messages"]] == ["m4", "m3", "m2"] and first["has_more"]
    rest = client.conversations_history(
        channel=slack.default_channel, limit=3, cursor=first["response_metadata"]["next_cursor"]
    )
    assert [m["text"] for m in rest["messages"]] == ["m1", "m0"] and not rest["has_more"]


def test_ephemeral_is_seen_by_its_user_only(slack: SlackFake, client: WebClient) -> None:
    parent = client.chat_postMessage(channel=slack.default_channel, text="run 7")["ts"]
    r = client.chat_postEphemeral(channel=slack.default_channel, user=ALICE, text="only you", thread_ts=parent)
    assert TS.match(r["message_ts"])
    assert [m.text for m in slack.ephemeral_messages(slack.default_channel, ALICE)] == ["only you"]
    assert slack.ephemeral_messages(slack.default_channel, BOB) == []
    assert slack.ephemeral_messages(slack.default_channel)[0].thread_ts == parent
    assert slack.texts() == ["run 7"]  # not in the channel
    with pytest.raises(SlackApiError) as e:
        client.chat_postEphemeral(channel=slack.default_channel, user="U0NOBODY01", text="x")
    assert _error(e) == "user_not_found"


def test_dm_via_conversations_open_is_stable(slack: SlackFake, client: WebClient) -> None:
    dm = client.conversations_open(users=[ALICE])["channel"]["id"]
    assert dm.startswith("D")
    again = client.conversations_open(users=ALICE, return_im=True)
    assert again["channel"]["id"] == dm and again["channel"]["user"] == ALICE and again["already_open"]
    assert client.conversations_open(users=[BOB])["channel"]["id"] != dm
    client.chat_postMessage(channel=dm, text="your run stalled")
    assert slack.texts(dm) == ["your run stalled"]
    assert slack.dm_channel(ALICE) == dm
    with pytest.raises(SlackApiError) as e:
        client.conversations_open(users=["U0NOBODY01"])
    assert _error(e) == "user_not_found"


def test_files_upload_v2_into_a_thread(slack: SlackFake, client: WebClient) -> None:
    parent = client.chat_postMessage(channel=slack.default_channel, text="run 3")["ts"]
    r = client.files_upload_v2(
        channel=slack.default_channel, thread_ts=parent, content=PNG, filename="loss.png", title="Loss curve",
        initial_comment="loss so far",
    )  # fmt: skip
    file_id = r["file"]["id"]
    assert r["file"]["title"] == "Loss curve"
    assert slack.file_bytes(file_id) == PNG
    f = slack.file(file_id)
    assert f is not None and (f.name, f.mimetype, f.filetype) == ("loss.png", "image/png", "png")

    thread = client.conversations_replies(channel=slack.default_channel, ts=parent)["messages"]
    assert thread[-1]["text"] == "loss so far"
    assert [(x["id"], x["name"], x["mimetype"]) for x in thread[-1]["files"]] == [(file_id, "loss.png", "image/png")]
    assert slack.messages(slack.default_channel, thread_ts=parent)[-1].files[0]["id"] == file_id
    assert [c.method for c in slack.calls[-3:-1]] == ["files.getUploadURLExternal", "files.completeUploadExternal"]


def test_token_is_checked(slack: SlackFake) -> None:
    bad = WebClient(token="xoxb-wrong", base_url=slack.start())
    with pytest.raises(SlackApiError) as e:
        bad.chat_postMessage(channel=slack.default_channel, text="hi")
    assert e.value.response.status_code == 200 and _error(e) == "invalid_auth"
    anonymous = WebClient(base_url=slack.start())
    with pytest.raises(SlackApiError) as e:
        anonymous.auth_test()
    assert _error(e) == "not_authed"
    assert slack.texts() == []
    assert slack.client().auth_test()["user_id"] == slack.bot_user_id


def test_block_kit_and_message_limits(slack: SlackFake, client: WebClient) -> None:
    def section(n: int) -> dict:
        return {"type": "section", "text": {"type": "mrkdwn", "text": "x" * n}}

    ch = slack.default_channel
    client.chat_postMessage(channel=ch, text="fits", blocks=[section(3000)] + [{"type": "divider"}] * 49)
    cases: dict[str, list[dict[str, Any]]] = {
        "invalid_blocks": [
            {"channel": ch, "text": "t", "blocks": [{"type": "divider"}] * 51},
            {"channel": ch, "text": "t", "blocks": [section(3001)]},
            {"channel": ch, "text": "t", "blocks": [{"type": "sectoin", "text": "typo"}]},
        ],
        "msg_too_long": [{"channel": ch, "text": "x" * 40001}],
        "channel_not_found": [{"channel": "C0NOPE0001", "text": "t"}],
        "thread_not_found": [{"channel": ch, "text": "t", "thread_ts": "1000000000.000001"}],
    }
    for error, calls in cases.items():
        for kwargs in calls:
            with pytest.raises(SlackApiError) as e:
                client.chat_postMessage(**kwargs)
            assert _error(e) == error, kwargs
    with pytest.raises(SlackApiError) as e, pytest.warns(UserWarning, match="text"):
        client.chat_postMessage(channel=ch)
    assert _error(e) == "no_text"
    with pytest.raises(SlackApiError) as e:
        client.chat_postMessage(channel=ch, text="t", blocks=[section(3001)])
    assert "must be less than 3001 characters [json-pointer:/blocks/0/text/text]" in e.value.response["errors"]
    with pytest.raises(SlackApiError) as e:
        client.chat_update(channel=ch, ts="1000000000.000001", text="t")
    assert _error(e) == "message_not_found"
    with pytest.raises(SlackApiError) as e:
        client.api_call("chat.fly")
    assert _error(e) == "unknown_method"
    assert "chat.fly: no such method" in spec_problems(slack.calls)[0]
    slack.clear_calls()  # the fixture's spec check would (rightly) flag it
    assert slack.texts() == ["fits"]


def test_cannot_edit_or_delete_a_human_message(slack: SlackFake, client: WebClient) -> None:
    human = slack.user_message(slack.default_channel, ALICE, "hello")
    with pytest.raises(SlackApiError) as e:
        client.chat_update(channel=slack.default_channel, ts=human.ts, text="hacked")
    assert _error(e) == "cant_update_message"
    with pytest.raises(SlackApiError) as e:
        client.chat_delete(channel=slack.default_channel, ts=human.ts)
    assert _error(e) == "cant_delete_message"
    client.reactions_add(channel=slack.default_channel, timestamp=human.ts, name="eyes")
    with pytest.raises(SlackApiError) as e:
        client.reactions_add(channel=slack.default_channel, timestamp=human.ts, name=":eyes:")
    assert _error(e) == "already_reacted"
    assert slack.message(slack.default_channel, human.ts).reactions == {"eyes": [slack.bot_user_id]}  # type: ignore[union-attr]
    assert client.users_info(user=ALICE)["user"]["name"] == "alice"
    with pytest.raises(SlackApiError) as e:
        client.users_info(user="U0NOBODY01")
    assert _error(e) == "user_not_found"


def test_form_encoded_blocks_are_decoded(slack: SlackFake, client: WebClient) -> None:
    blocks = [{"type": "section", "text": {"type": "plain_text", "text": "from a form"}}]
    client.api_call("chat.postMessage", params={"channel": slack.default_channel, "blocks": json.dumps(blocks)})
    assert slack.calls_to("chat.postMessage")[-1].params["blocks"] == blocks
    assert slack.last_message().blocks == blocks


def test_rate_limited_call_is_retried_and_posted_once(slack: SlackFake) -> None:
    slack.fail_next(429, on="chat.postMessage", retry_after=0, times=2)
    client = slack.client(retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=2)])
    r = client.chat_postMessage(channel=slack.default_channel, text="launched")
    assert r["ok"] and slack.texts() == ["launched"]
    calls = slack.calls_to("chat.postMessage")
    assert [(c.status, c.failed) for c in calls] == [(429, True), (429, True), (200, False)]
    assert calls[0].response == {"ok": False, "error": "ratelimited"}


def test_server_errors_are_retried_and_posted_once(slack: SlackFake) -> None:
    slack.fail_next(503, on="chat.postMessage")
    slack.fail_next(500, on="chat.postMessage")
    retry = ServerErrorRetryHandler(max_retry_count=2, interval_calculator=FixedValueRetryIntervalCalculator(0.01))
    client = slack.client(retry_handlers=[retry])
    client.chat_postMessage(channel=slack.default_channel, text="launched")
    assert slack.texts() == ["launched"]
    calls = slack.calls_to("chat.postMessage")
    assert [c.status for c in calls] == [503, 500, 200]
    assert calls[0].response["error"] == "internal_error"
    # without a retry handler the failure reaches the caller and nothing is posted
    slack.fail_next(500, on="chat.postMessage")
    with pytest.raises(SlackApiError):
        slack.client().chat_postMessage(channel=slack.default_channel, text="again")
    assert slack.texts() == ["launched"]


def test_subscribers_see_every_change_and_cannot_break_requests(slack: SlackFake, client: WebClient) -> None:
    seen: list[EmulatorEvent] = []
    slack.subscribe(seen.append)

    def broken(event: EmulatorEvent) -> None:
        raise RuntimeError("console crashed")

    unsubscribe = slack.subscribe(broken)
    ts = client.chat_postMessage(channel=slack.default_channel, text="a")["ts"]
    client.chat_update(channel=slack.default_channel, ts=ts, text="b")
    client.chat_postEphemeral(channel=slack.default_channel, user=ALICE, text="c")
    client.files_upload_v2(channel=slack.default_channel, content=b"hello", filename="notes.txt")
    client.chat_delete(channel=slack.default_channel, ts=ts)
    slack.user_message(slack.default_channel, BOB, "hi")
    unsubscribe()
    assert [(e.kind, e.message.text) for e in seen] == [
        ("posted", "a"),
        ("updated", "b"),
        ("ephemeral", "c"),
        ("file", ""),
        ("deleted", "b"),
        ("posted", "hi"),
    ]
    assert {e.channel for e in seen} == {slack.default_channel}
    assert slack.file_bytes(seen[3].message.files[0]["id"]) == b"hello"


def test_subscriber_sees_changes_from_the_server_thread(slack: SlackFake, client: WebClient) -> None:
    threads: list[str] = []
    slack.subscribe(lambda e: threads.append(threading.current_thread().name))
    client.chat_postMessage(channel=slack.default_channel, text="x")
    wait_for(lambda: threads, timeout=5, what="a change notification")
    assert threads[0] != threading.current_thread().name


def test_event_payloads_match_slacks_envelope_schema(slack: SlackFake) -> None:
    schema = fake_module.event_wrapper_schema()
    mention = slack.user_message(slack.default_channel, ALICE, f"<@{slack.bot_user_id}> launch tiny-lm")
    reply = slack.user_message(slack.default_channel, BOB, "how is it going?", thread_ts=mention.ts)
    dm = slack.user_message(slack.dm_channel(ALICE), ALICE, "status")

    first = slack.event_payload(mention, team_id="T0LAB00001", api_app_id="A0LABBOT01")
    jsonschema.validate(first, schema)
    assert first["type"] == "event_callback" and first["event"]["type"] == "app_mention"
    assert first["event"]["blocks"][0]["elements"][0]["elements"][0] == {"type": "user", "user_id": slack.bot_user_id}
    second = slack.validated_event(reply, event_id="Ev0CUSTOM01")
    assert second["event_id"] == "Ev0CUSTOM01"
    assert second["event"]["type"] == "message" and second["event"]["thread_ts"] == mention.ts
    assert second["event"]["parent_user_id"] == ALICE and second["event"]["channel_type"] == "channel"
    third = slack.validated_event(dm)
    assert third["event"]["channel_type"] == "im" and third["event"]["channel"].startswith("D")
    assert len({first["event_id"], third["event_id"]}) == 2
    assert slack.event_payload(mention, event_type="message")["event"]["type"] == "message"
    with pytest.raises(jsonschema.ValidationError):
        validate_event_payload({**first, "authed_users": []})
    with pytest.raises(ValueError, match="thread_not_found"):
        slack.user_message(slack.default_channel, ALICE, "x", thread_ts="1000000000.000001")


def test_check_against_spec_passes_well_formed_calls_and_catches_unknown_parameters() -> None:
    with started(check_spec=False) as fake:
        c = fake.client()
        ts = c.chat_postMessage(channel=fake.default_channel, text="ok", unfurl_links=False)["ts"]
        c.files_upload_v2(channel=fake.default_channel, thread_ts=ts, content=PNG, filename="a.png")
        c.conversations_history(channel=fake.default_channel, limit=10)
        fake.check_against_spec()
        c.api_call("chat.postMessage", json={"channel": fake.default_channel, "text": "x", "bogus_param": 1})
        with pytest.raises(SlackApiError):  # no name: Slack answers invalid_name, and the spec requires it
            c.api_call("reactions.add", params={"channel": fake.default_channel, "timestamp": ts})
        with pytest.raises(AssertionError) as e:
            fake.check_against_spec()
    assert "bogus_param" in str(e.value) and "required parameter(s) name missing" in str(e.value)
    assert len(spec_problems(fake.calls)) == 2


def test_spec_check_is_strict_about_parameters_newer_than_the_spec() -> None:
    with started(check_spec=False) as fake:
        fake.client().chat_postMessage(
            channel=fake.default_channel, text="x", metadata={"event_type": "run", "event_payload": {}}
        )
        fake.check_against_spec()  # slack_sdk names it: accepted
        with pytest.raises(AssertionError, match="metadata"):
            fake.check_against_spec(strict=True)


def test_missing_spec_skips_the_check_and_fails_it_in_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LABBOT_SPECS_DIR", str(tmp_path))  # an empty cache: make specs never ran
    fake_module.web_api_spec.cache_clear()
    fake_module.method_params.cache_clear()
    try:
        fake = SlackFake()
        fake.handle("auth.test", {})
        fake._record(fake_module.Call("auth.test", {}, {}, 0.0))
        monkeypatch.delenv("CI", raising=False)
        with pytest.raises(pytest.skip.Exception, match=r"slack-web-openapi-v2\.json is not in .*make specs"):
            fake.check_against_spec()
        monkeypatch.setenv("CI", "true")
        with pytest.raises(pytest.fail.Exception, match=r"make specs.*CI=true"):
            fake.check_against_spec()
    finally:
        fake_module.web_api_spec.cache_clear()
        fake_module.method_params.cache_clear()


def test_async_client(slack: SlackFake) -> None:
    async def go() -> tuple[str, str]:
        client = slack.async_client()
        ts = (await client.chat_postMessage(channel=slack.default_channel, text="async"))["ts"]
        await client.chat_postMessage(channel=slack.default_channel, text="reply", thread_ts=ts)
        dm = (await client.conversations_open(users=ALICE))["channel"]["id"]
        up = await client.files_upload_v2(channel=dm, content=PNG, filename="a.png", title="A")
        history = await client.conversations_history(channel=slack.default_channel)
        assert [m["text"] for m in history["messages"]] == ["async"]
        return dm, up["file"]["id"]

    dm, file_id = asyncio.run(go())
    assert slack.file_bytes(file_id) == PNG
    assert slack.messages(dm)[0].files[0]["mimetype"] == "image/png"


def test_concurrent_posts_get_distinct_increasing_timestamps(slack: SlackFake, client: WebClient) -> None:
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: client.chat_postMessage(channel=slack.default_channel, text=str(i)), range(40)))
    stamps = [m.ts for m in slack.messages(slack.default_channel)]
    assert len(stamps) == 40 and stamps == sorted(set(stamps))


def test_the_app_can_be_mounted_in_process() -> None:
    emulator = SlackFake(channels={"C0OPS00001": "ops"}, users={ALICE: "alice"}, bot_token="xoxb-t")
    with TestClient(emulator.app, base_url="http://slack.test") as http:
        auth = {"Authorization": "Bearer xoxb-t"}
        r = http.post("/api/chat.postMessage", data={"channel": "#ops", "text": "hi"}, headers=auth).json()
        assert r["ok"] and r["channel"] == "C0OPS00001"
        up = http.post("/api/files.getUploadURLExternal?filename=a.txt&length=2", headers=auth).json()
        assert up["upload_url"] == f"http://slack.test/upload/v1/{up['file_id']}"
        assert http.post(up["upload_url"], content=b"hi").status_code == 200
        done = http.post(
            "/api/files.completeUploadExternal",
            json={"files": [{"id": up["file_id"]}], "channel_id": "C0OPS00001"},
            headers=auth,
        ).json()
        assert done["files"] == [{"id": up["file_id"], "title": "a.txt"}]
        assert http.post("/api/users.info", data={"user": ALICE, "token": "xoxb-t"}).json()["user"]["name"] == "alice"
    assert emulator.file_bytes(up["file_id"]) == b"hi"
    assert emulator.default_channel == "C0OPS00001"
    assert [c.method for c in emulator.calls][-1] == "users.info"


def test_the_product_emulator_serves_the_web_api_without_the_test_surface() -> None:
    emulator = SlackEmulator(bot_token="xoxb-t")
    assert not any(hasattr(emulator, name) for name in ("calls", "calls_to", "fail_next", "clear_failures", "socket"))
    auth = {"Authorization": "Bearer xoxb-t"}
    with TestClient(emulator.app, base_url="http://slack.test") as http:
        assert http.post("/api/chat.postMessage", data={"channel": "#lab", "text": "hi"}, headers=auth).json()["ok"]
        socket_mode = http.post("/api/apps.connections.open", headers={"Authorization": "Bearer xapp-1"}).json()
        malformed = http.post("/api/auth.test", content=b"{", headers={**auth, "Content-Type": "application/json"})
    assert socket_mode == {"ok": False, "error": "unknown_method"}  # Socket Mode is the test fake's
    assert malformed.status_code == 200 and malformed.json() == {"ok": False, "error": "invalid_json"}
    assert [m.text for m in emulator.messages(emulator.default_channel)] == ["hi"]


def test_a_bolt_app_answers_delivered_event_payloads(slack: SlackFake) -> None:
    from slack_bolt import App, BoltRequest

    app = App(
        client=slack.client(), signing_secret="unused", request_verification_enabled=False,
        process_before_response=True,
    )  # fmt: skip

    @app.event("app_mention")
    def mentioned(event: dict, say: Any) -> None:
        say(text=f"on it: {event['text']}", thread_ts=event["ts"])

    @app.event("message")
    def message(event: dict, say: Any) -> None:
        say(text=f"heard {event['text']}", thread_ts=event.get("thread_ts") or event["ts"])

    def deliver(m: Any) -> int:
        body = json.dumps(slack.validated_event(m))
        return app.dispatch(BoltRequest(body=body, headers={"content-type": ["application/json"]})).status

    asked = slack.user_message(slack.default_channel, ALICE, f"<@{slack.bot_user_id}> launch tiny-lm")
    assert deliver(asked) == 200
    dm = slack.user_message(slack.dm_channel(BOB), BOB, "status?")
    assert deliver(dm) == 200
    answer = slack.messages(slack.default_channel, thread_ts=asked.ts)[-1]
    assert deliver(answer) == 200  # Bolt ignores the bot's own message: no reply to it
    assert slack.texts(thread_ts=asked.ts) == [asked.text, f"on it: {asked.text}"]
    assert slack.texts(slack.dm_channel(BOB), thread_ts=dm.ts) == ["status?", "heard status?"]
