"""labbot.agents.fleet.mcp_config and labbot.agents.fleet.mcp_pool against real MCP servers: an in-process MCPServer
built here, the toy server (tests/mcp_fixtures/toy_server.py) as a process over stdio, and a streamable-HTTP server
behind a bearer check.

Covered: ``[mcp]`` parsing and its error messages; lazy start; SERVER__TOOL names; destructive and read-only from
annotations and from labbot.toml; read-only servers hiding destructive tools; role allow-lists; tool errors, images,
unknown tools; timeouts; one shared connection under concurrent calls; a server that dies mid-call and is restarted
on the next; ``${VAR}`` header expansion that never shows the value. Nothing sleeps but the servers' own tools."""

from __future__ import annotations

import asyncio
import base64
import logging
import sys
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any

import anyio
import psutil
import pytest
from mcp.server import MCPServer
from mcp.server.mcpserver import Image
from mcp.types import ToolAnnotations
from mcp_fixtures import web_server
from pydantic import Field

from labbot.agents.fleet.mcp_config import McpServerConfig, McpSettings, UnsetVariable
from labbot.agents.fleet.mcp_pool import McpPool, tool_name, wait_bound
from labbot.agents.fleet.tools import CallContext, ToolCall, ToolExecutor, ToolResult
from labbot.common.errors import BadRequest

TOY = str(Path(__file__).resolve().parents[2] / "mcp_fixtures" / "toy_server.py")
CTX = CallContext(agent="ag1", role="researcher", owner="U0ALICE001")
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
SECRET = "tok-3c7e1b9f0a"


def run(scenario: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    return asyncio.run(scenario())


class MemServer:
    """Factory of the in-process server; counts how often the pool builds one (a connection)."""

    def __init__(self, barrier: int = 0) -> None:
        self.built = 0
        self.barrier = barrier
        self.arrived = 0
        self.all_in: anyio.Event | None = None

    def __call__(self) -> MCPServer:
        self.built += 1
        server = MCPServer("mem")

        @server.tool(annotations=ToolAnnotations(read_only_hint=True))
        def echo(text: str) -> str:
            """Return the text unchanged."""
            return text

        @server.tool()
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        @server.tool(meta={"labbot/waits": True})
        async def slow(seconds: float) -> str:
            """Sleep, then say so (marked as a wait on the cluster, as lab's wait_for_run is)."""
            await anyio.sleep(seconds)
            return "done"

        @server.tool(annotations=ToolAnnotations(read_only_hint=True), meta={"labbot/waits": "timeout_s"})
        async def wait(seconds: int, timeout_s: Annotated[int, Field(ge=1, le=5)] = 2) -> str:
            """Sleep, a wait bounded by its timeout_s (as lab's wait_for_run is)."""
            await anyio.sleep(min(seconds, timeout_s))
            return f"waited {min(seconds, timeout_s)}s"

        @server.tool()
        def boom() -> str:
            """Always fails."""
            raise RuntimeError("the boom tool always fails")

        @server.tool(annotations=ToolAnnotations(destructive_hint=True))
        def wipe(table: str) -> str:
            """Wipe a table (pretend)."""
            return f"wiped {table}"

        @server.tool(structured_output=False)
        def picture() -> list[Any]:
            """A caption and a one-pixel PNG."""
            return ["one red pixel", Image(data=PNG, format="png")]

        @server.tool()
        async def gather() -> int:
            """Returns only once `barrier` calls are in at the same time."""
            if self.all_in is None:
                self.all_in = anyio.Event()
            self.arrived += 1
            if self.arrived >= self.barrier:
                self.all_in.set()
            await self.all_in.wait()
            return self.arrived

        return server


def settings(
    servers: Mapping[str, Any] | None = None, roles: Mapping[str, Any] | None = None, builtins: tuple[str, ...] = ()
) -> McpSettings:
    return McpSettings.from_config({"mcp": {"servers": dict(servers or {}), "roles": dict(roles or {})}}, builtins)


def toy(starts: Path, **extra: Any) -> dict[str, Any]:
    return {"command": [sys.executable, TOY], "env": {"TOY_SERVER_STARTS": str(starts)}, **extra}


def starts_of(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def text(result: ToolResult) -> str:
    assert isinstance(result.content, str), result.content
    return result.content


# --- labbot.toml [mcp] ---------------------------------------------------------------------------------------------


def test_config_reads_stdio_http_builtin_servers_and_roles() -> None:
    s = settings(
        {
            "scratch": {
                "command": "python 'my server.py' --verbose",
                "args": ["--root", "/data"],
                "env": {"TOKEN": "${SCRATCH_TOKEN}"},
                "cwd": "/srv",
                "timeout": "90s",
                "start_timeout": "3m",
                "read_only": True,
            },
            "notion": {
                "url": "https://mcp.notion.com/mcp",
                "headers": {"Authorization": "Bearer ${NOTION_TOKEN}"},
                "destructive": ["notion-update-*"],
            },
            "lab": {"enabled": False},
        },
        {"researcher": {"tools": ["codebase__*", "lab__list_runs"]}},
        builtins=("lab", "codebase"),
    )
    scratch, notion, lab, codebase = (s.servers[n] for n in ("scratch", "notion", "lab", "codebase"))
    assert scratch.transport == "stdio" and scratch.command == (
        "python",
        "my server.py",
        "--verbose",
        "--root",
        "/data",
    )
    assert (scratch.cwd, scratch.timeout_s, scratch.read_only, scratch.env) == (
        "/srv",
        90.0,
        True,
        {"TOKEN": "${SCRATCH_TOKEN}"},
    )
    assert scratch.start_timeout_s == 180.0 and notion.start_timeout_s == 60.0
    assert notion.transport == "http" and notion.timeout_s == 60.0 and not notion.read_only
    assert notion.marks_destructive("notion-update-page") and not notion.marks_destructive("notion-search")
    assert lab.transport == "builtin" and not lab.enabled
    assert codebase == McpServerConfig(name="codebase")  # a built-in without a table gets the defaults
    assert s.allows("researcher", "codebase__grep") and s.allows("researcher", "lab__list_runs")
    assert not s.allows("researcher", "lab__stop_run")
    assert s.allows("admin", "lab__stop_run"), "a role without a table may call everything"
    assert McpSettings.from_config({}).servers == {}


@pytest.mark.parametrize(
    ("mcp", "expected"),
    [
        ({"servers": {"x": {"command": "srv", "url": "https://a/mcp"}}}, "[mcp.servers.x] has both command and url"),
        ({"servers": {"x": {"timeout": "5s"}}}, '[mcp.servers.x] needs command = "..."'),
        ({"servers": {"x": {"url": "https://a/mcp", "headers": "Bearer x"}}}, "headers must be a table of strings"),
        ({"servers": {"x": {"url": "https://a/mcp", "headers": {"X-Key": 42}}}}, "headers.X-Key must be a string"),
        ({"servers": {"x": {"url": "https://a/mcp", "header": {}}}}, "unknown key 'header' (did you mean 'headers'?)"),
        ({"servers": {"x": {"url": "https://a/mcp", "headers": {"A": "Bearer ${TOKEN"}}}}, "${VAR}"),
        ({"servers": {"x": {"url": "https://a/mcp?key=${K}"}}}, "put credentials in headers"),
        ({"servers": {"x": {"url": "mcp.example.com"}}}, "url must be an http(s) URL"),
        ({"servers": {"x": {"url": "https://a/mcp", "args": ["-v"]}}}, "args applies only to a server with command"),
        ({"servers": {"x": {"command": "srv", "headers": {}}}}, "headers applies only to a server with url"),
        ({"servers": {"x": {"command": []}}}, "command is empty"),
        ({"servers": {"x": {"command": "srv", "timeout": "soon"}}}, "[mcp.servers.x] timeout: bad duration 'soon'"),
        ({"servers": {"x": {"command": "srv", "read_only": "yes"}}}, "read_only must be true or false"),
        ({"servers": {"x": {"command": "srv", "destructive": "drop"}}}, "destructive must be a list"),
        ({"servers": {"a__b": {"command": "srv"}}}, "a server name is up to 32 letters"),
        ({"servers": {"x": "srv"}}, "[mcp.servers.x] must be a table"),
        ({"server": {}}, "[mcp]: unknown key 'server' (did you mean 'servers'?)"),
        ({"roles": {"r": {"tools": ["nope__*"]}}}, "'nope__*' names no known server"),
        ({"roles": {"r": {"tool": ["x__*"]}}}, "[mcp.roles.r]: unknown key 'tool'"),
        ({"roles": {"r": {"tools": "x__*"}}}, "tools must be a list of non-empty strings"),
    ],
)
def test_config_errors_name_the_table_and_key(mcp: dict[str, Any], expected: str) -> None:
    with pytest.raises(BadRequest) as e:
        McpSettings.from_config({"mcp": mcp})
    assert expected in e.value.message and "labbot.toml: [mcp" in e.value.message


def test_a_bad_header_value_is_not_echoed_in_the_error() -> None:
    with pytest.raises(BadRequest) as e:
        McpSettings.from_config({"mcp": {"servers": {"x": {"url": "https://a/mcp", "headers": {"K": [SECRET]}}}}})
    assert "headers.K must be a string (got a list)" in e.value.message and SECRET not in e.value.message


def test_header_references_expand_at_connect_time_and_never_show() -> None:
    s = settings({"notion": {"url": "https://a/mcp", "headers": {"Authorization": "Bearer ${NOTION_TOKEN}"}}})
    cfg = s.servers["notion"]
    assert cfg.resolved_headers({"NOTION_TOKEN": SECRET}) == {"Authorization": f"Bearer {SECRET}"}
    assert f"Bearer {SECRET}" in cfg.secrets({"NOTION_TOKEN": SECRET}) and SECRET in cfg.secrets(
        {"NOTION_TOKEN": SECRET}
    )
    with pytest.raises(UnsetVariable) as e:
        cfg.resolved_headers({})
    assert "headers.Authorization uses ${NOTION_TOKEN}, which is not set" in e.value.message
    literal = settings({"n": {"url": "https://a/mcp", "headers": {"Authorization": f"Bearer {SECRET}"}}})
    for shown in (repr(s), repr(cfg), repr(literal), str(literal.servers["n"])):
        assert SECRET not in shown and "Authorization" in shown


# --- the pool over an in-process server ------------------------------------------------------------------------------


@pytest.mark.subprocess
def test_nothing_starts_before_first_use(tmp_path: Path) -> None:
    mem, starts = MemServer(), tmp_path / "starts"

    async def scenario() -> None:
        async with McpPool(settings({"toy": toy(starts)}, builtins=("mem",)), {"mem": mem}) as pool:
            executor = pool.executor("researcher")
            assert executor.tools() == [] and mem.built == 0 and not starts.exists()
            names = [t.name for t in await pool.tools("researcher")]
            assert "mem__echo" in names and "toy__echo" in names
            assert mem.built == 1 and len(starts_of(starts)) == 1
            assert [t.name for t in executor.tools()] == names

    run(scenario)


def test_tools_are_namespaced_with_hints_from_annotations_and_config() -> None:
    s = settings({"mem": {"destructive": ["ad*"]}}, builtins=("mem",))

    async def scenario() -> None:
        async with McpPool(s, {"mem": MemServer()}) as pool:
            tools = {t.name: t for t in await pool.tools("anyone")}
            assert set(tools) == {
                f"mem__{n}" for n in ("echo", "add", "slow", "wait", "boom", "wipe", "picture", "gather")
            }
            assert tools["mem__echo"].read_only and not tools["mem__echo"].destructive
            assert tools["mem__wipe"].destructive, "destructiveHint"
            assert tools["mem__slow"].waits and not tools["mem__echo"].waits, "a built-in's labbot/waits"
            assert tools["mem__add"].destructive and not tools["mem__add"].read_only, "marked in labbot.toml"
            # unannotated: MCP's defaults (destructiveHint true unless read-only) hold, so it needs approval
            assert tools["mem__slow"].destructive and not tools["mem__slow"].read_only
            assert tools["mem__add"].server == "mem" and tools["mem__add"].description == "Add two integers."
            assert set(tools["mem__add"].input_schema["properties"]) == {"a", "b"}
            assert tools["mem__add"].as_anthropic()["name"] == "mem__add"

    run(scenario)


def test_names_fit_the_messages_api() -> None:
    assert tool_name("notion", "notion-search") == "notion__notion-search"
    assert tool_name("gh", "repos.get/contents") == "gh__repos_get_contents"
    long_a, long_b = tool_name("srv", "x" * 80 + "a"), tool_name("srv", "x" * 80 + "b")
    assert len(long_a) == len(long_b) == 64 and long_a != long_b


def test_calls_route_to_the_server_and_convert_results() -> None:
    async def scenario() -> None:
        async with McpPool(settings(builtins=("mem",)), {"mem": MemServer()}) as pool:
            executor: ToolExecutor = pool.executor("researcher")
            echoed = await executor.call(ToolCall("mem__echo", {"text": "hello"}, CTX))
            assert (echoed.content, echoed.is_error, echoed.meta) == ("hello", False, {"server": "mem", "tool": "echo"})
            assert text(await executor.call(ToolCall("mem__add", {"a": 2, "b": 3}, CTX))) == "5"
            failed = await executor.call(ToolCall("mem__boom", {}, CTX))
            assert failed.is_error and "boom" in text(failed)
            bad_args = await executor.call(ToolCall("mem__add", {"a": "two"}, CTX))
            assert bad_args.is_error
            picture = await executor.call(ToolCall("mem__picture", {}, CTX))
            assert picture.content == [
                {"type": "text", "text": "one red pixel"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()},
                },
            ]
            unknown = await executor.call(ToolCall("mem__nope", {}, CTX))
            assert unknown.is_error and "there is no tool called mem__nope" in text(unknown)
            assert "mem__echo" in text(unknown) and "mem__wipe" in text(unknown)

    run(scenario)


def test_a_read_only_server_hides_its_destructive_tools() -> None:
    s = settings({"mem": {"read_only": True, "destructive": ["add"]}}, builtins=("mem",))

    async def scenario() -> None:
        async with McpPool(s, {"mem": MemServer()}) as pool:
            names = {t.name for t in await pool.tools("researcher")}
            assert "mem__echo" in names
            assert "mem__wipe" not in names and "mem__add" not in names
            assert "mem__slow" not in names, "unannotated tools may change things: hidden from a read-only server"
            refused = await pool.executor("researcher").call(ToolCall("mem__wipe", {"table": "runs"}, CTX))
            assert refused.is_error and "there is no tool called mem__wipe" in text(refused)

    run(scenario)


@pytest.mark.subprocess
def test_roles_see_and_call_only_their_allow_list(tmp_path: Path) -> None:
    s = settings(
        {"toy": toy(tmp_path / "starts")},
        {"researcher": {"tools": ["mem__e*", "toy__pid"]}, "nobody": {"tools": []}},
        builtins=("mem",),
    )

    async def scenario() -> None:
        async with McpPool(s, {"mem": MemServer()}) as pool:
            assert {t.name for t in await pool.tools("researcher")} == {"mem__echo", "toy__pid"}
            assert await pool.tools("nobody") == []
            everything = {t.name for t in await pool.tools("admin")}
            assert {"mem__wipe", "toy__drop_table", "toy__die"} <= everything
            researcher = pool.executor("researcher")
            assert {t.name for t in researcher.tools()} == {"mem__echo", "toy__pid"}
            refused = await researcher.call(ToolCall("mem__add", {"a": 1, "b": 2}, CTX))
            assert refused.is_error and "role 'researcher' may not call mem__add" in text(refused)
            assert "mem__echo, toy__pid" in text(refused)
            assert text(await pool.executor("admin").call(ToolCall("mem__add", {"a": 1, "b": 2}, CTX))) == "3"

    run(scenario)


def test_a_call_that_hangs_times_out_and_the_server_stays_usable() -> None:
    s = settings({"mem": {"timeout": "300ms"}}, builtins=("mem",))

    async def scenario() -> None:
        async with McpPool(s, {"mem": (mem := MemServer())}) as pool:
            executor = pool.executor("researcher")
            started = time.monotonic()
            hung = await executor.call(ToolCall("mem__slow", {"seconds": 30}, CTX))
            assert time.monotonic() - started < 10
            assert hung.is_error and "the MCP server 'mem' did not answer within 300ms" in text(hung)
            assert text(await executor.call(ToolCall("mem__echo", {"text": "still here"}, CTX))) == "still here"
            assert mem.built == 1

    run(scenario)


def test_a_waiting_tool_may_wait_its_own_bound_beyond_the_servers_answer_timeout() -> None:
    """lab__wait_for_run waits up to its timeout_s (ten minutes by default) for an eval run: the server's one-minute
    answer timeout must not cut it, yet a wait that overruns its own bound still ends."""
    s = settings({"mem": {"timeout": "300ms"}}, builtins=("mem",))

    async def scenario() -> None:
        async with McpPool(s, {"mem": MemServer()}) as pool:
            executor = pool.executor("researcher")
            assert text(await executor.call(ToolCall("mem__wait", {"seconds": 1}, CTX))) == "waited 1s", (
                "default bound: 2s"
            )
            assert text(await executor.call(ToolCall("mem__wait", {"seconds": 1, "timeout_s": 1}, CTX))) == "waited 1s"
            hung = await executor.call(ToolCall("mem__slow", {"seconds": 1}, CTX))  # labbot/waits: true names no bound
            assert hung.is_error and "did not answer within 300ms" in text(hung)

    run(scenario)


def test_wait_bound_reads_the_named_argument_its_default_and_maximum() -> None:
    schema = {"properties": {"timeout_s": {"type": "integer", "default": 600, "maximum": 3600}}}
    assert wait_bound(schema, {}, "timeout_s") == 600
    assert wait_bound(schema, {"timeout_s": 30}, "timeout_s") == 30
    assert wait_bound(schema, {"timeout_s": 10**9}, "timeout_s") == 3600, "never past the schema's maximum"
    assert wait_bound(schema, {"timeout_s": 30}, None) == 0, "a tool that names no bound waits nothing extra"
    for bad in ("600", -5, 0, True, float("inf"), float("nan"), None):
        assert wait_bound(schema, {"timeout_s": bad}, "timeout_s") == 0, bad
    assert wait_bound({}, {}, "timeout_s") == 0, "no argument, no default"


def test_concurrent_calls_share_one_connection() -> None:
    mem = MemServer(barrier=6)

    async def scenario() -> list[ToolResult]:
        async with McpPool(settings({"mem": {"timeout": "20s"}}, builtins=("mem",)), {"mem": mem}) as pool:
            executor = pool.executor("researcher")
            return await asyncio.gather(*(executor.call(ToolCall("mem__gather", {}, CTX)) for _ in range(6)))

    results = run(scenario)
    assert [text(r) for r in results] == ["6"] * 6, "each call waits for all six: they ran at once"
    assert mem.built == 1


# --- the pool over stdio -------------------------------------------------------------------------------------------


@pytest.mark.subprocess
def test_a_server_that_dies_mid_call_is_restarted_on_the_next_call(tmp_path: Path) -> None:
    starts = tmp_path / "starts"

    async def scenario() -> None:
        async with McpPool(settings({"toy": toy(starts)})) as pool:
            executor = pool.executor("researcher")
            tools = {t.name: t for t in await pool.tools("researcher")}
            assert tools["toy__drop_table"].destructive and tools["toy__echo"].read_only
            assert not tools["toy__nap"].waits, "an outside server cannot exempt its calls from the agent's budgets"
            first = int(text(await executor.call(ToolCall("toy__pid", {}, CTX))))
            died = await executor.call(ToolCall("toy__die", {}, CTX))
            assert died.is_error and "the MCP server 'toy' stopped before answering (its connection closed)" in text(
                died
            )
            assert "will be restarted on the next call" in text(died)
            second = int(text(await executor.call(ToolCall("toy__pid", {}, CTX))))
            assert second != first and starts_of(starts) == [first, second]
            assert gone(first) and not gone(second)
        assert gone(second), "close() stops the process"

    run(scenario)


@pytest.mark.subprocess
def test_racing_first_calls_start_one_process(tmp_path: Path) -> None:
    starts = tmp_path / "starts"

    async def scenario() -> list[ToolResult]:
        async with McpPool(settings({"toy": toy(starts)})) as pool:
            executor = pool.executor("researcher")  # nothing listed yet: the calls list, and so connect, themselves
            return await asyncio.gather(*(executor.call(ToolCall("toy__pid", {}, CTX)) for _ in range(5)))

    results = run(scenario)
    assert len(starts_of(starts)) == 1 and {text(r) for r in results} == {str(starts_of(starts)[0])}


@pytest.mark.subprocess
def test_a_stdio_call_that_hangs_times_out(tmp_path: Path) -> None:
    starts = tmp_path / "starts"

    async def scenario() -> None:
        async with McpPool(settings({"toy": toy(starts, timeout="300ms")})) as pool:
            executor = pool.executor("researcher")  # start-up (a Python process: about a second) has its own budget
            hung = await executor.call(ToolCall("toy__nap", {"seconds": 30}, CTX))
            assert hung.is_error and "did not answer within 300ms" in text(hung)
            assert text(await executor.call(ToolCall("toy__echo", {"text": "awake"}, CTX))) == "awake"
            assert len(starts_of(starts)) == 1, "a slow tool is not a dead server"

    run(scenario)


def test_a_server_that_cannot_start_is_reported_and_the_others_still_work() -> None:
    s = settings({"ghost": {"command": "/nonexistent/mcp-server --stdio"}}, builtins=("mem", "broken"))
    tries: list[int] = []

    def broken() -> MCPServer:
        tries.append(1)
        raise RuntimeError("the broken built-in cannot start")

    async def scenario() -> None:
        async with McpPool(s, {"mem": MemServer(), "broken": broken}) as pool:
            names = {t.name for t in await pool.tools("researcher")}
            assert "mem__echo" in names and not any(n.startswith(("ghost__", "broken__")) for n in names)
            assert "No such file" in pool.problems["ghost"] and "cannot start" in pool.problems["broken"]
            result = await pool.executor("researcher").call(ToolCall("ghost__anything", {}, CTX))
            assert result.is_error and "there is no tool called ghost__anything" in text(result)
            assert "unavailable right now: " in text(result) and "ghost (FileNotFoundError" in text(result)
            assert len(tries) == 1, "a failed server is not retried on every call"
            await pool.refresh()
            assert len(tries) == 2, "refresh() retries it"

    run(scenario)


def test_after_close_calls_are_refused() -> None:
    async def scenario() -> ToolResult:
        pool = McpPool(settings(builtins=("mem",)), {"mem": MemServer()})
        await pool.tools("researcher")
        await pool.close()
        return await pool.executor("researcher").call(ToolCall("mem__echo", {"text": "x"}, CTX))

    result = run(scenario)
    assert result.is_error and "shut down" in text(result)


# --- the pool over streamable HTTP ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def web() -> Iterator[web_server.WebServer]:
    with web_server.serve(SECRET) as server:
        yield server


def test_http_server_with_a_bearer_header_from_the_environment(
    web: web_server.WebServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("LABBOT_TEST_WEB_TOKEN", SECRET)
    s = settings({"web": {"url": web.url, "headers": {"Authorization": "Bearer ${LABBOT_TEST_WEB_TOKEN}"}}})

    async def scenario() -> None:
        async with McpPool(s) as pool:
            tools = {t.name: t for t in await pool.tools("researcher")}
            assert tools["web__delete_page"].destructive and tools["web__whoami"].read_only
            result = await pool.executor("researcher").call(ToolCall("web__whoami", {}, CTX))
            assert text(result) == "the web server"

    run(scenario)
    assert web.authorizations and set(web.authorizations) == {f"Bearer {SECRET}"}
    assert SECRET not in caplog.text and SECRET not in repr(s)


def test_http_server_refusing_the_token_is_reported_without_it(
    web: web_server.WebServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "tok-wrong-5d2a8e"
    monkeypatch.setenv("LABBOT_TEST_WEB_TOKEN", wrong)
    monkeypatch.delenv("LABBOT_TEST_UNSET", raising=False)
    s = settings(
        {
            "web": {"url": web.url, "headers": {"Authorization": "Bearer ${LABBOT_TEST_WEB_TOKEN}"}},
            "unset": {"url": web.url, "headers": {"Authorization": "Bearer ${LABBOT_TEST_UNSET}"}},
        }
    )

    async def scenario() -> tuple[ToolResult, ToolResult]:
        async with McpPool(s) as pool:
            assert await pool.tools("researcher") == []
            assert "LABBOT_TEST_UNSET" in pool.problems["unset"]
            executor = pool.executor("researcher")
            return await executor.call(ToolCall("web__whoami", {}, CTX)), await executor.call(
                ToolCall("unset__whoami", {}, CTX)
            )

    refused, unset = run(scenario)
    assert refused.is_error and unset.is_error
    assert "${LABBOT_TEST_UNSET}, which is not set" in text(unset)
    for shown in (text(refused), text(unset), caplog.text):
        assert wrong not in shown and SECRET not in shown
    assert f"Bearer {wrong}" in web.authorizations, "the server did get the (wrong) token"


@pytest.mark.subprocess
def test_env_of_a_stdio_server_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABBOT_TEST_STARTS_DIR", str(tmp_path))
    s = settings(
        {"toy": {"command": [sys.executable, TOY], "env": {"TOY_SERVER_STARTS": "${LABBOT_TEST_STARTS_DIR}/s"}}}
    )

    async def scenario() -> None:
        async with McpPool(s) as pool:
            pid = text(await pool.executor("researcher").call(ToolCall("toy__pid", {}, CTX)))
            assert starts_of(tmp_path / "s") == [int(pid)]

    run(scenario)


def test_labbot_toml_makes_a_vendor_server_read_only_for_the_agents() -> None:
    """[mcp.servers.notion] read_only = true: the agents are offered Notion's reads and none of its writes."""
    from labbot.mcp_servers.linear import build_server as linear
    from labbot.mcp_servers.notion import build_server as notion

    s = settings({"notion": {"read_only": True}}, builtins=("notion", "linear"))

    async def scenario() -> None:
        async with McpPool(s, {"notion": notion, "linear": linear}) as pool:
            names = {t.name for t in await pool.tools("assistant")}
            assert {"notion__search", "notion__get_page", "notion__query_data_source"} <= names
            assert not names & {"notion__create_page", "notion__append_blocks", "notion__add_comment"}
            assert {"linear__create_issue", "linear__update_state"} <= names  # only the one server is read-only
            assert all(t.destructive for t in await pool.tools("assistant") if t.name == "linear__create_issue")

    run(scenario)
