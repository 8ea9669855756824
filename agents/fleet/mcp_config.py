"""Which MCP servers agents reach and which of their tools each role may call: ``[mcp]`` of ``labbot.toml``.

A server is a local command spoken to over stdio, a streamable-HTTP URL (the hosted Notion, Linear, Datadog and
GitHub servers plug in as they are), or one of labbot's built-ins (``mcp_servers/``, served in-process), which
need no table unless you want to tune them::

    [mcp.servers.notion]
    url = "https://mcp.notion.com/mcp"
    headers = { Authorization = "Bearer ${NOTION_TOKEN}" }  # ${VAR}: read from labbot's environment at connect
    destructive = ["notion-update-*", "notion-move-pages"]   # needs approval, whatever the server's annotations say
    timeout = "60s"                                          # a call that takes longer is an error (default 60s)
    start_timeout = "2m"                                     # connecting, or starting the process (default 60s)

    [mcp.servers.scratch]
    command = "python tools/scratch_server.py"               # or a list; shlex-split when a string
    args = ["--root", "/data/scratch"]
    env = { SCRATCH_TOKEN = "${SCRATCH_TOKEN}" }             # a stdio server inherits only HOME, PATH, SHELL, ...
    cwd = "/srv/labbot"
    read_only = true                                         # its destructive tools are hidden entirely

    [mcp.servers.lab]                                        # a built-in: no command, no url
    enabled = false

    [mcp.roles.researcher]                                   # a role without a table may call every tool
    tools = ["codebase__*", "lab__list_runs"]                # fnmatch globs over SERVER__TOOL names

A renamed role's table under its old name (``[mcp.roles.babysitter]``) is read as the new one's, with a warning
(``labbot.agents.fleet.roles.current_name``).

Header and env values stay unexpanded here, so a ``repr`` or a log line shows ``${NOTION_TOKEN}`` at most; the pool
(``labbot.agents.fleet.mcp_pool``) expands them when it connects. Sits in agents/; pure data, no I/O beyond reading the
environment when asked to.
"""

from __future__ import annotations

import contextlib
import difflib
import fnmatch
import os
import re
import shlex
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from labbot.agents.fleet.roles import current_name
from labbot.common.durations import parse_duration
from labbot.common.errors import BadRequest

DEFAULT_TIMEOUT_S = 60.0
SERVER_KEYS = (
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "timeout",
    "start_timeout",
    "destructive",
    "read_only",
    "enabled",
)
_STDIO_KEYS = ("args", "env", "cwd")
_HTTP_KEYS = ("headers",)
_ROLE_KEYS = ("tools",)
_MCP_KEYS = ("servers", "roles")
_SERVER_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_))*$")  # no "__": that separates server from tool
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SECRET_MIN_LEN = 4  # shorter values are too common to scrub from text without mangling it


class UnsetVariable(BadRequest):
    """A ``${VAR}`` in a header or env value names a variable that labbot's environment lacks."""


def _where(server: str) -> str:
    return f"labbot.toml: [mcp.servers.{server}]"


def _role_key(role: str) -> str:
    return f"[mcp.roles.{role}]"


def _unknown_key(where: str, key: str, allowed: Collection[str]) -> BadRequest:
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return BadRequest(f"{where}: unknown key {key!r}{hint}; the keys are {', '.join(allowed)}")


def _check_references(where: str, what: str, value: str) -> None:
    """A ``$`` that does not start a well-formed ``${VAR}`` is a typo, better caught now than at connect time."""
    rest = _VAR.sub("", value)
    if "${" in rest:
        raise BadRequest(f"{where} {what}: a reference must look like ${{VAR}} (letters, digits, _), e.g. ${{TOKEN}}")


def expand(value: str, environ: Mapping[str, str], *, where: str) -> str:
    """``value`` with each ``${VAR}`` replaced from ``environ``; an unset one raises ``UnsetVariable`` naming it."""

    def sub(m: re.Match[str]) -> str:
        var = m.group(1)
        if var not in environ:
            raise UnsetVariable(f"{where} uses ${{{var}}}, which is not set in labbot's environment")
        return environ[var]

    return _VAR.sub(sub, value)


def _string_table(t: Mapping[str, Any], key: str, server: str, example: str) -> dict[str, str]:
    raw = t.get(key, {})
    # Values may be secrets: say which entry is wrong and how, never what it holds.
    if not isinstance(raw, Mapping):
        raise BadRequest(f"{_where(server)} {key} must be a table of strings, e.g. {key} = {example}")
    out: dict[str, str] = {}
    for k, v in raw.items():
        if not isinstance(v, str):
            raise BadRequest(
                f"{_where(server)} {key}.{k} must be a string (got a {type(v).__name__}), e.g. {key} = {example}"
            )
        _check_references(_where(server), f"{key}.{k}", v)
        out[str(k)] = v
    return out


def _string_list(t: Mapping[str, Any], key: str, where: str, example: str) -> tuple[str, ...]:
    raw = t.get(key, [])
    if not isinstance(raw, list) or not all(isinstance(x, str) and x.strip() for x in raw):
        raise BadRequest(f"{where} {key} must be a list of non-empty strings, e.g. {key} = {example}; got {raw!r}")
    return tuple(x.strip() for x in raw)


def _duration(t: Mapping[str, Any], key: str, where: str) -> float:
    raw = t.get(key, DEFAULT_TIMEOUT_S)
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise BadRequest(f'{where} {key} must be a duration, e.g. {key} = "60s"')
    try:
        return parse_duration(str(raw))
    except BadRequest as e:
        raise BadRequest(f"{where} {key}: {e.message}") from None


def _bool(t: Mapping[str, Any], key: str, default: bool, where: str) -> bool:
    raw = t.get(key, default)
    if not isinstance(raw, bool):
        raise BadRequest(f"{where} {key} must be true or false; got {raw!r}")
    return raw


@dataclass(frozen=True, repr=False)
class McpServerConfig:
    """One MCP server: a command (stdio), a URL (streamable HTTP), or neither (a built-in served in-process)."""

    name: str
    command: tuple[str, ...] = ()  # program, then its arguments (``command`` shlex-split, then ``args``)
    env: Mapping[str, str] = field(default_factory=dict)  # unexpanded: may hold ${VAR}
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)  # unexpanded: may hold ${VAR}
    timeout_s: float = DEFAULT_TIMEOUT_S  # a call
    start_timeout_s: float = DEFAULT_TIMEOUT_S  # connecting (a stdio server: its process starting, npx downloading)
    destructive: tuple[str, ...] = ()  # fnmatch globs over the server's own tool names
    read_only: bool = False  # hide the server's destructive tools entirely
    enabled: bool = True

    @property
    def transport(self) -> Literal["stdio", "http", "builtin"]:
        if self.command:
            return "stdio"
        return "http" if self.url else "builtin"

    def marks_destructive(self, tool: str) -> bool:
        """Whether labbot.toml marks the server's tool ``tool`` (its own name, not namespaced) destructive."""
        return any(fnmatch.fnmatchcase(tool, pattern) for pattern in self.destructive)

    def resolved_headers(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        env = os.environ if environ is None else environ
        return {k: expand(v, env, where=f"{_where(self.name)} headers.{k}") for k, v in self.headers.items()}

    def resolved_env(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        env = os.environ if environ is None else environ
        return {k: expand(v, env, where=f"{_where(self.name)} env.{k}") for k, v in self.env.items()}

    def secrets(self, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
        """Expanded header and env values (and the variables they read): what must never reach a log or a user."""
        env = os.environ if environ is None else environ
        found: set[str] = set(self.headers.values())  # a token pasted into labbot.toml is as secret as a reference
        for value in (*self.headers.values(), *self.env.values()):
            found.update(env[var] for var in _VAR.findall(value) if var in env)
            with contextlib.suppress(UnsetVariable):
                found.add(expand(value, env, where=""))
        return tuple(sorted((s for s in found if len(s) >= _SECRET_MIN_LEN), key=len, reverse=True))

    def __repr__(self) -> str:
        # Names only for headers and env: their values may be tokens pasted into labbot.toml.
        where = {"stdio": f"command={list(self.command)!r}", "http": f"url={self.url!r}", "builtin": "builtin"}
        parts = [f"name={self.name!r}", where[self.transport]]
        if self.headers:
            parts.append(f"headers=[{', '.join(self.headers)}]")
        if self.env:
            parts.append(f"env=[{', '.join(self.env)}]")
        parts += [
            f"timeout_s={self.timeout_s:g}",
            f"start_timeout_s={self.start_timeout_s:g}",
            f"destructive={list(self.destructive)!r}",
        ]
        parts += [f"read_only={self.read_only}", f"enabled={self.enabled}"]
        return f"McpServerConfig({', '.join(parts)})"

    @classmethod
    def from_table(cls, name: str, t: Mapping[str, Any], *, builtin: bool = False) -> McpServerConfig:
        where = _where(name)
        if not isinstance(t, Mapping):
            raise BadRequest(
                f"{where} must be a table, e.g. [mcp.servers.{name}] followed by command = ... or url = ..."
            )
        for key in t:
            if key not in SERVER_KEYS:
                raise _unknown_key(where, key, SERVER_KEYS)
        has_command, has_url = "command" in t, "url" in t
        if has_command and has_url:
            raise BadRequest(
                f"{where} has both command and url: a server is either a local command spoken to over stdio "
                "or a streamable-HTTP URL, not both"
            )
        if not has_command and not has_url and not builtin:
            raise BadRequest(
                f'{where} needs command = "..." (a local server spoken to over stdio) or '
                f'url = "https://..." (a streamable-HTTP server)'
            )
        for keys, needs in ((_STDIO_KEYS, "command"), (_HTTP_KEYS, "url")):
            for key in keys:
                if key in t and needs not in t:
                    raise BadRequest(f"{where} {key} applies only to a server with {needs} = ...")

        command: tuple[str, ...] = ()
        if has_command:
            raw = t["command"]
            if isinstance(raw, str):
                try:
                    command = tuple(shlex.split(raw))
                except ValueError as e:
                    raise BadRequest(f"{where} command: cannot split {raw!r} into words ({e})") from None
            elif isinstance(raw, list) and all(isinstance(x, str) for x in raw):
                command = tuple(raw)
            else:
                raise BadRequest(
                    f'{where} command must be a string or a list of strings, e.g. command = "npx -y some-mcp-server"'
                )
            if not command or not command[0].strip():
                raise BadRequest(
                    f'{where} command is empty: name the program to run, e.g. command = "python server.py"'
                )
            command += _string_list(t, "args", where, '["--root", "/data"]')

        url: str | None = None
        if has_url:
            url = t["url"]
            if not isinstance(url, str) or not re.match(r"^https?://[^/\s]+", url):
                raise BadRequest(f'{where} url must be an http(s) URL, e.g. url = "https://mcp.notion.com/mcp"')
            if "${" in url:
                raise BadRequest(f"{where} url: put credentials in headers, not in the URL (URLs are logged)")

        cwd = t.get("cwd")
        if cwd is not None and (not isinstance(cwd, str) or not cwd.strip()):
            raise BadRequest(f'{where} cwd must be a folder path, e.g. cwd = "/srv/labbot"')

        return cls(
            name=name,
            command=command,
            env=_string_table(t, "env", name, '{ TOKEN = "${TOKEN}" }'),
            cwd=cwd,
            url=url,
            headers=_string_table(t, "headers", name, '{ Authorization = "Bearer ${NOTION_TOKEN}" }'),
            timeout_s=_duration(t, "timeout", where),
            start_timeout_s=_duration(t, "start_timeout", where),
            destructive=_string_list(t, "destructive", where, '["delete_*", "update_page"]'),
            read_only=_bool(t, "read_only", False, where),
            enabled=_bool(t, "enabled", True, where),
        )


@dataclass(frozen=True)
class RoleTools:
    """The tools a role may call: fnmatch globs over namespaced names (``codebase__*``, ``lab__list_runs``)."""

    role: str
    patterns: tuple[str, ...]

    def allows(self, tool: str) -> bool:
        return any(fnmatch.fnmatchcase(tool, pattern) for pattern in self.patterns)


@dataclass(frozen=True)
class McpSettings:
    servers: Mapping[str, McpServerConfig] = field(default_factory=dict)  # in labbot.toml's order, built-ins last
    roles: Mapping[str, RoleTools] = field(default_factory=dict)

    def allows(self, role: str, tool: str) -> bool:
        """Whether ``role`` may call the namespaced ``tool``; a role without a table may call everything."""
        tools = self.roles.get(role)
        return tools is None or tools.allows(tool)

    def with_builtins(self, names: Collection[str]) -> McpSettings:
        """These settings plus a default table for each built-in that labbot.toml does not mention."""
        servers = dict(self.servers)
        for name in names:
            servers.setdefault(name, McpServerConfig(name=name))
        return McpSettings(servers=servers, roles=self.roles)

    @classmethod
    def from_config(cls, config: Mapping[str, Any], builtins: Collection[str] = ()) -> McpSettings:
        """Parse ``[mcp]``; ``builtins`` are the in-process servers' names (their tables may omit command and url)."""
        mcp = config.get("mcp", {})
        if not isinstance(mcp, Mapping):
            raise BadRequest("labbot.toml: [mcp] must be a table, e.g. [mcp.servers.NAME] followed by url = ...")
        for key in mcp:
            if key not in _MCP_KEYS:
                raise _unknown_key("labbot.toml: [mcp]", key, _MCP_KEYS)

        raw_servers = mcp.get("servers", {})
        if not isinstance(raw_servers, Mapping):
            raise BadRequest("labbot.toml: [mcp.servers] must be a table of servers, e.g. [mcp.servers.notion]")
        servers: dict[str, McpServerConfig] = {}
        for name, table in raw_servers.items():
            if not _SERVER_NAME.match(name) or len(name) > 32:
                raise BadRequest(
                    f"labbot.toml: [mcp.servers.{name}]: a server name is up to 32 letters, digits, - and single _ "
                    "(tools are named SERVER__TOOL), e.g. [mcp.servers.notion]"
                )
            servers[name] = McpServerConfig.from_table(name, table, builtin=name in builtins)
        settings = cls(servers=servers).with_builtins(builtins)

        raw_roles = mcp.get("roles", {})
        if not isinstance(raw_roles, Mapping):
            raise BadRequest(
                "labbot.toml: [mcp.roles] must be a table of roles, e.g. [mcp.roles.researcher] tools = [...]"
            )
        roles: dict[str, RoleTools] = {}
        for given, table in raw_roles.items():
            where = f"labbot.toml: {_role_key(given)}"
            role = current_name(given, raw_roles, _role_key)  # a renamed role's old table is still read
            if not isinstance(table, Mapping):
                raise BadRequest(f'{where} must be a table, e.g. tools = ["codebase__*", "lab__list_runs"]')
            for key in table:
                if key not in _ROLE_KEYS:
                    raise _unknown_key(where, key, _ROLE_KEYS)
            if "tools" not in table:
                raise BadRequest(f'{where} needs tools = [...], e.g. tools = ["codebase__*", "lab__list_runs"]')
            patterns = _string_list(table, "tools", where, '["codebase__*", "lab__list_runs"]')
            for pattern in patterns:
                server, sep, _ = pattern.partition("__")
                if sep and not any(fnmatch.fnmatchcase(s, server) for s in settings.servers):
                    known = ", ".join(settings.servers) or "none configured"
                    raise BadRequest(
                        f"{where} tools: {pattern!r} names no known server (tools are SERVER__TOOL; servers: {known})"
                    )
            roles[role] = RoleTools(role=role, patterns=patterns)
        return cls(servers=settings.servers, roles=roles)
