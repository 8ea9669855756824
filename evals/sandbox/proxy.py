"""The one way out of a sandbox that asked for the network: the host's allow-list HTTP proxy (``[eval] allow_hosts``).

A sandbox with ``network="proxy"`` still has a network namespace of its own (only its loopback): no route anywhere,
so raw TCP, UDP and DNS stay impossible. What it gets is this proxy's unix socket, in a folder bound read-only at
:data:`INSIDE`, and a small forwarder (:data:`FORWARDER_SOURCE`, started before the command by the same script) that
listens on ``127.0.0.1:`` :data:`PORT` inside and relays each connection to the socket; ``HTTP_PROXY`` and
``HTTPS_PROXY`` (both cases) point at it.

The proxy speaks two things: ``CONNECT host:port`` (https, tunnelled as bytes) and plain-HTTP requests with an
absolute URI (``GET http://host/path``), relayed with ``Connection: close``. A host is let through only when it is
on the allow-list: an exact name (``pypi.org``), a wildcard (``*.example.com``: any name under it, not the name
itself) or an IP address written out. Anything else is answered ``403`` with the reason (header
``X-Labbot-Proxy: refused``). The name is resolved here, on the host, and the connection made to the address
resolved; an address of the host itself (loopback, ``0.0.0.0``) or link-local (a cloud's metadata service) is only
reached when the allow-list names it literally (``127.0.0.1``, ``localhost``), so a wildcard or a name that resolves
there cannot reach labbot's API or Ray's ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import re
import shutil
import socket
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from labbot.common.errors import BadRequest

INSIDE = "/run/labbot-proxy"  # where the proxy's folder is bound in a sandbox
SOCKET = "proxy.sock"
FORWARDER = "forward.py"
PORT = 3128  # the forwarder's port on the sandbox's own loopback
PROXY_URL = f"http://127.0.0.1:{PORT}"
MAX_HEAD = 64 * 1024
HEAD_TIMEOUT_S = 30.0
_HOSTNAME = re.compile(
    r"(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*"
)
_LOCAL_NAMES = {"localhost"}
_HOP_HEADERS = {"proxy-connection", "proxy-authorization", "connection", "keep-alive"}


def _normalise(host: str) -> str:
    return host.strip().lower().rstrip(".").removeprefix("[").removesuffix("]")


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class AllowList:
    """``[eval] allow_hosts``, checked: exact names, ``*.domain`` wildcards and IP addresses."""

    exact: frozenset[str]
    suffixes: tuple[str, ...]  # ".example.com" for "*.example.com"

    @staticmethod
    def parse(entries: Sequence[str]) -> AllowList:
        exact: set[str] = set()
        suffixes: list[str] = []
        for raw in entries:
            entry = _normalise(raw)
            wildcard = entry.startswith("*.")
            name = entry[2:] if wildcard else entry
            valid = (_ip(name) is not None and not wildcard) or bool(_HOSTNAME.fullmatch(name))
            if not valid or (wildcard and "." not in name and name not in _LOCAL_NAMES):
                raise BadRequest(
                    f"[eval] allow_hosts entry {raw!r} is not a host: write an exact name (pypi.org), a wildcard for "
                    "the names under a domain (*.example.com) or an IP address (127.0.0.1), without scheme, port or "
                    "path; '*' alone is not allowed (list the hosts)"
                )
            if wildcard:
                suffixes.append("." + name)
            else:
                exact.add(name)
        return AllowList(frozenset(exact), tuple(suffixes))

    def refusal(self, host: str) -> str | None:
        """Why ``host`` is refused, or None when the list allows it."""
        name = _normalise(host)
        if name in self.exact or any(name.endswith(s) for s in self.suffixes):
            return None
        listed = ", ".join(sorted(self.exact) + ["*" + s for s in self.suffixes]) or "nothing"
        return f"{name} is not in [eval] allow_hosts (allowed: {listed})"

    def address_refusal(self, host: str, address: str) -> str | None:
        """Why connecting to ``address`` (what ``host`` resolved to) is refused: the host's own addresses and
        link-local ones only when the allow-list names them literally."""
        ip = _ip(address)
        if ip is None or not (ip.is_loopback or ip.is_unspecified or ip.is_link_local):
            return None
        name = _normalise(host)
        literal = name == address or (name in _LOCAL_NAMES and ip.is_loopback)
        if literal and name in self.exact:
            return None
        return (
            f"{name} resolves to {address}, an address of the host itself or link-local: reachable only when "
            f"[eval] allow_hosts names it literally ({address})"
        )


@dataclass(frozen=True)
class Decision:
    """One request the proxy answered: what was asked and whether it went through."""

    method: str
    host: str
    port: int
    allowed: bool
    reason: str


def _split_host_port(target: str, default: int) -> tuple[str, int]:
    if target.startswith("["):
        host, _, rest = target[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, sep, port = target.rpartition(":")
        if not sep or ":" in host:  # no port, or a bare IPv6 address
            host, port = target, ""
    return host, int(port) if port else default


class AllowListProxy:
    """The proxy on a unix socket in a folder of its own (bind that folder into a sandbox at :data:`INSIDE`).

    ``start()`` serves it from a thread of its own, ``close()`` stops it and removes the folder; also a context
    manager. :attr:`decisions` lists every request answered, in order."""

    def __init__(self, allow_hosts: Sequence[str], *, connect_timeout_s: float = 10.0) -> None:
        self.allow = AllowList.parse(allow_hosts)
        self.connect_timeout_s = connect_timeout_s
        self.decisions: list[Decision] = []
        self._dir: Path | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._lock = threading.Lock()

    @property
    def folder(self) -> Path:
        if self._dir is None:
            raise BadRequest("the eval proxy is not started: call start() (or use it as a context manager) first")
        return self._dir

    @property
    def socket_path(self) -> Path:
        return self.folder / SOCKET

    def start(self) -> AllowListProxy:
        if self._dir is not None:
            return self
        folder = Path(tempfile.mkdtemp(prefix="labbot-proxy-"))
        folder.chmod(0o755)
        (folder / FORWARDER).write_text(FORWARDER_SOURCE)
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="labbot-eval-proxy", daemon=True)
        thread.start()
        path = str(folder / SOCKET)
        try:
            self._server = asyncio.run_coroutine_threadsafe(
                asyncio.start_unix_server(self._handle, path=path, limit=MAX_HEAD), loop
            ).result(timeout=10)
        except BaseException:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            loop.close()
            shutil.rmtree(folder, ignore_errors=True)
            raise
        os.chmod(path, 0o666)  # the sandbox's user is not the host's
        self._dir, self._loop, self._thread = folder, loop, thread
        return self

    def close(self) -> None:
        loop, thread, server = self._loop, self._thread, self._server
        if loop is None or thread is None:
            return
        if server is not None:

            async def stop() -> None:
                server.close()
                for task in asyncio.all_tasks():
                    if task is not asyncio.current_task():
                        task.cancel()

            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        if not thread.is_alive():
            loop.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
        self._dir, self._loop, self._thread, self._server = None, None, None, None

    def __enter__(self) -> AllowListProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _decide(self, method: str, host: str, port: int, reason: str | None) -> None:
        with self._lock:
            self.decisions.append(Decision(method, _normalise(host), port, reason is None, reason or "allowed"))

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._serve(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        parts = request_line.split(" ")
        if len(parts) != 3:
            return await _answer(writer, 400, "Bad Request", "not an HTTP request line")
        method, target, version = parts
        if method.upper() == "CONNECT":
            host, port = _split_host_port(target, 443)
            path = ""
        else:
            url = urlsplit(target)
            if url.scheme != "http" or not url.hostname:
                return await _answer(
                    writer, 400, "Bad Request", "send CONNECT host:port (https) or an absolute http:// URI"
                )
            host, port = url.hostname, url.port or 80
            path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        reason = self.allow.refusal(host)
        if reason is None:
            address, reason = await self._resolve(host, port)
        if reason is not None:
            self._decide(method, host, port, reason)
            return await _answer(writer, 403, "Forbidden", f"labbot eval proxy refused: {reason}")
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(address, port, limit=MAX_HEAD), self.connect_timeout_s
            )
        except (OSError, TimeoutError) as e:
            self._decide(method, host, port, None)
            return await _answer(writer, 502, "Bad Gateway", f"labbot eval proxy could not reach {host}:{port}: {e}")
        self._decide(method, host, port, None)
        if method.upper() == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            kept = [h for h in header_lines if h and h.split(":", 1)[0].strip().lower() not in _HOP_HEADERS]
            up_writer.write(f"{method} {path} {version}\r\n".encode("latin-1"))
            up_writer.write("".join(f"{h}\r\n" for h in [*kept, "Connection: close"]).encode("latin-1") + b"\r\n")
        await writer.drain()
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            up_writer.close()

    async def _resolve(self, host: str, port: int) -> tuple[str, str | None]:
        """The address to connect to, or the reason there is none allowed."""
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                _normalise(host), port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
            )
        except OSError as e:
            return "", f"{_normalise(host)} does not resolve on the host: {e}"
        reason = None
        for info in infos:
            address = str(info[4][0])
            reason = self.allow.address_refusal(host, address)
            if reason is None:
                return address, None
        return "", reason or f"{_normalise(host)} resolves to no address"


async def _answer(writer: asyncio.StreamWriter, status: int, phrase: str, body: str) -> None:
    data = (body + "\n").encode()
    writer.write(
        f"HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {len(data)}\r\n"
        f"X-Labbot-Proxy: {'refused' if status == 403 else 'error'}\r\nConnection: close\r\n\r\n".encode()
        + data
    )
    await writer.drain()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(64 * 1024):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.close()


def forwarder_argv(python: str, cmd: Sequence[str]) -> list[str]:
    """``cmd`` behind the forwarder: it listens on ``127.0.0.1:PORT``, forks the relay, then execs ``cmd``."""
    return [python, "-I", "-S", f"{INSIDE}/{FORWARDER}", str(PORT), f"{INSIDE}/{SOCKET}", "--", *cmd]


def proxy_env() -> dict[str, str]:
    return {
        "HTTP_PROXY": PROXY_URL,
        "HTTPS_PROXY": PROXY_URL,
        "http_proxy": PROXY_URL,
        "https_proxy": PROXY_URL,
    }


# Run inside the sandbox by its base interpreter (no site, no venv): listen first, so a connection made the moment
# the command starts waits in the backlog; the relay is a forked child holding no stdio, and dies with the sandbox.
FORWARDER_SOURCE = '''\
"""labbot eval sandbox: relay 127.0.0.1:PORT to the host's allow-list proxy socket, then exec the command."""
import os
import socket
import sys
import threading


def relay(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def connection(client, path):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        return
    back = threading.Thread(target=relay, args=(upstream, client), daemon=True)
    back.start()
    relay(client, upstream)
    back.join()
    client.close()
    upstream.close()


def main():
    port, path, sep, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
    if sep != "--" or not cmd:
        sys.exit("usage: forward.py PORT SOCKET -- CMD...")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    if os.fork() == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        while True:
            client, _ = listener.accept()
            threading.Thread(target=connection, args=(client, path), daemon=True).start()
    listener.close()
    try:
        os.execvp(cmd[0], cmd)
    except OSError as e:
        sys.stderr.write("sandbox: cannot run %s: %s\\n" % (cmd[0], e))
        os._exit(127)


main()
'''
