"""Shared by the seal's tests: an HTTP server on the host's own 127.0.0.1, which a sandbox can only reach through
the allow-list proxy."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest
from seal_repo import HOST_BODY as BODY


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def host_server() -> Iterator[int]:
    """An HTTP server on the host's 127.0.0.1; yields its port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
