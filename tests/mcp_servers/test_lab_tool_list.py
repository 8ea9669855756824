"""The ``lab`` server's tool list as agents see it (names, descriptions, input schemas, annotations, ``_meta``, in
order) is pinned in ``lab_tools.json``: a refactor of ``build_server`` must leave it byte for byte. A deliberate
change to a tool rewrites the file (``LABBOT_UPDATE_LAB_TOOLS=1 pytest tests/mcp_servers/test_lab_tool_list.py``)
and the diff shows what agents will see differently."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from mcp import Client

from labbot.mcp_servers.lab import LabApi, build_server

PINNED = Path(__file__).with_name("lab_tools.json")


def tool_list() -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        async with Client(build_server(LabApi("http://labbot.test", token=""))) as client:
            tools = (await client.list_tools()).tools
        return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]

    return asyncio.run(go())


def test_the_lab_tool_list_is_what_agents_saw() -> None:
    seen = tool_list()
    if os.environ.get("LABBOT_UPDATE_LAB_TOOLS") == "1":
        PINNED.write_text(json.dumps(seen, indent=1, ensure_ascii=False) + "\n")
    pinned = json.loads(PINNED.read_text())
    assert [t["name"] for t in seen] == [t["name"] for t in pinned]
    for tool, expected in zip(seen, pinned, strict=True):
        assert tool == expected, tool["name"]
