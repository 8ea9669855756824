"""Notion page → Markdown: what ``get_page`` hands a model for a 2,000-block page, against the JSON it fetched.

A page of 2,000 blocks of mixed types (headings, paragraphs with bold, links and code, nested bulleted and numbered
lists, to-dos, code, quotes, callouts, toggles, tables, images, bookmarks, equations, dividers) is seeded in the
Notion fake (tests/fakes/notion/) and read through ``get_page`` with ``mcp.Client`` in memory, the fake served
in process over ``httpx.ASGITransport``, 100 blocks a request as Notion pages them. Reported, in one run:

* ``get_page`` time (median of rounds), requests made;
* bytes returned to the model / bytes of JSON fetched from Notion (claim: the Markdown is at most a fifth of the
  JSON — the point of rendering rather than passing JSON through);
* ``blocks_to_markdown`` alone against ``json.dumps`` of the same blocks (the bare library's serialisation of the
  same tree): the renderer's cost relative to just serialising what was fetched.

    .venv/bin/python benchmarks/notion_render.py [--blocks 2000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
from typing import Any

import httpx
from _harness import median, report
from fakes.notion import TOKEN, NotionFake
from mcp import Client
from mcp.types import TextContent

from labbot.mcp_servers.notion import NotionApi, blocks_to_markdown, build_server

CLAIM = 0.2  # Markdown bytes / JSON bytes at most


class CountingTransport(httpx.AsyncBaseTransport):
    """The fake's ASGI transport, counting the response bytes and requests that pass through it."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.bytes = 0
        self.requests = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        body = await response.aread()
        self.bytes += len(body)
        self.requests += 1
        return httpx.Response(response.status_code, headers=response.headers, content=body, request=request)


def _rt(text: str, **marks: bool) -> dict[str, Any]:
    return {"text": {"content": text}, **({"annotations": marks} if marks else {})}


def _link(text: str, url: str) -> dict[str, Any]:
    return {"text": {"content": text, "link": {"url": url}}}


def _section(i: int) -> list[dict[str, Any]]:
    """One section of a lab notebook: 20 blocks, nested ones included."""
    para = [_rt(f"Run {i} used "), _rt("lr=3e-4", code=True), _rt(" and "), _rt("8 GPUs", bold=True), _rt("; see ")]
    para.append(_link("the dashboard", f"https://wandb.ai/lab/runs/{i}"))
    bullets = [{"bulleted_list_item": {"rich_text": [_rt(f"observation {i}.{k}")]}} for k in range(2)]
    cells = [[[_rt(a)], [_rt(b)]] for a, b in [("step", "loss"), (str(i * 100), f"{3 - i / 1000:.3f}")]]
    rows = [{"table_row": {"cells": c}} for c in cells]
    return [
        {"heading_2": {"rich_text": [_rt(f"Experiment {i}")]}},
        {"paragraph": {"rich_text": para}},
        {"bulleted_list_item": {"rich_text": [_rt("findings")], "children": bullets}},
        {"numbered_list_item": {"rich_text": [_rt("rerun with seed 2")]}},
        {"numbered_list_item": {"rich_text": [_rt("compare against baseline", italic=True)]}},
        {"to_do": {"rich_text": [_rt("write the eval")], "checked": i % 2 == 0}},
        {"code": {"rich_text": [_rt(f"python train.py --run {i} --lr 3e-4")], "language": "shell"}},
        {"quote": {"rich_text": [_rt("loss plateaus after 2k steps")]}},
        {"callout": {"rich_text": [_rt("check the data loader")], "icon": {"type": "emoji", "emoji": "💡"}}},
        {"toggle": {"rich_text": [_rt("raw logs")], "children": [{"paragraph": {"rich_text": [_rt("ok")]}}]}},
        {"table": {"table_width": 2, "has_column_header": True, "children": rows}},
        {"image": {"type": "external", "external": {"url": f"https://example.com/loss-{i}.png"}, "caption": []}},
        {"bookmark": {"url": "https://arxiv.org/abs/1706.03762", "caption": []}},
        {"equation": {"expression": "L = -\\sum_t \\log p(x_t)"}},
        {"divider": {}},
    ]


def _count(blocks: list[dict[str, Any]]) -> int:
    return sum(1 + _count(next(iter(b.values())).get("children", [])) for b in blocks)


def seed(fake: NotionFake, target: int) -> tuple[str, int]:
    """A page of about ``target`` blocks; (its id, how many blocks exactly)."""
    blocks: list[dict[str, Any]] = []
    i = 0
    while _count(blocks) + _count(_section(i)) <= target:
        blocks += _section(i)
        i += 1
    blocks += [{"paragraph": {"rich_text": [_rt(f"note {k}")]}} for k in range(target - _count(blocks))]
    return fake.add_page(title="Lab notebook", blocks=blocks), _count(blocks)


async def read_page(api: NotionApi, page: str) -> str:
    async with Client(build_server(api, read_only=True)) as client:
        result = await client.call_tool("get_page", {"page_id": page})
    assert not result.is_error, result
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


def timed(fn: Any, rounds: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return median(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one log line per request otherwise
    fake = NotionFake()
    page, n_blocks = seed(fake, a.blocks)
    counting = CountingTransport(fake.transport())
    api = NotionApi(TOKEN, base_url="http://notion.test", transport=counting)
    asyncio.run(read_page(api, page))  # warm-up: imports, the fake's and pydantic's first-call costs
    counting.bytes = counting.requests = 0
    page_s, text = timed(lambda: asyncio.run(read_page(api, page)), a.rounds)
    fetched, requests = counting.bytes / a.rounds, counting.requests // a.rounds
    returned = len(text.encode())
    assert fake.violations == [], fake.violations
    tree = fake.tree(page)
    render_s, markdown = timed(lambda: blocks_to_markdown(tree), a.rounds)
    dumps_s, dumped = timed(lambda: json.dumps(tree), a.rounds)
    ratio = returned / fetched
    ok = ratio <= CLAIM
    print(f"page of {n_blocks} blocks ({len(tree)} top level), median of {a.rounds} rounds")
    print(f"get_page through mcp.Client:   {page_s * 1000:8.1f} ms  ({requests} requests to the Notion fake)")
    print(f"JSON fetched from Notion:      {fetched / 1024:8.1f} KiB")
    print(f"returned to the model:         {returned / 1024:8.1f} KiB  ({len(markdown.splitlines())} Markdown lines)")
    verdict = "pass" if ok else "FAIL"
    print(f"returned / fetched = {ratio:.3f} (claim <= {CLAIM:g}): {verdict}; the JSON is {1 / ratio:.1f}x larger")
    print(
        f"blocks_to_markdown {render_s * 1000:.2f} ms vs json.dumps {dumps_s * 1000:.2f} ms of the same blocks: "
        f"{render_s / dumps_s:.2f}x ({len(markdown):,} vs {len(dumped):,} characters)"
    )
    report(
        "notion_render",
        {
            "blocks": n_blocks,
            "requests": requests,
            "get_page_s": page_s,
            "fetched_bytes": fetched,
            "returned_bytes": returned,
            "render_s": render_s,
            "json_dumps_s": dumps_s,
            "render_vs_dumps": render_s / dumps_s,
            "ratio": ratio,
            "claim": f"<= {CLAIM:g} bytes md/json",
            "ok": ok,
        },
    )


if __name__ == "__main__":
    main()
