"""labbot.mcp_servers: one MCP server per system: codebase, lab (labbot itself), notion, linear and datadog.

Imports nothing from ``bot`` or ``agents``: the ``lab`` server is a client of ``/api/v1`` like the CLI. Every tool
carries one of the annotations of :mod:`labbot.mcp_servers.annotations` (READ, WRITE, ADD, VENDOR_READ, VENDOR_WRITE).

:data:`BUILTINS` names the servers ``labbot mcp NAME`` can run: each maps to a factory that takes no arguments
(configuration comes from the environment) and returns the server object, imported only when it is built so the
CLI starts fast. Add a server by adding one entry; :mod:`labbot.mcp_servers.runner` serves it over stdio or HTTP.
labbot's own agents are offered the servers ``labbot.bot.agents_wiring.builtin_servers`` lists
(docs/recipes/add-an-mcp-server.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.server import MCPServer


def _codebase() -> MCPServer:
    from labbot.mcp_servers.codebase import build_server

    return build_server()


def _lab() -> MCPServer:
    from labbot.mcp_servers.lab import build_server

    return build_server()


def _notion() -> MCPServer:
    from labbot.mcp_servers.notion import build_server

    return build_server()


def _linear() -> MCPServer:
    from labbot.mcp_servers.linear import build_server

    return build_server()


def _datadog() -> MCPServer:
    from labbot.mcp_servers.datadog import build_server

    return build_server()


BUILTINS: dict[str, Callable[[], MCPServer]] = {
    "codebase": _codebase,
    "lab": _lab,
    "notion": _notion,
    "linear": _linear,
    "datadog": _datadog,
}

__all__ = ["BUILTINS"]
