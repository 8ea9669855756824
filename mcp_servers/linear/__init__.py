"""The ``linear`` MCP server: Linear's teams and issues for labbot's agents, over Linear's GraphQL API.

Reads — ``list_teams``, ``search_issues``, ``get_issue`` — are ``readOnlyHint``; writes — ``create_issue``,
``add_comment``, ``update_state`` — are ``destructiveHint``, so labbot's runtime runs them only after a human
approves (``build_server(read_only=True)`` leaves them out). Configuration comes from the environment:
``LINEAR_API_KEY`` (a personal API key; without it the server still starts and each call says how to make one) and
``LINEAR_API_URL`` (default ``https://api.linear.app/graphql``).

Modules, in the order a request flows: ``server`` (the tools), ``names`` (a model's names → Linear's ids),
``queries`` (every GraphQL document, :data:`OPERATIONS`), ``client`` (:class:`LinearApi`: GraphQL over
:class:`~labbot.mcp_servers.vendor_http.VendorApi`, errors explained, pagination), ``render`` (answers as text).
Imports nothing from bot/ or agents/.
"""

from __future__ import annotations

from labbot.mcp_servers.linear.client import LinearApi
from labbot.mcp_servers.linear.queries import OPERATIONS
from labbot.mcp_servers.linear.server import build_server

__all__ = ["OPERATIONS", "LinearApi", "build_server"]
