"""A small client of the control plane's ``/api/v1`` for the CLI (httpx; the admin token from LABBOT_HOME).

Import-light on purpose: ``labbot launch`` should cost a Python start-up and one request, not SQLAlchemy or Ray.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx


class CLIError(Exception):
    """Something to tell the user, with the exit code to leave with (2: bad input, 1: it failed)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def control_url() -> str:
    port = os.environ.get("LABBOT_PORT") or "3000"
    return (os.environ.get("LABBOT_PUBLIC_URL") or f"http://127.0.0.1:{port}").rstrip("/")


def home() -> Path:
    return Path(os.environ.get("LABBOT_HOME") or ".labbot").expanduser().resolve()


class ApiClient:
    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 30.0) -> None:
        self.url = url or control_url()
        if token is None:
            path = home() / "admin_token"
            if not path.exists():
                raise CLIError(
                    f"no admin token at {path}: start the control plane first (`labbot serve` or `make run`), "
                    "with the same LABBOT_HOME"
                )
            token = path.read_text().strip()
        self._http = httpx.Client(
            base_url=f"{self.url}/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=timeout
        )

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            r = self._http.request(method, path, **kwargs)
        except httpx.TransportError as e:
            raise CLIError(
                f"the labbot control plane is not answering at {self.url} ({type(e).__name__}): "
                "start it with `labbot serve` (or `make run`), or set LABBOT_PORT / LABBOT_PUBLIC_URL"
            ) from None
        if r.status_code >= 400:
            try:
                err = r.json()["error"]
                message, code = err["message"], err["code"]
            except (ValueError, KeyError, TypeError):
                message, code = r.text.strip() or f"HTTP {r.status_code}", "http"
            raise CLIError(message, exit_code=2 if 400 <= r.status_code < 500 and code != "conflict" else 1)
        return r

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.request(method, path, **kwargs).json()

    def close(self) -> None:
        self._http.close()
