"""How every HTTP fake here misbehaves on purpose: failures and hangs queued by a test, taken by the requests.

A fake mixes in `FailureInjection`, calls ``self.init_failures()`` in its constructor and gets, for its tests:

* ``fail_next(status, times=1, on=None, headers=None, body=None, retry_after=None)``: the next ``times`` requests
  (to ``on`` only, when given) are answered ``status`` with ``headers`` (``retry_after`` becomes ``Retry-After``) and
  ``body``: a JSON value; a ``str`` sent as it is as ``text/html`` (a proxy's error page); ``bytes`` sent as they are
  as ``application/json`` (a cut-off body); a ``Content-Type`` in ``headers`` overrides either. Without a body, the
  vendor's own answer to that status (the fake's `failure_answer`). Several calls queue up, in order;
* ``hang_next(times=1, seconds=None, on=None)``: the next ``times`` requests are held — until `release()`, the fake
  stops, the client hangs up (its timeout) or ``seconds`` pass (default ``max_hang_s``) — and then answered as usual
  (a failure queued too is the answer: a slow 503);
* ``release()`` ends every hang now and lets queued ones through; ``clear_failures(on=None)`` drops what is queued
  and not yet taken (for ``on``, or everything): the outage is over.

What ``on`` names is the fake's: a Slack method (``"chat.postMessage"``), a method and path template or path
(``"PATCH /v1/blocks/{block_id}/children"``, ``"GET /v1/blocks/<id>/children"``), a GraphQL operation
(``"IssueCreate"``). The fake decides where in its handling a request takes a hang (`hold_if_hanging`, with the names
the request goes by) and a failure (`take_failure`, answered with `Failure.response()`), so that, e.g., Notion's
injected failures answer only requests Notion would accept, and PagerDuty's answer before any validation.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

__all__ = ["Failure", "FailureInjection"]


@dataclass(frozen=True)
class Failure:
    """One injected answer: ``status``, ``headers`` and ``body`` (see the module docstring for the body's kinds)."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None

    def response(self) -> Response:
        """The Starlette response for this answer."""
        if isinstance(self.body, str | bytes):
            headers = {k: v for k, v in self.headers.items() if k.lower() != "content-type"}
            given = next((v for k, v in self.headers.items() if k.lower() == "content-type"), None)
            default = "text/html" if isinstance(self.body, str) else "application/json"
            return Response(self.body, self.status, headers, media_type=given or default)
        return JSONResponse(self.body, self.status, self.headers)


@dataclass
class _Queued:
    on: str | None  # None: any request
    times: int
    failure: Failure | None = None  # None: a hang
    seconds: float | None = None  # a hang's longest hold (None: the fake's max_hang_s)


class FailureInjection:
    """Queued failures and hangs for an HTTP fake; see the module docstring."""

    max_hang_s: float = 30.0
    _injected: deque[_Queued]
    _hangs: deque[_Queued]
    _injection_lock: threading.Lock
    _releases: int  # release() counts up; a hang ends when the count moves

    def init_failures(self, *, max_hang_s: float | None = None) -> None:
        """Set up the queues (a fake calls this in its constructor)."""
        self._injected = deque()
        self._hangs = deque()
        self._injection_lock = threading.Lock()
        self._releases = 0
        if max_hang_s is not None:
            self.max_hang_s = max_hang_s

    # ----------------------------------------------------------------- what tests call

    def fail_next(
        self,
        status: int,
        *,
        times: int = 1,
        on: str | None = None,
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        retry_after: float | None = None,
    ) -> None:
        """Answer the next ``times`` requests (to ``on``) with ``status``; see the module docstring."""
        if times < 1:
            raise ValueError("times must be at least 1")
        if body is None:
            body, default_headers = self.failure_answer(status)
        else:
            default_headers = {}
        merged = {**default_headers, **(headers or {})}
        if retry_after is not None:
            merged["Retry-After"] = f"{retry_after:g}"
        with self._injection_lock:
            self._injected.append(_Queued(on, times, Failure(status, merged, body)))

    def hang_next(self, times: int = 1, *, seconds: float | None = None, on: str | None = None) -> None:
        """Hold the next ``times`` requests (to ``on``) until `release`, the client hangs up, or ``seconds``."""
        if times < 1:
            raise ValueError("times must be at least 1")
        with self._injection_lock:
            self._hangs.append(_Queued(on, times, seconds=seconds))

    def release(self) -> None:
        """End every hang now, and let the hangs still queued through unheld."""
        with self._injection_lock:
            self._hangs.clear()
            self._releases += 1

    def clear_failures(self, on: str | None = None) -> None:
        """Drop the failures and hangs queued and not yet taken: for ``on``, or (None) all of them."""
        with self._injection_lock:
            for queue in (self._injected, self._hangs):
                kept = [q for q in queue if on is not None and q.on != on]
                queue.clear()
                queue.extend(kept)

    # ----------------------------------------------------------------- what the fake calls

    def failure_answer(self, status: int) -> tuple[Any, dict[str, str]]:
        """The vendor's own answer to an injected ``status``: (body, headers). Fakes override it with their
        vendor's error bodies; raise ValueError for a status the vendor would not fail with."""
        return {"error": f"injected HTTP {status}"}, {}

    def take_failure(self, *names: str) -> Failure | None:
        """The first queued failure for a request going by ``names`` (or for any request), counted as used."""
        with self._injection_lock:
            entry = _take(self._injected, names)
        return entry.failure if entry is not None else None

    async def hold_if_hanging(self, request: Request, *names: str) -> bool:
        """Hold this request if a hang is queued for it (see `hang_next`). False when the client hung up meanwhile
        (nobody reads the answer), else True."""
        with self._injection_lock:
            hang = _take(self._hangs, names)
            if hang is None:
                return True
            seconds = self.max_hang_s if hang.seconds is None else hang.seconds
            releases = self._releases
        deadline = time.monotonic() + seconds
        while self._releases == releases and time.monotonic() < deadline:
            if await request.is_disconnected():
                return False
            await asyncio.sleep(0.01)  # polled: release() comes from another thread
        return True


def _take(queue: deque[_Queued], names: tuple[str, ...]) -> _Queued | None:
    """The first entry of ``queue`` for a request going by ``names``, one of its times used (called locked)."""
    for entry in queue:
        if entry.on is None or entry.on in names:
            entry.times -= 1
            if entry.times <= 0:
                queue.remove(entry)
            return entry
    return None
