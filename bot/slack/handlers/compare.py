"""``/lab compare A B``: two training runs (on a metric, with the overlay plot in the message's thread) or two eval
runs (paired by task), compared in the channel where the command ran — a message everyone sees, since a verdict is
only as good as what it rests on; refusals are ephemeral."""

from __future__ import annotations

import logging
import re

from anyio import to_thread
from slack_sdk.errors import SlackApiError

from labbot.bot.commands import Parsed
from labbot.bot.render.compare import comparison_text
from labbot.bot.render.plots import overlay_plot_png
from labbot.bot.slack.blocks import text_blocks
from labbot.bot.slack.handlers.common import Asker, SlackDeps, tell
from labbot.evals.comparisons import RunComparer, thinned

log = logging.getLogger(__name__)


_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


async def compare(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    run_a, run_b, opts = parsed.args["run_a"], parsed.args["run_b"], parsed.options
    comparer = RunComparer(deps.service, deps.threads.telemetry, deps.evals)
    doc, points = await to_thread.run_sync(
        lambda: comparer.compare_with_points(
            run_a,
            run_b,
            metric=opts.get("metric"),
            better=opts.get("better"),
            window=opts.get("window"),
            viewer=who.user,
            admin=deps.is_admin(who.user),
        )
    )
    what = f"on {doc['metric']}" if doc["kind"] == "training" else f"on {doc['suite']}"
    summary = f"<@{who.user}> compared `{run_a}` and `{run_b}` {what}: {doc['verdict']}"
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": summary}}]
    blocks += text_blocks(f"```\n{comparison_text(doc)}\n```")[0][:3]
    try:
        posted = await deps.client.chat_postMessage(channel=who.channel, text=summary, blocks=blocks)
    except SlackApiError as e:  # a channel labbot is not in: the asker still gets the answer
        log.info("could not post a comparison in %s: %s", who.channel, e.response.get("error"))
        note = "invite @labbot to this channel and comparisons (and their plots) are posted here for everyone"
        context = {"type": "context", "elements": [{"type": "mrkdwn", "text": note}]}
        await tell(deps, who, summary, [*blocks, context])
        return
    if points is None:
        return
    series = [
        (f"{label} {side['id']} ({side['name']})", thinned(pts, side["steps"][0]), tuple(side["steps"]))
        for label, side, pts in (("A", doc["a"], points[0]), ("B", doc["b"], points[1]))
    ]
    title = f"{doc['metric']}: {run_a} vs {run_b} — {doc['verdict']}"
    png = await to_thread.run_sync(lambda: overlay_plot_png(series, metric=doc["metric"], title=title))
    await deps.client.files_upload_v2(
        channel=who.channel,
        thread_ts=posted["ts"],
        content=png,
        filename=f"compare-{run_a}-{run_b}-{_SAFE.sub('_', str(doc['metric']))}.png",  # a file per metric
        title=f"{doc['metric']}: {run_a} vs {run_b}",
    )
