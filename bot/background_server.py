"""A Starlette/ASGI app served by uvicorn from a daemon thread on a local port: the Slack Web API emulator (console
mode) uses it, and so do the test fakes of other services' HTTP edges.

``BackgroundServer(app, name)``: ``start(host, port)`` binds (port 0: any free port), waits until uvicorn serves
and returns the port; ``stop()`` shuts it down and closes the socket. Starting twice returns the same port.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn


class BackgroundServer:
    def __init__(self, app: Any, name: str, *, graceful_s: int = 2) -> None:
        self.app = app
        self.name = name
        self.graceful_s = graceful_s
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self.port: int | None = None

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self, *, host: str = "127.0.0.1", port: int = 0, timeout: float = 10.0) -> int:
        if self._server is not None and self.port is not None:
            return self.port
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        config = uvicorn.Config(
            self.app, log_config=None, log_level="warning", access_log=False, lifespan="off",
            timeout_graceful_shutdown=self.graceful_s,
        )  # fmt: skip
        server = uvicorn.Server(config)
        bound = int(sock.getsockname()[1])
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"{self.name}-{bound}")
        thread.daemon = True
        thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:  # uvicorn offers no event to wait on
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                sock.close()
                raise RuntimeError(f"the {self.name} did not start on {host}:{bound}")
            time.sleep(0.005)
        self._server, self._thread, self._socket, self.port = server, thread, sock, bound
        return bound

    def stop(self, timeout: float = 5.0) -> None:
        server, thread, sock = self._server, self._thread, self._socket
        self._server = self._thread = self._socket = None
        self.port = None
        if server is not None:
            server.should_exit = True
        if thread is not None:
            thread.join(timeout)
        if sock is not None:
            sock.close()
