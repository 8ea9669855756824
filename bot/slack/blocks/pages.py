"""How a page looks in Slack: the message posted in the run's thread, the owner's DM and the on-call channel, with
Ack / Resolve / Stop buttons while it is open, and the ``/lab pages`` list. Pure functions over the page's JSON
(``labbot.agents.babysitter.pager.incident_view``) and the run's (``labbot.training.run_json.run_view``);
re-rendered when the page changes (acknowledged, resolved), so every copy of it shows who did what.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from labbot.bot.slack.blocks.run_card import (
    TERMINAL,
    _button,
    _confirm,
    _mrkdwn,
    _plain,
    _tail,
    clip,
    escape,
    mention,
    parse_time,
)
from labbot.common.durations import format_duration

Block = dict[str, Any]

EMOJI = {"triggered": ":rotating_light:", "acknowledged": ":eyes:", "resolved": ":white_check_mark:"}
LEVELS = {0: "the run's thread and its owner", 1: "the on-call channel", 2: "PagerDuty"}


def _when(iso: str | None) -> str:
    t = parse_time(iso)
    return t.strftime("%H:%M UTC") if t else "?"


def page_label(page: dict[str, Any]) -> str:
    """The page's condition as people read it: its kind, or ``metric NAME`` for a job's metric alert."""
    alert = (page.get("detail") or {}).get("alert")
    return f"{page['kind']} {alert}" if page["kind"] == "metric" and isinstance(alert, str) else str(page["kind"])


def page_headline(page: dict[str, Any], run: dict[str, Any] | None) -> str:
    where = f"run `{page['run_id']}`" if page.get("run_id") else "the Ray cluster"
    if run is not None:
        where += f" ({clip(escape(str(run.get('name') or '')), 80)})"
    emoji = EMOJI.get(page["state"], ":grey_question:")
    if page["state"] == "triggered" and page.get("severity") == "warning":
        emoji = ":warning:"
    return f"{emoji} *{escape(page_label(page))}* — {where}"


def page_message(
    page: dict[str, Any],
    run: dict[str, Any] | None,
    *,
    level: int = 0,
    renotify: int = 0,
    usergroup: str | None = None,
    now: datetime | None = None,
    file_incidents: bool = False,
) -> tuple[str, list[Block]]:
    """The page as posted at ``level`` (0: thread / DM, 1: on-call channel); ``renotify`` > 0 for a reminder.
    ``file_incidents``: Linear is set up, so an open page not yet filed there has a File incident button."""
    owner = mention(run.get("owner")) if run is not None else None
    lines = [page_headline(page, run)]
    if page["state"] == "triggered":
        if level >= 1:
            group = f"<!subteam^{usergroup}> " if usergroup else ""
            since = parse_time(page.get("triggered_at"))
            age = format_duration((now - since).total_seconds()) if now and since else "a while"
            lines.append(f"{group}Escalated: nobody has acknowledged this page for {age}.")
        if renotify:
            lines.append(f"Reminder {renotify}: still unacknowledged.")
    lines.append(escape(str(page.get("summary", ""))))
    if owner and page.get("severity") != "warning":
        lines.append(f"Owner: {owner}")
    blocks: list[Block] = [{"type": "section", "text": _mrkdwn("\n".join(lines))}]
    tail = (page.get("detail") or {}).get("log_tail")
    if tail and page["state"] != "resolved":  # escaped, its own fences broken, and its end kept: the error is last
        body = escape(str(tail)).replace("```", "`\u200b``")
        blocks.append({"type": "section", "text": _mrkdwn(f"```\n{_tail(body, 2800)}\n```")})
    blocks.append({"type": "context", "elements": [_mrkdwn(_status_line(page), 3000)]})
    buttons = _buttons(page, run, file_incidents=file_incidents)
    if buttons:
        blocks.append({"type": "actions", "block_id": f"page_actions_{page['id']}", "elements": buttons})
    where = f"run {page['run_id']}" if page.get("run_id") else "the Ray cluster"
    text = f"{escape(page_label(page))} on {where}: "
    text += escape(str(page.get("summary", "")))
    if owner and page["state"] == "triggered" and page.get("severity") != "warning":
        text = f"{owner} {text}"  # the mention in the text is what notifies
    return clip(text, 3000), blocks


def _status_line(page: dict[str, Any]) -> str:
    parts = [f"page `{page['id']}`", f"{page['state']}"]
    if page["state"] == "triggered" and page.get("severity") != "warning":
        parts.append(f"level {page.get('escalation_level', 0)}: {LEVELS.get(page.get('escalation_level', 0), '?')}")
    if page.get("acknowledged_by"):
        parts.append(f"acknowledged by {mention(page['acknowledged_by'])} at {_when(page.get('acknowledged_at'))}")
    if page.get("resolved_by"):
        who = "labbot (the condition cleared)" if page["resolved_by"] == "labbot" else mention(page["resolved_by"])
        parts.append(f"resolved by {who} at {_when(page.get('resolved_at'))}")
    if page.get("reopened"):
        parts.append(f"re-opened {page['reopened']}×")
    linear = (page.get("links") or {}).get("linear")
    if linear:
        name = escape(str(linear.get("identifier") or "issue"))
        parts.append(f"Linear: <{linear['url']}|{name}>" if linear.get("url") else f"Linear: {name}")
    return " · ".join(parts)


def _buttons(page: dict[str, Any], run: dict[str, Any] | None, *, file_incidents: bool = False) -> list[Block]:
    if page["state"] == "resolved":
        return []
    out: list[Block] = []
    if page["state"] == "triggered":
        out.append({"type": "button", "text": _plain("Ack", 75), "action_id": "page_ack", "value": page["id"]})
    out.append({"type": "button", "text": _plain("Resolve", 75), "action_id": "page_resolve", "value": page["id"]})
    if file_incidents and not (page.get("links") or {}).get("linear"):
        out.append(
            {"type": "button", "text": _plain("File incident", 75), "action_id": "page_file", "value": page["id"]}
        )
    if run is not None and run.get("status") not in TERMINAL:
        who = clip(escape(str(run.get("name") or run["id"])), 80)
        stop = _confirm("Stop run?", f"Stop run *{who}*? Its checkpoints are kept.", "Stop", "danger")
        out.append(_button("Stop run", "run_stop", str(run["id"]), stop, "danger"))
    return out


def pages_list(pages: list[dict[str, Any]], *, command: str = "/lab") -> str:
    """``/lab pages``: one line per page, newest first."""
    if not pages:
        return f":white_check_mark: no open pages. (`{command} pages --all` shows resolved ones too.)"
    lines = []
    for p in pages:
        where = f"run `{p['run_id']}`" if p.get("run_id") else "cluster"
        who = f", acked by {mention(p['acknowledged_by'])}" if p.get("acknowledged_by") else ""
        lines.append(
            f"{EMOJI.get(p['state'], '')} `{p['id']}` *{escape(page_label(p))}* {where} — {p['state']}, level "
            f"{p.get('escalation_level', 0)}{who} — {escape(clip(str(p.get('summary', '')), 200))}"
        )
    if any(p.get("state") == "triggered" for p in pages):  # only when one is still waiting for someone
        lines.append(f"_acknowledge with `{command} ack PAGE`_")
    return "\n".join(lines)
