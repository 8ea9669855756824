"""``/lab pages``, ``ack`` and ``resolve``, and a page's Ack / Resolve / File incident buttons: anyone may
acknowledge or resolve a page — whoever is on call."""

from __future__ import annotations

from anyio import to_thread

from labbot.bot.commands import Parsed
from labbot.bot.slack.blocks import text_blocks
from labbot.bot.slack.blocks.pages import pages_list
from labbot.bot.slack.handlers.common import Asker, SlackDeps, tell


async def pages(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    pager = deps.need_pager()
    opts = parsed.options
    found = await to_thread.run_sync(
        lambda: pager.pages(include_resolved=bool(opts.get("all")), run_id=opts.get("run"), limit=20)
    )
    text = pages_list(found, command=deps.command)
    for blocks in text_blocks(text)[:1]:
        await tell(deps, who, f"{len(found)} pages", blocks)


async def ack(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    await page_action(deps, parsed.args["page"], "ack", who)


async def resolve(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    await page_action(deps, parsed.args["page"], "resolve", who, cause=parsed.options.get("cause"))


async def page_action(deps: SlackDeps, page_id: str, verb: str, who: Asker, *, cause: str | None = None) -> None:
    """Acknowledge or resolve a page (a command or a button). Resolving with a ``cause`` records it (also on a page
    already resolved)."""
    pager = deps.need_pager()
    if verb == "ack":
        page = await to_thread.run_sync(lambda: pager.acknowledge(page_id, by=who.user))
    else:
        page = await to_thread.run_sync(lambda: pager.resolve(page_id, by=who.user, cause=cause))
    if deps.after_page_change is not None:
        await deps.after_page_change()
    past = "acknowledged" if verb == "ack" else "resolved"
    if page.get("run_id"):
        await deps.threads.record_action(page["run_id"], f"<@{who.user}> {past} page {page['id']} ({page['kind']})")
    recorded = " — cause recorded" if cause else ""
    await tell(deps, who, f"page `{page['id']}` ({page['kind']}) is {page['state']}{recorded}")


async def file_incident(deps: SlackDeps, page_id: str, who: Asker) -> None:
    """File incident pressed on a page: a Linear issue, linked both ways."""
    await tell(deps, who, await deps.need_crosslinks().file_incident(page_id, who.user))
