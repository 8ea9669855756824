"""MCP tool call round trip, stdio against in-memory, for the same tool in one run.

The tool is ``echo`` of the toy server (tests/mcp_fixtures/toy_server.py): the same ``MCPServer`` object is served
(a) in-memory, as a pool built-in, and (b) over stdio, the module run as a subprocess. Both are called through what
agents use, ``McpPool.executor(role).call`` (claim: p50 over stdio <= 10 ms; ratio stdio/in-memory of the p50s),
and also through a bare ``mcp.Client.call_tool`` on each transport (reported, no claim), which shows the pool's
own overhead.

Every path is started and warmed up first (the first call starts the server); then the measured calls go in
blocks, the four paths taking turns (their order rotating) so that all of them see the same machine load.

    .venv/bin/python benchmarks/mcp_roundtrip.py [--calls 300] [--block 25] [--warmup 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

from _harness import ROOT, median, report
from mcp import Client, StdioServerParameters
from mcp_fixtures import toy_server

from labbot.agents.fleet.mcp_config import McpSettings
from labbot.agents.fleet.mcp_pool import McpPool
from labbot.agents.fleet.tools import CallContext, ToolCall

TOY = str(ROOT / "tests" / "mcp_fixtures" / "toy_server.py")
CTX = CallContext(agent="bench", role="bench", owner="U0BENCH001")
TEXT = "round trip"
CLAIM_MS = 10.0

Call = Callable[[], Awaitable[None]]


def p(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100)[int(q) - 1] if len(xs) > 1 else xs[0]


def pool_call(pool: McpPool, name: str) -> Call:
    executor = pool.executor("bench")
    echo = ToolCall(name, {"text": TEXT}, CTX)

    async def call() -> None:
        result = await executor.call(echo)
        assert not result.is_error and result.content == TEXT, result

    return call


def raw_call(client: Client) -> Call:
    async def call() -> None:
        result = await client.call_tool("echo", {"text": TEXT})
        assert not result.is_error and getattr(result.content[0], "text", None) == TEXT, result

    return call


async def measure(calls: int, block: int, warmup: int) -> dict[str, list[float]]:
    settings = McpSettings.from_config(
        {"mcp": {"servers": {"mem": {}, "stdio": {"command": [sys.executable, TOY]}}}}, builtins=("mem",)
    )
    async with AsyncExitStack() as stack:
        pool = await stack.enter_async_context(McpPool(settings, builtins={"mem": lambda: toy_server.server}))
        names = {spec.name for spec in await pool.tools("bench")}  # lists, and so starts, both servers
        assert {"mem__echo", "stdio__echo"} <= names, names
        raw_mem = await stack.enter_async_context(Client(toy_server.server))
        raw_stdio = await stack.enter_async_context(Client(StdioServerParameters(command=sys.executable, args=[TOY])))
        paths: dict[str, Call] = {
            "pool, in-memory": pool_call(pool, "mem__echo"),
            "pool, stdio": pool_call(pool, "stdio__echo"),
            "raw Client, in-memory": raw_call(raw_mem),
            "raw Client, stdio": raw_call(raw_stdio),
        }
        for call in paths.values():
            for _ in range(warmup):
                await call()
        times: dict[str, list[float]] = {label: [] for label in paths}
        order = list(paths)
        for r in range(-(-calls // block)):
            for label in order[r % len(order) :] + order[: r % len(order)]:
                call, out = paths[label], times[label]
                for _ in range(min(block, calls - len(out))):
                    start = time.perf_counter()
                    await call()
                    out.append((time.perf_counter() - start) * 1000)
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300, help="measured calls per path")
    ap.add_argument("--block", type=int, default=25, help="calls in a row before the next path takes its turn")
    ap.add_argument("--warmup", type=int, default=20, help="unmeasured calls per path first")
    a = ap.parse_args()
    times = asyncio.run(measure(a.calls, a.block, a.warmup))

    print(f"{'echo round trip (ms)':<26}{'p50':>9}{'p90':>9}{'p99':>9}   calls")
    for label, xs in times.items():
        print(f"{label:<26}{median(xs):>9.3f}{p(xs, 90):>9.3f}{p(xs, 99):>9.3f}   {len(xs)}")
    mem, stdio = median(times["pool, in-memory"]), median(times["pool, stdio"])
    raw_mem, raw_stdio = median(times["raw Client, in-memory"]), median(times["raw Client, stdio"])
    ok = stdio <= CLAIM_MS
    print(f"pool stdio p50: {stdio:.3f} ms (claim <= {CLAIM_MS:g} ms): {'pass' if ok else 'FAIL'}")
    print(f"stdio/in-memory (pool p50s) = {stdio / mem:.2f}; raw Client = {raw_stdio / raw_mem:.2f}")
    print(f"pool's own overhead (p50 pool - raw): in-memory {mem - raw_mem:+.3f} ms, stdio {stdio - raw_stdio:+.3f} ms")
    report(
        "mcp_roundtrip",
        {
            "stdio_p50_ms": stdio,
            "stdio_p90_ms": p(times["pool, stdio"], 90),
            "stdio_p99_ms": p(times["pool, stdio"], 99),
            "memory_p50_ms": mem,
            "memory_p99_ms": p(times["pool, in-memory"], 99),
            "raw_stdio_p50_ms": raw_stdio,
            "raw_memory_p50_ms": raw_mem,
            "ratio": stdio / mem,
            "claim": "<= 10 ms p50 over stdio",
            "ok": ok,
        },
    )


if __name__ == "__main__":
    main()
