"""The run card: the message at the top of a run's Slack thread, kept current by the thread keeper.

A pure function of the control plane's run JSON (see the README, "A run in JSON has ...") and a few lines of the
thread's history; it returns the fallback text and the Block Kit blocks for ``chat.postMessage``/``chat.update``.
The small formatters here (status emoji, numbers, durations, ETA) are shared with ``posts.py``, so a run reads the
same in the card, the progress lines and the summary.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from labbot.common.durations import format_duration
from labbot.training.remedies import lineage_text

Block = dict[str, Any]

TERMINAL = frozenset({"succeeded", "failed", "stopped"})
STATUS_EMOJI = {
    "queued": ":hourglass:",
    "pending": ":hourglass_flowing_sand:",
    "running": ":arrow_forward:",
    "stalled": ":warning:",
    "restarting": ":arrows_counterclockwise:",
    "succeeded": ":white_check_mark:",
    "failed": ":x:",
    "stopped": ":black_square_for_stop:",
}
DASH = "—"
HISTORY_LINES = 5
_USER_ID = re.compile(r"^[UW][A-Z0-9]+$")


# -- formatters shared by the card, progress lines and the summary -----------------------------------------------


def escape(text: str) -> str:
    """Slack's three control characters, escaped (user-supplied names and errors must not become links)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def mention(who: str | None) -> str:
    """A Slack user id as a mention, anything else (a CLI user's name) as escaped text."""
    if not who:
        return "someone"
    return f"<@{who}>" if _USER_ID.match(who) else escape(who)


def status_label(status: str) -> str:
    return f"{STATUS_EMOJI.get(status, ':grey_question:')} {status}"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def queue_text(run: dict[str, Any]) -> str | None:
    """A queued run's place: "2nd in line for training", or what it waits for ("waiting for a node with
    accelerator=1"); None when the run is not queued."""
    waiting = run.get("waiting_for")
    if run.get("status") == "queued" and isinstance(waiting, str) and waiting:
        return f"waiting for {escape(waiting)}"
    place = run.get("queue_position")
    if run.get("status") != "queued" or not isinstance(place, int) or isinstance(place, bool):
        return None
    return f"{_ordinal(place)} in line for {escape(str(run.get('purpose') or 'training'))}"


def as_float(value: Any) -> float | None:
    """A metric as the API carries it (a number or "NaN"/"Infinity"/"-Infinity") as a float; None if absent."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def number(value: Any) -> str:
    """A loss-like number: four decimals, thousands separators when large, "NaN"/"Infinity" spelled out."""
    v = as_float(value)
    if v is None:
        return DASH
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if v != 0 and abs(v) < 0.001:
        return f"{v:.3g}"
    return f"{v:.4f}"


def throughput(value: Any) -> str:
    """tokens_per_s for humans: "812 tok/s", "41.2k tok/s", "1.3M tok/s"."""
    v = as_float(value)
    if v is None or not math.isfinite(v):
        return DASH
    for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.1f}{unit} tok/s"
    return f"{v:.0f} tok/s"


def parse_time(iso: str | None) -> datetime | None:
    """An ISO-8601 timestamp from the API; a naive one is UTC (that is what the control plane stores)."""
    if not iso:
        return None
    try:
        t = datetime.fromisoformat(iso)
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


EVAL_JOBS = ("eval", "eval-incidents")  # their step is the samples scored, out of samples_total


def is_eval(run: dict[str, Any]) -> bool:
    return run.get("job") in EVAL_JOBS


def total_steps(run: dict[str, Any]) -> int | None:
    steps = (run.get("params") or {}).get("steps")
    if is_eval(run):
        steps = (run.get("metrics") or {}).get("samples_total")
        steps = int(steps) if isinstance(steps, int | float) and not isinstance(steps, bool) else None
    return steps if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0 else None


def step_text(run: dict[str, Any]) -> str:
    step, total = run.get("step"), total_steps(run)
    if step is None:
        text = DASH if total is None else f"{DASH} / {total}"
        phase = run.get("phase")  # before its first step, what the job is doing (tiny-rl's warm-up) says it is alive
        return f"{text} · {escape(str(phase))}" if phase else text
    return f"{step} / {total}" if total is not None else str(step)


def eta_seconds(run: dict[str, Any], *, rate: float | None = None, now: datetime | None = None) -> float | None:
    """Seconds until the last step, while the run is running; None when it cannot be known.

    ``rate`` (steps per second, e.g. from recent telemetry) wins; otherwise the average since ``started_at``.
    """
    step, total = run.get("step"), total_steps(run)
    if run.get("status") != "running" or total is None or step is None:
        return None
    if rate is None or not math.isfinite(rate) or rate <= 0:
        started = parse_time(run.get("started_at"))
        if started is None or step <= 0:
            return None
        elapsed = ((now or datetime.now(UTC)) - started).total_seconds()
        if elapsed <= 0:
            return None
        rate = step / elapsed
    return max(total - step, 0) / rate


def eta_text(run: dict[str, Any], *, rate: float | None = None, now: datetime | None = None) -> str:
    eta = eta_seconds(run, rate=rate, now=now)
    if eta is None:
        return DASH
    return "finishing" if eta < 1 else f"~{format_duration(eta)}"


def attempt_text(run: dict[str, Any]) -> str:
    """The attempt and the node it runs on: "2 · on 192.0.2.7 (3f2a9c1d)"."""
    text = str(run.get("attempt", 1))
    node = run.get("node")
    if isinstance(node, dict) and node.get("id") and run.get("status") not in TERMINAL:
        text += f" · on {escape(str(node.get('name') or ''))} ({escape(str(node['id'])[:8])})"
    return text


def headline_metric(run: dict[str, Any]) -> str:
    """The metric the run's card shows (``headline`` in the run JSON, from its job; loss by default)."""
    name = run.get("headline")
    return name if isinstance(name, str) and name else "loss"


def headline_label(run: dict[str, Any]) -> str:
    """The card field's name for the headline metric: "Loss" for loss, the metric's own name (escaped) otherwise."""
    name = headline_metric(run)
    return "Loss" if name == "loss" else escape(name)


def run_title(run: dict[str, Any]) -> str:
    return f"{run.get('job', '?')} · {run.get('name') or run.get('id', '?')}"


# -- the card --------------------------------------------------------------------------------------------------


def _plain(text: str, limit: int) -> dict[str, Any]:
    return {"type": "plain_text", "text": clip(text, limit), "emoji": True}


def _mrkdwn(text: str, limit: int = 3000) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": clip(text, limit)}


def _button(label: str, action_id: str, run_id: str, confirm: dict[str, Any], style: str | None) -> Block:
    button: Block = {"type": "button", "text": _plain(label, 75), "action_id": action_id, "value": run_id[:2000]}
    if style:
        button["style"] = style
    button["confirm"] = confirm
    return button


def _confirm(title: str, text: str, yes: str, style: str | None) -> dict[str, Any]:
    dialog: dict[str, Any] = {
        "title": _plain(title, 100),
        "text": _mrkdwn(text, 300),
        "confirm": _plain(yes, 30),
        "deny": _plain("Cancel", 30),
    }
    if style:
        dialog["style"] = style
    return dialog


def actions(run: dict[str, Any]) -> Block:
    """Stop (while the run is live) and Restart, each behind a confirm dialog."""
    run_id = str(run.get("id", ""))
    who = clip(escape(str(run.get("name") or run_id)), 80)
    ckpt = run.get("checkpoint_step")
    where = f" (step {ckpt})" if ckpt is not None else " (none yet: it starts from step 0)"
    elements = []
    if run.get("status") not in TERMINAL:
        stop = _confirm("Stop run?", f"Stop run *{who}*? Its checkpoints are kept.", "Stop", "danger")
        elements.append(_button("Stop", "run_stop", run_id, stop, "danger"))
    restart = _confirm("Restart run?", f"Restart run *{who}* from its latest checkpoint{where}?", "Restart", None)
    elements.append(_button("Restart", "run_restart", run_id, restart, None))
    return {"type": "actions", "block_id": "run_actions", "elements": elements}


def run_card(
    run: dict[str, Any],
    *,
    history: Sequence[str] = (),
    now: datetime | None = None,
    rate: float | None = None,
) -> tuple[str, list[Block]]:
    """The card for ``run``: (fallback text, blocks). ``history`` lines are mrkdwn written by labbot (mentions kept).

    Besides status, step, throughput and the rest, it shows the run's headline metric and its latest value
    (``pass_rate 0.6200`` for a job whose headline is ``pass_rate``; loss when the job names none)."""
    status = str(run.get("status", "?"))
    metrics = run.get("metrics") or {}
    ckpt = run.get("checkpoint_step")
    place = queue_text(run)
    fields = [
        ("Status", status_label(status) + (f" · {place}" if place else "")),
        ("Owner", mention(run.get("owner"))),
        ("Samples" if is_eval(run) else "Step", step_text(run)),
        (headline_label(run), number(metrics.get(headline_metric(run)))),
        ("Throughput", throughput(metrics.get("tokens_per_s"))),
        ("ETA", eta_text(run, rate=rate, now=now)),
        ("Attempt", attempt_text(run)),
        ("Checkpoint", DASH if ckpt is None else f"step {ckpt}"),
    ]
    if is_eval(run):  # samples scored and the pass rate so far; an eval has no tokens/s and no checkpoints
        fields = [f for f in fields if f[0] not in ("Throughput", "Checkpoint")]
    blocks: list[Block] = [
        {"type": "header", "text": _plain(run_title(run), 150)},
        {"type": "section", "fields": [_mrkdwn(f"*{name}*\n{value}", 2000) for name, value in fields]},
    ]
    if status == "failed" and run.get("error"):
        blocks.append({"type": "section", "text": _mrkdwn(error_text(str(run["error"])))})
    lineage = run.get("lineage") or []
    if lineage:  # what the babysitter did instead of paging: each remedial attempt, where from and what changed
        text = "\n".join(f":adhesive_bandage: {escape(lineage_text(e))}" for e in lineage[-HISTORY_LINES:])
        blocks.append({"type": "context", "elements": [_mrkdwn(_tail(text, 3000))]})
    meta = f"run `{escape(str(run.get('id', '?')))}`"
    if status == "queued":  # its submission id is reserved, but Ray has no such job until it is admitted
        meta += " · not on Ray yet"
    elif run.get("ray_submission_id"):
        meta += f" · Ray job `{escape(str(run['ray_submission_id']))}`"
    blocks.append({"type": "context", "elements": [_mrkdwn(meta)]})
    recent = [line for line in history if line.strip()][-HISTORY_LINES:]
    if recent:
        blocks.append({"type": "context", "elements": [_mrkdwn(_tail("\n".join(recent), 3000))]})
    blocks.append(actions(run))
    headline = headline_metric(run)
    fallback = (
        f"{escape(run_title(run))}: {escape(status)}, step {step_text(run)}, "
        f"{escape(headline)} {number(metrics.get(headline))}"
    )
    return fallback, blocks


def error_text(error: str, limit: int = 3000) -> str:
    """The run's error as a code block (backtick runs broken so the fence holds), clipped to fit a section."""
    body = escape(error).replace("```", "`\u200b``")
    return f":x: *Error*\n```{clip(body, limit - 20)}```"


def _tail(text: str, limit: int) -> str:
    """The end of ``text`` (history is newest-last, so the oldest part goes when it is too long)."""
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]
