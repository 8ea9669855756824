"""PagerDuty Events API v2 client: how labbot pages a human, and tells PagerDuty the page is handled or over.

Where it sits: the pager (``labbot.agents.babysitter.pager``) decides *when* to page; this module only speaks the wire
protocol, one event per call, and reports what PagerDuty made of it. It never retries by itself: `SendResult.outcome`
says whether the caller should (``"retry"``, with PagerDuty's ``Retry-After`` when one came) or must not
(``"rejected"``)::

    POST https://events.pagerduty.com/v2/enqueue
    {"routing_key": "...", "event_action": "trigger", "dedup_key": "labbot-k3xq7p-diverged",
     "payload": {"summary": "run k3xq7p diverged (loss NaN at step 310)", "source": "labbot", "severity": "critical"},
     "links": [{"href": "https://slack.com/...", "text": "Slack thread"}], "client": "labbot"}
    → 202 {"status": "success", "message": "Event processed", "dedup_key": "labbot-k3xq7p-diverged"}

``acknowledge`` and ``resolve`` carry only ``routing_key``, ``event_action`` and ``dedup_key``: PagerDuty ties them
to the alert the trigger with the same ``dedup_key`` opened.

Answers, as PagerDuty documents them: 2xx accepted; 400 the event is invalid (never retry it); 429 too many events
for the service and 5xx trouble on PagerDuty's side, like network errors and timeouts, are worth retrying later.

The routing key is a credential (anyone holding it can page the on-call). It travels only in the request body: no
message, log line, repr or exception text made here contains it.

Usage::

    pd = PagerDutyClient(routing_key)                # transport=httpx.MockTransport(...) or a fake's URL in tests
    result = await pd.trigger("labbot-k3xq7p-diverged", "run k3xq7p diverged", custom_details={"step": 310})
    if result.outcome == "retry":
        ...                                          # try again after result.retry_after_s (or a backoff)
    await pd.resolve("labbot-k3xq7p-diverged")
    await pd.aclose()
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from labbot.common.durations import format_duration
from labbot.common.observe import NO_OBSERVER, Observer
from labbot_client.backoff import retry_after_seconds

__all__ = [
    "ACTIONS",
    "EVENTS_URL",
    "SEVERITIES",
    "Outcome",
    "PagerDutyClient",
    "SendResult",
    "event_body",
]

log = logging.getLogger(__name__)

EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"
ACTIONS = ("trigger", "acknowledge", "resolve")
SEVERITIES = ("critical", "error", "warning", "info")
MAX_SUMMARY = 1024
MAX_DEDUP_KEY = 255
CLIENT_NAME = "labbot"
_REDACTED = "<routing key>"
EMPTY_KEY = "PagerDuty routing key is empty: set it to the integration key of an Events API v2 service"

Outcome = Literal["accepted", "retry", "rejected"]


@dataclass(frozen=True)
class SendResult:
    """What became of one event: whether to retry it, and a log-safe line saying why."""

    outcome: Outcome
    status: int | None
    """HTTP status; None when no answer came (network error, timeout)."""
    retry_after_s: float | None
    """PagerDuty's ``Retry-After`` in seconds (from seconds or an HTTP date), when it sent one."""
    message: str
    """For logs: what happened. Never contains the routing key."""

    @property
    def accepted(self) -> bool:
        return self.outcome == "accepted"


def event_body(
    routing_key: str,
    action: str,
    dedup_key: str,
    *,
    summary: str = "",
    source: str = "labbot",
    severity: str = "critical",
    custom_details: Mapping[str, Any] | None = None,
    links: Sequence[Mapping[str, str]] = (),
    client_url: str | None = None,
    timestamp: str | None = None,
    component: str | None = None,
    group: str | None = None,
    event_class: str | None = None,
) -> dict[str, Any]:
    """The JSON body of one Events API v2 event (pure).

    ``summary`` is cut to PagerDuty's 1024 characters. Payload fields, ``links`` and ``client_url`` belong to a
    trigger only and are left out of ``acknowledge``/``resolve``. ValueError (never naming the routing key) for an
    unknown action or severity, an empty or over-long (255) dedup key, a trigger without summary or source, or a
    link without ``href``.
    """
    if not routing_key:
        raise ValueError(EMPTY_KEY)
    if action not in ACTIONS:
        raise ValueError(f"unknown PagerDuty event action {action!r}: use one of {', '.join(ACTIONS)}")
    if not dedup_key:
        raise ValueError("empty PagerDuty dedup_key: give each alert a stable key, e.g. 'run-42/diverged'")
    if len(dedup_key) > MAX_DEDUP_KEY:
        raise ValueError(f"PagerDuty dedup_key is {len(dedup_key)} characters long: at most {MAX_DEDUP_KEY} allowed")
    body: dict[str, Any] = {"routing_key": routing_key, "event_action": action, "dedup_key": dedup_key}
    if action != "trigger":
        return body
    if severity not in SEVERITIES:
        raise ValueError(f"unknown PagerDuty severity {severity!r}: use one of {', '.join(SEVERITIES)}")
    if not summary.strip():
        raise ValueError("a PagerDuty trigger needs a summary: say what is wrong, e.g. 'run 42 diverged'")
    if not source.strip():
        raise ValueError("a PagerDuty trigger needs a source: the system that has the problem, e.g. 'labbot'")
    payload: dict[str, Any] = {"summary": summary[:MAX_SUMMARY], "source": source, "severity": severity}
    optional = {"timestamp": timestamp, "component": component, "group": group, "class": event_class}
    payload.update({k: v for k, v in optional.items() if v is not None})
    if custom_details is not None:
        payload["custom_details"] = dict(custom_details)
    body["payload"] = payload
    if links:
        for link in links:
            if not link.get("href"):
                raise ValueError(f"PagerDuty link {dict(link)!r} has no href: give each link an href (and a text)")
        body["links"] = [dict(link) for link in links]
    body["client"] = CLIENT_NAME
    if client_url:
        body["client_url"] = client_url
    return body


class PagerDutyClient:
    """Sends Events API v2 events over one pooled ``httpx.AsyncClient``; see the module docstring.

    ``transport`` is the test seam (``httpx.MockTransport``), ``url`` the other one (a local fake's URL). `send`
    never raises for HTTP or network trouble; it raises ValueError for an event `event_body` refuses (and
    TypeError for ``custom_details`` that JSON cannot encode): both are labbot's bugs, not PagerDuty's trouble.
    """

    def __init__(
        self,
        routing_key: str,
        *,
        url: str = EVENTS_URL,
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
        observer: Observer = NO_OBSERVER,
    ) -> None:
        if not routing_key:
            raise ValueError(EMPTY_KEY)
        self.observer = observer  # an event not accepted, by action and HTTP status (``/metrics``)
        self._routing_key = routing_key
        self.url = url
        self._http = httpx.AsyncClient(
            timeout=timeout, transport=transport, headers={"User-Agent": f"{CLIENT_NAME} (PagerDuty Events API v2)"}
        )

    def __repr__(self) -> str:
        return f"PagerDutyClient(url={self.url!r})"

    async def send(
        self,
        action: str,
        dedup_key: str,
        *,
        summary: str = "",
        source: str = "labbot",
        severity: str = "critical",
        custom_details: Mapping[str, Any] | None = None,
        links: Sequence[Mapping[str, str]] = (),
        client_url: str | None = None,
        timestamp: str | None = None,
        component: str | None = None,
        group: str | None = None,
        event_class: str | None = None,
    ) -> SendResult:
        """Send one event (fields as for `event_body`) and say what became of it."""
        body = event_body(
            self._routing_key, action, dedup_key, summary=summary, source=source, severity=severity,
            custom_details=custom_details, links=links, client_url=client_url, timestamp=timestamp,
            component=component, group=group, event_class=event_class,
        )  # fmt: skip
        what = f"PagerDuty {action} {dedup_key!r}"
        try:
            response = await self._http.post(self.url, json=body)
        except httpx.TimeoutException as e:
            self.observer.api_error("pagerduty", action, "timeout")
            result = SendResult("retry", None, None, f"{what}: timed out ({type(e).__name__}); retry later")
        except httpx.HTTPError as e:
            self.observer.api_error("pagerduty", action, "connection")
            reason = self._scrub(str(e)) or "no answer"
            result = SendResult("retry", None, None, f"{what}: {type(e).__name__}: {reason}; retry later")
        else:
            result = self._result(what, response)
            if not response.is_success:
                self.observer.api_error("pagerduty", action, str(response.status_code))
        level = logging.WARNING if result.outcome == "rejected" else logging.DEBUG
        log.log(level, "%s", result.message)
        return result

    async def trigger(self, dedup_key: str, summary: str, **fields: Any) -> SendResult:
        """Open an alert, or add to the open one with this ``dedup_key``; ``fields`` as for `send`."""
        return await self.send("trigger", dedup_key, summary=summary, **fields)

    async def acknowledge(self, dedup_key: str) -> SendResult:
        return await self.send("acknowledge", dedup_key)

    async def resolve(self, dedup_key: str) -> SendResult:
        return await self.send("resolve", dedup_key)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> PagerDutyClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ----------------------------------------------------------------- answers

    def _result(self, what: str, response: httpx.Response) -> SendResult:
        status = response.status_code
        detail = self._detail(response)
        if 200 <= status < 300:
            return SendResult("accepted", status, None, f"{what}: accepted (HTTP {status})")
        if status == 429 or status >= 500:
            retry_after = retry_after_seconds(response.headers.get("retry-after"))
            when = f"after {format_duration(retry_after)}" if retry_after is not None else "later"
            why = "too many events for this service" if status == 429 else "PagerDuty-side error"
            return SendResult("retry", status, retry_after, f"{what}: HTTP {status} ({why}{detail}); retry {when}")
        return SendResult("rejected", status, None, f"{what}: rejected, HTTP {status}{detail}; not retrying")

    def _detail(self, response: httpx.Response) -> str:
        """PagerDuty's own words about a failure (``message`` and ``errors``), scrubbed and kept short."""
        if response.is_success:
            return ""
        try:
            data = response.json()
        except ValueError:
            text = response.text.strip()[:200]
            return f": {self._scrub(text)}" if text else ""
        if not isinstance(data, dict):
            return ""
        parts = [str(data.get("message") or data.get("status") or "")]
        errors = data.get("errors")
        if isinstance(errors, list) and errors:
            parts.append("; ".join(str(e) for e in errors[:5]))
        text = " - ".join(p for p in parts if p)[:500]
        return f": {self._scrub(text)}" if text else ""

    def _scrub(self, text: str) -> str:
        # PagerDuty's errors and httpx's exception texts should never echo the key; make sure they cannot.
        return text.replace(self._routing_key, _REDACTED)
