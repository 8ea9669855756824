"""A property-based fuzz of ``POST /slack/events`` (hypothesis): every body signed with the app's signing secret —
JSON arrays and scalars, NaN and Infinity, NUL and lone surrogates in strings, bytes that are not UTF-8, and each
kind of Slack payload with fields missing or of the wrong type, as JSON and as form fields (``payload=``) — is
answered below 500, and nothing it sets off, in Bolt, in the listeners or in the work they hand to the background,
logs a traceback or an error.

In process, the app built as ``labbot serve`` builds it (``SlackRuntime.build`` behind ``create_app``, the API's
edge included) over a real RunService on SQLite and on PostgreSQL, the Slack fake answering the listeners' Web API
calls and Ray an address where nothing listens. After each request the test waits until every task the request
started has finished, so what a listener does after its ack is judged with the request that caused it. Bounded
examples: it stays in the fast tier."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from fakes.slack import SlackFake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient
from support import SLEEPER, free_port, make_service

from labbot.agents.babysitter.pager import Pager
from labbot.agents.babysitter.policy import PagingPolicy
from labbot.bot.api import create_app
from labbot.bot.config import SlackSettings
from labbot.bot.slack.handlers import SlackDeps
from labbot.bot.slack.runtime import SlackCore, SlackRuntime
from labbot.training.ray_cluster import RayConnection
from labbot.training.telemetry_store import TelemetryStore

SECRET = "fuzz-signing-secret"
ALICE, BOB = "U0ALICE001", "U0BOB00001"
TEAM, APP, CHANNEL = "T0LAB00001", "A0LABBOT01", "C0LAB00001"
JSON, FORM = "application/json", "application/x-www-form-urlencoded"
TS, THREAD = "1700000000.000200", "1700000000.000100"


@dataclass
class Door:
    client: TestClient
    runtime: SlackRuntime
    baseline: int

    def post(self, body: bytes, content_type: str | None) -> httpx.Response:
        """POST ``body`` signed now, as Slack signs (bytes: not every body here is text); the answer, once
        everything the request started has finished."""
        ts = str(int(time.time()))
        signature = hmac.new(SECRET.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256).hexdigest()
        headers = {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={signature}"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        answer = self.client.post("/slack/events", content=body, headers=headers)
        self.client.portal.call(self.settled)  # type: ignore[union-attr]
        return answer

    async def settled(self) -> None:
        """Until the tasks of the request (Bolt's listener after its ack, the listeners' background work) are done."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while len(asyncio.all_tasks()) - 1 > self.baseline and loop.time() < deadline:
            await asyncio.sleep(0.002)
        await self.runtime.tasks.drain(timeout=5)


async def _tasks_now() -> int:
    return len(asyncio.all_tasks()) - 1


@pytest.fixture
def door(tmp_path: Path, database_url: str) -> Iterator[Door]:
    fake = SlackFake(users={ALICE: "alice", BOB: "bob"})
    fake.start()
    nowhere = RayConnection(address=f"http://127.0.0.1:{free_port()}", token=None)
    service = make_service(tmp_path, nowhere, SLEEPER, database_url=database_url)
    pager = Pager(service.db, PagingPolicy(), slack=False, pagerduty=False)
    settings_ = SlackSettings(
        bot_token=fake.bot_token, signing_secret=SECRET, api_url=str(fake.url), admins=frozenset({BOB})
    )
    core = SlackCore.build(settings_, service, TelemetryStore(service.db))
    runtime = SlackRuntime.build(SlackDeps(core.client, service, core.threads, settings_, pager=pager))
    app = create_app(
        service, TelemetryStore(service.db), admin_token="fuzz-admin", pager=pager, db=service.db,
        extra_routes=runtime.routes(),
    )  # fmt: skip
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            yield Door(client, runtime, client.portal.call(_tasks_now))  # type: ignore[union-attr]
    finally:
        service.launcher.close()
        service.db.dispose()
        fake.stop()


# ----------------------------------------------------------------------------------------------- what Slack sends


def _event(event: dict[str, Any]) -> dict[str, Any]:
    return {
        "token": "unused", "team_id": TEAM, "context_team_id": TEAM, "api_app_id": APP, "type": "event_callback",
        "event_id": "Ev0FUZZ0001", "event_time": 1700000000, "event": {"event_ts": TS, **event},
        "authorizations": [{"enterprise_id": None, "team_id": TEAM, "user_id": "U0LABBOT01", "is_bot": True,
                            "is_enterprise_install": False}],
        "is_ext_shared_channel": False,
    }  # fmt: skip


def _interaction(kind: str, **fields: Any) -> dict[str, Any]:
    return {
        "type": kind, "team": {"id": TEAM, "domain": "lab"}, "user": {"id": ALICE, "team_id": TEAM},
        "api_app_id": APP, "token": "unused", "trigger_id": "1234.5678.abcdef", **fields,
    }  # fmt: skip


MESSAGE = {"message": {"ts": TS, "type": "message", "thread_ts": THREAD}}
VIEW = {
    "id": "V0FUZZ0001", "type": "modal", "callback_id": "feedback_comment", "team_id": TEAM, "app_id": APP,
    "private_metadata": json.dumps({"feedback": "fbk_1", "channel": CHANNEL, "thread_ts": THREAD}),
    "state": {"values": {"comment": {"text": {"type": "plain_text_input", "value": "wrong run"}}}},
    "hash": "1.abc", "root_view_id": "V0FUZZ0001", "previous_view_id": None, "external_id": "",
}  # fmt: skip
TEMPLATES: dict[str, dict[str, Any]] = {
    "message": _event({"type": "message", "user": ALICE, "text": "why is it slow?", "ts": TS, "thread_ts": THREAD,
                       "channel": CHANNEL, "channel_type": "channel"}),
    "app_mention": _event({"type": "app_mention", "user": ALICE, "text": "<@U0LABBOT01> help", "ts": TS,
                           "channel": CHANNEL}),
    "reaction_added": _event({"type": "reaction_added", "user": ALICE, "reaction": "+1", "item_user": "U0LABBOT01",
                              "item": {"type": "message", "channel": CHANNEL, "ts": TS}}),
    "app_home_opened": _event({"type": "app_home_opened", "user": ALICE, "channel": "D0ALICE001", "tab": "home"}),
    "assistant_thread_started": _event({"type": "assistant_thread_started", "assistant_thread": {
        "user_id": ALICE, "channel_id": "D0ALICE001", "thread_ts": THREAD, "context": {}}}),
    "other_event": _event({"type": "member_joined_channel", "user": ALICE, "channel": CHANNEL}),
    "url_verification": {"token": "unused", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
                         "type": "url_verification"},
    "command": {"token": "unused", "team_id": TEAM, "team_domain": "lab", "channel_id": CHANNEL,
                "channel_name": "lab", "user_id": ALICE, "user_name": "alice", "command": "/lab", "text": "runs",
                "api_app_id": APP, "response_url": "https://hooks.slack.invalid/commands/1",
                "trigger_id": "1234.5678.abcdef"},
    "block_actions": _interaction(
        "block_actions", container={"type": "message", "message_ts": TS, "channel_id": CHANNEL},
        channel={"id": CHANNEL, "name": "lab"}, response_url="https://hooks.slack.invalid/actions/1", **MESSAGE,
        actions=[{"type": "button", "action_id": "run_stop", "block_id": "run_actions", "value": "abc234",
                  "action_ts": "1700000001.000100"}],
    ),
    "feedback_button": _interaction(
        "block_actions", container={"type": "message", "message_ts": TS, "channel_id": CHANNEL},
        channel={"id": CHANNEL, "name": "lab"}, **MESSAGE,
        actions=[{"type": "feedback_buttons", "action_id": "answer_feedback", "block_id": "feedback",
                  "value": "down:trn_fuzz0001", "action_ts": "1700000001.000100"}],
    ),
    "home_button": _interaction(
        "block_actions", container={"type": "view", "view_id": "V0HOME0001"}, view={"id": "V0HOME0001",
                                                                                   "type": "home"},
        actions=[{"type": "button", "action_id": "home_page_1", "block_id": "home", "value": "1",
                  "action_ts": "1700000001.000100"}],
    ),
    "view_submission": _interaction("view_submission", view=VIEW, response_urls=[]),
    "view_closed": _interaction("view_closed", view=VIEW, is_cleared=False),
    "shortcut": _interaction("shortcut", callback_id="lab_shortcut", action_ts="1700000001.000100"),
    "message_action": _interaction(
        "message_action", callback_id="lab_message", channel={"id": CHANNEL, "name": "lab"},
        message={"type": "message", "user": ALICE, "ts": TS, "text": "r1 is slow"},
        response_url="https://hooks.slack.invalid/actions/2",
    ),
    "block_suggestion": _interaction(
        "block_suggestion", action_id="pick_run", block_id="runs", value="abc",
        container={"type": "view", "view_id": "V0FUZZ0001"}, view=VIEW,
    ),
    "interactive_message": _interaction(
        "interactive_message", callback_id="legacy", channel={"id": CHANNEL, "name": "lab"},
        actions=[{"name": "go", "type": "button", "value": "1"}], action_ts="1700000001.000100",
    ),
}  # fmt: skip
EVENTS = {name for name, doc in TEMPLATES.items() if doc.get("type") in ("event_callback", "url_verification")}
COMMAND_TEXTS = ["help", "runs", "help payload", "status abc234", "stop abc234", "pages", "logs abc234", "lanch x",
                 "", "help stop", "artifacts", "launch nosuchjob", "feedback", "ab"]  # fmt: skip

FIELDS = ["event", "actions", "view", "user", "channel", "team", "enterprise", "authorizations", "response_urls",
          "container", "message", "item", "command", "type", "thread_ts", "state", "workflow_step", "text"]  # fmt: skip
ODD = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(),
    st.text(max_size=8),
    st.sampled_from(["a\x00b", "\x00", "\ud800", "x\udfffy", "é" * 70, "9" * 300, "", "[]", "{}", ALICE, TS,
                     "run_stop", "home_page_2", "url_verification", "event_callback", "block_actions", "message",
                     "view_submission", "workflow_step", "up:trn_fuzz0001", "{\"feedback\": 1}", "[1]"]),
    st.just([]), st.just({}), st.just([{}]), st.just(["x"]), st.just({"id": None}), st.just({"type": 1}),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.sampled_from(["id", "type", "value", "x"]),
                                                           st.none() | st.integers() | st.text(max_size=3),
                                                           max_size=2),
)  # fmt: skip


def _places(doc: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in ``doc`` a mutation may touch: each key of each object, each item of each array."""
    found: list[tuple[Any, ...]] = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        found.append((*at, key))
        found.extend(_places(value, (*at, key)))
    return found


def _mutate(doc: Any, place: tuple[Any, ...], how: str, value: Any) -> Any:
    parent = doc
    for key in place[:-1]:
        parent = parent[key]
    if how == "drop":
        del parent[place[-1]]
    else:
        parent[place[-1]] = copy.deepcopy(value)  # st.just({}) is one object: a later mutation must not change it
    return doc


@st.composite
def slack_payloads(draw: st.DrawFn, name: str) -> dict[str, Any]:
    """The payload ``name`` with up to three fields dropped, replaced by odd values, or given odd siblings."""
    doc = copy.deepcopy(TEMPLATES[name])
    if "command" in doc:
        doc["text"] = draw(st.sampled_from(COMMAND_TEXTS) | st.text(max_size=20))
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 1, 2, 3]))):
        places = _places(doc)
        how = draw(st.sampled_from(["drop", "set", "set", "add"]))
        if how == "add" or not places:
            at = draw(st.sampled_from([(), *[p for p in places if isinstance(_get(doc, p), dict)]]))
            doc = _mutate(doc, (*at, draw(st.sampled_from(FIELDS))), "set", draw(ODD))
        else:
            doc = _mutate(doc, draw(st.sampled_from(places)), how, draw(ODD))
    return doc


def _get(doc: Any, place: tuple[Any, ...]) -> Any:
    for key in place:
        doc = doc[key]
    return doc


def _form(fields: dict[str, Any]) -> bytes:
    """Form fields as a browser encodes them; a lone surrogate as the bytes Python would give it (surrogatepass)."""
    strings = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in fields.items()}
    return urlencode(strings, encoding="utf-8", errors="surrogatepass").encode()


@st.composite
def encoded(draw: st.DrawFn) -> tuple[bytes, str | None]:
    """A Slack payload as a body: JSON, form fields, or the ``payload`` field of a form, mostly as Slack sends that
    kind; with any content type, mostly the right one."""
    name = draw(st.sampled_from(sorted(TEMPLATES)))
    doc = draw(slack_payloads(name))
    slacks = "fields" if name == "command" else "json" if name in EVENTS else "payload"
    how = draw(st.sampled_from([slacks, slacks, slacks, "json", "payload", "fields"]))
    if how == "json":
        body = json.dumps(doc).encode()  # NaN and Infinity as bare tokens, a lone surrogate as its \u escape
    elif how == "payload":
        body = urlencode({"payload": json.dumps(doc)}).encode()
    else:
        body = _form(doc)
    right = JSON if how == "json" else FORM
    content_type = draw(st.sampled_from([right, right, right, JSON, FORM, None, "text/plain",
                                         "application/json; charset=utf-8"]))  # fmt: skip
    return body, content_type


ODD_BODIES = [
    b"[]", b"[{}]", b"1", b'"x"', b"null", b"true", b"NaN", b"Infinity", b'{"event": NaN}', b'{"a": 1e400}',
    b'{"type": "event_callback", "event": -Infinity}', b"payload=[]", b"payload=1", b"payload=NaN",
    b"payload=%7B", b"payload=%22x%22", b"payload=null", b"payload=%7B%22type%22%3A%22%5Cu0000%22%7D",
    b"command=%2Flab&user_id=U1&channel_id=C1&text=%00", b"command=%2Flab", b"ssl_check=1&token=x",
    b"a=b", b"", b"{", b"\xff\xfe{}", b'{"\xed\xa0\x80": 1}', b'{"x": "\\ud800"}', b'{"x": "\\u0000"}',
]  # fmt: skip
RAW = st.one_of(
    st.sampled_from(ODD_BODIES),
    st.binary(max_size=64),
    st.integers(min_value=60, max_value=5000).map(lambda n: b"[" * n + b"]" * n),
    st.integers(min_value=60, max_value=200).map(lambda n: b'{"type": "event_callback", "event": %s}' % (b"[" * n)),
).map(lambda body: (body, None))
ANY_RAW = st.tuples(RAW, st.sampled_from([None, JSON, FORM])).map(lambda r: (r[0][0], r[1]))
BODIES = st.integers(min_value=0, max_value=9).flatmap(lambda n: encoded() if n < 7 else ANY_RAW)  # 70 % Slack's


def _problems(records: list[logging.LogRecord]) -> list[str]:
    return [
        f"{r.levelname} {r.name}: {r.getMessage()[:300]}"
        for r in records
        if r.exc_info or r.levelno >= logging.ERROR or "Traceback" in r.getMessage()
    ]


@pytest.mark.databases
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=BODIES)
def test_no_signed_body_gets_a_500_or_a_traceback(
    door: Door, caplog: pytest.LogCaptureFixture, body: tuple[bytes, str | None]
) -> None:
    caplog.clear()
    caplog.set_level(logging.INFO)
    status = door.post(*body).status_code
    assert status < 500, (status, body)
    problems = _problems(caplog.records)
    assert not problems, (body, problems)


@pytest.mark.databases
def test_the_security_probes_bodies_are_400_saying_why(door: Door, caplog: pytest.LogCaptureFixture) -> None:
    """The bodies the probe found answered 500: each is a 400 naming what is wrong, one warning line, no traceback."""
    no_view_type = json.loads(json.dumps(TEMPLATES["view_submission"]))
    del no_view_type["view"]["type"]
    cases = [
        (b"[]", JSON, "the payload is an array"),
        (b'{"event": NaN}', JSON, "NaN is not a JSON number"),
        (b"payload=%5B%5D", FORM, "the payload is an array"),
        (urlencode({"payload": json.dumps(no_view_type)}).encode(), FORM, "view.type is missing"),
        (b'{"type": "event_callback", "event": {"type": "message", "text": "a\\u0000b"}}', JSON, "NUL"),
    ]
    caplog.set_level(logging.INFO)
    for body, content_type, says in cases:
        caplog.clear()
        answer = door.post(body, content_type)
        assert answer.status_code == 400, (body, answer.status_code, answer.text)
        error = answer.json()["error"]
        assert error["code"] == "bad_request" and says in error["message"], (body, error)
        assert not _problems(caplog.records), caplog.text
        assert [r.levelname for r in caplog.records if r.name == "labbot.bot.slack.http"] == ["WARNING"]


@pytest.mark.databases
def test_a_command_that_says_payload_is_still_a_command(door: Door) -> None:
    """Bolt read a form saying "payload" anywhere for a payload field alone, so this command was an empty body."""
    fields = TEMPLATES["command"] | {"text": "lanch payload"}
    answer = door.post(urlencode(fields).encode(), FORM)
    assert answer.status_code == 200 and "did you mean 'launch'" in answer.text, answer.text
