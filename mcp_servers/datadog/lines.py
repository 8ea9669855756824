"""Logs, monitors and events from Datadog as compact lines a model can read (pure functions).

Every line is capped (:data:`MAX_LINE_CHARS`) and so is every block (logs: :data:`MAX_LOG_CHARS`; monitors and
events: a count). Text written by people or programs outside the conversation — log messages, monitor names and
messages, event titles and texts — is returned inside :func:`~labbot.mcp_servers.untrusted.untrusted` blocks by the
tools; these functions only shape it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from labbot.mcp_servers.datadog.window import iso

__all__ = [
    "MAX_LINE_CHARS",
    "MAX_LOG_CHARS",
    "cut",
    "event_line",
    "log_lines",
    "monitor_facts",
    "monitor_line",
    "one_line",
]

MAX_LINE_CHARS = 300
MAX_LOG_CHARS = 24_000  # all log lines of one answer together
_NEWLINES = re.compile(r"\s*[\r\n]+\s*")
_SPACES = re.compile(r"[ \t\f\v]+")


def cut(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def one_line(text: Any) -> str:
    """``text`` on one line: line breaks shown as ``⏎`` (a stack trace stays readable), runs of spaces as one."""
    return _SPACES.sub(" ", _NEWLINES.sub(" ⏎ ", str(text or "").strip()))


def log_line(event: Mapping[str, Any]) -> str:
    """``timestamp service status message`` of one v2 log event, at most :data:`MAX_LINE_CHARS`."""
    a = event.get("attributes") or {}
    bits = [a.get("timestamp") or "-", a.get("service") or "-", a.get("status") or "-", one_line(a.get("message"))]
    return cut(" ".join(str(b) for b in bits))


def log_lines(events: Sequence[Mapping[str, Any]], max_chars: int = MAX_LOG_CHARS) -> tuple[list[str], int]:
    """Lines of ``events`` (newest first, as fetched) that fit in ``max_chars``, the newest kept, returned oldest
    first; and how many did not fit."""
    kept: list[str] = []
    used = 0
    for event in events:
        line = log_line(event)
        if used + len(line) + 1 > max_chars:
            break
        kept.append(line)
        used += len(line) + 1
    return kept[::-1], len(events) - len(kept)


def monitor_line(m: Mapping[str, Any]) -> str:
    """``id · name · type · overall_state · query`` of one monitor."""
    bits = [m.get("id"), one_line(m.get("name")), m.get("type"), m.get("overall_state") or "?", m.get("query")]
    return cut(" · ".join(str(b) for b in bits))


def _thresholds(m: Mapping[str, Any]) -> str:
    t = (m.get("options") or {}).get("thresholds") or {}
    order = ("critical", "critical_recovery", "warning", "warning_recovery", "ok", "unknown")
    return " · ".join(f"{k} {t[k]}" for k in order if t.get(k) is not None)


def monitor_facts(m: Mapping[str, Any], max_groups: int = 30) -> list[str]:
    """What ``get_monitor`` shows of a monitor, except its name and message (untrusted text, shown apart)."""
    lines = [f"monitor {m.get('id')} · {m.get('type')} · {m.get('overall_state') or '?'}"]
    if m.get("priority") is not None:
        lines[0] += f" · priority {m['priority']}"
    lines.append(f"query: {cut(str(m.get('query')), 1000)}")
    if thresholds := _thresholds(m):
        lines.append(f"thresholds: {thresholds}")
    if m.get("tags"):
        lines.append(cut(f"tags: {', '.join(str(t) for t in m['tags'])}"))
    groups = ((m.get("state") or {}).get("groups") or {}).items()
    if groups:
        ranked = sorted(groups, key=lambda kv: (str((kv[1] or {}).get("status")) == "OK", kv[0]))
        lines.append(f"groups ({len(ranked)}, not OK first):")
        for name, g in ranked[:max_groups]:
            g = g or {}
            seen = [
                f"{what} {iso(g[key])}"
                for what, key in (("triggered", "last_triggered_ts"), ("resolved", "last_resolved_ts"))
                if g.get(key)
            ]
            lines.append(cut(f"  {name}: {g.get('status')}" + (f" ({', '.join(seen)})" if seen else "")))
        if len(ranked) > max_groups:
            lines.append(f"  … and {len(ranked) - max_groups} more groups")
    for downtime in m.get("matching_downtimes") or []:
        until = iso(downtime["end"]) if downtime.get("end") else "it is cancelled"
        lines.append(f"muted by downtime {downtime.get('id')} until {until}")
    for key in ("created", "modified"):
        if m.get(key):
            lines.append(f"{key}: {m[key]}")
    return lines


def event_line(e: Mapping[str, Any], text_chars: int = 200) -> str:
    """``time · priority · alert_type · source · title: text`` of one v1 event."""
    when = iso(e["date_happened"]) if isinstance(e.get("date_happened"), int | float) else "-"
    text = cut(one_line(e.get("text")), text_chars)
    bits = [when, e.get("priority") or "-", e.get("alert_type") or "-", e.get("source_type_name") or "-"]
    line = " · ".join(str(b) for b in bits) + f" · {one_line(e.get('title'))}" + (f": {text}" if text else "")
    return cut(line)
