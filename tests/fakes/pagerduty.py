"""PagerDuty for labbot's tests: the Events API v2 enqueue endpoint, served over real HTTP on 127.0.0.1.

`PagerDutyFake` answers ``POST /v2/enqueue`` the way PagerDuty documents it, from a uvicorn thread on a free port,
so that `labbot.agents.babysitter.pagerduty.PagerDutyClient` in the test process and a ``labbot serve`` subprocess
(given ``PAGERDUTY_EVENTS_URL=fake.url``) page the same fake. It keeps:

* `requests`: every request, accepted or not, with the status it was answered;
* `events`: the accepted event bodies, in order;
* `incidents`: dedup_key → ``"triggered"``/``"acknowledged"``/``"resolved"``, tracked as PagerDuty tracks alerts: a
  trigger opens an alert (or adds to the open one, whose state it keeps); acknowledge and resolve act on the open
  alert and are accepted but change nothing for an unknown or resolved key; a trigger after a resolve opens a new one.

Validation is strict, as PagerDuty's: a non-JSON content type, bad JSON, a body that is not an object, a missing or
wrong-length (32) ``routing_key``, a bad ``event_action``, a missing ``dedup_key`` on acknowledge/resolve (a trigger
without one gets a generated key, returned in the answer), a dedup_key over 255 characters, a trigger without
``payload.summary``/``source``/``severity``, an unknown severity, a summary over 1024 characters (PagerDuty would
truncate it; labbot must not send one) or a link without ``href`` are answered 400 with PagerDuty's invalid-event
body. `fail_next` (`fakes.failures`) queues answers (429, 5xx, 400) given before any validation; `hang_next` holds
requests.

Use ``with PagerDutyFake() as pd:`` or `start()`/`stop()`; `reset()` lets one server serve many tests;
`wait_for_events` waits on a condition, not a sleep.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from fakes.failures import Failure, FailureInjection
from fakes.served import ServedFake
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

ROUTING_KEY = "labbot0test0routing0key000000032"
"""A well-formed (32-character) integration key for tests."""
ACTIONS = ("trigger", "acknowledge", "resolve")
SEVERITIES = ("critical", "error", "warning", "info")
INVALID = {"status": "invalid event", "message": "Event object is invalid"}


@dataclass(frozen=True)
class SeenRequest:
    """One request to the fake and how it was answered."""

    method: str
    path: str
    content_type: str
    body: bytes
    status: int
    errors: tuple[str, ...] = ()
    """Why a 400 from validation was given (empty otherwise)."""

    def json(self) -> Any:
        return json.loads(self.body)


class PagerDutyFake(ServedFake, FailureInjection):
    """PagerDuty's Events API v2 on 127.0.0.1; see the module docstring.

    ``key_length``: the routing key length PagerDuty insists on (32); None accepts any non-empty key.
    """

    def __init__(self, *, key_length: int | None = 32) -> None:
        self.key_length = key_length
        self._cond = threading.Condition()
        self._requests: list[SeenRequest] = []
        self._events: list[dict[str, Any]] = []
        self._incidents: dict[str, str] = {}
        self.init_failures()
        self.app = Starlette(routes=[Route("/v2/enqueue", self._enqueue, methods=["POST"])])
        self.serve_app(self.app, "PagerDuty fake", path="/v2/enqueue")

    # ----------------------------------------------------------------- what tests read

    @property
    def requests(self) -> list[SeenRequest]:
        with self._cond:
            return list(self._requests)

    @property
    def events(self) -> list[dict[str, Any]]:
        with self._cond:
            return list(self._events)

    @property
    def incidents(self) -> dict[str, str]:
        with self._cond:
            return dict(self._incidents)

    def failure_answer(self, status: int) -> tuple[Any, dict[str, str]]:
        """PagerDuty's answer to an injected status (`fail_next`: before validation, nothing becomes an event)."""
        if status < 400:
            raise ValueError(f"fail_next({status}): give a failure status, e.g. 429, 500 or 503")
        if status == 400:
            return {**INVALID, "errors": ["injected failure"]}, {}
        if status == 429:
            return {"status": "throttle event", "message": "Requests for this service are arriving too quickly."}, {}
        return {"status": "error", "message": f"injected HTTP {status}"}, {}

    def reset(self) -> None:
        """Forget every request, event, incident and queued failure (the server keeps running)."""
        with self._cond:
            self._requests.clear()
            self._events.clear()
            self._incidents.clear()
        self.clear_failures()

    def wait_for_events(self, n: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The accepted events once there are at least ``n``; AssertionError after ``timeout`` seconds."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._events) >= n, timeout):
                seen = [f"{r.status} {r.errors or ''}" for r in self._requests]
                raise AssertionError(
                    f"PagerDuty fake: waited {timeout:g}s for {n} event(s), got {len(self._events)}; requests: {seen}"
                )
            return list(self._events)

    # ----------------------------------------------------------------- HTTP

    async def _enqueue(self, request: Request) -> Response:
        body = await request.body()
        ctype = request.headers.get("content-type", "")
        await self.hold_if_hanging(request, "POST /v2/enqueue")
        failure = self.take_failure("POST /v2/enqueue")
        if failure is not None:
            return self._answer(request, body, ctype, failure.status, failure=failure)
        errors, event = _validate(ctype, body, self.key_length)
        if errors:
            return self._answer(request, body, ctype, 400, {**INVALID, "errors": errors}, errors=tuple(errors))
        assert event is not None
        if not event.get("dedup_key"):
            event["dedup_key"] = uuid.uuid4().hex
        with self._cond:
            self._events.append(event)
            self._apply(event["event_action"], event["dedup_key"])
        answer = {"status": "success", "message": "Event processed", "dedup_key": event["dedup_key"]}
        return self._answer(request, body, ctype, 202, answer)

    def _answer(
        self,
        request: Request,
        body: bytes,
        ctype: str,
        status: int,
        answer: dict[str, Any] | None = None,
        failure: Failure | None = None,
        errors: tuple[str, ...] = (),
    ) -> Response:
        with self._cond:
            self._requests.append(SeenRequest(request.method, request.url.path, ctype, body, status, errors))
            self._cond.notify_all()
        return failure.response() if failure is not None else JSONResponse(answer, status_code=status)

    def _apply(self, action: str, key: str) -> None:
        """PagerDuty's alert states for one dedup_key (called with the lock held)."""
        state = self._incidents.get(key)
        is_open = state in ("triggered", "acknowledged")
        if action == "trigger" and not is_open:
            self._incidents[key] = "triggered"
        elif action == "acknowledge" and is_open:
            self._incidents[key] = "acknowledged"
        elif action == "resolve" and is_open:
            self._incidents[key] = "resolved"

    def _before_stop(self) -> None:
        self.release()


def _validate(ctype: str, body: bytes, key_length: int | None) -> tuple[list[str], dict[str, Any] | None]:
    """PagerDuty's checks of one enqueue request: (errors, the event when there are none)."""
    if ctype.split(";")[0].strip().lower() != "application/json":
        return [f"Content-Type must be application/json, got {ctype or 'none'!r}"], None
    try:
        event = json.loads(body)
    except ValueError:
        return ["Event is not valid JSON"], None
    if not isinstance(event, dict):
        return ["Event must be a JSON object"], None
    errors: list[str] = []
    key = event.get("routing_key")
    if not isinstance(key, str) or not key:
        errors.append("'routing_key' is missing or blank")
    elif key_length is not None and len(key) != key_length:
        errors.append(f"Length of 'routing_key' is incorrect (should be {key_length} characters)")
    action = event.get("event_action")
    if action not in ACTIONS:
        errors.append(f"'event_action' is missing or invalid (should be one of: {', '.join(ACTIONS)})")
    dedup_key = event.get("dedup_key")
    if dedup_key is not None and not isinstance(dedup_key, str):
        errors.append("'dedup_key' must be a string")
    elif dedup_key and len(dedup_key) > 255:
        errors.append("Length of 'dedup_key' is too long (maximum is 255 characters)")
    elif not dedup_key and action in ("acknowledge", "resolve"):
        errors.append(f"'dedup_key' is required for {action} events")
    if action == "trigger":
        errors += _trigger_errors(event)
    return errors, (None if errors else event)


def _trigger_errors(event: dict[str, Any]) -> list[str]:
    payload = event.get("payload")
    if not isinstance(payload, dict):
        return ["'payload' is missing or not an object"]
    errors = [f"'payload.{f}' is missing or blank" for f in ("summary", "source", "severity") if not _text(payload, f)]
    severity = payload.get("severity")
    if _text(payload, "severity") and severity not in SEVERITIES:
        errors.append(f"'payload.severity' is invalid (should be one of: {', '.join(SEVERITIES)})")
    if _text(payload, "summary") and len(payload["summary"]) > 1024:
        errors.append("Length of 'payload.summary' is too long (maximum is 1024 characters)")
    if "custom_details" in payload and not isinstance(payload["custom_details"], dict):
        errors.append("'payload.custom_details' must be an object")
    links = event.get("links", [])
    if not isinstance(links, list) or not all(isinstance(li, dict) and li.get("href") for li in links):
        errors.append("'links' must be a list of objects, each with an 'href'")
    return errors


def _text(obj: dict[str, Any], field: str) -> bool:
    value = obj.get(field)
    return isinstance(value, str) and bool(value.strip())
