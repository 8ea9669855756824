"""The ``notion`` MCP server: Notion's public API (version 2025-09-03, data sources) over httpx, as tools an agent
uses — ``search``, ``get_page`` (a page as Markdown), ``query_data_source`` — and, behind a human's approval,
``create_page``, ``append_blocks`` and ``add_comment``.

Configuration comes from the environment: ``NOTION_TOKEN`` (an internal integration's secret; without it the
server still starts and each call says how to get one) and ``NOTION_API_URL`` (default https://api.notion.com).

Where things are: ``client.py`` (NotionApi over the shared VendorApi seam: auth, version, Notion's errors,
pagination), ``ids.py`` (ids and URLs a model writes), ``blocks.py`` (reading a page's block tree, writing long
content within Notion's request limits), ``render.py`` (blocks → Markdown), ``compose.py`` (Markdown → blocks),
``properties.py`` (property values as text), ``server.py`` (the tools). Imports nothing from bot/ or agents/.
"""

from labbot.mcp_servers.notion.client import NOTION_VERSION, NotionApi
from labbot.mcp_servers.notion.compose import markdown_to_blocks
from labbot.mcp_servers.notion.render import blocks_to_markdown
from labbot.mcp_servers.notion.server import build_server

__all__ = ["NOTION_VERSION", "NotionApi", "blocks_to_markdown", "build_server", "markdown_to_blocks"]
