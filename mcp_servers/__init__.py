"""mcp_servers: one MCP server per system (codebase, lab, notion, linear, datadog), built in later issues.

Imports nothing from ``bot`` or ``agents``: the ``lab`` server is a client of ``/api/v1`` like the CLI.
"""
