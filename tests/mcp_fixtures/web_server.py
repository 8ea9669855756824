"""An MCP server over streamable HTTP behind a bearer-token check, served by uvicorn on a free local port in a thread
of its own: the shape of the hosted Notion, Linear, Datadog and GitHub servers, for the MCP pool's tests."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp.server import MCPServer
from mcp.types import ToolAnnotations
from starlette.responses import PlainTextResponse


@dataclass
class WebServer:
    url: str
    authorizations: list[str] = field(default_factory=list)  # the Authorization header of every request, in order


def build(token: str) -> tuple[Any, list[str]]:
    server = MCPServer("web")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def whoami() -> str:
        """Say which server answers."""
        return "the web server"

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def delete_page(page: str) -> str:
        """Delete a page (pretend)."""
        return f"deleted {page}"

    app = server.streamable_http_app()
    seen: list[str] = []

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            auth = dict(scope["headers"]).get(b"authorization", b"").decode()
            seen.append(auth)
            if auth != f"Bearer {token}":
                await PlainTextResponse("missing or wrong bearer token", status_code=401)(scope, receive, send)
                return
        await app(scope, receive, send)

    return guarded, seen


@contextmanager
def serve(token: str) -> Iterator[WebServer]:
    """Serve until the block ends. The socket listens before the thread starts, so requests queue, never fail."""
    app, seen = build(token)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        web = WebServer(url=f"http://127.0.0.1:{port}/mcp")
        web.authorizations = seen
        yield web
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
