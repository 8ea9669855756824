"""The shape rules of a Slack payload (``labbot.bot.slack.shapes``), pure: what Slack sends passes, and each way a
body can fail to be a payload labbot can act on is refused saying which field, what it should be and what it is —
never its value. With the strict JSON reader under them (``labbot.common.json_input``) and the one-line account of
an exception (``labbot.bot.slack.http.failure``)."""

from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import urlencode

import pytest

from labbot.bot.console.emulator import SlackEmulator
from labbot.bot.slack import payloads
from labbot.bot.slack.feedback import comment_modal
from labbot.bot.slack.http import NotAPayload, failure, payload_of
from labbot.bot.slack.shapes import read, refusal
from labbot.common.errors import BadRequest
from labbot.common.json_input import shown_key

WS = payloads.Workspace(team_id="T0LAB00001", app_id="A0LABBOT01", channel="C0LAB00001")
ALICE = "U0ALICE001"
SECRET_TEXT = "SECRET-VALUE-4242"


def _parsed(body: str) -> dict[str, Any]:
    return dict(read(body, payloads.JSON if body.startswith("{") else payloads.FORM))


def what_slack_sends() -> list[dict[str, Any]]:
    """Every payload labbot's console and tests send, as labbot builds them and as the emulator delivers events."""
    modal = comment_modal("fbk_1", WS.channel, "1700000000.000100") | {"id": "V0MODAL001"}
    bodies = [
        payloads.slash_command(WS, user=ALICE, user_name="alice", text="launch tiny-lm steps=20"),
        payloads.button_click(WS, user=ALICE, action_id="run_stop", value="abc234", message_ts="1700000000.000100"),
        payloads.feedback_click(WS, user=ALICE, value="up:trn_1", message_ts="1.2", thread_ts="1.1"),
        payloads.view_submission(WS, user=ALICE, view=modal, values={"comment": {"text": "the LR"}}),
        payloads.app_home_opened(WS, user=ALICE, dm="D0ALICE001"),
        payloads.assistant_thread_started(WS, user=ALICE, dm="D0ALICE001", thread_ts="1700000000.000100"),
        payloads.home_click(WS, user=ALICE, action_id="home_page_1", value="1", view_id="V0HOME0001"),
    ]
    docs = [_parsed(body) for body in bodies]
    slack = SlackEmulator()
    root = slack.user_message(WS.channel, ALICE, "why is r1 slow?")
    reply = slack.user_message(WS.channel, ALICE, "<@U0LABBOT01> and now?", thread_ts=root.ts)
    docs += [
        slack.event_payload(root),
        slack.event_payload(reply),
        slack.reaction_payload(root, user=ALICE, reaction="+1"),
    ]
    docs.append({"token": "t", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
                 "type": "url_verification"})  # fmt: skip
    docs.append({"ssl_check": "1", "token": "t"})
    return docs


@pytest.mark.parametrize("doc", what_slack_sends(), ids=lambda d: str(d.get("type") or d.get("command") or "ssl"))
def test_what_slack_sends_passes(doc: dict[str, Any]) -> None:
    assert refusal(doc) is None


def _command(**fields: Any) -> dict[str, Any]:
    return _parsed(payloads.slash_command(WS, user=ALICE, user_name="alice", text="runs")) | fields


def _click(**fields: Any) -> dict[str, Any]:
    doc = _parsed(payloads.button_click(WS, user=ALICE, action_id="run_stop", value="r1", message_ts="1.2"))
    return doc | fields


def _view(kind: str = "view_submission", drop: str | None = None, **view: Any) -> dict[str, Any]:
    modal = comment_modal("fbk_1", WS.channel, None) | {"id": "V0MODAL001"}
    doc = _parsed(payloads.view_submission(WS, user=ALICE, view=modal, values={"comment": {"text": "x"}}))
    doc["type"] = kind
    doc["view"] |= view
    if drop:
        del doc["view"][drop]
    return doc


def _event(**event: Any) -> dict[str, Any]:
    message = SlackEmulator().user_message(WS.channel, ALICE, "hello")
    doc = SlackEmulator().event_payload(message)
    doc["event"] = {k: v for k, v in (doc["event"] | event).items() if v is not DROP}
    return doc


DROP = object()
REFUSED: list[tuple[str, Any, str]] = [
    # the whole document
    ("an array", [], "the payload is an array: Slack sends an object"),
    ("a string", "x", "the payload is a string"),
    ("null", None, "the payload is null"),
    ("nothing Slack sends", {"a": "b"}, "not a Slack payload: it has no type"),
    ("NaN", {"type": "event_callback", "event": math.nan}, "event is nan, which JSON has no number for"),
    ("a NUL", _command(text="a\x00b"), "text holds a NUL character"),
    ("a lone surrogate", _command(text="\ud800"), "text is not valid UTF-8"),
    ("a key with a NUL", {"type": "shortcut", "x\x00": 1}, "a key in the document holds a NUL character"),
    ("nested 65 deep", {"type": "x", "a": json.loads("[" * 64 + "]" * 64)}, "nest more than 64 levels deep"),
    # what Bolt builds its context from, anywhere
    ("team an array", _click(team=["T"]), "team must be a Slack id (a string of at most 64 characters) or an object"),
    ("enterprise a number", _click(enterprise=7), "enterprise must be"),
    ("authorizations not objects", _event(authorizations=[1]), "authorizations[0] must be an object, got a number"),
    ("response_urls null", _view(response_urls=None) | {"response_urls": None}, "response_urls must be a list"),
    ("view null", _click(view=None), "view must be an object, got null"),
    ("an id too long", _command(user_id="U" * 65), "user_id must be a Slack id"),
    ("a ts too long", _event(ts="1" * 33), "event.ts must be a Slack timestamp"),
    ("type not a string", {"type": ["event_callback"]}, "type must be a string, got an array"),
    ("event.message a string", _event(message="m"), "event.message must be an object, or null, got a string"),
    # events
    ("event_callback without event", {"type": "event_callback"}, "event is missing"),
    ("event not an object", {"type": "event_callback", "event": "message"}, "event must be an object, got a string"),
    ("event without type", _event(type=DROP), "event.type is missing"),
    ("event.type a number", _event(type=1), "event.type must be a string, got a number"),
    ("a message without ts", _event(ts=DROP), "event.ts is missing: Slack always sends it in a message event"),
    ("a message in no channel", _event(channel=DROP), "event.channel is missing"),
    ("a message's channel an object", _event(channel={"id": "C1"}), "event.channel must be a Slack id"),
    ("a message's user an object", _event(user={"id": ALICE}), "event.user must be a Slack id"),
    ("a message's text null", _event(text=None), "event.text must be a string, got null"),
    ("a mention without ts", _event(type="app_mention", ts=DROP), "in an app_mention event"),
    ("a reaction's item a list", _event(type="reaction_added", item=[]), "event.item must be an object"),
    ("an assistant thread a list", _event(type="assistant_thread_started", assistant_thread=[]),
     "event.assistant_thread must be an object"),
    ("url_verification without challenge", {"type": "url_verification"}, "challenge is missing"),
    ("a challenge not a string", {"type": "url_verification", "challenge": 5}, "challenge must be a string"),
    # slash commands
    ("a command without user_id", {k: v for k, v in _command().items() if k != "user_id"}, "user_id is missing"),
    ("a command's channel_id a list", _command(channel_id=["C1"]), "channel_id must be a Slack id"),
    ("a command's text an object", _command(text={"t": 1}), "text must be a string, got an object"),
    ("a command's command a number", _command(command=1), "command must be a string"),
    ("a command with actions", _command(actions="x"), "actions must be a list of objects, or null, got a string"),
    # block actions
    ("block_actions without actions", {k: v for k, v in _click().items() if k != "actions"}, "actions is missing"),
    ("no action", _click(actions=[]), "actions must be a non-empty list of objects, got an empty list"),
    ("an action not an object", _click(actions=[1]), "actions[0] must be an object, got a number"),
    ("an action without action_id", _click(actions=[{"value": "r1"}]), "actions[0].action_id is missing"),
    ("an action_id a number", _click(actions=[{"action_id": 1}]), "actions[0].action_id must be a string"),
    ("a value an object", _click(actions=[{"action_id": "run_stop", "value": {}}]), "actions[0].value must be"),
    ("a clicker as a string", _click(user=ALICE), "user must be an object, got a string"),
    ("a clicker without id", _click(user={"name": "alice"}), "user.id is missing"),
    ("a container a string", _click(container="C1"), "container must be an object, or null, got a string"),
    ("a channel a string", _click(channel="C1"), "channel must be an object, or null, got a string"),
    # views
    ("a view_submission without view", {"type": "view_submission", "user": {"id": ALICE}}, "view is missing"),
    ("a view without type", _view(drop="type"), "view.type is missing: Slack always sends it in a view_submission"),
    ("a view without id", _view(drop="id"), "view.id is missing"),
    ("a view without state", _view(drop="state"), "view.state is missing"),
    ("state.values a list", _view(state={"values": []}), "view.state.values must be an object of block ids"),
    ("a block's values a string", _view(state={"values": {"comment": "x"}}),
     "view.state.values.comment must be an object of action ids"),
    ("an input's value a number", _view(state={"values": {"comment": {"text": {"value": 3}}}}),
     "view.state.values.comment.text.value must be a string, or null, got a number"),
    ("private_metadata an object", _view(private_metadata={"feedback": 1}), "view.private_metadata must be a string"),
    ("a workflow step saved without it", _view(type="workflow_step"), "workflow_step is missing"),
    ("a view_closed without callback_id", _view("view_closed", drop="callback_id"), "view.callback_id is missing"),
    ("a view_closed's is_cleared a string", _view("view_closed") | {"is_cleared": "no"}, "is_cleared must be true"),
    # shortcuts, options, legacy interactions
    ("a shortcut without callback_id", {"type": "shortcut", "trigger_id": "t", "user": {"id": ALICE}},
     "callback_id is missing"),
    ("a shortcut without trigger_id", {"type": "shortcut", "callback_id": "c", "user": {"id": ALICE}},
     "trigger_id is missing"),
    ("a message_action without message", {"type": "message_action", "callback_id": "c", "trigger_id": "t",
                                           "user": {"id": ALICE}, "channel": {"id": "C1"}}, "message is missing"),
    ("a message_action's message without ts", {"type": "message_action", "callback_id": "c", "trigger_id": "t",
                                               "user": {"id": ALICE}, "channel": {"id": "C1"}, "message": {}},
     "message.ts is missing"),
    ("a block_suggestion without action_id", {"type": "block_suggestion", "value": "x", "user": {"id": ALICE}},
     "action_id is missing"),
    ("a block_suggestion's value a list", {"type": "block_suggestion", "action_id": "a", "value": [],
                                           "user": {"id": ALICE}}, "value must be a string, got an array"),
    ("an interactive_message without actions", {"type": "interactive_message", "callback_id": "c", "actions": []},
     "actions must be a non-empty list"),
    ("a workflow_step_edit without its step", {"type": "workflow_step_edit", "callback_id": "c"},
     "workflow_step is missing"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "doc", "says"), REFUSED, ids=[c[0] for c in REFUSED])
def test_each_wrong_shape_is_refused_saying_which(case: str, doc: Any, says: str) -> None:
    why = refusal(doc)
    assert why is not None and says in why, (case, why)


def test_a_refusal_names_places_never_values() -> None:
    assert SECRET_TEXT not in (refusal(_command(user_id=SECRET_TEXT * 4)) or "SECRET")
    assert SECRET_TEXT not in (refusal(_click(actions=[{"action_id": SECRET_TEXT, "value": 1}])) or "SECRET")
    why = refusal(_view(state={"values": {f"{SECRET_TEXT} x": 3}})) or ""
    assert "view.state.values.[…] must be an object" in why and SECRET_TEXT not in why
    assert shown_key("comment") == "comment" and shown_key("has space") == "[…]" and shown_key("x" * 41) == "[…]"


def test_read_parses_as_bolt_does_strictly() -> None:
    assert read("", None) == {}
    assert read('{"type": "x"}', None) == {"type": "x"}  # JSON when it looks like JSON, whatever the type says
    assert read("command=%2Flab&text=runs", None) == {"command": "/lab", "text": "runs"}
    assert read("payload=%5B%5D", payloads.FORM) == []  # the interaction's JSON, here an array: refusal() says so
    # a form with a payload field is read for it alone; Bolt read any form saying "payload" anywhere so (as {})
    assert read("command=%2Flab&text=my+payload", payloads.FORM) == {"command": "/lab", "text": "my payload"}
    assert read("payload=%7B%7D&command=%2Flab", payloads.FORM) == {}
    for body, says in [('{"event": NaN}', "NaN is not a JSON number"), ("[Infinity]", "Infinity"),
                       ('{"a": 1e999}', "too large"), ("payload=%7B", "not JSON"), ("{", "not JSON"),
                       ('{"a": "\\u0000"}', "NUL")]:  # fmt: skip
        with pytest.raises(BadRequest, match=says):
            read(body, payloads.JSON if body.startswith(("{", "[")) else payloads.FORM)


def test_the_door_refuses_with_one_message_saying_what_is_wrong() -> None:
    with pytest.raises(NotAPayload, match="not a Slack payload labbot can act on: the body is not UTF-8"):
        payload_of(b"\xff\xfe", None)
    with pytest.raises(NotAPayload, match="labbot can act on: the payload is an array"):
        payload_of(b"payload=%5B%5D", "application/x-www-form-urlencoded; charset=utf-8")
    with pytest.raises(NotAPayload, match="labbot can act on: the JSON body: NaN"):
        payload_of(b'{"event": NaN}', "Application/JSON")
    body = urlencode({"payload": json.dumps(_click())}).encode()
    assert payload_of(body, "application/x-www-form-urlencoded")["type"] == "block_actions"


def test_a_failure_is_one_line_with_its_type_and_place() -> None:
    def inner(body: dict[str, Any]) -> Any:
        return body["view"]["type"]

    try:
        inner({"view": {SECRET_TEXT: 1}})
    except KeyError as e:
        said = failure(e)
    assert said.startswith("KeyError raised at ") and "test_slack_shapes.py:" in said and "(inner)" in said
    assert "\n" not in said and SECRET_TEXT not in said and "'type'" not in said  # no message: it may quote input
    assert failure(ValueError("x")) == "ValueError"  # never raised: no place to name
