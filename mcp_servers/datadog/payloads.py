"""Datadog's full answers kept as artifacts, so an agent (or a person) can read what the summary left out.

Each read tool hands the exact bytes Datadog sent to :meth:`Payloads.keep`, which stores them in the agent's own
artifact store through labbot's ``/api/v1/artifacts`` (:class:`labbot.mcp_servers.lab.LabApi`, the control plane's API)
as ``datadog-<kind>-<UTC time>.json``, and returns the line that ends the tool's answer::

    full payload: artifact a7k2m9pq (1.8 MiB, datadog-metrics-20260105T100000.123Z.json)

Storing is a courtesy, never a failure: when labbot is not reachable (the server run alone, without a control
plane), or refuses (quota, no store), the line says ``full payload not stored (<short reason>)`` and the tool still
answers with its summary.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from mcp.server.mcpserver.exceptions import ToolError

from labbot.common.humanize import format_bytes
from labbot.mcp_servers.lab import LabApi

__all__ = ["Payloads"]

_REASON_CHARS = 120


def _short(reason: str) -> str:
    reason = " ".join(reason.split())
    return reason if len(reason) <= _REASON_CHARS else reason[: _REASON_CHARS - 1] + "…"


class Payloads:
    """Where the tools keep Datadog's answers: ``lab``'s artifact store, for ``as_agent`` or ``lab.agent``."""

    def __init__(self, lab: LabApi, clock: Callable[[], float] = time.time) -> None:
        self.lab = lab
        self._clock = clock

    def name(self, kind: str) -> str:
        stamp = datetime.fromtimestamp(self._clock(), UTC).strftime("%Y%m%dT%H%M%S.%f")[:-3]
        return f"datadog-{kind}-{stamp}Z.json"

    async def keep(self, kind: str, raw: bytes, as_agent: str | None) -> str:
        """Store ``raw`` as the agent's artifact; the line that says where it is (or why it is not)."""
        if not raw:
            return "full payload not stored (Datadog sent an empty body)"
        params = {"agent": as_agent or self.lab.agent, "name": self.name(kind)}
        try:
            r = await self.lab.request(
                "POST", "/artifacts", params=params, content=raw, headers={"Content-Type": "application/json"}
            )
            artifact = r.json()["artifact"]
            return (
                f"full payload: artifact {artifact['id']} ({format_bytes(int(artifact['size']))}, {artifact['name']})"
            )
        except ToolError as e:  # LabApi's own: not running, not answering, refused
            return f"full payload not stored ({_short(str(e))})"
        except Exception as e:  # anything else the control plane does wrong must not cost the model its answer
            return f"full payload not stored ({type(e).__name__} from labbot's artifact store)"
