"""Serve an MCP server object over stdio (the default) or streamable HTTP with a bearer token.

``labbot mcp NAME [--http PORT]`` builds a server from :data:`labbot.mcp_servers.BUILTINS` and hands it to
:func:`run`.
Over HTTP the endpoint is ``http://HOST:PORT/mcp`` and every request must carry ``Authorization: Bearer TOKEN``
(401 otherwise, compared in constant time). The token is ``LABBOT_MCP_TOKEN`` when set, else the one kept in
``LABBOT_HOME/mcp_token`` (mode 0600, created on first use): see :func:`http_token`. The token is never logged.
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

if TYPE_CHECKING:
    from mcp.server import MCPServer

TOKEN_ENV = "LABBOT_MCP_TOKEN"
TOKEN_FILE = "mcp_token"
HTTP_PATH = "/mcp"


class BearerAuth:
    """ASGI middleware: an HTTP request without ``Authorization: Bearer <token>`` gets 401 and never reaches MCP."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError("an MCP server over HTTP needs a non-empty bearer token")
        self._app = app
        self._token = token.encode()

    def _authorized(self, scope: Scope) -> bool:
        header = next((v for k, v in scope.get("headers", ()) if k == b"authorization"), b"")
        scheme, _, credentials = bytes(header).partition(b" ")
        # compare_digest on every request, whatever the scheme, so timing tells nothing about the token
        match = hmac.compare_digest(credentials.strip(), self._token)
        return match and scheme.lower() == b"bearer"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" or self._authorized(scope):
            await self._app(scope, receive, send)
        elif scope["type"] == "http":
            body = {"error": "missing or wrong bearer token: send Authorization: Bearer <LABBOT_MCP_TOKEN>"}
            await JSONResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
        else:
            await send({"type": "websocket.close", "code": 1008})


def drop_destructive_tools(server: MCPServer) -> list[str]:
    """Read-only mode: remove every tool that could change something — annotated ``destructiveHint``, or not
    annotated ``readOnlyHint`` and silent on ``destructiveHint`` (MCP's default for such a tool is destructive).
    Returns the names removed."""
    import asyncio

    removed = []
    for tool in asyncio.run(server.list_tools()):
        hints = tool.annotations
        read_only = bool(hints and hints.read_only_hint)
        destructive = hints.destructive_hint if hints and hints.destructive_hint is not None else not read_only
        if destructive and not read_only:
            server.remove_tool(tool.name)
            removed.append(tool.name)
    return removed


def http_app(server: MCPServer, token: str, *, host: str = "127.0.0.1") -> ASGIApp:
    """The server's streamable-HTTP ASGI app at :data:`HTTP_PATH`, behind :class:`BearerAuth`."""
    return BearerAuth(server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host), token)


def http_token(home: Path, env: Mapping[str, str] = os.environ) -> tuple[str, Path | None]:
    """The HTTP bearer token and the file it lives in (``None`` when it came from ``LABBOT_MCP_TOKEN``)."""
    if token := env.get(TOKEN_ENV, "").strip():
        return token, None
    path = home / TOKEN_FILE
    home.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        token = path.read_text().strip()
        if not token:
            raise ValueError(f"{path} is empty: delete it and a new token is made, or set {TOKEN_ENV}") from None
        return token, path
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token, path


def run(server: MCPServer, *, http_port: int | None = None, host: str = "127.0.0.1", token: str | None = None) -> None:
    """Serve ``server`` until stopped: over stdio, or with ``http_port`` over streamable HTTP behind ``token``."""
    if http_port is None:
        server.run("stdio")
        return
    if not token:
        raise ValueError("an MCP server over HTTP needs a bearer token (see labbot.mcp_servers.runner.http_token)")
    import uvicorn

    # uvicorn's access log has the request line only, never headers: the token stays out of the logs
    uvicorn.run(http_app(server, token, host=host), host=host, port=http_port, log_level="warning")
