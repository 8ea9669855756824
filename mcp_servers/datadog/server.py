"""The ``datadog`` MCP server's tools: metrics, logs, monitors and events read from Datadog, and muting a monitor.

Each read tool answers compact text a model can read — a metric series downsampled with min/max/last, capped log
and event lines, one line a monitor — with what people and programs wrote (log messages, monitor and event text)
inside ``untrusted`` blocks, and ends with where Datadog's full answer was stored (``payloads.py``). Reads are
``readOnlyHint``; ``mute_monitor`` (a v1 downtime: the v1 API has no monitor mute of its own) is
``destructiveHint``, so labbot runs it only after a human approves, and ``read_only=True`` leaves it out.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from labbot.mcp_servers.annotations import VENDOR_READ, VENDOR_WRITE
from labbot.mcp_servers.datadog.client import DatadogApi
from labbot.mcp_servers.datadog.lines import MAX_LOG_CHARS, cut, event_line, log_lines, monitor_facts, monitor_line
from labbot.mcp_servers.datadog.payloads import Payloads
from labbot.mcp_servers.datadog.summaries import summarise_timeseries
from labbot.mcp_servers.datadog.window import iso, parse_window
from labbot.mcp_servers.datadog.window import window as time_window
from labbot.mcp_servers.lab import LabApi
from labbot.mcp_servers.untrusted import untrusted

__all__ = ["MAX_LOGS", "MONITOR_STATES", "build_server"]

MAX_LOGS = 1000  # one search; also the most one page of /api/v2/logs/events/search may ask for
MAX_LOG_PAGES = 20
MONITOR_PAGE = 1000
MAX_MONITOR_LINES = 100
MAX_EVENT_LINES = 50
MAX_MESSAGE_CHARS = 2000
MAX_MUTE_S = 7 * 86400.0
MONITOR_STATES = ("Alert", "Warn", "No Data", "OK", "Ignored", "Skipped", "Unknown")  # the v1 document's, by rank
PRIORITIES = ("normal", "low")

AsAgent = Annotated[str | None, Field(description="whose store (set by labbot for its own agents; leave it out)")]


def _state(state: str | None) -> str | None:
    if state is None or not state.strip():
        return None
    wanted = " ".join(state.replace("_", " ").split()).lower()
    for s in MONITOR_STATES:
        if s.lower() == wanted or (wanted == "warning" and s == "Warn") or (wanted == "nodata" and s == "No Data"):
            return s
    raise ToolError(f"state {state!r} is not a monitor state: use one of {', '.join(MONITOR_STATES)}")


def _rank(m: dict[str, Any]) -> tuple[int, int]:
    state = m.get("overall_state")
    return (MONITOR_STATES.index(state) if state in MONITOR_STATES else len(MONITOR_STATES), int(m.get("id") or 0))


def _as_list(doc: Any, what: str) -> list[Any]:
    if not isinstance(doc, list):
        raise ToolError(f"Datadog answered {what} with a {type(doc).__name__}, not a list: try again later")
    return doc


def _as_dict(doc: Any, what: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ToolError(f"Datadog answered {what} with a {type(doc).__name__}, not an object: try again later")
    return doc


def build_server(
    api: DatadogApi | None = None, *, read_only: bool = False, artifacts: LabApi | None = None
) -> MCPServer:
    """The server; ``api`` defaults to ``DatadogApi()`` (the environment), ``artifacts`` to ``LabApi()``."""
    dd = api or DatadogApi()
    payloads = Payloads(artifacts or LabApi())
    server: MCPServer = MCPServer(
        "labbot-datadog",
        instructions="Datadog: metrics, logs, monitors and events, summarised (each answer names the artifact that "
        "holds Datadog's full payload). Muting a monitor changes Datadog: a human approves each such call.",
    )

    for register in (_metrics_tools, _logs_tools, _monitors_tools, _events_tools):
        register(server, dd, payloads)
    if not read_only:
        _mute_tool(server, dd)
    return server


def _metrics_tools(server: MCPServer, dd: DatadogApi, payloads: Payloads) -> None:
    """The metric query: a window of points, summarised per series."""

    @server.tool(annotations=VENDOR_READ, structured_output=False)
    async def query_metrics(
        query: Annotated[str, Field(description="a Datadog metric query, e.g. avg:trainer.loss{run:r42} by {host}")],
        window: Annotated[str, Field(description="how far back from end, e.g. 15m, 1h, 2d")] = "1h",
        end: Annotated[str | None, Field(description="ISO-8601 or unix seconds; default now")] = None,
        as_agent: AsAgent = None,
    ) -> str:
        """Query a metric over a time window: per series its point count, span, min/max/mean/last and the series
        downsampled to at most 60 buckets (min/max/last each, so spikes show)."""
        if not query.strip():
            raise ToolError("query is empty: give a Datadog metric query such as avg:system.cpu.user{*}")
        w = time_window(window, end, dd.clock())
        params = {"from": math.floor(w.start), "to": math.ceil(w.end), "query": query}
        answer = await dd.fetch("GET", "/api/v1/query", params=params)
        doc = _as_dict(answer.doc, "the metric query")
        if doc.get("status") == "error":
            raise ToolError(f"Datadog: the query could not run: {cut(str(doc.get('error') or 'no reason given'))}")
        return summarise_timeseries(doc) + "\n" + await payloads.keep("metrics", answer.raw, as_agent)


def _logs_tools(server: MCPServer, dd: DatadogApi, payloads: Payloads) -> None:
    """The log search: the newest matching lines, paged as Datadog pages them."""

    @server.tool(annotations=VENDOR_READ, structured_output=False)
    async def search_logs(
        query: Annotated[str, Field(description="Datadog log search syntax, e.g. service:trainer status:error")],
        window: Annotated[str, Field(description="how far back from now, e.g. 15m, 1h")] = "15m",
        limit: Annotated[int, Field(ge=1, le=MAX_LOGS, description="the newest this many logs")] = 50,
        as_agent: AsAgent = None,
    ) -> str:
        """Search logs: the newest matching lines (timestamp service status message), oldest first, each cut at
        300 characters."""
        w = time_window(window, None, dd.clock())
        q = query.strip() or "*"
        body: dict[str, Any] = {"filter": {"query": q, "from": iso(w.start), "to": iso(w.end)}, "sort": "-timestamp"}
        events: list[Any] = []
        pages: list[bytes] = []
        cursor: str | None = None
        while True:
            body["page"] = {"limit": min(limit - len(events), MAX_LOGS), **({"cursor": cursor} if cursor else {})}
            answer = await dd.fetch("POST", "/api/v2/logs/events/search", json_body=body)
            doc = _as_dict(answer.doc, "the log search")
            pages.append(answer.raw)
            data = doc.get("data") or []
            events += data
            cursor = ((doc.get("meta") or {}).get("page") or {}).get("after")
            if not cursor or not data or len(events) >= limit or len(pages) >= MAX_LOG_PAGES:
                break
        more = bool(cursor) or len(events) > limit
        lines, dropped = log_lines(events[:limit])
        raw = pages[0] if len(pages) == 1 else b"[" + b",".join(pages) + b"]"  # each page's bytes as Datadog sent
        stored = await payloads.keep("logs", raw, as_agent)
        if not lines:
            return f"no logs match `{q}` in {w}\n{stored}"
        out = [
            f"{len(lines)} log line(s) matching `{q}` in {w}, oldest first:",
            untrusted("datadog logs", "\n".join(lines)),
        ]
        if dropped:
            out.append(
                f"({dropped} older line(s) left out to stay under {MAX_LOG_CHARS:,} characters: see the payload)"
            )
        if more:
            out.append(f"(more logs match: raise limit (at most {MAX_LOGS}) or narrow the query or the window)")
        return "\n".join([*out, stored])


def _monitors_tools(server: MCPServer, dd: DatadogApi, payloads: Payloads) -> None:
    """Monitors: the list, alerting first, and one in full."""

    @server.tool(annotations=VENDOR_READ, structured_output=False)
    async def list_monitors(
        name: Annotated[str | None, Field(description="only monitors whose name contains this")] = None,
        tags: Annotated[str | None, Field(description="monitor tags, comma separated, e.g. team:ml,service:x")] = None,
        state: Annotated[str | None, Field(description="Alert, Warn, No Data, OK, ...")] = None,
        scope: Annotated[str | None, Field(description="tags in the monitors' queries, e.g. host:gpu-3")] = None,
        as_agent: AsAgent = None,
    ) -> str:
        """Monitors, alerting first: id · name · type · overall state · query."""
        wanted = _state(state)
        params: dict[str, Any] = {"page": 0, "page_size": MONITOR_PAGE}
        for key, value in (("name", name), ("monitor_tags", tags), ("tags", scope)):
            if value and value.strip():
                params[key] = value.strip()
        answer = await dd.fetch("GET", "/api/v1/monitor", params=params)
        monitors = _as_list(answer.doc, "the monitor list")
        matching = sorted((m for m in monitors if wanted is None or m.get("overall_state") == wanted), key=_rank)
        stored = await payloads.keep("monitors", answer.raw, as_agent)
        which = f" in state {wanted}" if wanted else ""
        if not matching:
            return f"no monitors{which} match\n{stored}"
        out = [
            f"{len(matching)} monitor(s){which} (id · name · type · state · query):",
            untrusted("datadog monitors", "\n".join(monitor_line(m) for m in matching[:MAX_MONITOR_LINES])),
        ]
        if len(matching) > MAX_MONITOR_LINES:
            out.append(f"… and {len(matching) - MAX_MONITOR_LINES} more: narrow with name, tags or state")
        if len(monitors) >= MONITOR_PAGE:
            out.append(f"(only the first {MONITOR_PAGE} monitors were read: narrow with name, tags or scope)")
        return "\n".join([*out, stored])

    @server.tool(annotations=VENDOR_READ, structured_output=False)
    async def get_monitor(
        monitor_id: Annotated[int, Field(ge=1, description="an id from list_monitors")], as_agent: AsAgent = None
    ) -> str:
        """One monitor: state, query, thresholds, per-group states, and its name and message."""
        answer = await dd.fetch("GET", f"/api/v1/monitor/{monitor_id}", params={"group_states": "all"})
        m = _as_dict(answer.doc, "the monitor")
        told = f"name: {m.get('name')}\nmessage:\n{cut(str(m.get('message') or ''), MAX_MESSAGE_CHARS)}"
        stored = await payloads.keep("monitor", answer.raw, as_agent)
        return "\n".join([*monitor_facts(m), untrusted(f"datadog monitor {monitor_id}", told), stored])


def _events_tools(server: MCPServer, dd: DatadogApi, payloads: Payloads) -> None:
    """Events: deploys, alerts, restarts, newest first."""

    @server.tool(annotations=VENDOR_READ, structured_output=False)
    async def list_events(
        window: Annotated[str, Field(description="how far back from now, e.g. 1h, 1d")] = "1d",
        sources: Annotated[str | None, Field(description="comma separated sources, e.g. kubernetes,my_apps")] = None,
        tags: Annotated[str | None, Field(description="comma separated tags, e.g. env:prod")] = None,
        priority: Annotated[str | None, Field(description="normal or low")] = None,
        as_agent: AsAgent = None,
    ) -> str:
        """Events (deploys, alerts, restarts...), newest first: time · priority · type · source · title: text."""
        if priority is not None and priority.strip().lower() not in PRIORITIES:
            raise ToolError(f"priority {priority!r} is not one of {', '.join(PRIORITIES)}")
        w = time_window(window, None, dd.clock())
        params: dict[str, Any] = {"start": math.floor(w.start), "end": math.ceil(w.end)}
        for key, value in (("sources", sources), ("tags", tags), ("priority", priority)):
            if value and value.strip():
                params[key] = value.strip().lower() if key == "priority" else value.strip()
        answer = await dd.fetch("GET", "/api/v1/events", params=params)
        events = _as_dict(answer.doc, "the event list").get("events") or []
        stored = await payloads.keep("events", answer.raw, as_agent)
        if not events:
            return f"no events in {w}\n{stored}"
        shown = events[:MAX_EVENT_LINES]
        out = [f"{len(events)} event(s) in {w}, newest first:"]
        out.append(untrusted("datadog events", "\n".join(event_line(e) for e in shown)))
        if len(events) > len(shown):
            out.append(f"… and {len(events) - len(shown)} more: narrow with sources, tags, priority or the window")
        return "\n".join([*out, stored])


def _mute_tool(server: MCPServer, dd: DatadogApi) -> None:
    """The one write: a monitor muted for a while (a human approves each call)."""

    @server.tool(annotations=VENDOR_WRITE, structured_output=False)
    async def mute_monitor(
        monitor_id: Annotated[int, Field(ge=1, description="an id from list_monitors")],
        duration: Annotated[str, Field(description="how long, e.g. 30m, 1h, 1d (at most 7d)")] = "1h",
        reason: Annotated[str, Field(description="why, shown on the downtime in Datadog")] = "",
    ) -> str:
        """Mute a monitor for a while (a Datadog downtime on all its groups; needs a human's approval)."""
        seconds = parse_window(duration, name="duration")
        if seconds > MAX_MUTE_S:
            raise ToolError(f"duration {duration!r} is over 7d: a longer mute is for a person to set in Datadog")
        await dd.fetch("GET", f"/api/v1/monitor/{monitor_id}")  # "no such monitor" before anything is created
        now = dd.clock()
        until = math.ceil(now + seconds)
        body: dict[str, Any] = {
            "monitor_id": monitor_id,
            "scope": ["*"],
            "start": math.floor(now),
            "end": until,
            "message": reason.strip() or "muted through labbot",
            "timezone": "UTC",
        }
        downtime = _as_dict((await dd.fetch("POST", "/api/v1/downtime", json_body=body)).doc, "the downtime")
        return (
            f"muted monitor {monitor_id} until {iso(until)} (downtime {downtime.get('id')}); cancel the "
            "downtime in Datadog (Monitors → Manage Downtimes) to unmute sooner"
        )
