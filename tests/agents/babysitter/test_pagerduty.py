"""The PagerDuty client against the PagerDuty fake over real HTTP, the fake's own validation, and `event_body`."""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest
from fakes.pagerduty import ROUTING_KEY, PagerDutyFake
from hypothesis import given
from hypothesis import strategies as st
from support import free_port

from labbot.agents.babysitter.pagerduty import EVENTS_URL, PagerDutyClient, SendResult, event_body

OTHER_KEY = "R0UTINGKEY0THAT0MUST0NEVER0LEAK1"  # 32 characters, like a real integration key


@pytest.fixture(scope="module")
def server() -> Iterator[PagerDutyFake]:
    with PagerDutyFake() as pd:
        yield pd


@pytest.fixture
def fake(server: PagerDutyFake) -> PagerDutyFake:
    """The module's PagerDuty fake, with nothing recorded or queued."""
    server.reset()
    return server


def with_client(
    url: str, fn: Callable[[PagerDutyClient], Awaitable[Any]], *, key: str = ROUTING_KEY, **kwargs: Any
) -> Any:
    """``await fn(client)`` on a fresh client for ``url``, closed afterwards."""

    async def go() -> Any:
        async with PagerDutyClient(key, url=url, **kwargs) as client:
            return await fn(client)

    return asyncio.run(go())


def mock(handler: Callable[[httpx.Request], httpx.Response]) -> httpx.MockTransport:
    return httpx.MockTransport(handler)


# ----------------------------------------------------------------- against the fake


def test_trigger_acknowledge_resolve_are_accepted_and_tracked_by_dedup_key(fake: PagerDutyFake) -> None:
    async def story(pd: PagerDutyClient) -> list[SendResult]:
        first = await pd.trigger(
            "run-1/diverged", "run 1 diverged (loss NaN at step 310)", custom_details={"step": 310},
            links=[{"href": "https://slack.example/thread", "text": "Slack thread"}],
            client_url="https://labbot.example",
        )  # fmt: skip
        assert fake.incidents["run-1/diverged"] == "triggered"
        acked = await pd.acknowledge("run-1/diverged")
        assert fake.incidents["run-1/diverged"] == "acknowledged"
        again = await pd.trigger("run-1/diverged", "still diverged")  # joins the open alert, which stays acknowledged
        assert fake.incidents["run-1/diverged"] == "acknowledged"
        return [first, acked, again, await pd.resolve("run-1/diverged")]

    results = with_client(fake.url, story)

    assert [(r.outcome, r.status) for r in results] == [("accepted", 202)] * 4
    assert fake.incidents == {"run-1/diverged": "resolved"}
    events = fake.wait_for_events(4)
    assert [e["event_action"] for e in events] == ["trigger", "acknowledge", "trigger", "resolve"]
    assert events[0]["payload"] == {
        "summary": "run 1 diverged (loss NaN at step 310)",
        "source": "labbot",
        "severity": "critical",
        "custom_details": {"step": 310},
    }
    assert events[0]["links"] == [{"href": "https://slack.example/thread", "text": "Slack thread"}]
    assert (events[0]["client"], events[0]["client_url"]) == ("labbot", "https://labbot.example")
    assert events[1] == {"routing_key": ROUTING_KEY, "event_action": "acknowledge", "dedup_key": "run-1/diverged"}
    assert events[3] == {"routing_key": ROUTING_KEY, "event_action": "resolve", "dedup_key": "run-1/diverged"}


def test_unknown_keys_change_nothing_and_a_trigger_after_resolve_opens_a_new_alert(fake: PagerDutyFake) -> None:
    async def story(pd: PagerDutyClient) -> list[SendResult]:
        return [
            await pd.acknowledge("never-triggered"),
            await pd.resolve("never-triggered"),
            await pd.trigger("run-2/stalled", "run 2 stalled"),
            await pd.resolve("run-2/stalled"),
            await pd.acknowledge("run-2/stalled"),  # dropped by PagerDuty: that alert is resolved
        ]

    assert [r.outcome for r in with_client(fake.url, story)] == ["accepted"] * 5
    assert fake.incidents == {"run-2/stalled": "resolved"}

    with_client(fake.url, lambda pd: pd.trigger("run-2/stalled", "run 2 stalled again"))
    assert fake.incidents == {"run-2/stalled": "triggered"}


def test_429_with_retry_after_is_retried_after_what_pagerduty_asked(fake: PagerDutyFake) -> None:
    fake.fail_next(429, retry_after=7)

    async def story(pd: PagerDutyClient) -> list[SendResult]:
        return [await pd.trigger("k", "s"), await pd.trigger("k", "s")]

    first, second = with_client(fake.url, story)

    assert (first.outcome, first.status, first.retry_after_s) == ("retry", 429, 7.0)
    assert "retry after 7s" in first.message
    assert (second.outcome, second.status) == ("accepted", 202)  # the failure was used up
    assert [r.status for r in fake.requests] == [429, 202]
    assert fake.requests[0].json()["routing_key"] == ROUTING_KEY  # the failed request was seen, not applied
    assert len(fake.events) == 1


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_is_retried(fake: PagerDutyFake, status: int) -> None:
    fake.fail_next(status, times=2)

    async def story(pd: PagerDutyClient) -> list[SendResult]:
        return [await pd.trigger("k", "s") for _ in range(3)]

    results = with_client(fake.url, story)

    assert [(r.outcome, r.status, r.retry_after_s) for r in results[:2]] == [("retry", status, None)] * 2
    assert results[2].outcome == "accepted"
    assert fake.incidents == {"k": "triggered"}


def test_a_closed_port_is_retried_without_a_status() -> None:
    url = f"http://127.0.0.1:{free_port()}/v2/enqueue"  # nothing listens there

    result = with_client(url, lambda pd: pd.trigger("k", "s"))

    assert (result.outcome, result.status, result.retry_after_s) == ("retry", None, None)
    assert "ConnectError" in result.message


def test_a_timeout_is_retried_without_a_status() -> None:
    with socket.socket() as silent:  # accepts connections (the kernel does) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v2/enqueue"

        started = time.monotonic()
        result = with_client(url, lambda pd: pd.trigger("k", "s"), timeout=0.2)

    assert (result.outcome, result.status) == ("retry", None)
    assert "timed out" in result.message
    assert time.monotonic() - started < 5


def test_an_event_the_fake_finds_invalid_is_rejected_with_pagerdutys_reason(fake: PagerDutyFake) -> None:
    short_key = "a-short-secret-key"  # PagerDuty wants 32 characters

    result = with_client(fake.url, lambda pd: pd.trigger("k", "s"), key=short_key)

    assert (result.outcome, result.status, result.retry_after_s) == ("rejected", 400, None)
    assert "Length of 'routing_key' is incorrect" in result.message
    assert short_key not in result.message
    assert fake.events == [] and fake.incidents == {}
    assert fake.requests[0].errors == ("Length of 'routing_key' is incorrect (should be 32 characters)",)


def test_an_injected_400_is_rejected(fake: PagerDutyFake) -> None:
    fake.fail_next(400)

    result = with_client(fake.url, lambda pd: pd.resolve("k"))

    assert (result.outcome, result.status) == ("rejected", 400)
    assert "Event object is invalid" in result.message


@pytest.mark.subprocess
def test_the_fake_serves_other_processes(fake: PagerDutyFake) -> None:
    body = json.dumps({k: v for k, v in _trigger().items() if k != "dedup_key"})
    code = (
        f"import httpx; r = httpx.post({fake.url!r}, content={body!r}, headers={{'content-type': 'application/json'}})"
        "; print(r.status_code)"
    )

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)

    assert out.stdout.strip() == "202"
    (event,) = fake.wait_for_events(1)
    assert len(event["dedup_key"]) == 32  # a trigger without a dedup_key gets one, as PagerDuty generates it


def test_wait_for_events_says_what_it_saw_when_it_times_out(fake: PagerDutyFake) -> None:
    with pytest.raises(AssertionError, match=r"waited 0\.05s for 1 event"):
        fake.wait_for_events(1, timeout=0.05)


# ----------------------------------------------------------------- the fake's validation, as PagerDuty's


def _trigger(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "routing_key": ROUTING_KEY,
        "event_action": "trigger",
        "dedup_key": "k",
        "payload": {"summary": "s", "source": "labbot", "severity": "error"},
    }
    body.update(overrides)
    return body


INVALID_BODIES = {
    "no routing_key": {k: v for k, v in _trigger().items() if k != "routing_key"},
    "no event_action": {k: v for k, v in _trigger().items() if k != "event_action"},
    "bad event_action": _trigger(event_action="page"),
    "ack without dedup_key": {"routing_key": ROUTING_KEY, "event_action": "acknowledge"},
    "resolve with empty dedup_key": {"routing_key": ROUTING_KEY, "event_action": "resolve", "dedup_key": ""},
    "dedup_key too long": _trigger(dedup_key="k" * 256),
    "trigger without payload": {k: v for k, v in _trigger().items() if k != "payload"},
    "no summary": _trigger(payload={"source": "labbot", "severity": "error"}),
    "blank source": _trigger(payload={"summary": "s", "source": " ", "severity": "error"}),
    "no severity": _trigger(payload={"summary": "s", "source": "labbot"}),
    "bad severity": _trigger(payload={"summary": "s", "source": "labbot", "severity": "high"}),
    "summary too long": _trigger(payload={"summary": "s" * 1025, "source": "labbot", "severity": "info"}),
    "link without href": _trigger(links=[{"text": "no href"}]),
    "not an object": ["trigger"],
}


@pytest.mark.parametrize("body", INVALID_BODIES.values(), ids=INVALID_BODIES.keys())
def test_the_fake_rejects_what_pagerduty_rejects(fake: PagerDutyFake, body: Any) -> None:
    response = httpx.post(fake.url, json=body)

    assert response.status_code == 400
    answer = response.json()
    assert answer["status"] == "invalid event" and answer["message"] == "Event object is invalid"
    assert answer["errors"] and all(isinstance(e, str) for e in answer["errors"])
    assert fake.events == [] and fake.incidents == {}
    assert [r.status for r in fake.requests] == [400]


@pytest.mark.parametrize(
    ("content", "content_type"),
    [(b'{"routing_key": ', "application/json"), (b"routing_key=x", "application/x-www-form-urlencoded")],
    ids=["bad JSON", "form body"],
)
def test_the_fake_rejects_a_body_that_is_not_json(fake: PagerDutyFake, content: bytes, content_type: str) -> None:
    response = httpx.post(fake.url, content=content, headers={"content-type": content_type})

    assert response.status_code == 400
    assert response.json()["status"] == "invalid event"


def test_the_fake_generates_a_dedup_key_for_a_trigger_without_one(fake: PagerDutyFake) -> None:
    response = httpx.post(fake.url, json={k: v for k, v in _trigger().items() if k != "dedup_key"})

    assert response.status_code == 202
    answer = response.json()
    assert answer["status"] == "success" and answer["message"] == "Event processed"
    assert fake.incidents == {answer["dedup_key"]: "triggered"}


# ----------------------------------------------------------------- answers the fake does not give


def test_a_2xx_without_json_is_still_accepted() -> None:
    transport = mock(lambda request: httpx.Response(202, text="ok"))

    result = with_client(EVENTS_URL, lambda pd: pd.trigger("k", "s"), transport=transport)

    assert (result.outcome, result.status) == ("accepted", 202)


def test_retry_after_as_an_http_date() -> None:
    later = email.utils.formatdate(time.time() + 120, usegmt=True)
    transport = mock(lambda request: httpx.Response(503, headers={"Retry-After": later}))

    result = with_client(EVENTS_URL, lambda pd: pd.trigger("k", "s"), transport=transport)

    assert result.outcome == "retry" and result.retry_after_s is not None
    assert 100 < result.retry_after_s <= 120


@pytest.mark.parametrize("status", [401, 403, 404, 413, 422])
def test_other_4xx_are_rejected(status: int) -> None:
    transport = mock(lambda request: httpx.Response(status, text="nope"))

    result = with_client(EVENTS_URL, lambda pd: pd.resolve("k"), transport=transport)

    assert (result.outcome, result.status, result.retry_after_s) == ("rejected", status, None)


# ----------------------------------------------------------------- the routing key stays secret


def test_the_routing_key_never_shows_in_messages_logs_or_repr(caplog: pytest.LogCaptureFixture) -> None:
    def echo_key(request: httpx.Request) -> httpx.Response:  # a server careless enough to echo the key back
        errors = [f"routing_key {OTHER_KEY} is not known"]
        return httpx.Response(400, json={"status": "invalid event", "message": f"bad {OTHER_KEY}", "errors": errors})

    def raise_with_key(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"cannot send {OTHER_KEY}", request=request)

    caplog.set_level(logging.DEBUG, logger="labbot.agents.babysitter.pagerduty")
    results = [
        with_client(EVENTS_URL, lambda pd: pd.trigger("k", "s"), key=OTHER_KEY, transport=mock(handler))
        for handler in (echo_key, raise_with_key, lambda r: httpx.Response(429, text=OTHER_KEY))
    ]
    client = PagerDutyClient(OTHER_KEY)
    with pytest.raises(ValueError) as bad_action:
        asyncio.run(client.send("page", "k"))
    asyncio.run(client.aclose())

    assert [r.outcome for r in results] == ["rejected", "retry", "retry"]
    texts = [r.message for r in results] + [repr(r) for r in results]
    texts += [repr(client), str(client), str(bad_action.value), caplog.text]
    assert all(OTHER_KEY not in text for text in texts), texts
    assert "<routing key>" in results[0].message  # scrubbed, not silently dropped
    assert caplog.records  # the rejection was logged (and scrubbed)


# ----------------------------------------------------------------- event_body (pure)


def test_acknowledge_and_resolve_carry_only_the_key_action_and_dedup_key() -> None:
    for action in ("acknowledge", "resolve"):
        body = event_body(ROUTING_KEY, action, "k", summary="ignored", links=[{"href": "h"}], client_url="u")
        assert body == {"routing_key": ROUTING_KEY, "event_action": action, "dedup_key": "k"}


def test_a_trigger_body_has_the_required_payload_and_only_given_optional_fields() -> None:
    body = event_body(ROUTING_KEY, "trigger", "k", summary="s", severity="warning", component="gpu", event_class="nan")

    assert body["payload"] == {
        "summary": "s",
        "source": "labbot",
        "severity": "warning",
        "component": "gpu",
        "class": "nan",
    }
    assert "links" not in body and "client_url" not in body


@pytest.mark.parametrize(
    ("args", "kwargs", "says"),
    [
        (("page", "k"), {"summary": "s"}, "unknown PagerDuty event action 'page'"),
        (("trigger", "k"), {"summary": "s", "severity": "high"}, "unknown PagerDuty severity 'high'"),
        (("resolve", ""), {}, "empty PagerDuty dedup_key"),
        (("resolve", "k" * 256), {}, "at most 255"),
        (("trigger", "k"), {"summary": "  "}, "needs a summary"),
        (("trigger", "k"), {"summary": "s", "source": ""}, "needs a source"),
        (("trigger", "k"), {"summary": "s", "links": [{"text": "t"}]}, "has no href"),
    ],
)
def test_event_body_refuses_what_pagerduty_would(args: tuple[str, str], kwargs: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=says) as caught:
        event_body(OTHER_KEY, *args, **kwargs)
    assert OTHER_KEY not in str(caught.value)


@given(summary=st.text(min_size=1, max_size=3000).filter(str.strip), dedup_key=st.text(min_size=1, max_size=255))
def test_a_trigger_summary_is_cut_to_1024_characters(summary: str, dedup_key: str) -> None:
    body = event_body(ROUTING_KEY, "trigger", dedup_key, summary=summary)

    assert body["payload"]["summary"] == summary[:1024]
    assert body["dedup_key"] == dedup_key
