"""What labbot accepts as a Slack payload: the shape rules the door applies to a signed body before Bolt sees it,
and Socket Mode to an envelope's payload (pure: no I/O, nothing logged).

Bolt indexes what it is given without looking first: a body that is a JSON array, a ``view_submission`` whose view
has no ``type``, a block action with an empty ``actions`` list each raised inside Bolt (a 500 with a traceback), and
so did our listeners on an event without a ``ts`` or a command without a ``user_id``. :func:`read` parses a body the
way Bolt does, strictly; :func:`refusal` says why a parsed body is not a payload labbot can act on, or None. The rules
are those of Slack's own payloads, as far as Bolt (``slack_bolt.request.internals``, ``payload_utils``, the listener
matchers and built-in middleware) and labbot's listeners (``labbot.bot.slack.app``, ``.feedback``, ``.prompts``) read
them; fields nobody reads are left alone, so a field Slack adds tomorrow changes nothing:

* the whole document: an object; every string and key storable (no NUL, no lone surrogate: the database refuses
  them); no NaN or infinite number; nested at most 64 deep;
* everywhere Bolt builds its context from (the payload and its ``event``, ``message``, ``previous_message``,
  ``item``, ``assistant_thread`` and ``authorizations``): ``type`` a string; ``user``, ``channel``, ``team`` and
  ``enterprise`` an id or an object whose ``id`` is one; ``*_id`` fields ids, ``*ts`` fields Slack timestamps;
  ``event`` an object, ``actions``, ``authorizations`` and ``response_urls`` lists of objects, ``view`` and
  ``container`` objects; the strings Bolt and labbot compare or pass on (``text``, ``trigger_id``, ``callback_id``,
  ``action_id``, ...) strings. An id is a string of at most 64 characters, a timestamp of at most 32 (the database's
  columns for them);
* what each kind of payload must carry, by ``type`` (and ``command``, for a slash command): see ``_BY_TYPE`` and
  ``_BY_EVENT``. A body with none of ``type``, ``command`` and ``ssl_check`` is not a Slack payload.

A refusal names the field (``view.state.values``), what it should be and what it is, never its value: the door logs
it. A key that is not a plain name is shown as ``[…]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl

from labbot.common.json_input import MAX_JSON_DEPTH, loads_json, place, unstorable_in

__all__ = ["MAX_ID", "MAX_TS", "read", "refusal"]

MAX_ID = 64  # Slack's ids (U0ALICE001, C0LAB00001, T…, V…) are about a dozen characters; the database keeps 64
MAX_TS = 32  # "1700000000.000100"; the database keeps 32
JSON_TYPE = "application/json"


def read(text: str, content_type: str | None) -> Any:
    """A signed body as Bolt parses it (``slack_bolt.request.internals.parse_body``), strictly: JSON when the content
    type is ``application/json`` or the body begins with ``{``; else form fields, of which, when there is a
    ``payload`` field, only that counts (the JSON of an interaction). BadRequest for JSON that is not JSON, is nested
    too deep or holds NaN/Infinity. Unlike Bolt, a form is read for its payload only when it has that field, not
    whenever the word appears in the body: Bolt read ``/lab launch x --name mypayload`` as an empty body. Bolt is
    handed what this returns (``labbot.bot.slack.http``), so its own reading no longer matters."""
    if not text:
        return {}
    if content_type == JSON_TYPE or text.startswith("{"):
        return loads_json(text, what="the JSON body", allow_nan=False)
    form = dict(parse_qsl(text, keep_blank_values=True))
    if "payload" in form:
        return loads_json(form["payload"], what="the form's payload field", allow_nan=False)
    return form


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _a(kind: str) -> str:
    return f"{'an' if kind[:1] in ('a', 'e', 'i', 'o', 'u') else 'a'} {kind}"


class Shape:
    """One rule: ``check(value, where, label)`` is why ``value`` (at ``where``, in a payload described by ``label``)
    is refused, or None. ``expected`` says what would be right; ``accepts`` the Python types it applies to."""

    expected: str = ""
    accepts: tuple[type, ...] = ()

    def check(self, value: Any, where: str, label: str) -> str | None:
        if not isinstance(value, self.accepts):
            return f"{where} must be {self.expected}, got {_kind(value)}"
        return self.inner(value, where, label)

    def inner(self, value: Any, where: str, label: str) -> str | None:
        return None


class Text(Shape):
    accepts = (str,)

    def __init__(self, limit: int | None = None, expected: str = "a string") -> None:
        self.limit = limit
        self.expected = expected

    def inner(self, value: Any, where: str, label: str) -> str | None:
        if self.limit is not None and len(value) > self.limit:
            return f"{where} must be {self.expected}, got a string of {len(value)} characters"
        return None


class Bool(Shape):
    accepts = (bool,)
    expected = "true or false"


class Nullable(Shape):
    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.expected = f"{shape.expected}, or null"
        self.accepts = (*shape.accepts, type(None))

    def check(self, value: Any, where: str, label: str) -> str | None:
        if value is None:
            return None
        if not isinstance(value, self.shape.accepts):
            return f"{where} must be {self.expected}, got {_kind(value)}"
        return self.shape.check(value, where, label)


class Either(Shape):
    """A string (an id) or an object, each checked by its own rule."""

    def __init__(self, text: Shape, obj: Shape) -> None:
        self.text, self.obj = text, obj
        self.expected = f"{text.expected} or {obj.expected}"
        self.accepts = (str, dict)

    def inner(self, value: Any, where: str, label: str) -> str | None:
        return (self.text if isinstance(value, str) else self.obj).check(value, where, label)


class Obj(Shape):
    """An object whose ``required`` fields are present and whose known fields (present ones) pass their rules;
    fields it does not name are not looked at."""

    expected = "an object"
    accepts = (dict,)

    def __init__(self, fields: Mapping[str, Shape] | None = None, required: Iterable[str] = ()) -> None:
        self.fields = dict(fields or {})
        self.required = tuple(required)

    def inner(self, value: Any, where: str, label: str) -> str | None:
        for name in self.required:
            if name not in value:
                return f"{place(where, name)} is missing: Slack always sends it in {label}"
        for name, rule in self.fields.items():
            if name in value and (why := rule.check(value[name], place(where, name), label)):
                return why
        return None


class ListOf(Shape):
    accepts = (list,)

    def __init__(self, item: Shape, *, non_empty: bool = False) -> None:
        self.item = item
        self.non_empty = non_empty
        self.expected = (
            f"a {'non-empty ' if non_empty else ''}list of {'objects' if item.accepts == (dict,) else 'values'}"
        )

    def inner(self, value: Any, where: str, label: str) -> str | None:
        if self.non_empty and not value:
            return f"{where} must be {self.expected}, got an empty list"
        for i, item in enumerate(value):
            if why := self.item.check(item, place(where, i), label):
                return why
        return None


class MapOf(Shape):
    """An object every value of which passes ``value`` (keys are anyone's: block ids, action ids)."""

    accepts = (dict,)

    def __init__(self, value: Shape, expected: str) -> None:
        self.value = value
        self.expected = expected

    def inner(self, value: Any, where: str, label: str) -> str | None:
        for key, item in value.items():
            if why := self.value.check(item, place(where, key), label):
                return why
        return None


STRING = Text()
ID = Text(MAX_ID, f"a Slack id (a string of at most {MAX_ID} characters)")
TS = Text(MAX_TS, f'a Slack timestamp (a string like "1700000000.000100", at most {MAX_TS} characters)')
OBJECT = Obj()
WHO = Obj({"id": Nullable(ID), "team_id": Nullable(ID), "enterprise_id": Nullable(ID)})
"""``user``, ``channel``, ``team``, ``enterprise`` as objects: Bolt reads their ``id`` (and a user's ``team_id``)."""
IDENTIFIED = Obj({"id": ID, "team_id": Nullable(ID)}, required=("id",))
ACTION = Obj({"action_id": STRING, "block_id": STRING, "value": STRING, "type": STRING, "action_ts": TS})
CONTAINER = Obj({"type": STRING, "channel_id": ID, "message_ts": TS, "view_id": ID, "thread_ts": Nullable(TS)})
STATE_VALUES = MapOf(
    MapOf(Obj({"type": STRING, "value": Nullable(STRING)}), "an object of action ids, each an object"),
    "an object of block ids, each an object of action ids",
)
VIEW_FIELDS: dict[str, Shape] = {
    "id": ID,
    "type": STRING,
    "callback_id": STRING,
    "state": Obj({"values": STATE_VALUES}),
    "private_metadata": STRING,
    "hash": STRING,
    "external_id": STRING,
    "team_id": Nullable(ID),
    "app_id": Nullable(ID),
    "bot_id": Nullable(ID),
    "app_installed_team_id": Nullable(ID),
    "root_view_id": Nullable(ID),
    "previous_view_id": Nullable(ID),
}
VIEW = Obj(VIEW_FIELDS)

CONTEXT = Obj()
"""What Bolt reads to build a request's context, at the top and, recursively, in the nested objects it looks into."""
CONTEXT.fields.update(
    {
        "type": STRING,
        **dict.fromkeys(("user", "channel", "team", "enterprise"), Nullable(Either(ID, WHO))),
        **dict.fromkeys(
            ("user_id", "channel_id", "team_id", "enterprise_id", "api_app_id", "context_team_id",
             "context_enterprise_id", "bot_id", "app_installed_team_id"),
            Nullable(ID),
        ),
        **dict.fromkeys(("ts", "thread_ts", "event_ts", "message_ts", "action_ts"), Nullable(TS)),
        **dict.fromkeys(
            ("text", "trigger_id", "response_url", "callback_id", "action_id", "block_id", "command", "event_id",
             "token", "subtype", "channel_type", "tab", "reaction", "challenge", "ssl_check", "function_execution_id",
             "bot_access_token"),
            Nullable(STRING),
        ),
        "event": CONTEXT,
        **dict.fromkeys(("message", "previous_message", "item", "assistant_thread"), Nullable(CONTEXT)),
        "authorizations": Nullable(ListOf(CONTEXT)),
        "actions": Nullable(ListOf(ACTION)),
        "response_urls": ListOf(Obj({"response_url": Nullable(STRING), "channel_id": Nullable(ID)})),
        "view": VIEW,  # not null either: Bolt's log line for an unhandled request reads view.type
        "container": Nullable(CONTAINER),
        "function_data": Nullable(Obj({"execution_id": Nullable(STRING), "inputs": Nullable(OBJECT)})),
        "workflow_step": Nullable(OBJECT),
        "function": OBJECT,  # an event's (function_executed): Bolt reads function.callback_id
    }
)  # fmt: skip


_MESSAGE_EVENT = Obj(
    {"channel": ID, "ts": TS, "user": ID, "text": STRING, "thread_ts": Nullable(TS), "channel_type": STRING},
    required=("channel", "ts"),
)
_ASSISTANT_THREAD = Obj(
    {"assistant_thread": Obj({"user_id": ID, "channel_id": ID, "thread_ts": TS, "context": Nullable(OBJECT)},
                             required=("channel_id", "thread_ts"))},
    required=("assistant_thread",),
)  # fmt: skip
_BY_EVENT: dict[str, Obj] = {
    # the events labbot listens to, as its listeners read them (labbot.bot.slack.app, .feedback, .prompts)
    "message": _MESSAGE_EVENT,
    "app_mention": _MESSAGE_EVENT,
    **dict.fromkeys(
        ("reaction_added", "reaction_removed"),
        Obj({"user": ID, "reaction": STRING, "item": Nullable(Obj({"type": STRING, "channel": ID, "ts": TS}))}, ()),
    ),
    "app_home_opened": Obj({"user": ID, "channel": ID, "tab": STRING}, ()),
    # Bolt's assistant middleware (AttachingConversationKwargs) reads the thread's channel_id and thread_ts
    **dict.fromkeys(("assistant_thread_started", "assistant_thread_context_changed"), _ASSISTANT_THREAD),
}
_WHO_ACTED = {"user": IDENTIFIED, "trigger_id": STRING}
_BY_TYPE: dict[str, Obj] = {
    "url_verification": Obj({"challenge": STRING}, required=("challenge",)),
    "event_callback": Obj({"event": Obj({"type": STRING}, required=("type",))}, required=("event",)),
    "block_actions": Obj(
        {**_WHO_ACTED, "actions": ListOf(Obj(ACTION.fields, required=("action_id",)), non_empty=True),
         "channel": Nullable(Obj({"id": ID})), "message": Nullable(Obj({"ts": TS, "thread_ts": Nullable(TS)}))},
        required=("user", "actions"),
    ),
    "view_submission": Obj(
        {**_WHO_ACTED, "view": Obj(VIEW_FIELDS, required=("id", "type", "callback_id", "state"))},
        required=("user", "view"),
    ),
    "view_closed": Obj(
        {**_WHO_ACTED, "view": Obj(VIEW_FIELDS, required=("id", "type", "callback_id")), "is_cleared": Bool()},
        required=("user", "view"),
    ),
    "shortcut": Obj(_WHO_ACTED | {"callback_id": STRING}, required=("user", "callback_id", "trigger_id")),
    "message_action": Obj(
        _WHO_ACTED | {"callback_id": STRING, "channel": IDENTIFIED, "message": Obj({"ts": TS}, required=("ts",))},
        required=("user", "callback_id", "trigger_id", "channel", "message"),
    ),
    "block_suggestion": Obj(
        {"user": IDENTIFIED, "action_id": STRING, "block_id": STRING, "value": STRING},
        required=("user", "action_id", "value"),
    ),
    "interactive_message": Obj(
        {**_WHO_ACTED, "callback_id": STRING, "actions": ListOf(OBJECT, non_empty=True)},
        required=("callback_id", "actions"),
    ),
    "dialog_submission": Obj(
        {**_WHO_ACTED, "callback_id": STRING, "submission": OBJECT}, required=("callback_id", "submission")
    ),
    "dialog_cancellation": Obj({"callback_id": STRING}, required=("callback_id",)),
    "dialog_suggestion": Obj({"callback_id": STRING, "value": STRING}, required=("callback_id",)),
    "workflow_step_edit": Obj(
        {"callback_id": STRING, "workflow_step": OBJECT}, required=("callback_id", "workflow_step")
    ),
}  # fmt: skip
_COMMAND = Obj(
    {"command": STRING, "user_id": ID, "channel_id": ID, "text": STRING, "trigger_id": STRING},
    required=("command", "user_id", "channel_id"),
)
_WORKFLOW_STEP_SAVE = Obj({"workflow_step": OBJECT}, required=("workflow_step",))


def _rules(body: dict[str, Any]) -> list[tuple[Obj, Any, str, str]]:
    """The (rule, value, where, label) that apply to ``body`` by what it is (its type, command, event type)."""
    rules: list[tuple[Obj, Any, str, str]] = []
    if "command" in body:  # Bolt's test for a slash command, whatever else the body holds
        rules.append((_COMMAND, body, "", "a slash command"))
    kind = body.get("type")
    if isinstance(kind, str) and kind in _BY_TYPE:
        rules.append((_BY_TYPE[kind], body, "", f"{_a(kind)} payload"))
    event = body.get("event")
    if kind == "event_callback" and isinstance(event, dict):
        event_type = event.get("type")
        if isinstance(event_type, str) and event_type in _BY_EVENT:
            rules.append((_BY_EVENT[event_type], event, "event", f"{_a(event_type)} event"))
    view = body.get("view")
    if kind == "view_submission" and isinstance(view, dict) and view.get("type") == "workflow_step":
        rules.append((_WORKFLOW_STEP_SAVE, body, "", "a workflow step's view_submission"))
    return rules


def refusal(body: Any) -> str | None:
    """Why ``body`` (parsed: :func:`read`, or a Socket Mode envelope's payload) is not a Slack payload labbot can act
    on, or None when it is."""
    if not isinstance(body, dict):
        return f"the payload is {_kind(body)}: Slack sends an object (JSON, or form fields)"
    if why := unstorable_in(body, allow_nan=False, max_depth=MAX_JSON_DEPTH):
        return f"{why}, which no Slack payload holds"
    rules = _rules(body)
    for rule, value, where, label in rules:  # first: what this kind of payload needs says it most precisely
        if why := rule.check(value, where, label):
            return why
    if why := CONTEXT.check(body, "", "its payloads"):
        return why
    if not rules and "type" not in body and "ssl_check" not in body:
        return (
            "it is not a Slack payload: it has no type (an event or an interaction), no command (a slash command) "
            "and no ssl_check"
        )
    return None
