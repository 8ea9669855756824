"""The model API edge of the agent runtime: which model, how to reach it, and what its failures mean.

``ModelSettings.from_env`` reads ``ANTHROPIC_API_KEY`` (none ⇒ no model configured: agents answer
``NO_MODEL_MESSAGE``), ``ANTHROPIC_BASE_URL`` (proxies, gateways, the test fake) and ``LABBOT_MODEL``;
``make_client`` builds the one ``AsyncAnthropic`` the runtime (``labbot.agents.fleet.runtime``) talks to — or, for
``ModelSettings.demo_model()`` (``labbot console --demo``), the scripted demo model
(``labbot.agents.fleet.demo_model``). The SDK's own retries are off: the runtime retries with the shared policy
(``labbot.common.retry``) so that each wait and the final failure can be told in the thread. ``describe_failure``
sorts an SDK exception into retryable or not, with a plain description and the wait the API asked for
(``retry-after``); ``MODEL_RETRY`` says how often to try and how long to wait when it did not.

The key never appears in a repr, a log line or a message: descriptions are built from status codes and the API's
own error text, never from the request.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from labbot.common.errors import BadRequest
from labbot.common.retry import Backoff, RetryPolicy
from labbot_client.backoff import retry_after_seconds

if TYPE_CHECKING:  # the SDK takes seconds to import: only a process that makes a client pays for it
    import anthropic
    from anthropic import AsyncAnthropic

    from labbot.agents.fleet.demo_model import DemoClient

__all__ = [
    "ANTHROPIC_API_URL",
    "DEFAULT_MODEL",
    "MODEL_RETRY",
    "NO_MODEL_MESSAGE",
    "ModelFailure",
    "ModelSettings",
    "describe_failure",
    "make_client",
]

DEFAULT_MODEL = "claude-sonnet-5-5"
"""The current Sonnet (Claude Sonnet 5.5): the best mix of speed and judgement for tool-using agents."""
ANTHROPIC_API_URL = "https://api.anthropic.com"

NO_MODEL_MESSAGE = (
    "No model is configured, so I can't think about this one. To turn agents on, set ANTHROPIC_API_KEY in labbot's "
    f"environment and restart it; optionally set LABBOT_MODEL (default {DEFAULT_MODEL}) and ANTHROPIC_BASE_URL "
    "(for a proxy or gateway)."
)


@dataclass(frozen=True)
class ModelSettings:
    """How to reach the model. ``api_key`` is None when no model is configured; repr never shows it."""

    api_key: str | None = field(default=None, repr=False)
    base_url: str = ANTHROPIC_API_URL
    model: str = DEFAULT_MODEL
    timeout_s: float = 180.0  # one Messages API call; the run's wall-time budget bounds the whole loop
    demo: bool = False  # the scripted demo model (labbot.agents.fleet.demo_model), no API: `labbot console --demo`

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ModelSettings:
        base_url = (env.get("ANTHROPIC_BASE_URL") or "").strip() or ANTHROPIC_API_URL
        parsed = urlparse(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise BadRequest(f"ANTHROPIC_BASE_URL must be an http(s) URL such as {ANTHROPIC_API_URL}, got {base_url!r}")
        return cls(
            api_key=(env.get("ANTHROPIC_API_KEY") or "").strip() or None,
            base_url=base_url.rstrip("/"),
            model=(env.get("LABBOT_MODEL") or "").strip() or DEFAULT_MODEL,
        )

    @classmethod
    def demo_model(cls) -> ModelSettings:
        """The scripted demo model (``labbot.agents.fleet.demo_model``): agents that work without a key, their words
        a script's and labelled so."""
        from labbot.agents.fleet.demo_model import DEMO_MODEL

        return cls(model=DEMO_MODEL, demo=True)

    @property
    def configured(self) -> bool:
        return self.api_key is not None or self.demo

    def __repr__(self) -> str:
        key = "set" if self.api_key else "unset"
        return (
            f"ModelSettings(api_key=<{key}>, base_url={self.base_url!r}, model={self.model!r}, "
            f"timeout_s={self.timeout_s:g}{', demo' if self.demo else ''})"
        )


def make_client(settings: ModelSettings) -> AsyncAnthropic | DemoClient:
    """The SDK client for ``settings``, with the SDK's retries off (the runtime retries and says so); the demo
    model's in-process client for ``ModelSettings.demo_model()``.

    Everything is passed explicitly, so the SDK reads no credentials or base URL of its own from the process
    environment or a profile on disk."""
    if settings.demo:
        from labbot.agents.fleet.demo_model import DemoClient

        return DemoClient()
    if settings.api_key is None:
        raise BadRequest(NO_MODEL_MESSAGE)
    from anthropic import AsyncAnthropic

    return AsyncAnthropic(
        api_key=settings.api_key,
        base_url=settings.base_url,
        max_retries=0,
        timeout=settings.timeout_s,
    )


@dataclass(frozen=True)
class ModelFailure:
    """One failed Messages API call, as the runtime needs it."""

    retryable: bool
    what: str  # plain words for the thread: "the model API is overloaded (HTTP 529)"
    status: int | None = None  # the HTTP status, if a response came back
    retry_after_s: float | None = None  # what the API asked us to wait (retry-after-ms / retry-after)


MODEL_RETRY = RetryPolicy(attempts=5, backoff=Backoff(base=0.5, cap=8.0, max_retry_after=300.0))
"""Retries of a failed Messages API call: the shared policy (``labbot.common.retry``): 0.5 s doubling up to 8 s with
equal jitter, or the API's ``retry-after`` (the run's time budget bounds it: a wait past it is told, not waited)."""


_RETRYABLE_STATUS = frozenset({408, 409, 429})


def describe_failure(exc: BaseException) -> ModelFailure | None:
    """``exc`` sorted as the runtime needs it, or None when it is not a model API failure (a bug: let it raise)."""
    if "anthropic" not in sys.modules:
        return None  # no client was ever made, so no SDK exception can exist
    import anthropic

    if isinstance(exc, anthropic.APITimeoutError):
        return ModelFailure(True, "the model API did not answer in time")
    if isinstance(exc, anthropic.APIConnectionError):
        return ModelFailure(True, f"could not connect to the model API ({exc.request.url.host})")
    if isinstance(exc, anthropic.APIStatusError):
        return _status_failure(exc)
    if isinstance(exc, anthropic.APIError):  # e.g. a response that does not parse as a Message
        return ModelFailure(False, f"the model API answered something unexpected ({type(exc).__name__})")
    return None


def _status_failure(exc: anthropic.APIStatusError) -> ModelFailure:
    status = exc.status_code
    detail = _api_message(exc)
    should_retry = exc.response.headers.get("x-should-retry")
    retryable = status in _RETRYABLE_STATUS or status >= 500
    if should_retry in ("true", "false"):  # the API's own word wins, as in the SDK
        retryable = should_retry == "true"
    if status == 429:
        what = "the model API is rate-limiting us (HTTP 429)"
    elif status == 529:
        what = "the model API is overloaded (HTTP 529)"
    elif status >= 500:
        what = f"the model API had a server error (HTTP {status})"
    elif status == 401:
        what = "the model API refused the API key (HTTP 401): check ANTHROPIC_API_KEY"
    elif status == 403:
        what = f"the model API refused access (HTTP 403){detail}"
    elif status == 404:
        what = f"the model API does not know that model or path (HTTP 404){detail}: check LABBOT_MODEL"
    elif status == 413:
        what = "the conversation is too large for the model API (HTTP 413): start a new thread"
    else:
        what = f"the model API rejected the request (HTTP {status}){detail}"
    return ModelFailure(retryable, what, status, _retry_after(exc))


def _api_message(exc: anthropic.APIStatusError) -> str:
    message = exc.api_message
    if not message:
        return ""
    message = " ".join(message.split())
    return ": " + (message if len(message) <= 300 else message[:299] + "…")


def _retry_after(exc: anthropic.APIStatusError) -> float | None:
    """Seconds the API asked us to wait: ``retry-after-ms``, else ``retry-after`` (seconds or an HTTP date)."""
    headers = exc.response.headers
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000)
    except ValueError:
        pass
    return retry_after_seconds(headers.get("retry-after"))
