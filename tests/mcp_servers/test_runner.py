"""``labbot mcp codebase`` as a real process, over stdio and over ``--http PORT`` behind a bearer token."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent
from support import free_port, wait_for

from labbot.bot.cli.main import main
from labbot.mcp_servers.runner import TOKEN_ENV, http_token

PROJECT = Path(__file__).resolve().parents[2]
TOOLS = {"search", "read_file", "list_dir", "git_log", "git_show", "git_diff", "git_blame"}
SECRET = "sk-FAKE-SECRET-0123456789"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    (root / "README.md").write_text("# served over MCP\n")
    (root / ".env").write_text(f"API_KEY={SECRET}\n")
    return root


async def _session(client: Client) -> tuple[set[str], str, tuple[bool, str]]:
    """What a client sees: the tool names, README.md read, and .env refused."""
    async with client:
        names = {t.name for t in (await client.list_tools()).tools}
        readme = await client.call_tool("read_file", {"path": "README.md"})
        secret = await client.call_tool("read_file", {"path": ".env"})
    text = "".join(b.text for b in readme.content if isinstance(b, TextContent))
    refusal = "".join(b.text for b in secret.content if isinstance(b, TextContent))
    return names, text, (secret.is_error, refusal)


def _check(seen: tuple[set[str], str, tuple[bool, str]]) -> None:
    names, readme, (refused, refusal) = seen
    assert names == TOOLS
    assert "# served over MCP" in readme
    assert refused and "withheld" in refusal and SECRET not in refusal


@pytest.mark.subprocess
def test_stdio(root: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "labbot.bot.cli.main", "mcp", "codebase"],
        env={"LABBOT_CODEBASE_ROOT": str(root), "PYTHONPATH": str(PROJECT)},
        cwd=PROJECT,
    )
    _check(asyncio.run(_session(Client(params))))


class _HttpServer:
    def __init__(self, tmp_path: Path, root: Path) -> None:
        self.home = tmp_path / "home"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = tmp_path / "mcp.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("LABBOT_")}
        env.update(LABBOT_HOME=str(self.home), LABBOT_CODEBASE_ROOT=str(root), PYTHONPATH=str(PROJECT))
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "labbot.bot.cli.main", "mcp", "codebase", "--http", str(self.port)],
                cwd=PROJECT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_for(self._up, timeout=30, what=f"labbot mcp codebase --http {self.port} (log: {self.log})")

    def _up(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"labbot mcp exited with {self.proc.returncode}: {self.log.read_text()}")
        try:
            return httpx.post(self.url, json={}, timeout=1).status_code == 401
        except httpx.HTTPError:
            return False

    def post(self, headers: dict[str, str]) -> httpx.Response:
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"Accept": "application/json, text/event-stream", **headers}
        return httpx.post(self.url, json=body, headers=headers, timeout=10)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def http_server(tmp_path: Path, root: Path) -> Iterator[_HttpServer]:
    server = _HttpServer(tmp_path, root)
    yield server
    server.stop()


@pytest.mark.subprocess
def test_http_needs_the_bearer_token(http_server: _HttpServer) -> None:
    token_file = http_server.home / "mcp_token"
    token = token_file.read_text().strip()
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600 and len(token) >= 32

    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {token}"}, {"X-Token": token}):
        r = http_server.post(headers)
        assert r.status_code == 401, headers
        assert r.headers["www-authenticate"] == "Bearer" and token not in r.text

    async def with_token() -> tuple[set[str], str, tuple[bool, str]]:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
            return await _session(Client(streamable_http_client(http_server.url, http_client=http)))

    _check(asyncio.run(with_token()))
    http_server.stop()
    log = http_server.log.read_text()
    assert str(token_file) in log and token not in log


def test_http_token_comes_from_the_environment_or_one_file(tmp_path: Path) -> None:
    assert http_token(tmp_path / "home", {TOKEN_ENV: " from-env "}) == ("from-env", None)
    assert not (tmp_path / "home" / "mcp_token").exists()
    token, path = http_token(tmp_path / "home", {})
    assert path == tmp_path / "home" / "mcp_token" and path.read_text().strip() == token
    assert http_token(tmp_path / "home", {}) == (token, path)  # created once, then reused


def test_unknown_server_name_is_exit_2_naming_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mcp", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown MCP server 'nope'; known servers: codebase" in err and "Traceback" not in err
