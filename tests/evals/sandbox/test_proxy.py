"""The allow-list proxy: its list, the proxy on its unix socket, and a sandbox with ``network="proxy"``.

The host's HTTP server listens on the host's 127.0.0.1; a sandbox has a loopback of its own, so the only way it can
reach that server is through the proxy — which is what these tests show, and what they show it cannot do.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from seal_repo import HOST_BODY as BODY

from labbot.common.errors import BadRequest
from labbot.evals.sandbox.bwrap import Sandbox, SandboxSpec
from labbot.evals.sandbox.proxy import PORT, AllowList, AllowListProxy


def _ask(sock_path: Path, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(sock_path))
        s.sendall(request)
        chunks = []
        while data := s.recv(65536):
            chunks.append(data)
    return b"".join(chunks)


# --- the list ---------------------------------------------------------------------------------------------------


def test_allow_list_matches_exact_names_wildcards_and_addresses() -> None:
    allow = AllowList.parse(["PyPI.org", "*.example.com", "127.0.0.1", "[::1]"])
    assert allow.refusal("pypi.org") is None
    assert allow.refusal("pypi.org.") is None  # the root dot is the same name
    assert allow.refusal("files.example.com") is None
    assert allow.refusal("a.b.example.com") is None
    assert allow.refusal("127.0.0.1") is None
    assert allow.refusal("::1") is None
    refused = allow.refusal("example.com")  # a wildcard covers the names under it, not the name itself
    assert refused is not None and "example.com is not in [eval] allow_hosts" in refused
    assert allow.refusal("evilpypi.org") is not None
    assert allow.refusal("pypi.org.evil.net") is not None


@pytest.mark.parametrize("entry", ["*", "https://pypi.org", "pypi.org:443", "pypi.org/simple", "*.*.com", "a b"])
def test_allow_list_refuses_what_is_not_a_host(entry: str) -> None:
    with pytest.raises(BadRequest, match="is not a host: write an exact name"):
        AllowList.parse([entry])


def test_the_hosts_own_addresses_need_a_literal_entry() -> None:
    allow = AllowList.parse(["*.corp.example", "mirror.example", "127.0.0.1", "localhost"])
    # a name on the list that resolves to the host itself (or a cloud's metadata service) is not let through
    for address in ("127.0.0.1", "127.0.1.1", "0.0.0.0", "169.254.169.254", "::1"):
        reason = allow.address_refusal("pypi.corp.example", address)
        assert reason is not None and "names it literally" in reason
        assert allow.address_refusal("mirror.example", address) is not None
    assert allow.address_refusal("mirror.example", "93.184.216.34") is None
    assert allow.address_refusal("127.0.0.1", "127.0.0.1") is None
    assert allow.address_refusal("localhost", "127.0.0.1") is None
    assert AllowList.parse(["localhost"]).address_refusal("localhost", "169.254.169.254") is not None


# --- the proxy on its socket --------------------------------------------------------------------------------------


def test_proxy_tunnels_connect_and_relays_http_for_an_allowed_host(host_server: int) -> None:
    with AllowListProxy(["127.0.0.1"]) as proxy:
        tunnel = _ask(
            proxy.socket_path,
            f"CONNECT 127.0.0.1:{host_server} HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.0\r\n\r\n".encode(),
        )
        assert tunnel.startswith(b"HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.0 200")
        assert tunnel.endswith(BODY)
        plain = _ask(
            proxy.socket_path,
            f"GET http://127.0.0.1:{host_server}/x HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Proxy-Connection: keep-alive\r\n\r\n".encode(),
        )
        assert plain.startswith(b"HTTP/1.0 200") and plain.endswith(BODY)
        assert [(d.method, d.host, d.allowed) for d in proxy.decisions] == [
            ("CONNECT", "127.0.0.1", True),
            ("GET", "127.0.0.1", True),
        ]


def test_proxy_refuses_a_host_outside_the_list_with_the_reason(host_server: int) -> None:
    with AllowListProxy(["pypi.org"]) as proxy:
        for request in (
            f"CONNECT 127.0.0.1:{host_server} HTTP/1.1\r\n\r\n",
            f"GET http://localhost:{host_server}/ HTTP/1.1\r\n\r\n",
            "GET /relative HTTP/1.1\r\nHost: pypi.org\r\n\r\n",
        ):
            answer = _ask(proxy.socket_path, request.encode()).decode()
            assert BODY.decode() not in answer
            if "relative" in request:
                assert answer.startswith("HTTP/1.1 400") and "absolute http:// URI" in answer
            else:
                assert answer.startswith("HTTP/1.1 403 Forbidden")
                assert "X-Labbot-Proxy: refused" in answer
                assert "is not in [eval] allow_hosts (allowed: pypi.org)" in answer
        assert [d.allowed for d in proxy.decisions] == [False, False]


def test_proxy_close_removes_its_socket_and_folder() -> None:
    proxy = AllowListProxy([]).start()
    folder = proxy.folder
    assert proxy.socket_path.is_socket()
    proxy.close()
    assert not folder.exists()
    with pytest.raises(BadRequest, match="not started"):
        _ = proxy.socket_path


# --- a sandbox behind it ------------------------------------------------------------------------------------------

FETCH = """
import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode(), end="")
except urllib.error.HTTPError as e:
    print("HTTP", e.code, e.read().decode(), end="")
except OSError as e:
    print("ERROR", e, end="")
"""
RAW_TCP = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
    print("CONNECTED")
except OSError as e:
    print("ERROR", e)
"""
DNS = """
import socket
try:
    print("RESOLVED", socket.getaddrinfo("pypi.org", 443))
except OSError as e:
    print("ERROR", e)
"""


@pytest.mark.subprocess
def test_sandbox_reaches_an_allowed_host_only_through_the_proxy(tmp_path: Path, host_server: int) -> None:
    spec = SandboxSpec(tmp_path, network="proxy", allow_hosts=("127.0.0.1",))
    with Sandbox(spec) as box:
        url = f"http://127.0.0.1:{host_server}/"
        got = box.exec(["python3", "-c", FETCH, url], timeout_s=30)
        assert got.stdout == BODY.decode(), got
        # https goes as CONNECT: the tunnel, spoken by hand to the forwarder on the sandbox's own loopback
        tunnel = (
            f"import socket; s = socket.create_connection(('127.0.0.1', {PORT}));"
            f"s.sendall(b'CONNECT 127.0.0.1:{host_server} HTTP/1.1\\r\\n\\r\\nGET / HTTP/1.0\\r\\n\\r\\n');"
            "import sys; sys.stdout.write(b''.join(iter(lambda: s.recv(65536), b'')).decode())"
        )
        got = box.exec(["python3", "-c", tunnel], timeout_s=30)
        assert got.stdout.startswith("HTTP/1.1 200 Connection established"), got
        assert got.stdout.endswith(BODY.decode())
        # the same server, without the proxy: the sandbox's 127.0.0.1 is its own, nothing listens there
        got = box.exec(["python3", "-c", RAW_TCP, "127.0.0.1", str(host_server)], timeout_s=30)
        assert got.stdout.startswith("ERROR") and "refused" in got.stdout, got
        assert box.proxy is not None and [d.allowed for d in box.proxy.decisions] == [True, True]


@pytest.mark.subprocess
def test_sandbox_proxy_refuses_a_host_outside_the_list(tmp_path: Path, host_server: int) -> None:
    with Sandbox(SandboxSpec(tmp_path, network="proxy", allow_hosts=("pypi.org",))) as box:
        got = box.exec(["python3", "-c", FETCH, f"http://localhost:{host_server}/"], timeout_s=30)
        assert got.stdout.startswith("HTTP 403 labbot eval proxy refused: localhost is not in [eval] allow_hosts")
        got = box.exec(["python3", "-c", FETCH, "http://example.com/"], timeout_s=30)
        assert got.stdout.startswith("HTTP 403") and "example.com is not in" in got.stdout
        assert box.proxy is not None and not any(d.allowed for d in box.proxy.decisions)


@pytest.mark.subprocess
def test_raw_tcp_and_dns_stay_impossible_in_proxy_mode(tmp_path: Path, host_server: int) -> None:
    with Sandbox(SandboxSpec(tmp_path, network="proxy", allow_hosts=("127.0.0.1", "pypi.org"))) as box:
        for address in ("127.0.0.1", "1.1.1.1"):
            got = box.exec(["python3", "-c", RAW_TCP, address, str(host_server)], timeout_s=30)
            assert got.stdout.startswith("ERROR"), got
        got = box.exec(["python3", "-c", DNS], timeout_s=30)
        assert got.stdout.startswith("ERROR"), got


@pytest.mark.subprocess
def test_without_a_proxy_nothing_is_reachable(tmp_path: Path, host_server: int) -> None:
    with Sandbox(SandboxSpec(tmp_path)) as box:
        got = box.exec(["sh", "-c", "env | grep -i _proxy; true"], timeout_s=30)
        assert got.stdout == ""
        got = box.exec(["python3", "-c", FETCH, f"http://127.0.0.1:{host_server}/"], timeout_s=30)
        assert got.stdout.startswith("ERROR") and "refused" in got.stdout, got
        # the forwarder's port is not there either
        got = box.exec(["python3", "-c", RAW_TCP, "127.0.0.1", str(PORT)], timeout_s=30)
        assert got.stdout.startswith("ERROR"), got


def test_allow_hosts_without_proxy_mode_is_a_bad_request(tmp_path: Path) -> None:
    with pytest.raises(BadRequest, match='only used with network="proxy"'):
        Sandbox(SandboxSpec(tmp_path, allow_hosts=("pypi.org",)))
    with pytest.raises(BadRequest, match="is not a host"):
        Sandbox(SandboxSpec(tmp_path, network="proxy", allow_hosts=("https://pypi.org/simple",)))
