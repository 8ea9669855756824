"""The codebase server's search against pathological regexes, and the event loop while it runs.

A repository of ``--files`` small Python files plus one file with a line of 5,000 ``a``s (ending in ``!``, so
``(a+)+$`` must fail) and a line of 5,000 ``x``s. Each pattern is searched ``--repeat`` times through ``mcp.Client``
in memory (the ``python`` searcher, the one that runs in labbot's process), while a ticker measures the event
loop's largest stall and a second client times ``list_dir`` calls made during the searches. Prints the worst search
time of the pathological patterns, the median of a plain search, their ratio, the largest stall and the slowest
``list_dir`` (claim: worst pathological search <= 2 s, stall <= 200 ms).

    .venv/bin/python benchmarks/codebase_regex.py [--files 300] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client
from mcp.types import TextContent

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from labbot.mcp_servers.codebase import build_server  # noqa: E402

PLAIN = "def no_such_function"  # matches nothing, so it reads every file, as the pathological ones do
PATHOLOGICAL = ["(a+)+$", "(.+)+@", "(a|aa)+$", "(x+x+)+y"]
CLAIM_S, CLAIM_STALL_S = 2.0, 0.2


def make_repo(root: Path, files: int) -> None:
    for i in range(files):
        body = "".join(f"def train_{i}_{j}(lr):\n    return lr * {j}  # step {j}\n\n" for j in range(40))
        (root / f"mod_{i:04d}.py").write_text(body)
    (root / "pathological.txt").write_text("a" * 5000 + "!\n" + "x" * 5000 + "\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)


async def measure(root: Path, repeat: int) -> dict[str, float]:
    server = build_server(root, search_with="python", home=root.parent / "home")
    async with Client(server) as searcher, Client(server) as other:
        stall, done, listings = 0.0, False, []

        async def ticker() -> None:
            nonlocal stall
            while not done:
                start = time.perf_counter()
                await asyncio.sleep(0.005)
                stall = max(stall, time.perf_counter() - start - 0.005)

        async def lister() -> None:
            while not done:
                start = time.perf_counter()
                await other.call_tool("list_dir", {})
                listings.append(time.perf_counter() - start)
                await asyncio.sleep(0.02)

        async def search(query: str) -> float:
            start = time.perf_counter()
            result = await searcher.call_tool("search", {"query": query, "max_results": 500})
            took = time.perf_counter() - start
            text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
            assert not result.is_error, text
            return took

        await search(PLAIN)  # warm up
        tasks = [asyncio.create_task(ticker()), asyncio.create_task(lister())]
        plain = [await search(PLAIN) for _ in range(repeat)]
        plain_stall, stall, plain_listings, listings = stall, 0.0, listings, []
        worst = {q: max([await search(q) for _ in range(repeat)]) for q in PATHOLOGICAL}
        done = True
        await asyncio.gather(*tasks)
    return {
        "plain_s": statistics.median(plain),
        "worst_s": max(worst.values()),
        **{f"worst {q}": t for q, t in worst.items()},
        "stall_s": stall,
        "plain_stall_s": plain_stall,
        "plain_list_dir_max_s": max(plain_listings) if plain_listings else 0.0,
        "list_dir_max_s": max(listings) if listings else 0.0,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=300, help="Python files in the repository searched")
    ap.add_argument("--repeat", type=int, default=5, help="searches per pattern")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        make_repo(root, a.files)
        r = asyncio.run(measure(root, a.repeat))
    for q in PATHOLOGICAL:
        print(f"search {q!r:<12} worst {r[f'worst {q}'] * 1000:9.1f} ms")
    print(f"search {PLAIN!r:<12} median {r['plain_s'] * 1000:8.1f} ms ({a.files} files)")
    ratio = r["worst_s"] / r["plain_s"]
    print(f"worst pathological / plain = {ratio:.2f}")
    print(
        f"event loop's largest stall: {r['stall_s'] * 1000:.1f} ms during the pathological searches, "
        f"{r['plain_stall_s'] * 1000:.1f} ms during the plain one"
    )
    print(
        f"slowest list_dir answered meanwhile: {r['list_dir_max_s'] * 1000:.1f} ms (pathological), "
        f"{r['plain_list_dir_max_s'] * 1000:.1f} ms (plain)"
    )
    ok = r["worst_s"] <= CLAIM_S and r["stall_s"] <= CLAIM_STALL_S
    print(f"claim (worst <= {CLAIM_S:g} s, stall <= {CLAIM_STALL_S * 1000:g} ms): {'pass' if ok else 'FAIL'}")
    result = {"worst_ms": r["worst_s"] * 1000, "plain_ms": r["plain_s"] * 1000, "stall_ms": r["stall_s"] * 1000}
    result |= {"list_dir_max_ms": r["list_dir_max_s"] * 1000, "ratio": ratio}
    claim = "regex <= 2 s, loop stall <= 200 ms"
    print(json.dumps({"benchmark": "codebase_regex", **result, "claim": claim, "ok": ok}))


if __name__ == "__main__":
    main()
