"""An experiment's card, the root of its thread: status, the trials counted (done / running / pruned / queued /
failed), budget used, the best config so far with its interval, and each trial with its runs; pure (JSON in, Block
Kit out). Its digest says whether an update would change anything."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from labbot.bot.slack.blocks.run_card import clip, escape, mention
from labbot.common.experiment_text import best_words, budget_words, counts_words, objective_words, params_words

MAX_TRIAL_LINES = 25  # more, and the card says how many more and where to see them all
STATUS_EMOJI = {
    "running": ":arrows_counterclockwise:", "paused": ":double_vertical_bar:", "done": ":white_check_mark:",
    "stopped": ":octagonal_sign:", "budget_spent": ":moneybag:",
}  # fmt: skip
TRIAL_EMOJI = {
    "launching": ":hourglass_flowing_sand:", "running": ":runner:", "done": ":white_check_mark:",
    "pruned": ":scissors:", "failed": ":x:", "stopped": ":octagonal_sign:",
}  # fmt: skip


def trial_line(t: dict[str, Any], metric: str) -> str:
    runs = ", ".join(f"`{r['id']}` {r.get('status', '?')}" + (f" step {r['step']}" if r.get("step") else "")
                     for r in t["runs"]) or "not launched yet"  # fmt: skip
    value = f" → {metric} {t['value']:.4g}" if t.get("value") is not None else ""
    why = f" — {escape(clip(t['reason'], 160))}" if t.get("reason") and t["status"] != "done" else ""
    return f"{TRIAL_EMOJI.get(t['status'], '')} #{t['number']} {escape(params_words(t['params']))}{value} · {runs}{why}"


def experiment_card(doc: dict[str, Any], command: str = "/lab") -> tuple[str, list[dict[str, Any]]]:
    metric = doc["objective"]["metric"]
    reason = f" ({escape(doc['reason'])})" if doc.get("reason") else ""
    head = (
        f"{STATUS_EMOJI.get(doc['status'], '')} *experiment `{doc['id']}` {escape(doc['name'])}* — "
        f"{doc['status']}{reason}\n"
        f"job `{doc['job']}` · {doc['search']} search · {doc['prune']} pruning · by {mention(doc['owner'])}\n"
        f"objective: {escape(objective_words(doc['objective']))}\n"
        f"space: `{escape(' '.join(doc['space']))}`"
    )
    lines = [f"*trials:* {counts_words(doc)}", budget_words(doc), escape(best_words(doc))]
    trials = doc["trials"]
    shown = [trial_line(t, metric) for t in trials[:MAX_TRIAL_LINES]]
    if len(trials) > MAX_TRIAL_LINES:
        shown.append(f"… {len(trials) - MAX_TRIAL_LINES} more: `{command} experiment {doc['id']}`")
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": clip(head, 2900)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": clip("\n".join(lines), 2900)}},
    ]
    if shown:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": clip("\n".join(shown), 2900)}})
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": (
        f"`{command} experiment {doc['id']} pause|resume|stop` · `{command} experiment {doc['id']} stop-trial N`"
    )}]})  # fmt: skip
    text = f"experiment {doc['id']} {doc['name']}: {doc['status']}, {counts_words(doc)}"
    return text, blocks


def card_digest(blocks: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(blocks, sort_keys=True).encode()).hexdigest()
