"""``/lab feedback`` (the latest 👍/👎 on agents' answers and eval results) and ``/lab ab`` (the A/B test of the
agents' models, ``[agents.ab]``)."""

from __future__ import annotations

from anyio import to_thread

from labbot.agents.feedback.report import ab_document
from labbot.agents.feedback.store import FeedbackStore
from labbot.bot.commands import Parsed
from labbot.bot.render.feedback import ab_text, feedback_table
from labbot.bot.slack.blocks import text_blocks
from labbot.bot.slack.handlers.common import Asker, SlackDeps, tell


async def feedback(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    store, opts = FeedbackStore(deps.service.db), parsed.options
    rows = await to_thread.run_sync(
        lambda: store.recent(limit=int(opts.get("limit") or 20), vote="down" if opts.get("down") else None)
    )
    if opts.get("mine"):
        rows = [r for r in rows if r["user"] == who.user]
    text = f"```\n{feedback_table(rows)}\n```"
    for blocks in text_blocks(text)[:1]:
        await tell(deps, who, f"{len(rows)} votes", blocks)


async def ab(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    store = FeedbackStore(deps.service.db)
    doc = await to_thread.run_sync(ab_document, store, deps.ab)
    text = ab_text(doc) if not doc.get("configured") else f"```\n{ab_text(doc)}\n```"
    for blocks in text_blocks(text)[:1]:
        await tell(deps, who, "A/B test", blocks)
