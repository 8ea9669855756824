"""The MCP client pool: every server of ``[mcp]`` (``labbot.agents.fleet.mcp_config``) plus labbot's built-ins, reached
with ``mcp.Client`` and offered to agents as ``ToolExecutor``\\ s (``labbot.agents.fleet.tools``), one per role.

The agent runtime asks ``pool.executor(role)`` for its tools and calls; the approval gate wraps that executor and
reads ``ToolSpec.destructive``, which is set here from the tool's ``destructiveHint`` or from labbot.toml. Tools
are named ``SERVER__TOOL`` (sanitized to what the Messages API accepts) and filtered by the role's allow-list; a
``read_only`` server's destructive tools are not offered at all.

Servers start lazily: nothing connects until a role's tools are listed or a tool is called, and then one
connection per server is made, under a lock, and shared by every agent. A server that dies (its process exits,
its connection closes) fails the call in progress with an ``is_error`` result saying so, and the next call starts
it again. A call that outlives the server's ``timeout`` is an ``is_error`` result too (starting a server has a
``start_timeout`` of its own); calls never raise for a server's trouble. Header and env values are expanded from
the environment at connect time and scrubbed from every message this module logs or returns.

Each connection is held open by a task of its own: ``mcp.Client`` keeps anyio cancel scopes that must be left by
the task that entered them, while calls come from many agents' tasks. A pool lives on one event loop.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import logging
import math
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import httpx2

if TYPE_CHECKING:
    from mcp import Client, types

from labbot.agents.fleet.mcp_config import McpServerConfig, McpSettings
from labbot.agents.fleet.tools import CallContext, ToolCall, ToolResult, ToolSpec
from labbot.common.durations import format_duration
from labbot.common.errors import BadRequest, LabbotError
from labbot.common.humanize import format_bytes
from labbot.common.mcp_meta import PREVIEW_META, WAITS_META

logger = logging.getLogger(__name__)

ServerFactory = Callable[[], Any]  # returns an in-process ``mcp.server.MCPServer`` (or a low-level ``Server``)

_NAME_OK = re.compile(r"[^a-zA-Z0-9_-]")
_NAME_MAX = 64
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})  # what the Messages API accepts
_MAX_NAMES_IN_ERROR = 40
_CLOSE_GRACE_S = 10.0  # the stdio transport's own shutdown is bounded at about 6 s (close stdin, TERM, KILL)
_LIST_PAGES_MAX = 100
_RETRY_LISTING_AFTER_S = 30.0  # a server that could not be listed is not tried again sooner, except by refresh()
_TRANSPORT_ERRORS = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    EOFError,
    OSError,  # a broken pipe to a stdio server's process
    httpx2.TransportError,
)


class ServerUnavailable(Exception):
    """A server could not be connected to; the message is safe to show (no secrets)."""


@dataclass(frozen=True)
class _Entry:
    spec: ToolSpec
    tool: str  # the server's own name for it
    wait_arg: str | None = None  # a waiting tool's argument that bounds its wait, in seconds (labbot.common.mcp_meta)


def tool_name(server: str, tool: str) -> str:
    """``SERVER__TOOL`` made to fit ``^[a-zA-Z0-9_-]{1,64}$``: other characters become ``_``; a long name keeps its
    head and a short hash of the whole, so that two long names that share a head still differ."""
    name = _NAME_OK.sub("_", f"{server}__{tool}")
    if len(name) > _NAME_MAX:
        digest = hashlib.sha256(f"{server}__{tool}".encode()).hexdigest()[:8]
        name = f"{name[: _NAME_MAX - 9]}_{digest}"
    return name


def wait_bound(schema: Mapping[str, Any], arguments: Mapping[str, Any], arg: str | None) -> float:
    """How long a waiting tool's call may wait, in seconds, beyond its server's answer timeout: the ``arg`` given,
    else its default in ``schema``, at most the schema's maximum; 0 for a tool that names no such argument."""
    if arg is None:
        return 0.0
    prop = (schema.get("properties") or {}).get(arg) or {}
    value = arguments.get(arg, prop.get("default"))
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        return 0.0
    most = prop.get("maximum")
    if isinstance(most, int | float) and not isinstance(most, bool):
        value = min(value, most)
    return float(value)


def _load_mcp() -> None:
    """The MCP SDK, imported when the first tools are listed rather than when labbot starts (about 1.5 s of imports
    each ``labbot serve`` would pay before answering, agents or not); called on a worker thread, off the loop."""
    import mcp.client.streamable_http
    import mcp.shared.exceptions  # noqa: F401


def _is_mcp_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the SDK's ``MCPError``: none can be before the SDK is imported."""
    loaded = sys.modules.get("mcp.shared.exceptions")
    return loaded is not None and isinstance(exc, loaded.MCPError)


def _connection_closed() -> Exception:
    from mcp import types
    from mcp.shared.exceptions import MCPError

    return MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")


def _describe(exc: BaseException) -> str:
    """One line for an exception, looking inside the exception groups that anyio task groups wrap errors in."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    if isinstance(exc, LabbotError | ServerUnavailable) or _is_mcp_error(exc):  # messages written to be read
        return str(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _broken(exc: BaseException) -> bool:
    """Whether ``exc`` means the connection is gone (restart it), not that a live server answered with an error."""
    if isinstance(exc, BaseExceptionGroup):
        return any(_broken(e) for e in exc.exceptions)
    if _is_mcp_error(exc):
        from mcp import types

        return getattr(exc, "code", None) == types.CONNECTION_CLOSED
    return isinstance(exc, _TRANSPORT_ERRORS) and not isinstance(exc, TimeoutError)


class _Connection:
    """One live ``mcp.Client`` to one server, held open by a task of its own until ``close()``."""

    def __init__(self, config: McpServerConfig, factory: ServerFactory | None) -> None:
        self.config = config
        self._factory = factory
        self._client: Client | None = None
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.dead = False

    @property
    def client(self) -> Client:
        if self._client is None or not self.alive:
            raise _connection_closed()
        return self._client

    @property
    def alive(self) -> bool:
        return not self.dead and self._task is not None and not self._task.done()

    def _target(self, stack: AsyncExitStack) -> Any:
        cfg = self.config
        if cfg.transport == "builtin":
            if self._factory is None:
                raise ServerUnavailable(f"no built-in MCP server is called {cfg.name!r}")
            return self._factory()
        if cfg.transport == "stdio":
            from mcp import StdioServerParameters

            return StdioServerParameters(
                command=cfg.command[0], args=list(cfg.command[1:]), env=cfg.resolved_env() or None, cwd=cfg.cwd
            )
        assert cfg.url is not None
        # The SDK's own default client has no headers; ours carries them, expanded only now and kept only here.
        http = httpx2.AsyncClient(headers=cfg.resolved_headers(), timeout=httpx2.Timeout(30.0, read=300.0))
        stack.push_async_callback(http.aclose)
        from mcp.client.streamable_http import streamable_http_client

        return streamable_http_client(cfg.url, http_client=http)

    async def _hold(self) -> None:
        from mcp import Client

        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(Client(self._target(stack)))
                self._client = client
                self._ready.set_result(None)
                await self._stop.wait()
        except BaseException as e:
            if not self._ready.done():
                self._ready.set_exception(e if isinstance(e, Exception) else ServerUnavailable("cancelled"))
            elif isinstance(e, Exception):  # it died after connecting: calls see CONNECTION_CLOSED
                logger.debug("MCP server %s: connection ended: %s", self.config.name, _describe(e))
            if not isinstance(e, Exception):
                raise
        finally:
            self.dead = True

    async def open(self) -> None:
        self._task = asyncio.create_task(self._hold(), name=f"mcp-{self.config.name}")
        try:
            await asyncio.shield(self._ready)
        except BaseException:
            with anyio.CancelScope(shield=True):  # the caller's timeout must not cut the clean-up short
                await self.close()
            raise

    async def close(self) -> None:
        self.dead = True
        task = self._task
        if task is None:
            return
        self._stop.set()
        if not self._ready.done():
            task.cancel()  # still connecting: nothing to leave gracefully
        done, _ = await asyncio.wait({task}, timeout=_CLOSE_GRACE_S)
        if not done:
            task.cancel()
            await asyncio.wait({task})
        if self._ready.done() and not self._ready.cancelled():
            self._ready.exception()  # retrieved, so asyncio does not warn about it


class McpExecutor:
    """The ``ToolExecutor`` an agent of one role gets: the pool's tools that the role may call."""

    def __init__(self, pool: McpPool, role: str) -> None:
        self.pool = pool
        self.role = role

    def tools(self) -> Sequence[ToolSpec]:
        """The tools as last listed (``await pool.tools(role)`` or ``pool.refresh()`` lists them)."""
        return self.pool.listed_tools(self.role)

    async def call(self, call: ToolCall) -> ToolResult:
        """The pool answers by the name, from its own listing (the role's allow-list, the server's own tool name),
        whatever ``call.spec`` says."""
        return await self.pool.call(self.role, call.name, call.arguments, call.ctx)


class McpPool:
    """Every MCP server labbot's agents reach, connected on first use and restarted after it dies."""

    def __init__(
        self, settings: McpSettings | None = None, builtins: Mapping[str, ServerFactory] | None = None
    ) -> None:
        self.builtins = dict(builtins or {})
        self.settings = (settings or McpSettings()).with_builtins(self.builtins)
        for name, cfg in self.settings.servers.items():
            if cfg.transport == "builtin" and name not in self.builtins:
                raise BadRequest(
                    f"labbot.toml: [mcp.servers.{name}] needs command = ... or url = ...: "
                    f"there is no built-in server called {name!r} (built-ins: {', '.join(self.builtins) or 'none'})"
                )
        self._connections: dict[str, _Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._listings: dict[str, tuple[types.Tool, ...]] = {}
        self._entries: tuple[tuple[str, _Entry], ...] = ()
        self._by_role: dict[str, dict[str, _Entry]] = {}
        self._closed = False
        self.problems: dict[str, str] = {}  # server → why it is not offering tools right now (safe to show)
        self._failed_at: dict[str, float] = {}  # server → when listing it last failed (monotonic)

    @property
    def servers(self) -> list[McpServerConfig]:
        return [cfg for cfg in self.settings.servers.values() if cfg.enabled]

    async def start(self) -> None:
        """Nothing connects here: each server starts when it is first needed."""

    async def __aenter__(self) -> McpPool:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def executor(self, role: str) -> McpExecutor:
        return McpExecutor(self, role)

    async def tools(self, role: str) -> list[ToolSpec]:
        """The tools ``role`` may call, listing (and so starting) each server not listed yet."""
        await self._list(refresh=False)
        return [entry.spec for entry in self._allowed(role).values()]

    async def refresh(self, role: str | None = None) -> list[ToolSpec]:
        """List every server's tools again (they may have changed); the tools ``role`` may call (all, if no role)."""
        await self._list(refresh=True)
        return self.listed_tools(role)

    def listed_tools(self, role: str | None = None) -> list[ToolSpec]:
        """The tools ``role`` may call (all, if no role) as last listed; connects nothing."""
        if role is None:
            return [entry.spec for _, entry in self._entries]
        return [entry.spec for entry in self._allowed(role).values()]

    async def call(self, role: str, name: str, arguments: Mapping[str, Any], ctx: CallContext) -> ToolResult:
        """Call the namespaced tool ``name`` for an agent of ``role``; trouble comes back as an ``is_error`` result."""
        if self._closed:
            return ToolResult("labbot's MCP tools are shut down (labbot is stopping)", is_error=True)
        allowed = self._allowed(role)
        if name not in allowed and self._unlisted():
            await self._list(refresh=False)  # called before anything was listed, or a server was down then
            allowed = self._allowed(role)
        entry = allowed.get(name)
        if entry is None:
            return self._unknown(role, name, allowed)
        assert entry.spec.server is not None
        cfg = self.settings.servers[entry.spec.server]
        meta = {"server": cfg.name, "tool": entry.tool}
        conn: _Connection | None = None
        # a waiting tool (lab__wait_for_run) bounds its own wait: the server's answer timeout comes on top of it
        limit = cfg.timeout_s + wait_bound(entry.spec.input_schema, arguments, entry.wait_arg)
        try:
            conn = await self._connection(cfg)
            with anyio.fail_after(limit):
                result = await conn.client.call_tool(entry.tool, dict(arguments))
        except TimeoutError:
            return ToolResult(
                f"{name}: the MCP server {cfg.name!r} did not answer within {format_duration(limit)}; "
                "try again later or with a smaller request",
                is_error=True,
                meta=meta,
            )
        except ServerUnavailable as e:
            return ToolResult(
                f"{name}: the MCP server {cfg.name!r} could not be started ({e}); it will be tried again on the next "
                "call",
                is_error=True,
                meta=meta,
            )
        except Exception as e:
            if not _broken(e):  # the server answered with an error: it is alive
                return ToolResult(f"{name} failed: {self._scrub(cfg, _describe(e))}", is_error=True, meta=meta)
            why = "its connection closed" if _is_mcp_error(e) else self._scrub(cfg, _describe(e))
            return await self._died(cfg, conn, name, why, meta)
        return ToolResult(_content(result), is_error=result.is_error, meta=meta)

    async def close(self) -> None:
        """Close every connection (stdio servers' processes stop); calls after this are refused."""
        self._closed = True
        connections = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(conn.close() for conn in connections))

    # --- connections -----------------------------------------------------------------------------------------

    async def _connection(self, cfg: McpServerConfig) -> _Connection:
        conn = self._connections.get(cfg.name)
        if conn is not None and conn.alive:
            return conn
        lock = self._locks.setdefault(cfg.name, asyncio.Lock())
        async with lock:  # one connection per server however many agents ask at once
            conn = self._connections.get(cfg.name)
            if conn is not None and conn.alive:
                return conn
            if conn is not None:
                await self._discard(cfg.name, conn)
            if self._closed:
                raise ServerUnavailable("labbot is stopping")
            conn = _Connection(cfg, self.builtins.get(cfg.name))
            try:
                with anyio.fail_after(cfg.start_timeout_s):
                    await conn.open()
            except TimeoutError:
                raise ServerUnavailable(f"it did not start within {format_duration(cfg.start_timeout_s)}") from None
            except Exception as e:
                raise ServerUnavailable(self._scrub(cfg, _describe(e))) from None
            logger.info("MCP server %s connected (%s)", cfg.name, cfg.transport)
            self._connections[cfg.name] = conn
            self.problems.pop(cfg.name, None)
            return conn

    async def _discard(self, server: str, conn: _Connection | None) -> None:
        if conn is None:
            return
        if self._connections.get(server) is conn:
            del self._connections[server]
        await conn.close()

    async def _died(
        self, cfg: McpServerConfig, conn: _Connection | None, name: str, why: str, meta: Mapping[str, Any]
    ) -> ToolResult:
        logger.warning("MCP server %s stopped before answering %s (%s); it will be restarted", cfg.name, name, why)
        await self._discard(cfg.name, conn)
        return ToolResult(
            f"{name}: the MCP server {cfg.name!r} stopped before answering ({why}), so the call may or may not have "
            "taken effect; the server will be restarted on the next call",
            is_error=True,
            meta=meta,
        )

    @staticmethod
    def _scrub(cfg: McpServerConfig, text: str) -> str:
        for secret in cfg.secrets():
            text = text.replace(secret, "***")
        return text

    # --- listing and naming ----------------------------------------------------------------------------------

    def _unlisted(self) -> list[McpServerConfig]:
        """Servers not listed yet, less those that failed lately (each try may cost a start-up timeout)."""
        now = time.monotonic()
        return [
            cfg
            for cfg in self.servers
            if cfg.name not in self._listings
            and now - self._failed_at.get(cfg.name, -math.inf) >= _RETRY_LISTING_AFTER_S
        ]

    async def _list(self, *, refresh: bool) -> None:
        servers = self.servers if refresh else self._unlisted()
        if self._closed or not servers:
            return
        if "mcp.client.streamable_http" not in sys.modules:
            await anyio.to_thread.run_sync(_load_mcp)
        await asyncio.gather(*(self._list_one(cfg, refresh) for cfg in servers))
        self._index()

    async def _list_one(self, cfg: McpServerConfig, refresh: bool) -> None:
        conn: _Connection | None = None
        try:
            conn = await self._connection(cfg)
            with anyio.fail_after(cfg.timeout_s):
                tools: list[types.Tool] = []
                cursor: str | None = None
                for _ in range(_LIST_PAGES_MAX):
                    page = await conn.client.list_tools(cursor=cursor, cache_mode="refresh" if refresh else "use")
                    tools += page.tools
                    cursor = page.next_cursor
                    if not cursor:
                        break
        except Exception as e:
            why = (
                f"did not answer within {format_duration(cfg.timeout_s)}"
                if isinstance(e, TimeoutError)
                else self._scrub(cfg, _describe(e))
            )
            logger.warning("MCP server %s: cannot list its tools: %s", cfg.name, why)
            self.problems[cfg.name] = why
            self._failed_at[cfg.name] = time.monotonic()
            if _broken(e):
                await self._discard(cfg.name, conn)
            return
        self._listings[cfg.name] = tuple(tools)
        self._failed_at.pop(cfg.name, None)
        self.problems.pop(cfg.name, None)

    def _index(self) -> None:
        """Name every listed tool, once for all roles; names are unique even when sanitizing makes two alike."""
        entries: dict[str, _Entry] = {}
        for cfg in self.servers:
            for tool in self._listings.get(cfg.name, ()):
                annotations = tool.annotations
                # MCP's defaults: a tool not marked read-only may change things (destructiveHint defaults to true)
                # unless it says destructiveHint: false. Unannotated tools therefore need approval: fail closed.
                read_only_hint = bool(annotations and annotations.read_only_hint)
                destructive_hint = annotations.destructive_hint if annotations else None
                destructive = (not read_only_hint and destructive_hint is not False) or cfg.marks_destructive(tool.name)
                if destructive and cfg.read_only:
                    continue
                name, n = tool_name(cfg.name, tool.name), 1
                while name in entries:  # "a.b" and "a_b" both sanitize to a_b
                    name, n = tool_name(cfg.name, f"{tool.name}_{n}"), n + 1
                title = tool.title or (annotations.title if annotations else None)
                # an outside server cannot exempt its own calls from the agent's budgets
                waits = (tool.meta or {}).get(WAITS_META) if cfg.transport == "builtin" else None
                shows = (tool.meta or {}).get(PREVIEW_META) if cfg.transport == "builtin" else None
                spec = ToolSpec(
                    name=name,
                    description=tool.description or title or tool.name,
                    input_schema=tool.input_schema,
                    read_only=bool(annotations and annotations.read_only_hint) and not destructive,
                    destructive=destructive,
                    server=cfg.name,
                    waits=bool(waits),
                    preview=tool_name(cfg.name, shows) if isinstance(shows, str) and shows else None,
                )
                entries[name] = _Entry(spec=spec, tool=tool.name, wait_arg=waits if isinstance(waits, str) else None)
        self._entries = tuple(entries.items())
        self._by_role.clear()

    def _allowed(self, role: str) -> dict[str, _Entry]:
        allowed = self._by_role.get(role)
        if allowed is None:
            allowed = {name: entry for name, entry in self._entries if self.settings.allows(role, name)}
            self._by_role[role] = allowed
        return allowed

    def _unknown(self, role: str, name: str, allowed: Mapping[str, _Entry]) -> ToolResult:
        names = sorted(allowed)
        shown = ", ".join(names[:_MAX_NAMES_IN_ERROR]) + (
            f" and {len(names) - _MAX_NAMES_IN_ERROR} more" if len(names) > _MAX_NAMES_IN_ERROR else ""
        )
        exists = any(entry_name == name for entry_name, _ in self._entries)
        why = f"role {role!r} may not call {name}" if exists else f"there is no tool called {name}"
        down = [f"{server} ({why_down})" for server, why_down in self.problems.items()]
        note = f"; unavailable right now: {', '.join(down)}" if down else ""
        return ToolResult(f"{why}; the tools you can call are: {shown or 'none'}{note}", is_error=True)


def _content(result: types.CallToolResult) -> str | list[dict[str, Any]]:
    """An MCP tool result as Messages API content: text as text, images as base64 image blocks, the rest described."""
    from mcp import types

    blocks: list[dict[str, Any]] = []
    for item in result.content:
        if isinstance(item, types.TextContent):
            blocks.append({"type": "text", "text": item.text})
        elif isinstance(item, types.ImageContent):
            blocks.append(_image(item.data, item.mime_type, "image"))
        elif isinstance(item, types.AudioContent):
            blocks.append(_text(f"[audio ({item.mime_type}, {_size(item.data)}) not shown]"))
        elif isinstance(item, types.ResourceLink):
            mime = f", {item.mime_type}" if item.mime_type else ""
            blocks.append(_text(f"[resource link: {item.name} <{item.uri}>{mime}]"))
        elif isinstance(item, types.EmbeddedResource):
            res = item.resource
            if isinstance(res, types.TextResourceContents):
                blocks.append(_text(f"[resource {res.uri}]\n{res.text}"))
            else:
                blocks.append(_image(res.blob, res.mime_type or "", f"resource {res.uri}"))
        else:  # a content type newer than this code
            blocks.append(_text(f"[{getattr(item, 'type', type(item).__name__)} content not shown]"))
    if not blocks and result.structured_content is not None:
        blocks.append(_text(json.dumps(result.structured_content, ensure_ascii=False, default=str)))
    if all(block["type"] == "text" for block in blocks):
        return "\n".join(block["text"] for block in blocks) if blocks else "(the tool returned nothing)"
    return blocks


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _size(data: str) -> str:
    try:
        return format_bytes(len(base64.b64decode(data, validate=True)))
    except (binascii.Error, ValueError):
        return "undecodable"


def _image(data: str, mime: str, what: str) -> dict[str, Any]:
    if mime in _IMAGE_TYPES:
        return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}}
    return _text(f"[{what} ({mime or 'unknown type'}, {_size(data)}) not shown]")
