"""Slack for labbot's tests: the product's Web API emulator with what only tests need, and checks of labbot's calls
against Slack's specs.

`SlackFake` is `labbot.bot.console.emulator.SlackEmulator` served on 127.0.0.1 (port 0) plus:

* recording: every Web API call, in arrival order (`calls`, `calls_to`, `clear_calls`), as a `Call`;
* failure injection (`fakes.failures`): ``fail_next(status, on="chat.postMessage", times=..., retry_after=...)``
  answers the next calls of a method with a 429 (Slack's ``ratelimited``, ``Retry-After: 1`` unless told), a 5xx
  (``internal_error``) or a 200 with an error body, before the token is checked and without applying the call;
  ``hang_next`` holds calls; ``clear_failures`` ends an outage;
* ``when_called(method, action)``: the next call of a method runs ``action`` as it arrives, before it is answered (a
  test acting at that moment of labbot's work: stopping the replica that made it);
* Socket Mode (`fakes.socket_mode`): ``apps.connections.open`` with an app token (``xapp-…``) hands out a websocket
  on this fake, and `socket` sends envelopes over it;
* real slack_sdk clients pointed at it, message texts, Events API envelopes validated against Slack's event wrapper
  schema, and `check_against_spec()`, which fails when labbot sent a Web API call with a parameter Slack's
  published OpenAPI spec does not list for that method, or left out a required one. Both specs are among the vendor
  specs (make specs), read through `vendor_specs.spec_path`: if one is missing, the test that needs it is skipped
  (with ``CI=true``: fails).

Use `with started() as slack:` (checks the calls against the spec when the block ends without an error; it reads the
spec first, so a missing one skips the test before it runs) or `SlackFake()` with `start()`/`stop()`.
"""

from __future__ import annotations

import functools
import inspect
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import jsonschema
from fakes.failures import FailureInjection
from fakes.socket_mode import SocketHub
from slack_sdk import WebClient
from slack_sdk.web.async_client import AsyncWebClient
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, WebSocketRoute
from vendor_specs import spec_path

from labbot.bot.console.emulator import Answer, Message, SlackEmulator

WEB_API_SPEC = "slack-web-openapi-v2.json"
EVENT_WRAPPER_SCHEMA = "slack-event-wrapper-schema.json"
CLIENT_DEFAULT_PARAMS = frozenset({"team_id"})
"""Sent with every call by a slack_sdk client built with ``team_id`` (Bolt's per-request clients are); Slack accepts it
on every method (org-wide apps), though the spec lists it for few."""


@dataclass(frozen=True)
class Call:
    """One recorded Web API call: decoded parameters (without the token), request headers (authorization
    redacted), when it arrived, and how it was answered (``failed`` when an injected failure answered it)."""

    method: str
    params: dict[str, Any]
    headers: dict[str, str]
    time: float
    status: int = 200
    response: dict[str, Any] = field(default_factory=dict)
    failed: bool = False

    @property
    def ok(self) -> bool:
        return self.status == 200 and bool(self.response.get("ok"))

    @property
    def error(self) -> str | None:
        err = self.response.get("error")
        return str(err) if err is not None else None


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


SURFACE_METHODS = (
    "chat.startStream",
    "chat.appendStream",
    "chat.stopStream",
    "assistant.threads.setStatus",
    "assistant.threads.setSuggestedPrompts",
    "views.publish",
)
"""The Web API methods of Slack's AI-app surfaces labbot calls: newer than the 2021 spec (or, views.publish, older
than the arguments slack_sdk gives it), so checked against slack_sdk's own method signatures."""


def sdk_signature_problems(calls: Iterable[Call], methods: Iterable[str] = SURFACE_METHODS) -> list[str]:
    """One line per call to ``methods`` that slack_sdk's signatures of that method (``WebClient`` and
    ``AsyncWebClient``, read with ``inspect.signature``) would not send: a parameter neither names, or a required
    one missing."""
    wanted = set(methods)
    problems: list[str] = []
    for i, call in enumerate(calls):
        if call.method not in wanted:
            continue
        for cls in (WebClient, AsyncWebClient):
            fn = getattr(cls, call.method.replace(".", "_"), None)
            if fn is None:
                problems.append(f"call #{i} {call.method}: slack_sdk's {cls.__name__} has no such method")
                continue
            params = inspect.signature(fn).parameters
            named = {n for n, p in params.items() if n != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
            required = {n for n in named if params[n].default is params[n].empty}
            unknown = sorted(set(call.params) - named - CLIENT_DEFAULT_PARAMS)
            missing = sorted(required - set(call.params))
            if unknown:
                problems.append(f"call #{i} {call.method}: {cls.__name__} names no parameter {', '.join(unknown)}")
            if missing:
                problems.append(f"call #{i} {call.method}: required by {cls.__name__}: {', '.join(missing)}")
    return problems


class SlackFake(SlackEmulator, FailureInjection):
    """The Slack emulator with what tests need; see the module docstring. Arguments as for `SlackEmulator`."""

    def __init__(self, **kwargs: Any) -> None:
        self.socket = SocketHub()  # before the emulator builds its routes, which serve it
        self._calls: list[Call] = []
        self._calls_lock = threading.Lock()
        self._when_called: list[tuple[str, Callable[[dict[str, Any]], object]]] = []
        self.init_failures()
        super().__init__(**kwargs)

    # ----------------------------------------------------------------- recording, failures, Socket Mode

    @property
    def calls(self) -> list[Call]:
        """Every Web API call so far, in arrival order (a copy)."""
        with self._calls_lock:
            return list(self._calls)

    def calls_to(self, method: str) -> list[Call]:
        with self._calls_lock:
            return [c for c in self._calls if c.method == method]

    def clear_calls(self) -> None:
        with self._calls_lock:
            self._calls.clear()

    def _record(self, call: Call) -> None:
        with self._calls_lock:
            self._calls.append(call)

    def when_called(self, method: str, action: Callable[[dict[str, Any]], object]) -> None:
        """Run ``action(params)`` once, when the next call of ``method`` arrives, before it is answered (it is then
        answered as usual). Runs on the fake's event loop: keep it short."""
        with self._calls_lock:
            self._when_called.append((method, action))

    def _take_action(self, method: str) -> Callable[[dict[str, Any]], object] | None:
        with self._calls_lock:
            for i, (name, action) in enumerate(self._when_called):
                if name == method:
                    del self._when_called[i]
                    return action
        return None

    def failure_answer(self, status: int) -> tuple[Any, dict[str, str]]:
        if status == 429:
            return {"ok": False, "error": "ratelimited"}, {"Retry-After": "1"}
        return {"ok": False, "error": "internal_error" if status >= 500 else "fatal_error"}, {}

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving (held calls let go first); state and recorded calls stay readable."""
        self.release()
        super().stop(timeout)

    def routes(self) -> list[BaseRoute]:
        return [*super().routes(), WebSocketRoute("/socket/{conn:str}", self.socket.endpoint)]

    async def serve_call(
        self, method: str, params: dict[str, Any], request: Request, answer: Callable[[], Answer]
    ) -> Response:
        """Record the call; an action set for it (``when_called``) runs first; a queued hang holds it, a queued
        failure answers it, ``apps.connections.open`` opens a Socket Mode connection; else the emulator answers it."""
        arrived = time.time()
        headers = {k: ("Bearer ***" if k == "authorization" else v) for k, v in request.headers.items()}
        action = self._take_action(method)
        if action is not None:
            action(params)
        await self.hold_if_hanging(request, method)
        failure = self.take_failure(method)
        if failure is not None:
            body = failure.body if isinstance(failure.body, dict) else {}
            self._record(Call(method, params, headers, arrived, failure.status, body, failed=True))
            return failure.response()
        if method == "apps.connections.open":  # Socket Mode: takes the app-level token, not the bot's
            auth = request.headers.get("authorization", "")
            if auth.lower().startswith("bearer ") and auth[7:].strip().startswith(self.socket.app_token_prefix):
                body = {"ok": True, "url": self.socket.open(f"ws://{request.url.netloc}")}
            else:
                body = {"ok": False, "error": "invalid_auth"}
            self._record(Call(method, params, headers, arrived, 200, body))
            return JSONResponse(body)
        answered = answer()
        self._record(Call(method, params, headers, arrived, answered.status, answered.body))
        return answered.response()

    # ----------------------------------------------------------------- spec checks and helpers

    def check_against_spec(self, *, strict: bool = False) -> None:
        """AssertionError listing every recorded call Slack's published spec would not accept (see `spec_problems`)."""
        problems = spec_problems(self.calls, strict=strict)
        if problems:
            raise AssertionError("Slack Web API calls that do not match Slack's spec:\n  " + "\n  ".join(problems))

    def check_against_sdk(self) -> None:
        """AssertionError listing every recorded call to the surfaces' methods that slack_sdk's method signatures
        would not send (see `sdk_signature_problems`)."""
        problems = sdk_signature_problems(self.calls)
        if problems:
            raise AssertionError("Web API calls that do not match slack_sdk's signatures:\n  " + "\n  ".join(problems))

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
    fake.check_against_sdk()
    if check_spec:
        fake.check_against_spec()
