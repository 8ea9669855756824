"""labbot.mcp_servers.annotations: every tool of every built-in server carries exactly one of its annotations, as an
MCP client reads them (``mcp.Client`` in memory), and what the agents and ``--read-only`` make of each is what the
annotation says: WRITE needs a human's approval and a read-only server hides it; READ and ADD do not.

The servers are built as ``labbot mcp NAME`` builds them (``BUILTINS``), with no credentials and no labbot running:
listing tools reaches nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp import Client

from labbot.agents.fleet.mcp_config import McpSettings
from labbot.agents.fleet.mcp_pool import McpPool
from labbot.mcp_servers import BUILTINS
from labbot.mcp_servers.annotations import ALL
from labbot.mcp_servers.runner import drop_destructive_tools

VENDORS = {"notion", "linear", "datadog"}
WRITES = {"WRITE", "VENDOR_WRITE"}
READS = {"READ", "VENDOR_READ"}


@pytest.fixture(autouse=True)
def _no_labbot_and_no_keys(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABBOT_HOME", str(tmp_path))
    monkeypatch.setenv("LABBOT_PUBLIC_URL", "http://127.0.0.1:9")
    for key in ("NOTION_TOKEN", "LINEAR_API_KEY", "DD_API_KEY", "DD_APP_KEY"):
        monkeypatch.delenv(key, raising=False)


def kinds_of(name: str) -> dict[str, str]:
    """Each tool of the built-in server ``name``, as a client lists it, with the one annotation it carries."""

    async def listed() -> Any:
        async with Client(BUILTINS[name]()) as client:
            return (await client.list_tools()).tools

    kinds = {}
    for tool in asyncio.run(listed()):
        matches = [kind for kind, hints in ALL.items() if tool.annotations == hints]
        assert len(matches) == 1, f"{name}.{tool.name} carries {tool.annotations!r}, not one of {sorted(ALL)}"
        kinds[tool.name] = matches[0]
    return kinds


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_every_tool_of_every_builtin_server_carries_exactly_one_annotation(name: str) -> None:
    kinds = kinds_of(name)
    assert kinds, f"{name} has no tools"
    if name in VENDORS:  # they reach a system outside labbot: openWorldHint
        assert set(kinds.values()) <= {"VENDOR_READ", "VENDOR_WRITE"}
    else:
        assert set(kinds.values()) <= {"READ", "WRITE", "ADD"}
    if name == "codebase":
        assert set(kinds.values()) == {"READ"}
    if name == "lab":
        # only adding: to the agent's own store, or a finding to the lab's (its numbers checked by the claim ledger);
        # a research question's plan, report and the failure actions its approved plan lists (approved already)
        adds = {"put_artifact", "share_artifact", "post_artifact", "record_finding"}
        adds |= {"open_research", "propose_plan", "research_act", "submit_report"}
        assert {t for t, k in kinds.items() if k == "ADD"} == adds


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_read_only_mode_drops_exactly_the_writes(name: str) -> None:
    kinds = kinds_of(name)
    removed = drop_destructive_tools(BUILTINS[name]())
    assert set(removed) == {t for t, k in kinds.items() if k in WRITES}


def test_the_agents_approve_and_hide_what_the_annotations_say() -> None:
    kinds = {f"{name}__{tool}": kind for name in BUILTINS for tool, kind in kinds_of(name).items()}
    open_all = McpSettings.from_config({"mcp": {"servers": {}}}, tuple(BUILTINS))
    read_only = McpSettings.from_config(
        {"mcp": {"servers": {n: {"read_only": True} for n in BUILTINS}}}, tuple(BUILTINS)
    )

    async def offered(settings: McpSettings) -> dict[str, Any]:
        async with McpPool(settings, dict(BUILTINS)) as pool:
            return {t.name: t for t in await pool.tools("assistant")}

    tools = asyncio.run(offered(open_all))
    assert set(tools) == set(kinds)
    for name, tool in tools.items():
        assert (tool.destructive, tool.read_only) == (kinds[name] in WRITES, kinds[name] in READS), name
    assert set(asyncio.run(offered(read_only))) == {t for t, k in kinds.items() if k not in WRITES}
