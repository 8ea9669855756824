"""The built-in roles against the built-in MCP servers: every tool glob a role declares matches a tool that labbot's
own servers really offer (a glob that matches nothing is a capability the role silently lacks)."""

from __future__ import annotations

import asyncio
import fnmatch

import pytest
from mcp import Client

from labbot.agents.fleet.mcp_pool import tool_name
from labbot.agents.fleet.roles import DELEGATE, load_roles
from labbot.mcp_servers import BUILTINS


@pytest.fixture(scope="module")
def offered(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """Every namespaced tool name the built-in servers offer (as the agents see them), plus ``delegate``."""

    async def names(server_name: str) -> list[str]:
        async with Client(BUILTINS[server_name]()) as client:
            return [tool_name(server_name, t.name) for t in (await client.list_tools()).tools]

    async def all_names() -> set[str]:
        found = {DELEGATE}
        for server_name in BUILTINS:
            found.update(await names(server_name))
        return found

    return asyncio.run(all_names())


def test_every_built_in_server_offers_tools(offered: set[str]) -> None:
    for server_name in BUILTINS:
        assert any(name.startswith(f"{server_name}__") for name in offered), server_name


@pytest.mark.parametrize("role", sorted(load_roles()))
def test_every_glob_of_a_built_in_role_matches_a_tool_the_built_in_servers_offer(role: str, offered: set[str]) -> None:
    dead = [glob for glob in load_roles()[role].tools if not fnmatch.filter(offered, glob)]
    assert dead == [], f"role {role!r}: these tool globs match no tool of the built-in servers: {dead}"


def test_the_eval_writer_can_save_read_and_post_its_drafts(offered: set[str]) -> None:
    writer = load_roles()["eval-writer"]
    for tool in ("lab__put_artifact", "lab__get_artifact", "lab__list_artifacts", "lab__post_artifact"):
        assert tool in offered and writer.allows(tool), tool
    assert not writer.allows("lab__stop_run") and not writer.allows("lab__launch_run")


def test_the_eval_writer_generates_runs_reads_and_compares_evals(offered: set[str]) -> None:
    writer = load_roles()["eval-writer"]
    for tool in ("generate_eval_suite", "run_eval", "get_eval_results", "compare_eval_runs", "list_eval_suites"):
        assert f"lab__{tool}" in offered and writer.allows(f"lab__{tool}"), tool
    assert "deletion=function" in writer.system and "approval" in writer.system
