"""``/lab artifacts [ID]``: what the asker's agents keep in the artifact store (one store per role:
RESEARCHER/ROLE), listed, or one of them posted here as a file."""

from __future__ import annotations

from anyio import to_thread

from labbot.agents.fleet.identity import store_of
from labbot.agents.fleet.roles import load_roles
from labbot.agents.fleet.tools import CallContext
from labbot.bot.commands import Parsed
from labbot.bot.slack.blocks import text_blocks
from labbot.bot.slack.blocks.run_card import escape
from labbot.bot.slack.handlers.common import Asker, SlackDeps, tell
from labbot.common.errors import BadRequest, LabbotError
from labbot.common.humanize import format_bytes
from labbot.storage.artifacts import ArtifactNotFound


async def artifacts(deps: SlackDeps, parsed: Parsed, who: Asker) -> None:
    store = deps.artifacts
    if store is None:
        raise LabbotError("there is no artifact store in this labbot")
    stores = [store_of(CallContext(agent="", role=role, owner=who.user)) for role in sorted(load_roles())]
    artifact_id = parsed.args.get("artifact")
    if artifact_id:
        for agent in stores:
            try:
                view, stream = await to_thread.run_sync(store.open_visible, agent, artifact_id)
            except ArtifactNotFound:
                continue
            with stream:
                data = await to_thread.run_sync(stream.read)
            await deps.threads.post_file(who.channel, None, str(view["name"]), data)
            return
        raise BadRequest(f"none of your agents has an artifact {artifact_id!r}: `{deps.command} artifacts` lists them")
    lines = []
    for agent in stores:
        for a in await to_thread.run_sync(store.list, agent):
            shared = f" · shared by {a['owner_agent']}" if a["owner_agent"] != agent else ""
            lines.append(
                f"`{a['id']}` {escape(a['name'])} · {format_bytes(a['size'])} · {agent.split('/', 1)[1]}{shared}"
            )
    if not lines:
        await tell(deps, who, "your agents have no artifacts yet: they keep reports, plots and payloads there")
        return
    text = "\n".join([*lines, f"_post one here with `{deps.command} artifacts ID`_"])
    for blocks in text_blocks(text)[:1]:
        await tell(deps, who, f"{len(lines)} artifacts", blocks)
