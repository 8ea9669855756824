"""Block trees in and out of Notion, within its limits: reading a page's whole content, writing a long one.

Reading (:func:`fetch_tree`): ``GET /v1/blocks/{id}/children`` answers one level, 100 blocks a page, so the walker
follows ``next_cursor`` and then fetches the children of every ``has_children`` block, level by level (a few
requests at a time: Notion allows about three a second), attaching them under ``"children"``. It stops at a depth
and a total number of blocks, and says so; sub-pages and child databases are separate pages and are not entered.

Writing (:class:`Writer`): one append request takes at most 100 blocks in any ``children`` array, two levels of
nesting below its own blocks and 1,000 blocks in all. A block that does not fit is sent without its children,
which are then appended to the new block's id (Notion's answer lists the created blocks in order). The writer
counts what was written so that a failure midway can say how far it got.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from labbot.mcp_servers.notion.client import NotionApi
from labbot.mcp_servers.notion.ids import segment

__all__ = ["MAX_BLOCKS", "MAX_DEPTH", "Tree", "Writer", "count_blocks", "fetch_tree", "split_for_create"]

MAX_DEPTH = 8  # levels of nesting get_page shows
MAX_BLOCKS = 2500  # blocks get_page fetches at most
MAX_CHILDREN = 100  # in one children array of a request
MAX_NESTING = 2  # levels of children below a request's own blocks
MAX_REQUEST_BLOCKS = 1000  # blocks in one request, nested ones included
CONCURRENCY = 3
_NOT_ENTERED = {"child_page", "child_database"}


@dataclass
class Tree:
    """A page's content: top-level blocks with ``"children"`` attached, how many blocks, and what was cut."""

    blocks: list[dict[str, Any]]
    count: int
    notes: list[str] = field(default_factory=list)


class _Budget:
    def __init__(self, blocks: int) -> None:
        self.left = blocks
        self.cut = False


async def _children(api: NotionApi, block_id: str, budget: _Budget) -> list[dict[str, Any]]:
    if budget.left <= 0:
        budget.cut = True
        return []
    path = f"/v1/blocks/{segment(str(block_id))}/children"
    results, more = await api.paginate("GET", path, limit=budget.left)
    budget.left -= len(results)
    budget.cut = budget.cut or more
    return results


def _enters(block: dict[str, Any]) -> bool:
    return bool(block.get("has_children")) and block.get("type") not in _NOT_ENTERED and bool(block.get("id"))


async def fetch_tree(
    api: NotionApi, block_id: str, *, max_depth: int = MAX_DEPTH, max_blocks: int = MAX_BLOCKS
) -> Tree:
    """The content under ``block_id`` (a page or a block), at most ``max_depth`` levels and ``max_blocks`` blocks."""
    budget = _Budget(max_blocks)
    top = await _children(api, block_id, budget)
    level, depth, hidden = [b for b in top if _enters(b)], 1, 0
    while level:
        if depth >= max_depth:
            hidden = len(level)
            break

        async def fill(block: dict[str, Any], gate: asyncio.Semaphore) -> None:
            async with gate:
                block["children"] = await _children(api, block["id"], budget)

        gate = asyncio.Semaphore(CONCURRENCY)
        # gather, not a TaskGroup: a TaskGroup cancels its parent task on failure, which the MCP server's anyio
        # cancel scopes read as the session being cancelled; the first failure (a ToolError) is the one to tell
        failures = [e for e in await asyncio.gather(*(fill(b, gate) for b in level), return_exceptions=True) if e]
        if failures:
            raise failures[0]
        level = [c for b in level for c in b.get("children", []) if _enters(c)]
        depth += 1
    notes = []
    if budget.cut:
        notes.append(f"[cut: the page has more than {max_blocks} blocks; only the first {max_blocks} are shown]")
    if hidden:
        notes.append(f"[{hidden} block(s) nested deeper than {max_depth} levels have content that is not shown]")
    return Tree(top, max_blocks - budget.left, notes)


def _kind(block: dict[str, Any]) -> str:
    return next(k for k in block if k not in {"object", "type", "id"})


def _kids(block: dict[str, Any]) -> list[dict[str, Any]]:
    kids = block[_kind(block)].get("children")
    return kids if isinstance(kids, list) else []


def count_blocks(blocks: list[dict[str, Any]]) -> int:
    """Blocks in ``blocks``, nested ones included."""
    return sum(1 + count_blocks(_kids(b)) for b in blocks)


def _fits(block: dict[str, Any], level: int = 0) -> bool:
    """Whether ``block`` with all its children can go in one request (as one of its top-level blocks)."""
    kids = _kids(block)
    if not kids:
        return True
    return level < MAX_NESTING and len(kids) <= MAX_CHILDREN and all(_fits(k, level + 1) for k in kids)


def _sendable(block: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(what to send now, the children to append to it afterwards)."""
    if _fits(block) and count_blocks([block]) <= MAX_REQUEST_BLOCKS:
        return block, []
    kind = _kind(block)
    data = dict(block[kind])
    kids = data.pop("children")
    if kind == "table":  # a table is created with its rows
        data["children"], kids = kids[:MAX_CHILDREN], kids[MAX_CHILDREN:]
    return {**block, kind: data}, kids


def split_for_create(blocks: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the leading blocks that can go in the create request itself, the rest to append after)."""
    n = total = 0
    for b in blocks[:MAX_CHILDREN]:
        sent, rest = _sendable(b)
        size = count_blocks([sent])
        if rest or total + size > MAX_REQUEST_BLOCKS:
            break
        n, total = n + 1, total + size
    return blocks[:n], blocks[n:]


class Writer:
    """Appends block trees in requests within Notion's limits; ``written`` counts the blocks Notion accepted."""

    def __init__(self, api: NotionApi) -> None:
        self.api = api
        self.written = 0

    async def append(self, parent_id: str, blocks: list[dict[str, Any]]) -> None:
        prepared = [_sendable(b) for b in blocks]
        chunk: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        size = 0
        for sent, rest in prepared:
            n = count_blocks([sent])
            if chunk and (len(chunk) == MAX_CHILDREN or size + n > MAX_REQUEST_BLOCKS):
                await self._send(parent_id, chunk)
                chunk, size = [], 0
            chunk.append((sent, rest))
            size += n
        if chunk:
            await self._send(parent_id, chunk)

    async def _send(self, parent_id: str, chunk: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> None:
        path = f"/v1/blocks/{segment(parent_id)}/children"
        doc = await self.api.request("PATCH", path, json_body={"children": [sent for sent, _ in chunk]})
        self.written += count_blocks([sent for sent, _ in chunk])
        made = doc.get("results")
        if any(rest for _, rest in chunk) and (not isinstance(made, list) or len(made) != len(chunk)):
            raise ToolError("Notion did not answer with the blocks it created, so their nested content was not added")
        for (_, rest), block in zip(chunk, made or [], strict=False):
            if rest:
                await self.append(str(block["id"]), rest)
