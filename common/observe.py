"""What a lower layer reports for ``/metrics``, without knowing Prometheus or the bot.

The composition root (``labbot.bot.serve``) passes an implementation (``labbot.bot.metrics.Metrics``) down to the
telemetry store, the agent runtime, the vendor HTTP seam and PagerDuty; everything that is not handed one reports to
:data:`NO_OBSERVER`, which does nothing. Labels are bounded by construction: a system, a method or HTTP verb, an
error code, a role — never a run id, a user or a path with ids in it. An observer must not raise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

__all__ = ["NO_OBSERVER", "NullObserver", "Observer"]


class Observer(Protocol):
    def api_error(self, system: str, method: str, error: str) -> None:
        """An outside API answered an error, or did not answer: ``system`` is ``slack``, ``notion``, ``linear``,
        ``datadog`` or ``pagerduty``; ``method`` a Web API method (``chat.postMessage``) or an HTTP verb; ``error`` a
        vendor's error code (``channel_not_found``), an HTTP status (``503``), ``timeout`` or ``connection``."""

    def telemetry_points(self, points: int) -> None:
        """A job's batch of ``points`` telemetry points was stored."""

    def agent_run(
        self,
        role: str,
        *,
        stop: str,
        model_calls: int,
        tokens: Mapping[str, int],
        tool_calls: int,
        tool_errors: int,
    ) -> None:
        """An agent run of ``role`` ended with ``stop`` after ``model_calls`` Messages API calls, using ``tokens``
        (``input``, ``output``, ``cache_read``, ``cache_creation``) and making ``tool_calls`` tool calls, of which
        ``tool_errors`` failed."""


class NullObserver:
    """Reports nowhere: the default of every lower layer (tests, ``labbot mcp NAME`` on its own)."""

    def api_error(self, system: str, method: str, error: str) -> None:
        pass

    def telemetry_points(self, points: int) -> None:
        pass

    def agent_run(
        self,
        role: str,
        *,
        stop: str,
        model_calls: int,
        tokens: Mapping[str, int],
        tool_calls: int,
        tool_errors: int,
    ) -> None:
        pass


NO_OBSERVER: Observer = NullObserver()
