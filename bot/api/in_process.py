"""labbot's own agents reach its API in process: the built-in ``lab`` MCP server (and the ``datadog`` server's artifact
client) call the app object through ``httpx.ASGITransport``, never a socket, so an agent's tool call does not depend
on ``LABBOT_PUBLIC_URL`` (an Ingress, another replica, a URL that points nowhere) and carries no credential out of the
process.

:class:`InProcessApi` is the door: the agents are wired before the app exists (``ControlPlane.build``), so the app is
put in once built (``ControlPlane.app``); until then a request answers 503. The door vouches for what comes through
it: it sets the admin token on each request itself (whatever ``Authorization`` the request had is dropped), so the MCP
servers are never handed the token, and nothing they send or echo can hold it. Only code in this process holds the
door; the network reaches the app through uvicorn, never through here.

Not run by ``ASGITransport``: the app's lifespan (labbot's has none; ``serve`` runs uvicorn with ``lifespan="off"``
too). A request runs on the caller's task and event loop, as long as it takes (``wait_for_run`` polls through here),
and its response is collected whole before the caller sees it (an artifact read is capped after the fact).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
from starlette.types import ASGIApp, Receive, Scope, Send

from labbot.bot.web.errors import error_response

if TYPE_CHECKING:
    from labbot.mcp_servers.lab import LabApi

__all__ = ["IN_PROCESS_URL", "InProcessApi"]

IN_PROCESS_URL = "http://labbot.in-process"
"""The base URL the in-process clients are given: only the path matters, the host is never looked up."""


class InProcessApi:
    """The app as an ASGI callable for the in-process clients; see the module docstring."""

    def __init__(self, admin_token: str) -> None:
        self._app: ASGIApp | None = None
        self._authorization = f"Bearer {admin_token}".encode()

    def attach(self, app: ASGIApp) -> None:
        """The app the door leads to from now on (each ``ControlPlane.app()`` puts its own in)."""
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # ASGITransport sends only http scopes
            return
        if self._app is None:
            await error_response(503, "not_running", "labbot's API is not up yet: try again in a moment")(
                scope, receive, send
            )
            return
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"authorization"]
        headers.append((b"authorization", self._authorization))
        await self._app({**scope, "headers": headers}, receive, send)

    def transport(self) -> httpx.AsyncBaseTransport:
        """An httpx transport into the app. An error the app raises is its 500 answer, as over the network."""
        return httpx.ASGITransport(app=self, raise_app_exceptions=False)

    def lab_api(self) -> LabApi:
        """A client of ``/api/v1`` for the ``lab`` server (or another built-in's artifacts), through this door: no
        URL, no token of its own."""
        from labbot.mcp_servers.lab import LabApi  # with the MCP SDK: wanted once an agent first lists its tools

        return LabApi(IN_PROCESS_URL, "", transport=self.transport())
