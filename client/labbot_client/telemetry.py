"""In-job telemetry client: ships training metrics and heartbeats from a running job to the control plane.

Where it sits: this module is imported by *user training code* running on cluster nodes (Ray workers), not by
the bot. It talks to exactly one endpoint of the control plane::

    POST {LABBOT_CONTROL_URL}/api/v1/runs/{LABBOT_RUN_ID}/telemetry
    Authorization: Bearer {LABBOT_TELEMETRY_TOKEN}
    {"attempt": 1, "sent_at": 1718000000.0,
     "points": [{"step": 10, "ts": 1718000000.0, "metrics": {"loss": 1.23, "tokens_per_s": 4567.0}}],
     "events": [{"kind": "checkpoint", "step": 10, "ts": 1718000000.0, "path": "/ckpt/10"}]}

A request with empty ``points`` and ``events`` is a heartbeat: it lets the control plane tell a job that is
alive but stuck from a job that is dead. Non-finite metric values are sent as the strings ``"NaN"``,
``"Infinity"`` and ``"-Infinity"`` (they are a divergence signal and must arrive as such).

Usage inside a job::

    from labbot_client import telemetry

    telemetry.init()                      # reads LABBOT_* env vars; returns None (no-op mode) outside labbot
    for step in range(n):
        ...
        telemetry.log(step, loss=loss, tokens_per_s=tps)
    telemetry.checkpoint(step, path)
    telemetry.phase("rollout")            # optional: what the job is doing now, carried by every request
    telemetry.finish()                    # optional: an atexit hook flushes the tail anyway

A job with phases (an RL job alternating rollout and learning) names the current one with ``phase()``: every
following request, heartbeats included, carries ``"phase": "rollout"``, so when the step stops advancing labbot
can say where the job is stuck ("stuck in rollout for 12m"). Phase names are 1-32 characters of letters, digits,
``_``, ``-`` and ``.``; anything else is ignored with a warning.

Guarantees and design:

* Only the standard library and httpx are imported: nothing from labbot, no torch/numpy.
* ``log()`` never blocks and never raises. It converts the values with ``float()`` (so ints, bools, numpy
  scalars and 0-d tensors work; unconvertible values and strings are dropped from the point) and appends to a
  bounded ``collections.deque``; when the buffer is full the *oldest* points are dropped and counted in
  ``dropped``. Note that ``float()`` on a CUDA tensor synchronises the device: the value has to be read some
  time, and reading it at ``log()`` time is the only way to get the value *of that step*.
* One daemon sender thread per client sends batches (at most ``batch_size`` points and well under 1 MiB per
  request) every ``flush_interval`` seconds, sooner when a full batch is waiting or a checkpoint is logged,
  and a heartbeat when nothing was sent for ``heartbeat_interval`` seconds, whatever the training loop does.
* Delivery is at-least-once and in order: 2xx accepts a batch; 408/425/429/5xx and connection errors keep the
  batch and retry it with exponential backoff and jitter (capped at ``backoff_max``, 10 s by default) or the
  server's ``Retry-After`` (429/503); any other status (400, 401, 403, 404, 413, 422, ...) drops the batch,
  counts its points in ``dropped`` and warns once on stderr. The token is never written anywhere.
* ``flush()`` cuts a client-side backoff short once (never a server-requested ``Retry-After``) and waits, up
  to its timeout, until everything buffered when it was called has been resolved.
* ``init()`` registers an atexit hook that closes the default client with a deadline (``exit_timeout``,
  default 5 s): the last steps are delivered if the control plane is reachable, and exit is never delayed
  by more than the deadline (the sender is a daemon thread; a request still in flight is abandoned).
* Fork: in a forked child (``os.fork``, multiprocessing's fork start method, DataLoader workers) every
  client inherited from the parent becomes a silent no-op (the parent's thread does not exist there, and
  re-sending the parent's buffered points from the child would duplicate them), and the module default is
  cleared, so module-level ``log()`` is a no-op in the child unless it calls ``init()`` itself.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import math
import os
import re
import sys
import threading
import time
import weakref
from typing import Any
from urllib.parse import quote

import httpx

from labbot_client.backoff import RETRY_AFTER_STATUS, RETRYABLE_STATUS, Backoff, retry_after_seconds

__all__ = ["Telemetry", "checkpoint", "finish", "init", "log", "phase"]

ENV_URL = "LABBOT_CONTROL_URL"
ENV_RUN_ID = "LABBOT_RUN_ID"
ENV_TOKEN = "LABBOT_TELEMETRY_TOKEN"
ENV_ATTEMPT = "LABBOT_ATTEMPT"

#: Request bodies are kept under this many bytes (the server's limit is 1 MiB; leave headroom).
MAX_BODY_BYTES = 1_000_000
#: Checkpoint events per request, and the longest checkpoint path kept (so events alone never hit the limit).
MAX_EVENTS_PER_REQUEST = 100
MAX_PATH_CHARS = 4096
#: The control plane refuses a whole batch over one bad point, so log() enforces its per-point limits up
#: front: non-negative steps, metric names of 1-64 characters, at most 64 metrics a point (the rest dropped).
MAX_METRICS_PER_POINT = 64
MAX_METRIC_NAME_CHARS = 64
#: A phase name: what the control plane accepts (telemetry_ingest checks the same).
PHASE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")

_OK, _REJECTED, _RETRY = "ok", "rejected", "retry"

# (step, ts, {name: float | "NaN" | "Infinity" | "-Infinity"})
_Point = tuple[int, float, dict[str, float | str]]
# (kind, step, ts, path)
_Event = tuple[str, int, float, str | None]


def _write_stderr(message: str) -> None:
    try:
        sys.stderr.write(f"labbot.telemetry: {message}\n")
        sys.stderr.flush()
    except Exception:
        pass


def _redact(message: str, token: str | None) -> str:
    # Tokens shorter than 4 characters are not secrets worth mangling every message for.
    return message.replace(token, "***") if token and len(token) >= 4 else message


def _coerce(value: Any) -> float | str | None:
    """float() the value; encode non-finite floats as JSON-safe strings; None when it is not a number."""
    if type(value) is float:
        f = value
    elif isinstance(value, (str, bytes, bytearray)):
        return None
    else:
        try:
            f = float(value)
        except Exception:
            return None
    if math.isfinite(f):
        return f
    if f != f:
        return "NaN"
    return "Infinity" if f > 0 else "-Infinity"


def _step(value: Any) -> int | None:
    try:
        step = int(value)
    except Exception:
        return None
    return step if step >= 0 else None


class Telemetry:
    """A telemetry client for one run attempt: a bounded buffer plus one daemon sender thread.

    ``log()``/``checkpoint()`` are safe to call from the training loop (O(1), never raise). Counters are
    exact when one thread logs; with several logging threads ``dropped`` may be off by a few. A client built
    directly (not by ``init()``) has no atexit hook: call ``close()`` at the end of the job.
    """

    def __init__(
        self,
        url: str,
        run_id: str,
        token: str,
        attempt: int = 1,
        *,
        flush_interval: float = 1.0,
        heartbeat_interval: float = 5.0,
        max_buffer: int = 10_000,
        batch_size: int = 500,
        timeout: float = 5.0,
        transport: httpx.BaseTransport | None = None,
        backoff_base: float = 0.5,
        backoff_max: float = 10.0,
        max_events: int = 1_000,
    ) -> None:
        self._endpoint = f"{str(url).rstrip('/')}/api/v1/runs/{quote(str(run_id), safe='')}/telemetry"
        self._token = str(token)
        self._headers = {"Authorization": f"Bearer {self._token}", "Content-Type": "application/json"}
        self._attempt = int(attempt)
        self._flush_interval = max(float(flush_interval), 0.005)
        self._heartbeat_interval = max(float(heartbeat_interval), 0.01)
        self._batch_size = max(int(batch_size), 1)
        self._max_buffer = max(int(max_buffer), 1)
        self._max_events = max(int(max_events), 1)
        self._timeout = float(timeout)
        self._transport = transport
        base = max(float(backoff_base), 0.001)
        self._backoff = Backoff(base=base, cap=max(float(backoff_max), base))

        # Producer side (training loop). Only log()/checkpoint() write these.
        self._buf: collections.deque[_Point] = collections.deque(maxlen=self._max_buffer)
        self._events: collections.deque[_Event] = collections.deque(maxlen=self._max_events)
        self._logged = 0  # points appended to _buf, ever
        self._ev_logged = 0
        self._invalid = 0  # log() calls whose step could not be converted
        self._phase: str | None = None  # what the job says it is doing; sent with every request

        # Sender side. Only the sender thread writes these.
        self._popped = 0  # points taken out of _buf, ever (the rest of logged - len(_buf) was evicted)
        self._ev_popped = 0
        self._carry: list[_Point] = []  # points split off an oversize batch: older than anything in _buf
        self._pending: tuple[list[_Point], list[_Event]] | None = None  # the batch being delivered
        self._sent = 0
        self._rejected = 0  # points in batches the server refused (4xx)
        self._oversize = 0  # single points too large for one request
        self._ev_sent = 0
        self._ev_rejected = 0
        self._failures = 0  # consecutive retryable failures
        self._retry_at = 0.0  # monotonic time before which nothing is sent (backoff)
        self._server_delay = False  # the current backoff comes from a Retry-After
        self._backing_off = False  # read by log() so it does not wake the sender during a backoff
        self._last_attempt = time.monotonic()
        self._warned: set[str] = set()
        self._overflow_seen = 0
        self._served_flush = 0

        # Shared.
        self._cond = threading.Condition()
        self._flush_gen = 0  # bumped (under _cond) by flush()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._close_lock = threading.Lock()
        self._closing = False
        self._closed = False  # log() is a no-op once set (close() or forked child)
        self._forked = False
        self._pid = os.getpid()

        _clients.add(self)
        self._thread = threading.Thread(target=self._run, name=f"labbot-telemetry-{run_id}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ training-loop side

    def log(self, step: int, **metrics: float) -> None:
        """Record the metrics of one step. O(1), never blocks on the network, never raises."""
        try:
            if self._closed:
                return
            ts = time.time()
            istep = self._checked_step(step, "a point")
            if istep is None:
                self._invalid += 1
                return
            values: dict[str, float | str] = {}
            for name, raw in metrics.items():
                value = _coerce(raw)
                if value is None:
                    self._warn_once(
                        "metric", f"dropped metric {name!r}: {type(raw).__name__} is not convertible to float"
                    )
                elif not 0 < len(name) <= MAX_METRIC_NAME_CHARS:
                    self._warn_once(
                        "name", f"dropped metric {name!r:.80}: names are 1-{MAX_METRIC_NAME_CHARS} characters"
                    )
                elif len(values) >= MAX_METRICS_PER_POINT:
                    self._warn_once(
                        "many", f"dropped metric {name!r}: at most {MAX_METRICS_PER_POINT} metrics per point"
                    )
                else:
                    values[name] = value
            self._buf.append((istep, ts, values))
            self._logged += 1
            if len(self._buf) >= self._batch_size and not self._backing_off and not self._wake.is_set():
                self._wake.set()
        except Exception:
            pass

    def phase(self, name: str) -> None:
        """Name what the job is doing now (e.g. ``"rollout"``, ``"learn"``); every following request, heartbeats
        included, carries it. Never raises; a name that is not 1-32 letters, digits, ``_``, ``-``, ``.`` is
        ignored with a warning."""
        try:
            if isinstance(name, str) and PHASE_NAME.match(name):
                self._phase = name  # sent with the next batch or heartbeat (within heartbeat_interval)
            else:
                self._warn_once("phase", f"ignored phase {name!r:.40}: use 1-32 letters, digits, '_', '-' or '.'")
        except Exception:
            pass

    def _checked_step(self, step: Any, what: str) -> int | None:
        istep = _step(step)
        if istep is None:
            self._warn_once("step", f"dropped {what}: step {step!r:.40} is not a non-negative integer")
        return istep

    def checkpoint(self, step: int, path: str | None = None) -> None:
        """Record a checkpoint event (sent promptly, with the next batch). Never raises."""
        try:
            if self._closed:
                return
            ts = time.time()
            istep = self._checked_step(step, "an event")
            if istep is None:
                return
            spath = None if path is None else str(path)[:MAX_PATH_CHARS]
            self._events.append(("checkpoint", istep, ts, spath))
            self._ev_logged += 1
            if not self._backing_off:
                self._wake.set()
        except Exception:
            pass

    # ------------------------------------------------------------------ control

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait up to ``timeout`` s until everything buffered now has been sent.

        Returns True if all of it was accepted by the server; False on timeout, or if some of it was dropped
        (buffer overflow, rejected by the server). Cuts a client-side backoff short once.
        """
        try:
            if self._forked or os.getpid() != self._pid:
                return True
            deadline = time.monotonic() + max(float(timeout), 0.0)
            target, ev_target = self._logged, self._ev_logged
            dropped0, ev_dropped0 = self.dropped, self._events_dropped()
            with self._cond:
                self._flush_gen += 1
            self._wake.set()
            with self._cond:
                while not self._resolved(target, ev_target):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not self._thread.is_alive():
                        return False
                    self._cond.wait(min(remaining, 0.1))
            return self.dropped == dropped0 and self._events_dropped() == ev_dropped0
        except Exception:
            return False

    def close(self, timeout: float = 5.0) -> None:
        """Flush (``timeout`` s at most in all), then stop the sender. Idempotent; later log()s are no-ops."""
        try:
            with self._close_lock:
                if self._closing:
                    return
                self._closing = True
            if self._forked or os.getpid() != self._pid:
                self._closed = True
                return
            deadline = time.monotonic() + max(float(timeout), 0.0)
            self.flush(timeout)
            self._closed = True
            self._stop.set()
            self._wake.set()
            self._thread.join(max(deadline - time.monotonic(), 0.0))
        except Exception:
            pass

    @property
    def dropped(self) -> int:
        """Points lost: evicted from the full buffer, rejected by the server, or unusable."""
        return self._invalid + self._rejected + self._oversize + self._overflow()

    @property
    def sent(self) -> int:
        """Points accepted by the server."""
        return self._sent

    def __repr__(self) -> str:
        counts = f"attempt={self._attempt}, sent={self.sent}, dropped={self.dropped}"
        return f"Telemetry({self._endpoint!r}, {counts})"

    # ------------------------------------------------------------------ bookkeeping

    def _overflow(self) -> int:
        # Producer increments _logged after append, the sender increments _popped before popping: a racing
        # read can only undercount transiently, never report a drop that did not happen.
        return max(self._logged - self._popped - len(self._buf), 0)

    def _events_dropped(self) -> int:
        return self._ev_rejected + max(self._ev_logged - self._ev_popped - len(self._events), 0)

    def _resolved(self, target: int, ev_target: int) -> bool:
        points = self._sent + self._rejected + self._oversize + self._overflow()
        events = self._ev_sent + self._events_dropped()
        return points >= target and events >= ev_target

    def _warn_once(self, key: str, message: str) -> None:
        if key in self._warned:
            return
        self._warned.add(key)
        message = _redact(message, self._token)
        _write_stderr(message)

    def _after_fork_in_child(self) -> None:
        self._forked = True
        self._closed = True
        self._closing = True
        self._buf = collections.deque(maxlen=self._max_buffer)
        self._events = collections.deque(maxlen=self._max_events)
        self._carry = []
        self._pending = None

    # ------------------------------------------------------------------ sender thread

    def _run(self) -> None:
        client: httpx.Client | None = None
        try:
            client = httpx.Client(transport=self._transport, timeout=self._timeout)
        except Exception as exc:
            self._warn_once("client", f"telemetry disabled: cannot create HTTP client ({type(exc).__name__})")
            return
        next_flush = time.monotonic() + self._flush_interval
        try:
            while not self._stop.is_set():
                self._wake.clear()
                try:
                    next_flush = self._cycle(client, next_flush)
                except Exception as exc:  # never let the thread die
                    self._warn_once("internal", f"internal error in sender: {type(exc).__name__}: {exc}")
                    self._stop.wait(1.0)
        finally:
            with contextlib.suppress(Exception):
                client.close()

    def _cycle(self, client: httpx.Client, next_flush: float) -> float:
        """One turn of the sender loop: send what is due, then sleep until the next thing is due."""
        now = time.monotonic()
        flush_requested = self._flush_gen != self._served_flush
        if now < self._retry_at:
            if flush_requested and not self._server_delay:
                self._retry_at = now  # a flush cuts a client-side backoff short, once
            else:
                self._sleep(self._retry_at - now)
                return next_flush
        if flush_requested:
            self._served_flush = self._flush_gen
        if (
            self._pending is not None
            or flush_requested
            or now >= next_flush
            or len(self._buf) >= self._batch_size
            or self._events
        ):
            next_flush = now + self._flush_interval
            self._drain(client)
        now = time.monotonic()
        if (
            self._pending is None
            and not self._stop.is_set()
            and now >= self._retry_at
            and now - self._last_attempt >= self._heartbeat_interval
        ):
            self._send(client, [], [])
        self._check_overflow()
        with self._cond:
            self._cond.notify_all()
        now = time.monotonic()
        wake_at = min(next_flush, self._last_attempt + self._heartbeat_interval)
        if self._pending is not None:
            wake_at = min(wake_at, self._retry_at)
        self._sleep(max(wake_at, self._retry_at) - now)
        return next_flush

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._wake.wait(seconds)

    def _drain(self, client: httpx.Client) -> None:
        while not self._stop.is_set():
            body: bytes | None = None
            if self._pending is None:
                batch = self._take_batch()
                if batch is None:
                    return
                points, events, body = batch  # a fresh body for the first try; retries re-encode (sent_at)
                self._pending = (points, events)
            points, events = self._pending
            if self._send(client, points, events, body) == _RETRY:
                return
            self._pending = None
            with self._cond:
                self._cond.notify_all()

    def _take_batch(self) -> tuple[list[_Point], list[_Event], bytes] | None:
        while True:
            points = self._carry[: self._batch_size]
            del self._carry[: len(points)]
            k = min(self._batch_size - len(points), len(self._buf))
            if k > 0:
                self._popped += k  # before popping: see _overflow()
                for _ in range(k):
                    points.append(self._buf.popleft())
            events: list[_Event] = []
            k = min(MAX_EVENTS_PER_REQUEST, len(self._events))
            if k > 0:
                self._ev_popped += k
                for _ in range(k):
                    events.append(self._events.popleft())
            if not points and not events:
                return None
            # Keep the body under the limit: split the batch, the rest goes back to the front of the queue.
            body = self._encode(points, events)
            while points and len(body) > MAX_BODY_BYTES:
                if len(points) > 1:
                    half = len(points) // 2
                    self._carry[:0] = points[half:]
                    del points[half:]
                else:
                    self._oversize += 1
                    self._warn_once("oversize", "dropped a point too large for one request")
                    points = []
                body = self._encode(points, events)
            if points or events:
                return points, events, body

    def _encode(self, points: list[_Point], events: list[_Event]) -> bytes:
        body: dict[str, Any] = {
            "attempt": self._attempt,
            "sent_at": time.time(),
            "points": [{"step": s, "ts": ts, "metrics": m} for s, ts, m in points],
            "events": [{"kind": kind, "step": s, "ts": ts, "path": p} for kind, s, ts, p in events],
        }
        if self._phase is not None:
            body["phase"] = self._phase
        return json.dumps(body, allow_nan=False, separators=(",", ":")).encode("utf-8")

    def _send(self, client: httpx.Client, points: list[_Point], events: list[_Event], body: bytes | None = None) -> str:
        self._last_attempt = time.monotonic()
        if body is None:
            body = self._encode(points, events)
        try:
            response = client.post(self._endpoint, content=body, headers=self._headers)
        except Exception as exc:
            self._retry_later(None, f"{type(exc).__name__}: {exc}")
            return _RETRY
        finally:
            self._last_attempt = time.monotonic()
        status = response.status_code
        if 200 <= status < 300:
            self._sent += len(points)
            self._ev_sent += len(events)
            self._failures = 0
            self._retry_at = 0.0
            self._server_delay = False
            self._backing_off = False
            return _OK
        if status in RETRYABLE_STATUS or status >= 500:
            retry_after = (
                retry_after_seconds(response.headers.get("retry-after")) if status in RETRY_AFTER_STATUS else None
            )
            self._retry_later(retry_after, f"HTTP {status}")
            return _RETRY
        if status in (401, 403):
            self._reject(points, events, "auth", f"HTTP {status}: the control plane refused the telemetry token")
        else:
            self._reject(
                points,
                events,
                "rejected",
                f"HTTP {status}: the control plane rejected a batch ({_snippet(response)})",
            )
        return _REJECTED

    def _reject(self, points: list[_Point], events: list[_Event], key: str, message: str) -> None:
        self._rejected += len(points)
        self._ev_rejected += len(events)
        # A refused batch is not retried, but the next one is sent normally (no backoff reset either way).
        self._failures = 0
        self._retry_at = 0.0
        self._server_delay = False
        self._backing_off = False
        self._warn_once(key, f"{message}; dropping it and counting its points in `dropped` (warned once)")

    def _retry_later(self, retry_after: float | None, reason: str) -> None:
        self._failures += 1
        delay = self._backoff.delay(self._failures, retry_after)
        self._server_delay = retry_after is not None
        self._retry_at = time.monotonic() + delay
        self._backing_off = True
        self._warn_once(
            "unreachable",
            f"control plane unavailable ({reason}); buffering up to {self._max_buffer} points and retrying"
            " with backoff (warned once)",
        )

    def _check_overflow(self) -> None:
        overflow = self._overflow()
        if overflow > self._overflow_seen:
            self._overflow_seen = overflow
            self._warn_once(
                "overflow", f"telemetry buffer full ({self._max_buffer} points): dropping the oldest points"
            )


def _snippet(response: httpx.Response) -> str:
    try:
        text = " ".join(response.text.split())
    except Exception:
        return "no body"
    return (text[:200] + "...") if len(text) > 200 else (text or "no body")


# ---------------------------------------------------------------------- module-level default client

_clients: weakref.WeakSet[Telemetry] = weakref.WeakSet()
_default: Telemetry | None = None
_lock = threading.Lock()
_atexit_registered = False
_exit_timeout = 5.0


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        _write_stderr(f"ignoring {name}={raw!r}: not an integer; using {default}")
        return default


def init(
    url: str | None = None,
    run_id: str | None = None,
    token: str | None = None,
    attempt: int | None = None,
    *,
    exit_timeout: float = 5.0,
    **options: Any,
) -> Telemetry | None:
    """Create the module's default client from arguments, falling back to the ``LABBOT_*`` environment.

    Returns None (and module-level ``log``/``checkpoint``/``finish`` stay no-ops) when the URL, run id or
    token is missing, e.g. when a job is run by hand outside labbot. Idempotent: while a default client is
    open, a second call returns it. ``options`` are passed to :class:`Telemetry`. Registers an atexit hook
    that closes the default client, waiting at most ``exit_timeout`` seconds. Never raises.
    """
    global _default, _atexit_registered, _exit_timeout
    try:
        with _lock:
            if _default is not None and not _default._closed:
                return _default
            url = url or os.environ.get(ENV_URL, "").strip()
            run_id = run_id or os.environ.get(ENV_RUN_ID, "").strip()
            token = token or os.environ.get(ENV_TOKEN, "").strip()
            if not (url and run_id and token):
                return None
            resolved_attempt = int(attempt) if attempt is not None else _env_int(ENV_ATTEMPT, 1)
            client = Telemetry(url, run_id, token, resolved_attempt, **options)
            _default = client
            _exit_timeout = float(exit_timeout)
            if not _atexit_registered:
                atexit.register(_at_exit)
                _atexit_registered = True
            return client
    except Exception as exc:
        message = f"telemetry disabled: init failed ({type(exc).__name__}: {exc})"
        _write_stderr(_redact(message, token))
        return None


def log(step: int, **metrics: float) -> None:
    """Log one step's metrics on the default client; a no-op without one. Never raises."""
    client = _default
    if client is not None:
        client.log(step, **metrics)


def checkpoint(step: int, path: str | None = None) -> None:
    """Record a checkpoint event on the default client; a no-op without one. Never raises."""
    client = _default
    if client is not None:
        client.checkpoint(step, path)


def phase(name: str) -> None:
    """Name the default client's current phase (see :meth:`Telemetry.phase`); a no-op without one. Never raises."""
    client = _default
    if client is not None:
        client.phase(name)


def finish(timeout: float = 5.0) -> None:
    """Flush and close the default client (at most ``timeout`` s) and forget it. Idempotent; never raises."""
    global _default
    try:
        with _lock:
            client, _default = _default, None
        if client is not None:
            client.close(timeout)
    except Exception:
        pass


def _at_exit() -> None:
    finish(_exit_timeout)


def _after_fork_in_child() -> None:
    global _default, _lock
    _lock = threading.Lock()  # the parent's may have been held by another thread at fork time
    _default = None
    for client in list(_clients):
        client._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
