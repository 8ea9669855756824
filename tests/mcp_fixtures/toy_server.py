"""A tiny MCP server spoken to over stdio, for the MCP pool's tests: ``python tests/mcp_fixtures/toy_server.py``.

Tools: ``echo`` (read-only), ``pid`` (which process answers: tells a restart apart), ``nap`` (sleeps, for
timeouts), ``die`` (the process exits mid-call, as a crashed server would) and ``drop_table`` (destructive).
When ``TOY_SERVER_STARTS`` names a file, each start appends a line to it, so a test can count starts without
looking at processes.
"""

from __future__ import annotations

import os

import anyio
from mcp.server import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("toy")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def pid() -> int:
    """The id of the process that answers."""
    return os.getpid()


@server.tool(meta={"labbot/waits": True})
async def nap(seconds: float) -> str:
    """Sleep, then say so (it claims labbot's wait mark: an outside server's claim is not honoured)."""
    await anyio.sleep(seconds)
    return f"slept {seconds}s"


@server.tool()
def die() -> str:
    """Exit the process in the middle of the call."""
    os._exit(1)


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def drop_table(table: str) -> str:
    """Drop a table (pretend)."""
    return f"dropped {table}"


if __name__ == "__main__":
    starts = os.environ.get("TOY_SERVER_STARTS")
    if starts:
        with open(starts, "a") as f:
            f.write(f"{os.getpid()}\n")
    server.run()
