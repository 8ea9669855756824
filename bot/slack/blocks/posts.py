"""The other messages labbot posts about a run: launch confirmation, progress lines, restarts, the final summary,
and the ephemeral error a mistyped ``/lab`` command gets.

Pure functions of the run JSON, like the card (``run_card.py``, whose formatters they share); the thread keeper
(``bot/slack/threads.py``) and the command handlers post what these return.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

from labbot.bot.slack.blocks.run_card import (
    DASH,
    STATUS_EMOJI,
    Block,
    as_float,
    clip,
    error_text,
    escape,
    eta_text,
    headline_label,
    headline_metric,
    mention,
    number,
    parse_time,
    queue_text,
    run_title,
    step_text,
    throughput,
)
from labbot.common.durations import format_duration

_OUTCOME = {"succeeded": "finished", "failed": "failed", "stopped": "was stopped"}


def progress_text(run: dict[str, Any], *, rate: float | None = None, now: datetime | None = None) -> str:
    """One compact line: ``step 120 / 200 · loss 2.3145 · 41.2k tok/s · ETA ~3m`` (unknown parts left out; the
    run's headline metric in place of loss when its job names another)."""
    metrics = run.get("metrics") or {}
    parts = [f":chart_with_upwards_trend: step *{step_text(run)}*"]
    headline = headline_metric(run)
    if metrics.get(headline) is not None:
        parts.append(f"{escape(headline)} *{number(metrics[headline])}*")
    tps = throughput(metrics.get("tokens_per_s"))
    if tps != DASH:
        parts.append(tps)
    eta = eta_text(run, rate=rate, now=now)
    if eta != DASH:
        parts.append(f"ETA {eta}")
    return " · ".join(parts)


def launch_confirmation(run: dict[str, Any]) -> str:
    """What the thread opens with once the run is launched: who, what, with which parameters, where on Ray."""
    every = run.get("params") or {}
    given = run.get("params_given")
    # the parameters the launch set; the job's defaults (tiny-rl has 40) are `labbot run RUN` away
    shown = {k: v for k, v in every.items() if k in given} if isinstance(given, list) else every
    params = " ".join(f"`{escape(str(k))}={escape(str(v))}`" for k, v in shown.items())
    line = (
        f":rocket: {mention(run.get('owner'))} launched *{escape(str(run.get('job', '?')))}* run "
        f"*{escape(str(run.get('name') or run.get('id', '?')))}* (`{escape(str(run.get('id', '?')))}`)"
    )
    if params:
        line += f" with {params}"
    if isinstance(given, list) and len(every) > len(shown):
        line += " and the job's defaults" if params else " with the job's defaults"
    if run.get("status") == "queued":
        place = queue_text(run)
        line += f"\n:hourglass: queued{f': {place}' if place else ''}; it goes to Ray when capacity frees"
    elif run.get("ray_submission_id"):
        line += f"\nRay job `{escape(str(run['ray_submission_id']))}`"
    curves = "loss curves" if list(run.get("plot") or ["loss"]) == ["loss"] else "metric plots"
    return line + f". Progress, {curves} and the summary will follow in this thread."


def left_queue_text(run: dict[str, Any], *, now: datetime | None = None) -> str:
    """A queued run was admitted: capacity for its purpose freed, it went to Ray."""
    queued_at = parse_time(run.get("queued_at"))
    waited = f" after {format_duration(((now or datetime.now(UTC)) - queued_at).total_seconds())}" if queued_at else ""
    sid = run.get("ray_submission_id")
    where = f" as Ray job `{escape(str(sid))}`" if sid else ""
    return (
        f":arrow_forward: capacity for {escape(str(run.get('purpose') or 'training'))} freed: the run left the "
        f"queue{waited} and went to Ray{where}."
    )


def restart_text(run: dict[str, Any], by: str | None) -> str:
    """A new attempt began, by a person (``by``, a Slack user id or a name) or unsaid (``None``: the thread keeper sees
    the attempt change; who restarted it, labbot or a person, is said in the thread and on the card by whoever did)."""
    ckpt = run.get("checkpoint_step")
    start = f"resuming from checkpoint step {ckpt}" if ckpt is not None else "starting from step 0 (no checkpoint yet)"
    if by:
        return f":arrows_counterclockwise: {mention(by)} restarted the run: attempt {run.get('attempt', '?')}, {start}."
    return f":arrows_counterclockwise: attempt {run.get('attempt', '?')} started, {start}."


def _loss_line(last: Any, first: Any, best: Any) -> str:
    text = number(last) if first is None else f"{number(first)} → {number(last)}"
    b = as_float(best)
    if b is not None and math.isfinite(b):
        text += f" (best {number(b)})"
    return text


def summary_blocks(
    run: dict[str, Any],
    *,
    first_loss: float | None = None,
    best_loss: float | None = None,
    duration_s: float | None = None,
) -> tuple[str, list[Block]]:
    """The final summary posted when a run ends: outcome, steps, the headline metric first → last (best),
    throughput, wall time. ``first_loss`` and ``best_loss`` are of the run's headline metric (loss unless its job
    names another; the thread keeper gives a best only for loss, where lower is better)."""
    status = str(run.get("status", "?"))
    metrics = run.get("metrics") or {}
    shown = headline_metric(run)
    if duration_s is None:
        started, ended = parse_time(run.get("started_at")), parse_time(run.get("ended_at"))
        if started and ended:
            duration_s = (ended - started).total_seconds()
    ckpt = run.get("checkpoint_step")
    attempts = run.get("attempt", 1)
    steps = step_text(run)
    fields = [
        ("Steps", steps),
        (headline_label(run), _loss_line(metrics.get(shown), first_loss, best_loss)),
        ("Throughput", throughput(metrics.get("tokens_per_s"))),
        ("Wall time", format_duration(duration_s)),
        ("Checkpoints", DASH if ckpt is None else f"latest at step {ckpt}"),
        ("Attempts", str(attempts)),
    ]
    headline = (
        f"{STATUS_EMOJI.get(status, ':grey_question:')} *{escape(run_title(run))}* "
        f"{_OUTCOME.get(status, f'is {escape(status)}')}"
    )
    blocks: list[Block] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": clip(headline, 3000)}},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": clip(f"*{k}*\n{v}", 2000)} for k, v in fields]},
    ]
    if run.get("error") and status == "stopped":  # a stop is no error: who stopped it, said plainly
        said = re.sub(r"\bslack:([UW][A-Z0-9]{2,})\b", r"<@\1>", clip(escape(str(run["error"])), 2900))
        blocks.append(
            {"type": "section", "text": {"type": "mrkdwn", "text": f":octagonal_sign: {said[:1].upper()}{said[1:]}"}}
        )
    elif run.get("error"):
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": error_text(str(run["error"]))}})
    fallback = (
        f"{escape(run_title(run))} {_OUTCOME.get(status, escape(status))}: step {steps}, "
        f"{escape(shown)} {_loss_line(metrics.get(shown), first_loss, best_loss)}"
    )
    return fallback, blocks


def ephemeral_error(message: str, usage: str | None = None) -> tuple[str, list[Block]]:
    """A refused command, for the person who typed it only: what was wrong and, when known, what is accepted."""
    text = clip(f":warning: {escape(message)}", 3000)
    blocks: list[Block] = [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]
    if usage:
        body = escape(usage).replace("```", "`\u200b``")
        usage_text = clip(f"*Usage*\n```{body}", 2997) + "```"
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": usage_text}})
    return clip(escape(message), 3000), blocks
