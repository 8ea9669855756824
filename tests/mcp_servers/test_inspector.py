"""The built-in MCP servers through a client nobody here wrote: the official MCP Inspector's CLI mode (TypeScript SDK)
spawns ``labbot mcp codebase`` / ``labbot mcp lab`` over stdio, lists their tools and calls one; we parse its JSON.

The Inspector comes from the npm registry through ``npx`` (fetched on first use, from npx's cache afterwards). It is
pinned: 0.15.0 is the newest release that runs on Node 20 (0.16+ need Node 22, and 2.x replaced the launcher), and
its CLI is ``--cli [-e KEY=VALUE] COMMAND ARGS... --method tools/list|tools/call [--tool-name N --tool-arg k=v]``.
Skipped only when ``npx`` is not on PATH; a failed download fails the test, with npx's output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

INSPECTOR = "@modelcontextprotocol/inspector@0.15.0"
PROJECT = Path(__file__).resolve().parents[2]
FIRST_RUN_TIMEOUT_S = 600  # the first run downloads the Inspector and its dependencies (≈ 25 s here)
CODEBASE_TOOLS = {"search", "read_file", "list_dir", "git_log", "git_show", "git_diff", "git_blame"}
LAB_READS = {
    "list_runs",
    "get_run",
    "wait_for_run",
    "run_metrics",
    "run_logs",
    "list_pages",
    "list_artifacts",
    "get_artifact",
}
LAB_READS |= {"list_eval_suites", "get_eval_suite", "get_eval_results", "compare_eval_runs"}
LAB_READS |= {"plan_experiment", "get_experiment", "check_claims", "search_findings"}
LAB_READS |= {"research_status", "show_plan", "wait_for_research"}
LAB_ACTIONS = {"launch_run", "stop_run", "restart_run", "ack_page", "generate_eval_suite", "run_eval"}
LAB_ACTIONS |= {"run_experiment", "stop_experiment", "start_research"}
LAB_STORE = {"put_artifact", "share_artifact", "post_artifact", "record_finding"}
LAB_STORE |= {"open_research", "propose_plan", "research_act", "submit_report"}
GIT_ENV = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@lab", "GIT_COMMITTER_NAME": "Ada"}
GIT_ENV |= {"GIT_COMMITTER_EMAIL": "ada@lab", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}

pytestmark = [
    pytest.mark.subprocess,  # every test here starts the Inspector (node) and a labbot server
    pytest.mark.skipif(shutil.which("npx") is None, reason="npx (Node.js) is not on PATH: no MCP Inspector"),
    pytest.mark.timeout(FIRST_RUN_TIMEOUT_S + 60),  # over the suite's 300 s: room for the first download
]


def _labbot() -> list[str]:
    """The ``labbot`` command as installed next to this Python (a plain ``python -m`` when it is not)."""
    script = Path(sys.executable).with_name("labbot")
    return [str(script)] if script.exists() else [sys.executable, "-m", "labbot.bot.cli.main"]


def inspect(server: list[str], env: dict[str, str], *method: str) -> Any:
    """Run the Inspector's CLI against ``server`` (spawned over stdio with ``env`` added) and parse what it prints."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("LABBOT_")}
    command = ["npx", "-y", INSPECTOR, "--cli"]
    for key, value in env.items():
        command += ["-e", f"{key}={value}"]
    command += [*server, *method]
    out = subprocess.run(
        command, cwd=PROJECT, env=base, capture_output=True, text=True, timeout=FIRST_RUN_TIMEOUT_S, check=False
    )
    assert out.returncode == 0, f"{' '.join(command)} exited {out.returncode}:\n{out.stderr}\n{out.stdout}"
    return json.loads(out.stdout)


def text_of(result: dict[str, Any]) -> str:
    return "".join(block["text"] for block in result["content"] if block["type"] == "text")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("inspected") / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "train.py").write_text("def train(lr):\n    return lr * 2  # INSPECTOR_MARKER\n")
    (repo / ".env").write_text("API_KEY=sk-FAKE-SECRET-0123456789\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "first"]):
        subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, check=True, capture_output=True)
    return repo


@pytest.fixture(scope="module")
def codebase(repo: Path) -> tuple[list[str], dict[str, str]]:
    return [*_labbot(), "mcp", "codebase"], {"LABBOT_CODEBASE_ROOT": str(repo)}


def test_the_inspector_lists_the_codebase_tools_as_read_only(codebase: tuple[list[str], dict[str, str]]) -> None:
    tools = {t["name"]: t for t in inspect(*codebase, "--method", "tools/list")["tools"]}
    assert set(tools) == CODEBASE_TOOLS
    for name, tool in tools.items():
        assert tool["annotations"]["readOnlyHint"] is True, name
        assert tool["annotations"]["destructiveHint"] is False, name
        assert tool["description"] and tool["inputSchema"]["type"] == "object", name
    assert tools["read_file"]["inputSchema"]["required"] == ["path"]


def test_the_inspector_calls_a_codebase_tool(codebase: tuple[list[str], dict[str, str]]) -> None:
    found = inspect(
        *codebase, "--method", "tools/call", "--tool-name", "search", "--tool-arg", "query=INSPECTOR_MARKER"
    )
    assert found["isError"] is False
    assert text_of(found) == "src/train.py:2:     return lr * 2  # INSPECTOR_MARKER"

    refused = inspect(*codebase, "--method", "tools/call", "--tool-name", "read_file", "--tool-arg", "path=.env")
    assert refused["isError"] is True and "sk-FAKE" not in text_of(refused)


def test_the_inspector_lists_the_lab_tools_without_a_running_labbot(tmp_path: Path) -> None:
    server = [*_labbot(), "mcp", "lab"]
    env = {"LABBOT_HOME": str(tmp_path / "nohome"), "LABBOT_PUBLIC_URL": "http://127.0.0.1:9"}
    tools = {t["name"]: t["annotations"] for t in inspect(server, env, "--method", "tools/list")["tools"]}
    assert set(tools) == LAB_READS | LAB_ACTIONS | LAB_STORE
    for name in LAB_READS:
        assert tools[name]["readOnlyHint"] is True and tools[name]["destructiveHint"] is False, name
    for name in LAB_ACTIONS:
        assert tools[name]["readOnlyHint"] is False and tools[name]["destructiveHint"] is True, name
    for name in LAB_STORE:
        assert tools[name]["readOnlyHint"] is False and tools[name]["destructiveHint"] is False, name

    listed = inspect(server, env, "--method", "tools/call", "--tool-name", "list_artifacts")
    assert listed["isError"] is True
    assert f"labbot is not running here (no admin token at {tmp_path / 'nohome' / 'admin_token'})" in text_of(listed)


VENDOR_TOOLS = {
    "notion": ({"search", "get_page", "query_data_source"}, {"create_page", "append_blocks", "add_comment"}),
    "linear": ({"list_teams", "search_issues", "get_issue"}, {"create_issue", "add_comment", "update_state"}),
    "datadog": ({"query_metrics", "search_logs", "list_monitors", "get_monitor", "list_events"}, {"mute_monitor"}),
}
FIRST_READ = {"notion": ("search", "query=plans"), "linear": ("list_teams", None), "datadog": ("list_monitors", None)}
MISSING = {"notion": "NOTION_TOKEN is not set", "linear": "LINEAR_API_KEY is not set", "datadog": "DD_API_KEY"}


@pytest.mark.parametrize("name", sorted(VENDOR_TOOLS))
def test_the_inspector_lists_a_vendor_servers_tools_with_their_hints(name: str, tmp_path: Path) -> None:
    """Reads are readOnlyHint, writes destructiveHint; with no credentials the server still starts."""
    reads, writes = VENDOR_TOOLS[name]
    env = {"LABBOT_HOME": str(tmp_path), "LABBOT_PUBLIC_URL": "http://127.0.0.1:9"}  # no control plane there
    tools = {t["name"]: t for t in inspect([*_labbot(), "mcp", name], env, "--method", "tools/list")["tools"]}
    assert set(tools) == reads | writes
    assert all(tools[t]["annotations"]["readOnlyHint"] is True for t in reads)
    assert all(tools[t]["annotations"]["destructiveHint"] is True for t in writes)


def test_the_inspector_hears_a_missing_key_as_a_tool_error_and_read_only_serves_reads(tmp_path: Path) -> None:
    """With no credentials a call is an error result saying which variable to set (no network is reached), and
    --read-only serves the reads alone: one vendor here (the three share the code that does it; each vendor's own
    tests check its missing-key message in process)."""
    name = "notion"
    reads, _writes = VENDOR_TOOLS[name]
    env = {"LABBOT_HOME": str(tmp_path), "LABBOT_PUBLIC_URL": "http://127.0.0.1:9"}
    server = [*_labbot(), "mcp", name]
    tool, arg = FIRST_READ[name]
    call = ["--method", "tools/call", "--tool-name", tool, *(["--tool-arg", arg] if arg else [])]
    result = inspect(server, env, *call)
    assert result["isError"] is True and MISSING[name] in text_of(result)
    read_only = {t["name"] for t in inspect([*server, "--read-only"], env, "--method", "tools/list")["tools"]}
    assert read_only == reads
