"""Slack for labbot's tests: the product's Web API emulator, plus checks of labbot's calls against Slack's specs.

`SlackFake` is `labbot.bot.console.emulator.SlackEmulator` served on 127.0.0.1 (port 0) with test helpers: real
slack_sdk clients pointed at it, message texts, Events API envelopes validated against Slack's event wrapper schema, and
`check_against_spec()`, which fails when labbot sent a Web API call with a parameter Slack's published OpenAPI spec does
not list for that method, or left out a required one. Both specs are among the vendor specs (make specs), read
through `vendor_specs.spec_path`: if one is missing, the test that needs it is skipped (with ``CI=true``: fails).

Use `with started() as slack:` (checks the calls against the spec when the block ends without an error; it reads the
spec first, so a missing one skips the test before it runs) or `SlackFake()` with `start()`/`stop()`.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import jsonschema
from slack_sdk import WebClient
from slack_sdk.web.async_client import AsyncWebClient
from vendor_specs import spec_path

from labbot.bot.console.emulator import Call, Message, SlackEmulator

WEB_API_SPEC = "slack-web-openapi-v2.json"
EVENT_WRAPPER_SCHEMA = "slack-event-wrapper-schema.json"
CLIENT_DEFAULT_PARAMS = frozenset({"team_id"})
"""Sent with every call by a slack_sdk client built with ``team_id`` (Bolt's per-request clients are); Slack accepts it
on every method (org-wide apps), though the spec lists it for few."""


def _load(name: str) -> Any:
    return json.loads(spec_path(name).read_text())


@functools.cache
def web_api_spec() -> dict[str, Any]:
    """Slack's Web API OpenAPI 2 document (slackapi/slack-api-specs)."""
    return dict(_load(WEB_API_SPEC))


@functools.cache
def event_wrapper_schema() -> dict[str, Any]:
    """Slack's Events API outer envelope, as a JSON Schema."""
    return dict(_load(EVENT_WRAPPER_SCHEMA))


@dataclass(frozen=True)
class MethodParams:
    """The parameters one Web API method takes: from Slack's spec, else from slack_sdk's method signature."""

    method: str
    source: str  # "spec" or "slack_sdk"
    allowed: frozenset[str]
    required: frozenset[str]
    sdk_allowed: frozenset[str] = frozenset()
    """For spec methods: slack_sdk's explicit keyword parameters (newer than the 2021 spec, e.g. ``metadata``)."""


def _sdk_params(method: str) -> tuple[frozenset[str], frozenset[str]] | None:
    fn = getattr(WebClient, method.replace(".", "_"), None)
    if fn is None or not callable(fn):
        return None
    allowed, required = set(), set()
    for name, param in inspect.signature(fn).parameters.items():
        if name in ("self", "app_token") or param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
            continue  # app_token (apps.connections.open) travels as the bearer token, like token
        allowed.add(name)
        if param.default is param.empty:
            required.add(name)
    return frozenset(allowed), frozenset(required)


@functools.cache
def method_params(method: str) -> MethodParams | None:
    """What Slack accepts for ``method`` (token aside: it may always come in the Authorization header)."""
    path = web_api_spec()["paths"].get(f"/{method}")
    sdk = _sdk_params(method)
    if path:
        params = [p for op in path.values() if isinstance(op, dict) for p in op.get("parameters", [])]
        allowed = frozenset(p["name"] for p in params if p.get("in") in ("formData", "query", "header")) - {"token"}
        required = frozenset(p["name"] for p in params if p.get("required")) - {"token"}
        return MethodParams(method, "spec", allowed, required, sdk[0] if sdk else frozenset())
    if sdk:
        return MethodParams(method, "slack_sdk", sdk[0], sdk[1])
    return None


def spec_problems(calls: Iterable[Call], *, strict: bool = False) -> list[str]:
    """One line per call that Slack's spec would not accept as sent.

    A parameter passes when the spec lists it for the method, or (unless ``strict``) when slack_sdk's own method
    signature names it: the spec was frozen in 2021 and lacks newer parameters such as ``metadata``. Methods the
    spec lacks (files.getUploadURLExternal, files.completeUploadExternal) are checked against slack_sdk's signature.
    ``team_id`` passes everywhere (see CLIENT_DEFAULT_PARAMS).
    """
    problems: list[str] = []
    for i, call in enumerate(calls):
        known = method_params(call.method)
        where = f"call #{i} {call.method}"
        if known is None:
            problems.append(f"{where}: no such method in Slack's spec or in slack_sdk's WebClient")
            continue
        allowed = (known.allowed if strict else known.allowed | known.sdk_allowed) | CLIENT_DEFAULT_PARAMS
        unknown = sorted(set(call.params) - allowed)
        missing = sorted(known.required - set(call.params))
        if unknown:
            problems.append(
                f"{where}: parameter(s) {', '.join(unknown)} not accepted by {call.method} "
                f"(accepted: {', '.join(sorted(allowed))})"
            )
        if missing:
            problems.append(f"{where}: required parameter(s) {', '.join(missing)} missing ({known.source})")
    return problems


class SlackFake(SlackEmulator):
    """The Slack emulator with test helpers; see the module docstring."""

    def check_against_spec(self, *, strict: bool = False) -> None:
        """AssertionError listing every recorded call Slack's published spec would not accept (see `spec_problems`)."""
        problems = spec_problems(self.calls, strict=strict)
        if problems:
            raise AssertionError("Slack Web API calls that do not match Slack's spec:\n  " + "\n  ".join(problems))

    def client(self, **kwargs: Any) -> WebClient:
        """A real slack_sdk WebClient with the bot token, pointed at this fake (started if it was not)."""
        return WebClient(token=self.bot_token, base_url=self.start(), **kwargs)

    def async_client(self, **kwargs: Any) -> AsyncWebClient:
        return AsyncWebClient(token=self.bot_token, base_url=self.start(), **kwargs)

    def texts(self, channel: str | None = None, *, thread_ts: str | None = None) -> list[str]:
        """Texts of the channel's (default channel's) top-level messages, or of one thread, oldest first."""
        return [m.text for m in self.messages(channel or self.default_channel, thread_ts=thread_ts)]

    def last_message(self, channel: str | None = None) -> Message:
        messages = self.messages(channel or self.default_channel)
        if not messages:
            raise AssertionError(f"no messages in {channel or self.default_channel}")
        return messages[-1]

    def validated_event(self, message: Message, **kwargs: Any) -> dict[str, Any]:
        """`event_payload` for ``message``, checked against Slack's event wrapper JSON Schema."""
        payload = self.event_payload(message, **kwargs)
        validate_event_payload(payload)
        return payload


def validate_event_payload(payload: dict[str, Any]) -> None:
    """jsonschema.ValidationError unless ``payload`` is a valid Events API envelope per Slack's schema."""
    jsonschema.validate(payload, event_wrapper_schema())


@contextmanager
def started(*, check_spec: bool = True, **kwargs: Any) -> Iterator[SlackFake]:
    """A started `SlackFake` (``kwargs`` as for SlackEmulator); on a clean exit, its calls are checked against
    Slack's spec (`SlackFake.check_against_spec`), which is read first: missing, the test is skipped before it runs."""
    if check_spec:
        web_api_spec()
    fake = SlackFake(**kwargs)
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()
    if check_spec:
        fake.check_against_spec()
