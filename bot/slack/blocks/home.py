"""The App Home tab: a researcher's lab at a glance, as one ``home`` view (pure: data in, view out).

Sections: my runs (newest first, a page at a time: status, step, headline metric, Stop / Restart), the open pages
I own or am on call for, my agents' recent threads and artifacts, my eval runs, and capacity by purpose. Block Kit
holds a home tab to 100 blocks and a section to 3,000 characters; a page of runs is ``RUNS_PER_PAGE`` (two blocks
each) and every list is clipped, so the view fits whatever the numbers; more runs than a page get "Older runs" /
"Newer runs" buttons (``home_runs_page``, the page as value). Someone with nothing yet gets a short welcome saying
what to type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from labbot.bot.slack.blocks.run_card import (
    actions,
    as_float,
    clip,
    escape,
    headline_label,
    headline_metric,
    number,
    status_label,
    step_text,
)
from labbot.training.capacity import number as count

HOME_MAX_BLOCKS = 100
RUNS_PER_PAGE = 10
LIST_MAX = 5  # pages, threads, artifacts, eval runs shown
PAGE_ACTION = "home_runs_page"


@dataclass(frozen=True)
class HomeData:
    """What one user's home shows; ``runs`` is this page's, newest first, out of ``runs_total``."""

    user: str
    runs: list[dict[str, Any]] = field(default_factory=list)
    runs_total: int = 0
    page: int = 0
    pages: list[dict[str, Any]] = field(default_factory=list)
    threads: list[dict[str, Any]] = field(default_factory=list)  # {"channel", "thread_ts", "role", "run_id"}
    artifacts: list[dict[str, Any]] = field(default_factory=list)  # {"id", "name", "agent", "size"}
    evals: list[dict[str, Any]] = field(default_factory=list)  # eval runs (run JSON)
    capacity: list[dict[str, Any]] = field(default_factory=list)  # the capacity report's purposes
    command: str = "/lab"
    agents: str = ""  # whether the agents answer (integrations.agents_line)

    @property
    def empty(self) -> bool:
        return not (self.runs_total or self.pages or self.threads or self.artifacts or self.evals)


def _section(text: str, block_id: str | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "section", "text": {"type": "mrkdwn", "text": clip(text, 3000)}}
    if block_id:
        block["block_id"] = block_id
    return block


def _header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": clip(text, 150), "emoji": True}}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": clip(text, 3000)}]}


def run_line(run: dict[str, Any]) -> str:
    name = escape(str(run.get("name") or run.get("id")))
    parts = [f"*{name}* `{run.get('id')}` · {escape(str(run.get('job')))}", status_label(str(run.get("status")))]
    if run.get("step") is not None:
        parts.append(f"step {step_text(run)}")
    value = as_float((run.get("metrics") or {}).get(headline_metric(run)))
    if value is not None:
        parts.append(f"{headline_label(run)} {number(value)}")
    return " · ".join(parts)


def _run_blocks(run: dict[str, Any]) -> list[dict[str, Any]]:
    buttons = actions(run)
    buttons["block_id"] = f"home_run_{run.get('id')}"[:255]  # block ids are unique within a view
    return [_section(run_line(run)), buttons]


def _pager(data: HomeData) -> dict[str, Any] | None:
    elements = []
    if data.page > 0:
        elements.append(_page_button("Newer runs", data.page - 1))
    if (data.page + 1) * RUNS_PER_PAGE < data.runs_total:
        elements.append(_page_button("Older runs", data.page + 1))
    return {"type": "actions", "block_id": "home_runs_pager", "elements": elements} if elements else None


def _page_button(label: str, page: int) -> dict[str, Any]:
    return {
        "type": "button",
        "text": {"type": "plain_text", "text": label},
        "action_id": f"{PAGE_ACTION}_{page}",
        "value": str(page),
    }


def _page_line(page: dict[str, Any]) -> str:
    where = f"run `{page['run_id']}`" if page.get("run_id") else "the cluster"
    kind, summary = escape(str(page.get("kind"))), escape(str(page.get("summary")))
    return f"`{page['id']}` {kind} on {where} · {page.get('state')} · {summary}"


def _thread_line(thread: dict[str, Any]) -> str:
    channel = str(thread.get("channel") or "")
    where = "your DM with labbot" if channel.startswith("D") else f"<#{channel}>" if channel else "no thread"
    run = f" · run `{thread['run_id']}`" if thread.get("run_id") else ""
    return f"{escape(str(thread.get('role')))} in {where}{run} · {thread.get('when', '')}".rstrip(" ·")


def _listed(items: list[str], more: int) -> str:
    text = "\n".join(f"• {clip(i, 500)}" for i in items[:LIST_MAX])
    return text + (f"\n…and {more} more" if more > 0 else "")


def home_view(data: HomeData, *, updated: str = "") -> dict[str, Any]:
    """The home tab of ``data.user`` (see the module docstring); ``updated`` goes into the footer."""
    cmd = data.command
    blocks: list[dict[str, Any]] = [_header("Your lab")]
    if data.empty:
        blocks.append(
            _section(
                ":wave: Nothing of yours here yet. Launch a run with "
                f"`{cmd} launch tiny-lm steps=300`: its card, status and buttons show up here, with the pages you "
                f"are on call for, your agents' threads and artifacts, and your eval runs. `{cmd} help` lists "
                "everything; in the assistant tab, ask me anything about your runs."
            )
        )
    else:
        first = data.page * RUNS_PER_PAGE + 1
        last = data.page * RUNS_PER_PAGE + len(data.runs)
        title = f"*My runs* — {first}–{last} of {data.runs_total}" if data.runs else f"*My runs* — {data.runs_total}"
        blocks.append(_section(title if data.runs_total else "*My runs* — none yet", "home_runs"))
        for run in data.runs[:RUNS_PER_PAGE]:
            blocks += _run_blocks(run)
        pager = _pager(data)
        if pager is not None:
            blocks.append(pager)
            blocks.append(_context(f"All of them: `{cmd} runs` here, or `labbot runs` in a terminal."))
        blocks.append({"type": "divider"})
        pages = [_page_line(p) for p in data.pages]
        blocks.append(_section("*Open pages*\n" + (_listed(pages, len(pages) - LIST_MAX) if pages else "none :tada:")))
        threads = [_thread_line(t) for t in data.threads]
        arts = [f"`{a['id']}` {escape(str(a['name']))} · {escape(str(a['agent']))}" for a in data.artifacts]
        agents = "*My agents' threads*\n" + (_listed(threads, 0) if threads else "none yet")
        agents += "\n*Their artifacts*\n" + (_listed(arts, 0) if arts else "none yet")
        blocks.append(_section(agents))
        evals = [_eval_line(r) for r in data.evals]
        blocks.append(_section("*My eval runs*\n" + (_listed(evals, 0) if evals else "none yet")))
    if data.capacity:
        blocks.append({"type": "divider"})
        blocks.append(_section("*Capacity by purpose*\n" + "\n".join(_capacity_line(p) for p in data.capacity[:10])))
    if data.agents:
        blocks.append(_context(data.agents))
    if updated:
        blocks.append(_context(f"updated {updated}"))
    return {"type": "home", "blocks": blocks[:HOME_MAX_BLOCKS]}


def _eval_line(run: dict[str, Any]) -> str:
    rate = as_float((run.get("metrics") or {}).get("pass_rate"))
    shown = f" · pass rate {rate:.0%}" if rate is not None else ""
    return f"`{run.get('id')}` {escape(str(run.get('name')))} · {status_label(str(run.get('status')))}{shown}"


def _capacity_line(p: dict[str, Any]) -> str:
    def of(key: str) -> str:
        limit = p["limits"][key]
        return f"{count(p['use'][key])}/{count(limit) if limit is not None else '-'}"

    queued = len(p.get("queued") or [])
    return (
        f"• *{escape(str(p['purpose']))}*{'' if p.get('capped') else ' (no cap)'}: runs {of('runs')}, "
        f"CPUs {of('cpus')}, GPUs {of('gpus')}" + (f", {queued} queued" if queued else "")
    )
